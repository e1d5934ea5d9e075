#include "trainer.h"

#include "blas_threads.h"
#include "breakpoints.h"
#include "gloo_communicator.h"
#include "hook_chain.h"
#include "memory_tracker.h"
#include "net/communicator.h"
#include "net/trace.h"
#include "session/session_events.h"
#include "span_hook.h"
#include "strategy.h"

#include <QRandomGenerator>
#include <QString>

#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <thread>
#include <time.h>

namespace smol::engine {

namespace {

using Clock = std::chrono::steady_clock;

class ByteCounter : public net::TraceSink {
public:
    ByteCounter(int nodes, net::TraceSink *next, net::TraceSink *events)
        : m_sent(new std::atomic<std::uint64_t>[std::size_t(nodes)]), m_next(next), m_events(events)
    {
        for (int i = 0; i < nodes; ++i)
            m_sent[std::size_t(i)] = 0;
    }
    void onFrame(const net::FrameEvent &e) override
    {
        if (e.side == net::FrameEvent::Side::Send)
            m_sent[std::size_t(e.src)] += e.bytes;
        if (m_next)
            m_next->onFrame(e);
        if (m_events)
            m_events->onFrame(e);
    }
    std::uint64_t sent(int node) const { return m_sent[std::size_t(node)]; }

private:
    std::unique_ptr<std::atomic<std::uint64_t>[]> m_sent;
    net::TraceSink *m_next;
    net::TraceSink *m_events;
};

// The cluster-wide metrics of each completed step as events, then the
// caller's observer.
class MetricEmitter : public TrainObserver {
public:
    MetricEmitter(SessionEventSink *events, TrainObserver *next) : m_events(events), m_next(next) {}
    void onStep(const StepReport &r) override
    {
        const std::int64_t now = net::monotonicNs();
        if (!std::isnan(r.loss))
            m_events->onMetric(MetricSample{now, r.step, -1, "loss", r.loss});
        m_events->onMetric(MetricSample{now, r.step, -1, "samples_per_s", r.samplesPerS});
        if (m_next)
            m_next->onStep(r);
    }
    bool wantsCollectiveSnapshots() const override { return m_next && m_next->wantsCollectiveSnapshots(); }
    void onTestLoss(std::int64_t step, double loss) override
    {
        if (m_next)
            m_next->onTestLoss(step, loss);
    }
    void onMemorySnapshot(const MemorySnapshot &s) override
    {
        if (m_next)
            m_next->onMemorySnapshot(s);
    }
    void onReform(int attempt, int maxAttempts, int nodes, std::int64_t fromStep, const std::string &reason) override
    {
        if (m_next)
            m_next->onReform(attempt, maxAttempts, nodes, fromStep, reason);
    }
    void onWaitingForNodes(double seconds) override
    {
        if (m_next)
            m_next->onWaitingForNodes(seconds);
    }

private:
    SessionEventSink *m_events;
    TrainObserver *m_next;
};

// Collects every node's loss for a step and reports the step once all are in:
// their mean, weighted by `lossRows` (rows by rank) when the nodes' shares of
// the batch differ. Leader-paced (asynchronous strategies): a step is rank
// 0's step, reported when rank 0 finishes it, with the other nodes' latest
// memory.
class StepBoard {
public:
    StepBoard(int nodes, std::int64_t steps, std::int64_t samplesPerStep, TrainObserver *observer,
              bool leaderPaced, std::vector<std::int64_t> lossRows)
        : m_nodes(nodes), m_globalBatch(samplesPerStep), m_observer(observer), m_leaderPaced(leaderPaced),
          m_lossRows(std::move(lossRows)), m_losses(std::size_t(steps)), m_memory(std::size_t(steps), std::vector<NodeMemory>(std::size_t(nodes))),
          m_latest(std::size_t(nodes)), m_count(std::size_t(steps), 0), m_start(Clock::now()) {}

    void report(int node, std::int64_t step, double loss, const NodeMemory &mem)
    {
        StepReport r;
        {
            std::lock_guard lock(m_mutex);
            m_latest[std::size_t(node)] = mem;
            if (m_leaderPaced && node != 0)
                return;
            if (!std::isnan(loss))
                m_losses[std::size_t(step)].emplace_back(node, loss);
            m_memory[std::size_t(step)][std::size_t(node)] = mem;
            if (m_leaderPaced)
                m_memory[std::size_t(step)] = m_latest;
            else if (++m_count[std::size_t(step)] < m_nodes)
                return;
            r.step = step;
            r.loss = stepLoss(m_losses[std::size_t(step)], m_lossRows);
            r.seconds = std::chrono::duration<double>(Clock::now() - m_start).count();
            r.samplesPerS = r.seconds > 0 ? double((step + 1) * m_globalBatch) / r.seconds : 0;
            r.memory = m_memory[std::size_t(step)];
        }
        if (m_observer)
            m_observer->onStep(r);
    }

    std::vector<double> curve() const
    {
        std::vector<double> c;
        for (const auto &l : m_losses)
            c.push_back(stepLoss(l, m_lossRows));
        return c;
    }
    std::vector<NodeMemory> lastMemory() const { return m_memory.empty() ? std::vector<NodeMemory>{} : m_memory.back(); }

private:

    std::mutex m_mutex;
    int m_nodes;
    std::int64_t m_globalBatch;
    TrainObserver *m_observer;
    bool m_leaderPaced;
    std::vector<std::int64_t> m_lossRows; // by rank; empty: a plain mean
    std::vector<std::vector<std::pair<int, double>>> m_losses; // (rank, loss) per step
    std::vector<std::vector<NodeMemory>> m_memory;
    std::vector<NodeMemory> m_latest; // by node
    std::vector<int> m_count;
    Clock::time_point m_start;
};

MemorySample memorySampleOf(const MemorySnapshot &m, int node, std::int64_t tNs)
{
    MemorySample s;
    s.tNs = tNs;
    s.node = node;
    s.step = m.step;
    s.params = m.memory.params;
    s.grads = m.memory.grads;
    s.optimizer = m.memory.optimizer;
    s.activations = m.memory.activations;
    s.comm = m.memory.comm;
    s.live = m.memory.live;
    s.peak = m.memory.peak;
    s.collective = m.kind;
    s.seq = m.seq;
    s.before = m.before;
    return s;
}

// Each memory slot's running strategy (runNode's), for the memory hook: a
// hook may run on a thread of the node other than runNode's (edp's server).
std::atomic<const Strategy *> g_strategyOfSlot[memory::kMaxNodes];
thread_local bool t_collectiveResult = false;

// Publishes the node's memory by category at every collective boundary. May
// run on several threads of one node at once (edp's server handles each
// worker on its own thread), hence the atomic step.
class MemoryHook : public net::CollectiveHook {
public:
    MemoryHook(int slot, const std::atomic<std::int64_t> *step, std::function<void(const MemorySnapshot &)> sink)
        : m_slot(slot), m_step(step), m_sink(std::move(sink)) {}
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
        if (!nodeMemoryNow(m_slot, &s.memory)) {
            const memory::Usage u = memory::usage(m_slot);
            s.memory.live = u.live;
            s.memory.peak = u.peak;
        }
        t_collectiveResult = false;
        s.live = s.memory.live;
        s.peak = s.memory.peak;
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

// What a node's strategy gets from the run's config (no model, data or
// communicator yet).

NodeMemory snapshot(int node, const Strategy &strategy);

NodeMemory snapshot(int node, const Strategy &strategy)
{
    const MemoryBreakdown b = strategy.memory();
    const memory::Usage u = memory::usage(node);
    NodeMemory m;
    m.params = b.params;
    m.grads = b.grads;
    m.optimizer = b.optimizer;
    m.comm = b.comm;
    m.live = u.live;
    m.peak = u.peak;
    m.activations = std::max<std::int64_t>(0, u.live - b.params - b.grads - b.optimizer - b.comm);
    return m;
}

} // namespace

bool atCollectiveResult() { return t_collectiveResult; }

bool nodeMemoryNow(int slot, NodeMemory *out)
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

NodeContext nodeContextOf(const TrainConfig &config, int rank)
{
    NodeContext ctx;
    ctx.rank = rank;
    ctx.nodes = config.nodes;
    ctx.optimizer = config.optimizer;
    ctx.globalBatch = config.globalBatch;
    ctx.bucketBytes = config.bucketBytes;
    ctx.steps = config.steps;
    ctx.maxStaleness = config.maxStaleness;
    ctx.behaviour = std::size_t(rank) < config.behaviour.size() ? config.behaviour[std::size_t(rank)] : NodeBehaviour{};
    ctx.placement = config.placement;
    ctx.microBatches = config.microBatches;
    ctx.schedule = config.schedule;
    return ctx;
}

static_assert(kMaxNodes <= memory::kMaxNodes, "every node of a run needs its own memory slot");

void validateConfig(const TrainConfig &c)
{
    const auto names = strategyNames();
    if (std::find(names.begin(), names.end(), c.strategy) == names.end())
        throw std::invalid_argument("unknown strategy '" + c.strategy + "'");
    if (c.nodes < 1 || c.nodes > kMaxNodes)
        throw std::invalid_argument("--nodes must be between 1 and " + std::to_string(kMaxNodes));
    if (c.strategy == "single" && c.nodes != 1)
        throw std::invalid_argument("the single strategy runs on exactly 1 node");
    if (c.steps < 1)
        throw std::invalid_argument("--steps must be at least 1");
    if (c.globalBatch < 1)
        throw std::invalid_argument("--global-batch must be at least 1");
    if (!(c.optimizer.lr > 0) || !std::isfinite(c.optimizer.lr))
        throw std::invalid_argument("--lr must be a positive number");
    if (c.maxStaleness < 0)
        throw std::invalid_argument("--staleness must be at least 0");
    for (const auto &l : c.links)
        if (l.a < 0 || l.b < 0 || l.a >= c.nodes || l.b >= c.nodes || l.a == l.b)
            throw std::invalid_argument("--link " + std::to_string(l.a) + "-" + std::to_string(l.b) +
                                        " needs two different ranks below --nodes");
    for (const auto &b : c.behaviour)
        if (!(b.slowdown >= 1) || !std::isfinite(b.slowdown))
            throw std::invalid_argument("--slowdown factors must be at least 1");
    checkBackend(c);
}

void checkBackend(const TrainConfig &c)
{
    if (c.backend != TrainConfig::Backend::Gloo)
        return;
    // Everything maps onto Gloo's collectives and its tagged send/recv; a
    // strategy that needs more would be refused here.
    static const std::vector<std::string> onGloo{"single", "ddp",    "zero1",    "zero2", "zero3",
                                                 "syncps", "edp",    "pipeline", "tensor"};
    if (std::find(onGloo.begin(), onGloo.end(), c.strategy) == onGloo.end())
        throw std::invalid_argument("--backend gloo does not run " + c.strategy);
    if (!c.links.empty())
        throw std::invalid_argument("--link shapes our transport's links; --backend gloo does not use them");
}

std::shared_ptr<const DataSource> loadTrainingData(TrainConfig &config)
{
    if (config.model.kind == "gpt") {
        auto data = makeCharCorpus(config.seed, config.model.blockSize, config.corpus);
        config.model.vocabSize = data->vocabSize();
        return data;
    }
    return makeFashionMnist(config.seed);
}

namespace {

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

std::unique_ptr<TrainObserver> makeMetricEmitter(SessionEventSink *events, TrainObserver *next)
{
    return std::make_unique<MetricEmitter>(events, next);
}

void emitStepEvents(SessionEventSink &events, int node, std::int64_t step, double loss, const NodeMemory &m,
                    std::int64_t startNs, std::int64_t endNs)
{
    SpanEvent s;
    s.node = node;
    s.kind = SpanEvent::Kind::Step;
    s.name = "step " + std::to_string(step);
    s.startNs = startNs;
    s.endNs = endNs;
    s.step = step;
    events.onSpan(s);
    events.onMemory(MemorySample{endNs, node, step, m.params, m.grads, m.optimizer, m.activations, m.comm, m.live,
                                 m.peak});
    if (!std::isnan(loss))
        events.onMetric(MetricSample{endNs, step, node, "loss", loss});
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
        if (r.materialised && r.owner != rank && r.owner >= 0 &&
            (out.empty() || out.back() != r.param))
            out.push_back(r.param);
    return out;
}

NodeResult runNode(const TrainConfig &config, const NodeRun &run)
{
    const int rank = run.rank;
    memory::NodeScope scope(run.memorySlot);
    const NodeBehaviour behaviour = nodeContextOf(config, rank).behaviour;
    std::unique_ptr<TrainModel> model = makeModel(config.model);
    if (run.initialParams.defined())
        loadParams(*model, run.initialParams);
    std::unique_ptr<Strategy> strategy = makeStrategy(config.strategy);
    NodeContext ctx = nodeContextOf(config, rank);
    ctx.comm = run.comm;
    ctx.data = run.data;
    ctx.model = model.get();
    ctx.onSpan = run.onSpan;
    strategy->setup(ctx);
    struct Running { // what gatheredParamsNow() and the memory hook read, for this run only
        Running(const Strategy *s, int r, int slot) : slot(slot)
        {
            t_runningStrategy = s, t_runningRank = r;
            if (slot >= 0 && slot < memory::kMaxNodes)
                g_rankOfSlot[slot] = r, g_strategyOfSlot[slot] = s;
        }
        ~Running()
        {
            t_runningStrategy = nullptr, t_runningRank = -1;
            if (slot >= 0 && slot < memory::kMaxNodes)
                g_strategyOfSlot[slot] = nullptr;
        }
        int slot;
    } running(strategy.get(), rank, run.memorySlot);
    NodeResult result;
    // The held-out loss: a replica of its own (uncharged: it is the
    // runtime's, not the training's memory) loaded with the current
    // parameters, on a fixed slice of the test set.
    const bool testing = config.testEvery > 0 && !strategy->isAsynchronous();
    std::unique_ptr<TrainModel> evalModel;
    Batch testBatch;
    if (testing && rank == 0) {
        memory::NodeScope uncharged(-1);
        evalModel = makeModel(config.model);
        testBatch = run.data->testSlice(0, kTestLossSamples);
    }
    if (run.firstStep > 0 || run.initialMoments.defined()) {
        const bool adam = config.optimizer.kind == OptimizerConfig::Kind::Adam;
        if (!adam)
            strategy->loadOptimizerState({}, run.firstStep);
        else if (!run.initialMoments.defined() || !strategy->loadOptimizerState(run.initialMoments, run.firstStep))
            result.momentsRestarted = true; // Adam starts over from zero moments (and t = 0)
    }
    const auto t0 = Clock::now();
    for (std::int64_t k = run.firstStep; k < config.steps; ++k) {
        if (run.currentStep)
            *run.currentStep = k;
        const std::int64_t cpu0 = threadCpuNs();
        const double loss = strategy->step(k);
        if (!strategy->isAsynchronous() && behaviour.slowdown > 1) { // edp stretches its own compute (stretchCompute)
            const std::int64_t slowStart = net::monotonicNs();
            slowDown(behaviour.slowdown, threadCpuNs() - cpu0);
            // The emulated slowdown stands for compute the node would have
            // done: a compute span on its lane, so waiting is not mistaken for it.
            if (ctx.onSpan) {
                SpanEvent s;
                s.node = rank;
                s.kind = SpanEvent::Kind::Forward;
                s.name = "slowdown x" + QString::number(behaviour.slowdown, 'g', 3).toStdString() + " (emulated)";
                s.step = k;
                s.startNs = slowStart;
                s.endNs = net::monotonicNs();
                ctx.onSpan(s);
            }
        }
        NodeMemory mem = snapshot(run.memorySlot, *strategy);
        result.memory = mem;
        if (run.onStep)
            run.onStep(k, loss, mem);
        if (strategy->finished())
            break; // asynchronous strategies: left, or told to stop
        if (testing && ((k + 1) % config.testEvery == 0 || k + 1 == config.steps)) {
            const torch::Tensor params = strategy->fullParameters(); // a collective for sharded strategies
            if (rank == 0) {
                memory::NodeScope uncharged(-1);
                torch::NoGradGuard noGrad;
                loadParams(*evalModel, params);
                const double loss = evalModel->loss(testBatch).item<double>();
                if (run.onTestLoss)
                    run.onTestLoss(k, loss);
            }
        }
        if (run.checkpointEvery > 0 && !strategy->isAsynchronous() && (k + 1) % run.checkpointEvery == 0 &&
            k + 1 < config.steps) {
            const torch::Tensor full = strategy->fullParameters();
            const OptimizerMoments moments = config.optimizer.kind == OptimizerConfig::Kind::Adam
                                                 ? strategy->fullOptimizerState()
                                                 : OptimizerMoments{};
            if (run.onCheckpoint)
                run.onCheckpoint(k + 1, full, moments);
        }
    }
    result.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    result.finalParams = strategy->fullParameters();
    result.async = strategy->asyncStats();
    result.stats = strategy->stats();
    return result;
}

TrainSummary runTraining(const TrainConfig &configIn, TrainObserver *observer)
{
    validateConfig(configIn);
    TrainConfig config = configIn;
    config.model.seed = config.seed;
    memory::install();
    torch::set_num_threads(1); // one LibTorch thread per node: allocations stay on the node's thread
    limitBlasToOneThread();

    const std::shared_ptr<const DataSource> data = loadTrainingData(config);
    const std::unique_ptr<Strategy> kind = makeStrategy(config.strategy);
    checkBatchSplit(*kind, config.globalBatch, config.nodes);
    kind->checkContext(config.model, nodeContextOf(config, /*rank=*/0));

    const bool gloo = config.backend == TrainConfig::Backend::Gloo;
    std::vector<std::unique_ptr<net::Transport>> mesh;
    std::unique_ptr<GlooStore> glooStore; // the gloo nodes' rendezvous
    if (config.nodes > 1 && gloo)
        glooStore = std::make_unique<GlooStore>();
    else {
        // A 1-node world gets a communicator too (its collectives return at
        // once): no strategy runs without one.
        const std::string token = QString::number(QRandomGenerator::system()->generate64(), 16).toStdString();
        mesh = net::makeLocalMesh(config.nodes > 1 ? config.transport : net::TransportKind::Inproc, config.nodes,
                                  token);
        for (const auto &l : config.links) {
            mesh[std::size_t(l.a)]->setLinkLimit(l.b, l.limit);
            mesh[std::size_t(l.b)]->setLinkLimit(l.a, l.limit);
        }
    }
    ByteCounter bytes(config.nodes, config.traceSink, config.events);
    std::unique_ptr<MetricEmitter> metrics;
    if (config.events) {
        metrics = std::make_unique<MetricEmitter>(config.events, observer);
        observer = metrics.get();
    }
    if (config.countBytes || config.traceSink || config.events)
        for (auto &t : mesh)
            t->setTraceSink(&bytes);

    const std::int64_t samplesPerStep = kind->samplesPerStep(config.globalBatch, config.nodes);
    StepBoard board(config.nodes, config.steps, samplesPerStep, observer, kind->isAsynchronous(),
                    lossRows(*kind, config.globalBatch, config.nodes));
    AsyncStats asyncStats;
    std::map<std::string, std::vector<double>> stats; // strategy figures, one entry per node
    std::mutex errorMutex;
    std::string firstError;
    torch::Tensor finalParams;
    std::vector<double> nodeSeconds(static_cast<std::size_t>(config.nodes), 0.0);
    if (config.breakpoints)
        config.breakpoints->beginRun(config.nodes);
    std::vector<std::thread> threads;
    for (int rank = 0; rank < config.nodes; ++rank) {
        threads.emplace_back([&, rank] {
            try {
                memory::NodeScope scope(rank);
                memory::resetNode(rank);
                const NodeBehaviour behaviour = nodeContextOf(config, rank).behaviour;
                if (behaviour.joinAfterMs > 0)
                    std::this_thread::sleep_for(std::chrono::milliseconds(behaviour.joinAfterMs));
                std::atomic<std::int64_t> currentStep{0};
                std::unique_ptr<net::Communicator> comm;
                std::unique_ptr<net::CollectiveHook> hook;
                std::unique_ptr<net::CollectiveHook> breakHook;
                HookChain hooks;
                if (glooStore) {
                    auto g = std::make_unique<GlooCommunicator>(*glooStore, rank, config.nodes);
                    if (config.countBytes || config.traceSink)
                        g->setTraceSink(&bytes); // one event per collective: see gloo_communicator.h
                    comm = std::move(g);
                } else if (!mesh.empty()) {
                    comm = std::make_unique<net::Communicator>(*mesh[std::size_t(rank)]);
                }
                if (comm) {
                    const bool snapshots = observer && observer->wantsCollectiveSnapshots();
                    if (snapshots || config.events) {
                        hook = makeMemoryHook(rank, &currentStep, [&, snapshots](const MemorySnapshot &m) {
                            if (snapshots)
                                observer->onMemorySnapshot(m);
                            if (config.events)
                                config.events->onMemory(memorySampleOf(m, rank, net::monotonicNs()));
                        });
                        hooks.add(hook.get());
                    }
                    if (config.breakpoints) {
                        breakHook = config.breakpoints->makeHook(rank, &currentStep);
                        hooks.add(breakHook.get());
                    }
                }
                std::unique_ptr<SpanHook> spans;
                if (comm && config.events) {
                    spans = std::make_unique<SpanHook>(rank, &currentStep, hooks.empty() ? nullptr : &hooks,
                                                       [&](const SpanEvent &s) { config.events->onSpan(s); });
                    comm->setHook(spans.get());
                } else if (comm && !hooks.empty()) {
                    comm->setHook(&hooks);
                }
                NodeRun run;
                run.rank = rank;
                run.memorySlot = rank;
                run.comm = comm.get();
                run.data = data;
                run.currentStep = &currentStep;
                if (config.events)
                    run.onSpan = [&](const SpanEvent &s) { config.events->onSpan(s); };
                std::int64_t stepStart = net::monotonicNs();
                run.onTestLoss = [&](std::int64_t k, double loss) {
                    if (config.events)
                        config.events->onMetric(MetricSample{net::monotonicNs(), k, -1, "test_loss", loss});
                    if (observer)
                        observer->onTestLoss(k, loss);
                };
                run.onStep = [&, rank](std::int64_t k, double loss, const NodeMemory &mem) {
                    if (config.events)
                        emitStepEvents(*config.events, rank, k, loss, mem, stepStart, net::monotonicNs());
                    board.report(rank, k, loss, mem);
                    stepStart = net::monotonicNs();
                };
                NodeResult result = runNode(config, run);
                nodeSeconds[std::size_t(rank)] = result.seconds;
                if (rank == 0) {
                    finalParams = result.finalParams;
                    asyncStats = result.async;
                }
                {
                    std::lock_guard lock(errorMutex);
                    for (const auto &[key, value] : result.stats)
                        stats[key].push_back(value);
                }
                if (config.breakpoints)
                    config.breakpoints->nodeFinished(rank); // a pause no longer waits for it
            } catch (const std::exception &e) {
                {
                    std::lock_guard lock(errorMutex);
                    if (firstError.empty())
                        firstError = "node " + std::to_string(rank) + ": " + e.what();
                }
                if (config.breakpoints)
                    config.breakpoints->abort(); // release held peers so they fail too
                // Peers blocked in a collective with this node fail at once.
                if (!mesh.empty())
                    mesh[std::size_t(rank)]->abort();
            }
        });
    }
    for (auto &t : threads)
        t.join();
    for (auto &t : mesh)
        t->setTraceSink(nullptr);
    if (!firstError.empty())
        throw std::runtime_error(firstError);

    TrainSummary s;
    s.strategy = config.strategy;
    s.nodes = config.nodes;
    s.steps = config.steps;
    s.lossCurve = board.curve();
    s.finalLoss = s.lossCurve.back();
    s.finalParams = finalParams;
    s.paramCount = finalParams.numel();
    s.paramChecksum = finalParams.to(torch::kFloat64).sum().item<double>();
    s.paramL2 = finalParams.to(torch::kFloat64).norm().item<double>();
    s.seconds = *std::max_element(nodeSeconds.begin(), nodeSeconds.end());
    s.samplesPerS = s.seconds > 0 ? double(config.steps * samplesPerStep) / s.seconds : 0;
    s.async = asyncStats;
    for (const auto &[key, values] : stats)
        s.extra[key] = std::accumulate(values.begin(), values.end(), 0.0) / double(values.size());
    s.memoryPerNode = board.lastMemory();
    for (int r = 0; r < config.nodes; ++r) {
        s.bytesSentPerNode.push_back(bytes.sent(r));
        s.peakBytesPerNode.push_back(memory::usage(r).peak);
    }
    // Test accuracy on a fresh replica loaded with the final parameters.
    s.testAccuracy = testAccuracyOf(config, *data, finalParams);
    if (config.events && s.testAccuracy >= 0)
        config.events->onMetric(MetricSample{net::monotonicNs(), config.steps - 1, -1, "test_accuracy", s.testAccuracy});
    return s;
}

} // namespace smol::engine
