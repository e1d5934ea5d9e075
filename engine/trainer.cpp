// runTraining(): an in-process cluster whose nodes are threads, and what a
// run is checked and prepared with wherever it runs (validateConfig,
// nodeContextOf, loadTrainingData) and reported through (the step board,
// the metric emitter, step events). One node's part of a run: node_run.cpp.
#include "trainer.h"

#include "blas_threads.h"
#include "engine/breakpoints/breakpoints.h"
#include "engine/gloo/gloo_communicator.h"
#include "memory_tracker.h"
#include "node_hooks.h"
#include "net/communicator.h"
#include "net/trace.h"
#include "session/session_events.h"
#include "strategy.h"
#include "net/device_mesh.h"

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
        : m_sent(new std::atomic<std::uint64_t>[std::size_t(nodes)]),
          m_stepping(new std::atomic<bool>[std::size_t(nodes)]),
          m_inSteps(new std::atomic<std::uint64_t>[std::size_t(nodes) * kGroups]), m_next(next), m_events(events)
    {
        for (int i = 0; i < nodes; ++i) {
            m_sent[std::size_t(i)] = 0;
            m_stepping[std::size_t(i)] = false;
            for (std::size_t g = 0; g < kGroups; ++g)
                m_inSteps[std::size_t(i) * kGroups + g] = 0;
        }
    }
    void onFrame(const net::FrameEvent &e) override
    {
        if (e.side == net::FrameEvent::Side::Send) {
            m_sent[std::size_t(e.src)] += e.bytes;
            if (m_stepping[std::size_t(e.src)])
                m_inSteps[std::size_t(e.src) * kGroups + net::groupOfSeq(e.seq) % kGroups] += e.bytes;
        }
        if (e.side == net::FrameEvent::Side::Send && m_steadyNow[std::size_t(e.src)])
            m_steadyBytes[std::size_t(e.src)] += e.bytes;
        if (m_next)
            m_next->onFrame(e);
        if (m_events)
            m_events->onFrame(e);
    }
    std::uint64_t sent(int node) const { return m_sent[std::size_t(node)]; }
    // Between step(k)'s start and end on `node`, its sends count as in steps,
    // by the process group in their seq (net/group_transport.h); from the
    // node's `steadyFrom`-th step on, also as the steady state's.
    void setStepping(int node, bool stepping)
    {
        const std::size_t n = std::size_t(node);
        m_stepping[n] = stepping;
        if (stepping && m_stepsBegun[n]++ >= m_steadyFrom) {
            ++m_steadySteps[n];
            m_steadyNow[n] = true;
        } else if (!stepping) {
            m_steadyNow[n] = false;
        }
    }
    // The steady state begins at this step (a compressor's first compressed one).
    void setSteadyFrom(std::int64_t step) { m_steadyFrom = step; }
    // Payload bytes `node` sent per step from the steady state's first step
    // on; -1 when it ran none of them.
    double steadyBytesPerStep(int node) const
    {
        const std::size_t n = std::size_t(node);
        return m_steadySteps[n] ? double(m_steadyBytes[n]) / double(m_steadySteps[n]) : -1;
    }
    std::uint64_t sentInSteps(int node, std::uint32_t group) const
    {
        return m_inSteps[std::size_t(node) * kGroups + group % kGroups];
    }

private:
    static constexpr std::size_t kGroups = net::kMaxGroupId + 1;
    std::unique_ptr<std::atomic<std::uint64_t>[]> m_sent;
    std::unique_ptr<std::atomic<bool>[]> m_stepping;
    std::unique_ptr<std::atomic<std::uint64_t>[]> m_inSteps; // [node][group]
    // Written by each node's own thread, read once the run is over.
    std::int64_t m_steadyFrom = 0;
    std::vector<std::int64_t> m_stepsBegun = std::vector<std::int64_t>(kMaxNodes, 0);
    std::vector<std::int64_t> m_steadySteps = std::vector<std::int64_t>(kMaxNodes, 0);
    std::unique_ptr<std::atomic<bool>[]> m_steadyNow = std::make_unique<std::atomic<bool>[]>(kMaxNodes);
    std::unique_ptr<std::atomic<std::uint64_t>[]> m_steadyBytes = std::make_unique<std::atomic<std::uint64_t>[]>(kMaxNodes);
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
          m_lossRows(std::move(lossRows)), m_losses(std::size_t(steps)), m_memory(std::size_t(steps), std::vector<net::MemoryByCategory>(std::size_t(nodes))),
          m_latest(std::size_t(nodes)), m_count(std::size_t(steps), 0), m_start(Clock::now()) {}

    void report(int node, std::int64_t step, double loss, const net::MemoryByCategory &mem)
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
    std::vector<net::MemoryByCategory> lastMemory() const { return m_memory.empty() ? std::vector<net::MemoryByCategory>{} : m_memory.back(); }

private:

    std::mutex m_mutex;
    int m_nodes;
    std::int64_t m_globalBatch;
    TrainObserver *m_observer;
    bool m_leaderPaced;
    std::vector<std::int64_t> m_lossRows; // by rank; empty: a plain mean
    std::vector<std::vector<std::pair<int, double>>> m_losses; // (rank, loss) per step
    std::vector<std::vector<net::MemoryByCategory>> m_memory;
    std::vector<net::MemoryByCategory> m_latest; // by node
    std::vector<int> m_count;
    Clock::time_point m_start;
};

MemorySample memorySampleOf(const MemorySnapshot &m, int node, std::int64_t tNs)
{
    return MemorySample{tNs, node, m.step, m.memory, m.kind, m.seq, m.before};
}

} // namespace

NodeContext nodeContextOf(const TrainConfig &config, int rank)
{
    NodeContext ctx;
    ctx.rank = rank;
    ctx.nodes = config.nodes;
    ctx.optimizer = config.optimizer;
    ctx.optimizer.masterWeights = config.model.precision == Precision::Bf16; // fp32 master weights
    ctx.globalBatch = config.globalBatch;
    ctx.accumulate = config.accumulate;
    ctx.bucketBytes = config.bucketBytes;
    ctx.compression = config.compression;
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
    if (!c.mesh.empty()) {
        net::DeviceMesh::parse(c.mesh, c.nodes);
        makeStrategy(c.strategy, c.mesh); // the dp axis runs this strategy, or one line why not
    }
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
    if (c.accumulate < 1 || c.accumulate > kMaxAccumulate)
        throw std::invalid_argument("--accumulate must be between 1 and " + std::to_string(kMaxAccumulate));
    checkRecompute(c.model);
    // tensor's blocks (and a mesh's tp axis) are its own forwards, split by heads.
    if (c.model.recompute != Recompute::None &&
        (c.strategy == "tensor" || (!c.mesh.empty() && net::DeviceMesh::parse(c.mesh, c.nodes).size(net::MeshAxis::Tp) > 1)))
        throw std::invalid_argument("--recompute is not implemented for tensor parallelism (--strategy tensor or a "
                                    "mesh's tp axis) yet; take --recompute none");
    checkPrecision(c.model);
    checkCompression(c);
    checkBackend(c);
}

void checkCompression(const TrainConfig &c)
{
    net::AllReduceAlgorithm algorithm;
    if (!c.allReduce.empty() && !net::parseAllReduceAlgorithm(c.allReduce, &algorithm))
        throw std::invalid_argument("--allreduce takes ring, doubling or auto, not '" + c.allReduce + "'");
    if (c.compression.startStep < 0)
        throw std::invalid_argument("--compress-start must be at least 0");
    if (!c.compression.isOn())
        return;
    if (c.model.precision == Precision::Bf16)
        throw std::invalid_argument("--compress " + c.compression.text() + " compresses float32 gradients; with "
                                    "--precision bf16 they are bf16 on the wire already");
    // The gradients' all-reduce is ddp's (alone, or on a mesh's dp axis);
    // the other strategies reduce-scatter or push theirs.
    if (c.strategy != "ddp")
        throw std::invalid_argument("--compress " + c.compression.text() + " compresses ddp's all-reduce (alone or as " +
                                    "a mesh's dp axis), not " + c.strategy + "'s gradients");
}

net::AllReduceAlgorithm allReduceAlgorithmOf(const TrainConfig &c)
{
    net::AllReduceAlgorithm algorithm = net::AllReduceAlgorithm::Ring;
    if (!net::parseAllReduceAlgorithm(c.allReduce, &algorithm) && c.compression.isOn())
        algorithm = net::AllReduceAlgorithm::Auto;
    return algorithm;
}

void checkBackend(const TrainConfig &c)
{
    if (c.backend != TrainConfig::Backend::Gloo)
        return;
    // Everything maps onto Gloo's collectives and its tagged send/recv; a
    // strategy that needs more would be refused here.
    static const std::vector<std::string> onGloo = strategyNames(); // every one, today
    if (std::find(onGloo.begin(), onGloo.end(), c.strategy) == onGloo.end())
        throw std::invalid_argument("--backend gloo does not run " + c.strategy);
    if (!c.links.empty())
        throw std::invalid_argument("--link shapes our transport's links; --backend gloo does not use them");
    // This LibTorch's ProcessGroupGloo all-reduces float16 but not bfloat16
    // ("Invalid scalar type" from inside the collective).
    if (c.compression.kind == CompressionConfig::Kind::Bf16)
        throw std::invalid_argument("--compress bf16: this LibTorch's Gloo has no bfloat16 all-reduce; "
                                    "use --compress fp16 with --backend gloo");
    if (c.model.precision == Precision::Bf16)
        throw std::invalid_argument("--precision bf16: this LibTorch's Gloo has no bfloat16 all-reduce; "
                                    "use --backend ours");

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


std::unique_ptr<TrainObserver> makeMetricEmitter(SessionEventSink *events, TrainObserver *next)
{
    return std::make_unique<MetricEmitter>(events, next);
}

void emitStepEvents(SessionEventSink &events, int node, std::int64_t step, double loss, const StepMemory &m,
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
    MemorySample sample;
    sample.tNs = endNs;
    sample.node = node;
    sample.step = step;
    if (m.peak != net::MemoryByCategory{}) {
        sample.memory = m.peak;
        sample.stepPeak = true;
        events.onMemory(sample);
    }
    sample.memory = m.atEnd;
    sample.stepPeak = false;
    events.onMemory(sample);
    if (!std::isnan(loss))
        events.onMetric(MetricSample{endNs, step, node, "loss", loss});
}


namespace {

// An in-process run (runTraining): the nodes are threads of this process.
// The life of a run:
//
//   1. prepare   check the config; one LibTorch and BLAS thread per node;
//                load the data; the strategy's batch split and context
//   2. mesh      the transports between the node threads (or Gloo's
//                store), their link limits, a byte counter on every frame
//   3. nodes     a thread per rank: its communicator and collective hooks
//                (node_hooks.h), then runNode() reporting to the step
//                board, the session's events and the observer; the first
//                failure releases held peers and closes its links
//   4. summary   the loss curve, rank 0's final parameters, bytes and
//                memory per node, the strategy's figures, test accuracy
class InProcessRun {
public:
    InProcessRun(const TrainConfig &config, TrainObserver *observer) : m_config(config), m_observer(observer) {}

    TrainSummary run()
    {
        prepare();
        buildMesh();
        runNodes();
        return summary();
    }

private:
    // 1. The config, threads, data and the strategy's checks.
    void prepare()
    {
        validateConfig(m_config);
        m_config.model.seed = m_config.seed;
        memory::install();
        torch::set_num_threads(1); // one LibTorch thread per node: allocations stay on the node's thread
        limitBlasToOneThread();
        m_data = loadTrainingData(m_config);
        m_kind = makeStrategy(m_config.strategy, m_config.mesh);
        checkBatchSplit(*m_kind, m_config.globalBatch, m_config.nodes);
        m_kind->checkContext(m_config.model, nodeContextOf(m_config, /*rank=*/0));
    }

    // 2. The transports (or Gloo's rendezvous), link limits, byte counting.
    void buildMesh()
    {
        const TrainConfig &config = m_config;
        if (config.nodes > 1 && config.backend == TrainConfig::Backend::Gloo)
            m_glooStore = std::make_unique<GlooStore>();
        else {
            // A 1-node world gets a communicator too (its collectives return at
            // once): no strategy runs without one.
            const std::string token = QString::number(QRandomGenerator::system()->generate64(), 16).toStdString();
            m_mesh = net::makeLocalMesh(config.nodes > 1 ? config.transport : net::TransportKind::Inproc,
                                        config.nodes, token);
            for (const auto &l : config.links) {
                m_mesh[std::size_t(l.a)]->setLinkLimit(l.b, l.limit);
                m_mesh[std::size_t(l.b)]->setLinkLimit(l.a, l.limit);
            }
        }
        m_bytes = std::make_unique<ByteCounter>(config.nodes, config.traceSink, config.events);
        m_bytes->setSteadyFrom(config.compression.firstCompressedStep());
        if (config.events) {
            m_metrics = std::make_unique<MetricEmitter>(config.events, m_observer);
            m_observer = m_metrics.get();
        }
        if (config.countBytes || config.traceSink || config.events)
            for (auto &t : m_mesh)
                t->setTraceSink(m_bytes.get());
        m_samplesPerStep = m_kind->samplesPerStep(config.globalBatch * config.accumulate, config.nodes);
        m_board = std::make_unique<StepBoard>(config.nodes, config.steps, m_samplesPerStep, m_observer,
                                              m_kind->isAsynchronous(),
                                              lossRows(*m_kind, config.globalBatch, config.nodes, config.accumulate));
    }

    // 3. A thread per rank; the first failure is the run's.
    void runNodes()
    {
        m_nodeSeconds.assign(std::size_t(m_config.nodes), 0.0);
        if (m_config.breakpoints) {
            m_config.breakpoints->beginRun(m_config.nodes);
            // A pause holds every node's receives, not only the held nodes'.
            m_config.breakpoints->setHoldCallback([this](bool held) {
                for (auto &t : m_mesh)
                    t->holdWaits(held);
            });
        }
        std::vector<std::thread> threads;
        for (int rank = 0; rank < m_config.nodes; ++rank)
            threads.emplace_back([this, rank] { nodeMain(rank); });
        for (auto &t : threads)
            t.join();
        if (m_config.breakpoints)
            m_config.breakpoints->setHoldCallback(nullptr);
        for (auto &t : m_mesh)
            t->setTraceSink(nullptr);
        if (!m_firstError.empty())
            throw std::runtime_error(m_firstError);
    }

    void nodeMain(int rank)
    {
        try {
            memory::NodeScope scope(rank);
            memory::resetNode(rank);
            const NodeBehaviour behaviour = nodeContextOf(m_config, rank).behaviour;
            if (behaviour.joinAfterMs > 0)
                std::this_thread::sleep_for(std::chrono::milliseconds(behaviour.joinAfterMs));
            std::atomic<std::int64_t> currentStep{0};
            const std::unique_ptr<net::Communicator> comm = communicatorOf(rank);
            NodeHooks hooks;
            if (comm)
                hooks.install(*comm, hookPlanOf(rank, &currentStep));
            std::int64_t stepStart = net::monotonicNs();
            const NodeResult result = runNode(m_config, nodeRunOf(rank, comm.get(), &currentStep, stepStart));
            collect(rank, result);
            if (m_config.breakpoints)
                m_config.breakpoints->nodeFinished(rank); // a pause no longer waits for it
        } catch (const std::exception &e) {
            {
                std::lock_guard lock(m_errorMutex);
                if (m_firstError.empty())
                    m_firstError = "node " + std::to_string(rank) + ": " + e.what();
            }
            if (m_config.breakpoints)
                m_config.breakpoints->abort(); // release held peers so they fail too
            // Peers blocked in a collective with this node fail at once.
            if (!m_mesh.empty())
                m_mesh[std::size_t(rank)]->abort();
        }
    }

    std::unique_ptr<net::Communicator> communicatorOf(int rank)
    {
        if (m_glooStore) {
            auto g = std::make_unique<GlooCommunicator>(*m_glooStore, rank, m_config.nodes);
            if (m_config.countBytes || m_config.traceSink)
                g->setTraceSink(m_bytes.get()); // one event per collective: see gloo_communicator.h
            return g;
        }
        if (!m_mesh.empty())
            return std::make_unique<net::Communicator>(*m_mesh[std::size_t(rank)]);
        return nullptr;
    }

    // Memory at collectives to the observer and the session, this process's
    // breakpoints, collective spans to the session.
    NodeHookPlan hookPlanOf(int rank, const std::atomic<std::int64_t> *step)
    {
        NodeHookPlan plan;
        plan.rank = rank;
        plan.memorySlot = rank;
        plan.step = step;
        const bool snapshots = m_observer && m_observer->wantsCollectiveSnapshots();
        if (snapshots || m_config.events)
            plan.onMemory = [this, rank, snapshots](const MemorySnapshot &m) {
                if (snapshots)
                    m_observer->onMemorySnapshot(m);
                if (m_config.events)
                    m_config.events->onMemory(memorySampleOf(m, rank, net::monotonicNs()));
            };
        if (m_config.breakpoints)
            plan.breakpoints = m_config.breakpoints->makeHook(rank, step);
        if (m_config.events)
            plan.onSpan = [this](const SpanEvent &s) { m_config.events->onSpan(s); };
        return plan;
    }

    // runNode()'s callbacks: steps to the board (and the session, as Step
    // spans from `stepStart`), held-out losses to the session and observer.
    NodeRun nodeRunOf(int rank, net::Communicator *comm, std::atomic<std::int64_t> *step, std::int64_t &stepStart)
    {
        NodeRun run;
        run.rank = rank;
        run.memorySlot = rank;
        run.comm = comm;
        run.data = m_data;
        run.currentStep = step;
        run.onStepping = [this, rank](bool stepping) { m_bytes->setStepping(rank, stepping); };
        if (m_config.events)
            run.onSpan = [this](const SpanEvent &s) { m_config.events->onSpan(s); };
        run.onTestLoss = [this](std::int64_t k, double loss) {
            if (m_config.events)
                m_config.events->onMetric(MetricSample{net::monotonicNs(), k, -1, "test_loss", loss});
            if (m_observer)
                m_observer->onTestLoss(k, loss);
        };
        run.onStep = [this, rank, &stepStart](std::int64_t k, double loss, const StepMemory &mem) {
            if (m_config.events)
                emitStepEvents(*m_config.events, rank, k, loss, mem, stepStart, net::monotonicNs());
            m_board->report(rank, k, loss, mem.atEnd);
            stepStart = net::monotonicNs();
        };
        return run;
    }

    void collect(int rank, const NodeResult &result)
    {
        m_nodeSeconds[std::size_t(rank)] = result.seconds;
        if (rank == 0) {
            m_finalParams = result.finalParams;
            m_asyncStats = result.async;
        }
        std::lock_guard lock(m_errorMutex);
        for (const auto &[key, value] : result.stats)
            m_stats[key].push_back(value);
    }

    // Each node's bytes sent inside its steps, by the mesh's axes.
    std::vector<std::map<std::string, std::uint64_t>> bytesByAxis(const net::DeviceMesh &mesh) const
    {
        std::vector<std::map<std::string, std::uint64_t>> out;
        for (int r = 0; r < m_config.nodes; ++r) {
            std::vector<std::uint64_t> byGroup;
            for (std::uint32_t g = 0; g <= net::kMaxGroupId; ++g)
                byGroup.push_back(m_bytes->sentInSteps(r, g));
            out.push_back(mesh.byAxis(byGroup));
        }
        return out;
    }

    // 4. The summary.
    TrainSummary summary()
    {
        const TrainConfig &config = m_config;
        TrainSummary s = TrainSummary::of(config.strategy, config.nodes, config.steps, m_board->curve());
        s.setFinalParams(m_finalParams);
        s.seconds = *std::max_element(m_nodeSeconds.begin(), m_nodeSeconds.end());
        s.samplesPerS = s.seconds > 0 ? double(config.steps * m_samplesPerStep) / s.seconds : 0;
        s.async = m_asyncStats;
        for (const auto &[key, values] : m_stats)
            s.extra[key] = std::accumulate(values.begin(), values.end(), 0.0) / double(values.size());
        s.memoryPerNode = m_board->lastMemory();
        if (!config.mesh.empty())
            s.bytesInStepsByAxis = bytesByAxis(net::DeviceMesh::parse(config.mesh));
        double steady = 0;
        for (int r = 0; r < config.nodes; ++r) {
            s.bytesSentPerNode.push_back(m_bytes->sent(r));
            s.peakBytesPerNode.push_back(memory::usage(r).peak);
            steady += std::max(0.0, m_bytes->steadyBytesPerStep(r)) / config.nodes;
        }
        // Bytes per node per step, measured on the wire, from the first
        // compressed step on (every step without compression).
        s.extra["bytes_per_node_per_step"] = steady;
        s.extra["bytes_per_step_from"] = double(config.compression.firstCompressedStep());
        // Test accuracy on a fresh replica loaded with the final parameters.
        s.testAccuracy = testAccuracyOf(config, *m_data, m_finalParams);
        if (config.events && s.testAccuracy >= 0)
            config.events->onMetric(
                MetricSample{net::monotonicNs(), config.steps - 1, -1, "test_accuracy", s.testAccuracy});
        return s;
    }

    TrainConfig m_config;
    TrainObserver *m_observer;
    std::shared_ptr<const DataSource> m_data;
    std::unique_ptr<Strategy> m_kind;
    std::vector<std::unique_ptr<net::Transport>> m_mesh;
    std::unique_ptr<GlooStore> m_glooStore; // the gloo nodes' rendezvous
    std::unique_ptr<ByteCounter> m_bytes;
    std::unique_ptr<MetricEmitter> m_metrics;
    std::int64_t m_samplesPerStep = 0;
    std::unique_ptr<StepBoard> m_board;
    AsyncStats m_asyncStats;
    std::map<std::string, std::vector<double>> m_stats; // strategy figures, one entry per node
    std::mutex m_errorMutex;
    std::string m_firstError;
    torch::Tensor m_finalParams;
    std::vector<double> m_nodeSeconds;
};

} // namespace

TrainSummary TrainSummary::of(const std::string &strategy, int nodes, std::int64_t steps,
                              std::vector<double> lossCurve)
{
    TrainSummary s;
    s.strategy = strategy;
    s.nodes = nodes;
    s.steps = steps;
    s.lossCurve = std::move(lossCurve);
    s.finalLoss = s.lossCurve.empty() ? std::nan("") : s.lossCurve.back();
    return s;
}

void TrainSummary::setFinalParams(const torch::Tensor &params)
{
    finalParams = params;
    paramCount = params.numel();
    paramChecksum = params.to(torch::kFloat64).sum().item<double>();
    paramL2 = params.to(torch::kFloat64).norm().item<double>();
}

TrainSummary runTraining(const TrainConfig &config, TrainObserver *observer)
{
    return InProcessRun(config, observer).run();
}

} // namespace smol::engine
