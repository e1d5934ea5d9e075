// One node's part of a run (runNode, trainer.h), the same code for
// runTraining()'s node threads and a cluster node process, and what can be
// asked of a node while it runs: its memory by category (nodeMemoryNow, the
// memory hook at collectives, the step's peaks), the parameters it holds in full beyond its
// shard (gatheredParamsNow), whether a collective's result is being
// measured (atCollectiveResult). Also the evaluation replicas: held-out
// losses during the run, test accuracy after it.
#include "trainer.h"

#include "memory_tracker.h"
#include "net/communicator.h"
#include "session/session_events.h"
#include "strategy.h"

#include <QString>

#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>
#include <time.h>

namespace smol::engine {

namespace {

using Clock = std::chrono::steady_clock;

// Each memory slot's running strategy (runNode's), for the memory hook: a
// hook may run on a thread of the node other than runNode's (edp's server).
std::atomic<const Strategy *> g_strategyOfSlot[memory::kMaxNodes];
thread_local bool t_collectiveResult = false;

// Each memory slot's peaks in the current step, by category (params .. comm,
// then live): the largest value at any probe since the step began. Probes
// come from several threads of a node (its communication thread, edp's
// server threads), hence atomics.
constexpr int kPeakFields = net::MemoryByCategory::kCategories + 1;
std::atomic<std::int64_t> g_stepPeaks[memory::kMaxNodes][kPeakFields];

void notePeaks(int slot, const net::MemoryByCategory &m)
{
    if (slot < 0 || slot >= memory::kMaxNodes)
        return;
    for (int k = 0; k < net::MemoryByCategory::kCategories; ++k)
        memory::raiseTo(g_stepPeaks[slot][k], m.category(k));
    memory::raiseTo(g_stepPeaks[slot][net::MemoryByCategory::kCategories], m.live);
}

// A new step: no probes yet, and the allocator's window starts now.
void startStepPeaks(int slot)
{
    if (slot < 0 || slot >= memory::kMaxNodes)
        return;
    for (auto &field : g_stepPeaks[slot])
        field.store(0, std::memory_order_relaxed);
    memory::resetWindowPeak(slot);
}

net::MemoryByCategory stepPeaksOf(int slot)
{
    if (slot < 0 || slot >= memory::kMaxNodes)
        return {};
    const auto &f = g_stepPeaks[slot];
    net::MemoryByCategory m;
    std::int64_t *fields[kPeakFields] = {&m.params, &m.grads, &m.optimizer, &m.activations, &m.comm, &m.live};
    for (int k = 0; k < kPeakFields; ++k)
        *fields[k] = f[k].load(std::memory_order_relaxed);
    m.peak = std::max(memory::usage(slot).windowPeak, m.live);
    return m;
}

// Publishes the node's memory by category at every collective boundary. May
// run on several threads of one node at once (edp's server handles each
// worker on its own thread), hence the atomic step.
class MemoryHook : public net::CollectiveHook {
public:
    MemoryHook(int slot, const std::atomic<std::int64_t> *step,
               std::function<void(const MemorySnapshot &)> sink)
        : m_slot(slot)
        , m_step(step)
        , m_sink(std::move(sink))
    {
    }
    void before(const net::CollectiveInfo &info) override { publish(info, true); }
    void after(const net::CollectiveInfo &info) override { publish(info, false); }

private:
    void publish(const net::CollectiveInfo &info, bool before)
    {
        MemorySnapshot s;
        s.node = m_slot;
        s.step = m_step ? m_step->load() : 0;
        s.kind = info.kind;
        s.seq = info.seq;
        s.before = before;
        s.name = info.name;
        t_collectiveResult = !before;
        if (nodeMemoryNow(m_slot, &s.memory)) {
            notePeaks(m_slot, s.memory);
        } else {
            const memory::Usage u = memory::usage(m_slot);
            s.memory.live = u.live;
            s.memory.peak = u.peak;
        }
        t_collectiveResult = false;
        m_sink(s);
    }
    int m_slot;
    const std::atomic<std::int64_t> *m_step;
    std::function<void(const MemorySnapshot &)> m_sink;
};

// A slower machine, emulated for every lock-step strategy: after a step, sleep
// (slowdown - 1) x the CPU time this node's thread spent in it. CPU time, not
// wall time, so waiting for peers in collectives is not stretched too.
std::int64_t threadCpuNs()
{
    timespec ts{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return std::int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void slowDown(double slowdown, std::int64_t cpuNs)
{
    if (slowdown > 1)
        std::this_thread::sleep_for(std::chrono::nanoseconds(std::int64_t(double(cpuNs) * (slowdown - 1))));
}

// The node's memory by category now: what its strategy holds, its memory
// slot's live and peak bytes, and activations as the rest.
net::MemoryByCategory snapshot(int node, const Strategy &strategy)
{
    net::MemoryByCategory m = strategy.memory();
    const memory::Usage u = memory::usage(node);
    m.live = u.live;
    m.peak = u.peak;
    m.activations = std::max<std::int64_t>(0, u.live - m.params - m.grads - m.optimizer - m.comm);
    return m;
}

// A flat parameter vector (namedParameters() order) into `model`.
void loadParams(TrainModel &model, const torch::Tensor &flat)
{
    torch::NoGradGuard noGrad;
    std::int64_t at = 0;
    for (auto &[name, p] : model.namedParameters()) {
        if (at + p.numel() > flat.numel())
            throw std::invalid_argument("the checkpoint holds " + std::to_string(flat.numel()) +
                                        " parameters, fewer than this model has");
        p.copy_(flat.narrow(0, at, p.numel()).view(p.sizes()));
        at += p.numel();
    }
    if (at != flat.numel())
        throw std::invalid_argument("the checkpoint holds " + std::to_string(flat.numel()) +
                                    " parameters, this model has " + std::to_string(at));
}

} // namespace

bool atCollectiveResult()
{
    return t_collectiveResult;
}

void noteStepMemory()
{
    const int slot = memory::currentNode();
    net::MemoryByCategory m;
    if (nodeMemoryNow(slot, &m))
        notePeaks(slot, m);
}

bool nodeMemoryNow(int slot, net::MemoryByCategory *out)
{
    if (slot < 0 || slot >= memory::kMaxNodes)
        return false;
    const Strategy *s = g_strategyOfSlot[slot].load();
    if (!s)
        return false;
    *out = snapshot(slot, *s);
    return true;
}

std::unique_ptr<net::CollectiveHook> makeMemoryHook(int memorySlot, const std::atomic<std::int64_t> *step,
                                                    std::function<void(const MemorySnapshot &)> sink)
{
    return std::make_unique<MemoryHook>(memorySlot, step, std::move(sink));
}

double testAccuracyOf(const TrainConfig &config, const DataSource &data, const torch::Tensor &params)
{
    if (config.model.kind == "gpt")
        return -1;
    std::unique_ptr<TrainModel> eval = makeModel(config.model);
    loadParams(*eval, params);
    torch::NoGradGuard noGrad;
    // In slices of 1000: the activations of 10000 rows at once would be a
    // process's memory peak.
    const std::int64_t n = data.testRows();
    double correct = 0;
    for (std::int64_t at = 0; at < n; at += 1000) {
        const std::int64_t rows = std::min<std::int64_t>(1000, n - at);
        correct += double(std::llround(eval->accuracy(data.testSlice(at, rows)) * double(rows)));
    }
    return n > 0 ? correct / double(n) : 0;
}

namespace {
thread_local const Strategy *t_runningStrategy = nullptr; // runNode's, on its thread
thread_local int t_runningRank = -1;
std::atomic<int> g_rankOfSlot[memory::kMaxNodes]; // each memory slot's running rank
} // namespace

std::vector<std::string> gatheredParamsNow()
{
    std::vector<std::string> out;
    // runNode's thread, or another thread of the node (its communication
    // thread, where zero3's collectives run): the node's memory slot says.
    const Strategy *strategy = t_runningStrategy;
    int rank = t_runningRank;
    const int slot = memory::currentNode();
    if (!strategy && slot >= 0 && slot < memory::kMaxNodes) {
        strategy = g_strategyOfSlot[slot].load();
        rank = g_rankOfSlot[slot].load();
    }
    if (!strategy || strategy->name() != "zero3")
        return out;
    for (const ShardRange &r : strategy->shards())
        if (r.materialised && r.owner != rank && r.owner >= 0 && (out.empty() || out.back() != r.param))
            out.push_back(r.param);
    return out;
}

namespace {

// What gatheredParamsNow() and the memory hook read while a node runs, for
// that run only.
class RunningStrategy {
public:
    RunningStrategy(const Strategy *s, int rank, int slot)
        : m_slot(slot)
    {
        t_runningStrategy = s, t_runningRank = rank;
        if (slot >= 0 && slot < memory::kMaxNodes)
            g_rankOfSlot[slot] = rank, g_strategyOfSlot[slot] = s;
    }
    ~RunningStrategy()
    {
        t_runningStrategy = nullptr, t_runningRank = -1;
        if (m_slot >= 0 && m_slot < memory::kMaxNodes)
            g_strategyOfSlot[m_slot] = nullptr;
    }

private:
    int m_slot;
};

// One node's part of a run (runNode), on the node's thread, charged to its
// memory slot. The life of a node's run:
//
//   1. set up    the model (from the starting parameters, if any), the
//                strategy on it, and the replica for held-out losses
//   2. resume    the optimizer's state at firstStep (Adam: its moments, or
//                a restart from zero moments when there are none)
//   3. steps     each step: the strategy's step, the emulated slowdown, the
//                node's memory and loss to onStep; when due, the held-out
//                loss (rank 0) and the full parameters to onCheckpoint
//   4. result    the full parameters, the strategy's figures, the time
class NodeLoop {
public:
    NodeLoop(const TrainConfig &config, const NodeRun &run)
        : m_config(config)
        , m_run(run)
        , m_behaviour(nodeContextOf(config, run.rank).behaviour)
    {
    }

    NodeResult run()
    {
        setUp();
        const RunningStrategy running(m_strategy.get(), m_run.rank, m_run.memorySlot);
        resume();
        const auto t0 = Clock::now();
        for (std::int64_t k = m_run.firstStep; k < m_config.steps; ++k) {
            if (m_run.onStepping)
                m_run.onStepping(true);
            step(k);
            if (m_run.onStepping)
                m_run.onStepping(false);
            if (m_strategy->finished())
                break; // asynchronous strategies: left, or told to stop
            if (m_testing && ((k + 1) % m_config.testEvery == 0 || k + 1 == m_config.steps))
                testLoss(k);
            // (an asynchronous strategy's checkpoint is its server's own
            // copy: only the node that asks for one, rank 0, calls it)
            if (m_run.checkpointEvery > 0 && (k + 1) % m_run.checkpointEvery == 0 && k + 1 < m_config.steps)
                checkpoint(k + 1);
        }
        m_result.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
        m_result.finalParams = m_strategy->fullParameters();
        m_result.async = m_strategy->asyncStats();
        m_result.stats = m_strategy->stats();
        return std::move(m_result);
    }

private:
    // 1. The model, the strategy on it, the held-out loss's replica: a
    // replica of its own (uncharged: it is the runtime's, not the
    // training's memory) on a fixed slice of the test set.
    void setUp()
    {
        m_model = makeModel(m_config.model);
        if (m_run.initialParams.defined())
            loadParams(*m_model, m_run.initialParams);
        m_strategy = makeStrategy(m_config.strategy, m_config.mesh);
        m_ctx = nodeContextOf(m_config, m_run.rank);
        m_ctx.firstStep = m_run.firstStep;
        m_ctx.comm = m_run.comm;
        if (m_run.comm)
            m_run.comm->setAllReduceAlgorithm(allReduceAlgorithmOf(m_config));
        m_ctx.data = m_run.data;
        m_ctx.model = m_model.get();
        m_ctx.onSpan = m_run.onSpan;
        m_strategy->setup(m_ctx);
        m_testing = m_config.testEvery > 0 && !m_strategy->isAsynchronous();
        if (m_testing && m_run.rank == 0) {
            memory::NodeScope uncharged(-1);
            m_evalModel = makeModel(m_config.model);
            m_testBatch = m_run.data->testSlice(0, kTestLossSamples);
        }
    }

    // 2. The optimizer's state where the run resumes. A bf16 run's starting
    // parameters are its float32 master weights (checkpoint() hands those
    // on as the parameters, the bf16 ones being their rounding), so the
    // optimizer's master continues exactly from them.
    void resume()
    {
        const torch::Tensor master = m_config.model.precision == Precision::Bf16 && m_run.initialParams.defined()
                                         ? m_run.initialParams.to(torch::kFloat32)
                                         : torch::Tensor();
        if (m_run.firstStep <= 0 && !m_run.initialMoments.defined() && !master.defined())
            return;
        const bool adam = m_config.optimizer.kind == OptimizerConfig::Kind::Adam;
        const OptimizerMoments &m = m_run.initialMoments;
        if (!adam) {
            m_strategy->loadOptimizerState({{}, {}, master}, m_run.firstStep);
        } else if (!m.defined() || !m_strategy->loadOptimizerState({m.exp, m.expSq, master}, m_run.firstStep)) {
            // Adam starts over from zero moments (and t = 0); from step 0
            // with bf16 starting weights, there was nothing to restart.
            m_result.momentsRestarted = m_run.firstStep > 0 || m.defined();
            if (master.defined())
                m_strategy->loadOptimizerState({{}, {}, master}, 0); // the master weights still continue
        }
    }

    // 3. One step, stretched by the emulated slowdown, reported.
    void step(std::int64_t k)
    {
        if (m_run.currentStep)
            *m_run.currentStep = k;
        startStepPeaks(m_run.memorySlot);
        const std::int64_t cpu0 = threadCpuNs();
        const double loss = m_strategy->step(k);
        if (!m_strategy->isAsynchronous() &&
            m_behaviour.slowdown > 1) // edp stretches its own compute (stretchCompute)
            emulateSlowdown(k, threadCpuNs() - cpu0);
        StepMemory mem;
        mem.atEnd = snapshot(m_run.memorySlot, *m_strategy);
        notePeaks(m_run.memorySlot, mem.atEnd);
        mem.peak = stepPeaksOf(m_run.memorySlot);
        m_result.memory = mem.atEnd;
        if (m_run.onStep)
            m_run.onStep(k, loss, mem);
    }

    // The emulated slowdown stands for compute the node would have done: a
    // compute span on its lane, so waiting is not mistaken for it.
    void emulateSlowdown(std::int64_t k, std::int64_t cpuNs)
    {
        const std::int64_t slowStart = net::monotonicNs();
        slowDown(m_behaviour.slowdown, cpuNs);
        if (!m_ctx.onSpan)
            return;
        SpanEvent s;
        s.node = m_run.rank;
        s.kind = SpanEvent::Kind::Forward;
        s.name = "slowdown x" + QString::number(m_behaviour.slowdown, 'g', 3).toStdString() + " (emulated)";
        s.step = k;
        s.startNs = slowStart;
        s.endNs = net::monotonicNs();
        m_ctx.onSpan(s);
    }

    // The held-out loss after step k, on rank 0 (a collective for sharded
    // strategies: every rank takes part).
    void testLoss(std::int64_t k)
    {
        const torch::Tensor params = m_strategy->fullParameters();
        if (m_run.rank != 0)
            return;
        memory::NodeScope uncharged(-1);
        torch::NoGradGuard noGrad;
        loadParams(*m_evalModel, params);
        const double loss = m_evalModel->loss(m_testBatch).item<double>();
        if (m_run.onTestLoss)
            m_run.onTestLoss(k, loss);
    }

    void checkpoint(std::int64_t stepsDone)
    {
        const torch::Tensor params = m_strategy->fullParameters();
        const bool bf16 = m_config.model.precision == Precision::Bf16; // the master weights to keep
        const OptimizerMoments moments = m_config.optimizer.kind == OptimizerConfig::Kind::Adam || bf16
                                             ? m_strategy->fullOptimizerState()
                                             : OptimizerMoments{};
        // bf16: the float32 master weights stand for the parameters (their
        // rounding), so a resume (resume()) continues exactly.
        const torch::Tensor full = moments.master.defined() ? moments.master : params;
        if (m_run.onCheckpoint)
            m_run.onCheckpoint(stepsDone, full, moments);
    }

    const TrainConfig &m_config;
    const NodeRun &m_run;
    const NodeBehaviour m_behaviour;
    std::unique_ptr<TrainModel> m_model;
    std::unique_ptr<Strategy> m_strategy;
    NodeContext m_ctx;
    NodeResult m_result;
    bool m_testing = false;
    std::unique_ptr<TrainModel> m_evalModel;
    Batch m_testBatch;
};

} // namespace

NodeResult runNode(const TrainConfig &config, const NodeRun &run)
{
    memory::NodeScope scope(run.memorySlot);
    return NodeLoop(config, run).run();
}

} // namespace smol::engine
