// An in-process cluster: N nodes as threads of this process, connected by a
// real transport (TCP over loopback by default, or in-memory queues), each
// running one strategy object on its own model replica or shard. What
// `smolctl train` runs, and what the tests compare strategies with.
//
// Does not (yet): run nodes in other processes, pause at collectives, or
// record sessions; those belong to the cluster runtime.
#pragma once

#include "flat_optimizer.h"
#include "engine/models/model.h"
#include "net/communicator.h"
#include "net/dtype.h"
#include "net/trace.h"
#include "net/transport.h"
#include "strategy.h"

#include <torch/torch.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace smol::net {
class CollectiveHook;
}

namespace smol::engine {

class BreakpointController;
class SessionEventSink;

struct TrainConfig {
    std::string strategy = "ddp";
    int nodes = 2;
    ModelConfig model;  // kind and sizes; model.seed is set from seed
    std::string corpus; // gpt: text file ("" = default corpus)
    std::int64_t steps = 100;
    std::int64_t globalBatch = 120; // splits evenly over 1, 2, 3, 4, 5, 6 and 8 nodes
    std::uint64_t seed = 0;
    net::TransportKind transport = net::TransportKind::Tcp;
    // Who runs the collectives: our transport (Ours) or c10d's
    // ProcessGroupGloo (Gloo: every strategy; `transport` and `links` unused).
    enum class Backend { Ours, Gloo };
    Backend backend = Backend::Ours;
    OptimizerConfig optimizer;
    std::int64_t bucketBytes = 256 * 1024;
    // ddp's (and a mesh's dp axis's) gradient compression (--compress,
    // --compress-start; engine/grad_compressor.h).
    CompressionConfig compression;
    // Our all-reduce: "ring", "doubling" or "auto" (net/communicator.h);
    // "" = the ring, or auto when compressing (its messages are small by
    // design; plain runs keep the ring's closed form 2(N-1)/N x S).
    std::string allReduce;
    bool countBytes = true; // attach a trace sink that counts bytes per node
    // Also deliver every frame event here (not owned; called from I/O
    // threads). nullptr: no sink beyond the byte counter.
    net::TraceSink *traceSink = nullptr;
    // Everything the run does as events (engine/session/session_events.h):
    // frames, collective and step spans, memory per step, metrics. Not
    // owned; called from node and I/O threads. nullptr: none.
    SessionEventSink *events = nullptr;
    // Pause at collectives (engine/breakpoints.h); not owned. nullptr: never.
    BreakpointController *breakpoints = nullptr;
    // edp: no push is applied more than this many updates after its weights.
    std::int64_t maxStaleness = 4;
    // Per-node speed and membership (strategy.h), by rank; missing = defaults.
    std::vector<NodeBehaviour> behaviour;
    // Emulated slow links (net/link_shaper.h) between ranks a and b, both
    // directions; applied to the mesh once it is built (not with gloo).
    struct Link {
        int a = 0;
        int b = 1;
        net::LinkLimit limit;
    };
    std::vector<Link> links;
    // pipeline: layer placement ("" or "auto": balanced by parameter count),
    // micro-batches per step (dividing globalBatch) and their schedule.
    std::string placement;
    std::int64_t microBatches = 1;
    PipelineSchedule schedule = PipelineSchedule::OneFOneB;
    // Gradient accumulation (--accumulate K): each optimizer step runs K
    // micro-steps of globalBatch samples each (so a step consumes K x
    // globalBatch samples: the same ones a run with --global-batch K x B
    // draws) and synchronises gradients once, after the last (ddp's
    // all-reduce, zero's reduce-scatter). Data-parallel strategies and a
    // mesh's dp axis; 1: none.
    std::int64_t accumulate = 1;
    // A device mesh, "dp=2,tp=2,pp=2" (net/device_mesh.h; strategies/mesh.h):
    // the axes multiply to `nodes`; `strategy` is what the dp axis does (ddp,
    // zero1, zero2); placement, microBatches and schedule apply to pp. Empty:
    // no mesh, `strategy` runs alone.
    std::string mesh;
    // Lock-step strategies: every K steps (and after the last), rank 0
    // measures the loss on held-out data (the first kTestLossSamples test
    // samples) with the current parameters. 0: never.
    std::int64_t testEvery = 0;
};

constexpr std::int64_t kTestLossSamples = 1000;
constexpr std::int64_t kMaxAccumulate = 1024; // --accumulate's largest K

struct StepReport {
    std::int64_t step = 0;
    double loss = 0;         // mean over the nodes that computed one (edp: the applied push's)
    double seconds = 0;      // wall time since training started
    double samplesPerS = 0;  // global batches x batch size so far / seconds
    std::vector<net::MemoryByCategory> memory;
};

// A node's memory at a collective boundary (before or after one).
// Exact at that instant: the strategy's held tensors by category (zero3's
// gathered layer in params while it is held, collective buffers in comm),
// activations = live - the rest.
struct MemorySnapshot {
    int node = 0;
    std::int64_t step = 0;
    net::CollectiveKind kind = net::CollectiveKind::None;
    std::uint64_t seq = 0;
    bool before = true;
    net::MemoryByCategory memory; // by category, with live and peak
    std::string name;    // the collective's tensor name ("params.fc1")
};

// The calling node thread's memory by category right now (its running
// strategy's tensors and its allocator slot); false off a node thread.
bool nodeMemoryNow(int memorySlot, net::MemoryByCategory *out);
// A communicator hook that takes the node's memory by category before and
// after every collective (MemorySnapshot) and hands it to `sink`, on the
// calling thread (edp's server threads too). `step`: the node's current step.
std::unique_ptr<net::CollectiveHook> makeMemoryHook(int memorySlot, const std::atomic<std::int64_t> *step,
                                                    std::function<void(const MemorySnapshot &)> sink);

class TrainObserver {
public:
    virtual ~TrainObserver() = default;
    // Called once per step, after every node finished it, from a node thread.
    virtual void onStep(const StepReport &report) = 0;
    // Called on the node's thread (edp's server: on its per-worker threads,
    // concurrently) before and after every collective, when
    // wantsCollectiveSnapshots() says so. Keep it quick.
    virtual bool wantsCollectiveSnapshots() const { return false; }
    virtual void onMemorySnapshot(const MemorySnapshot &) {}
    // A held-out loss after `step` (TrainConfig::testEvery), from rank 0's thread.
    virtual void onTestLoss(std::int64_t /*step*/, double /*loss*/) {}
    // Cluster runs: a node was lost and the run re-forms, attempt `attempt`
    // of at most `maxAttempts`, with `nodes` nodes from step `fromStep`.
    // From the coordinator's run() thread.
    virtual void onReform(int /*attempt*/, int /*maxAttempts*/, int /*nodes*/, std::int64_t /*fromStep*/,
                          const std::string & /*reason*/) {}
    // Cluster runs: every node was lost; the run waits up to `seconds` for
    // nodes to join again. From the coordinator's run() thread.
    virtual void onWaitingForNodes(double /*seconds*/) {}
};

struct TrainSummary {
    std::string strategy;
    int nodes = 0;
    std::int64_t steps = 0;
    double finalLoss = 0;
    double testAccuracy = -1; // -1: not a classifier
    std::int64_t paramCount = 0;
    double paramChecksum = 0; // sum of all parameters, as double
    double paramL2 = 0;
    double samplesPerS = 0;
    double seconds = 0;
    std::vector<std::uint64_t> bytesSentPerNode; // payload bytes
    // A mesh's run: each node's payload bytes sent inside its steps by axis
    // ("dp", "tp", "pp", "cp": the axes above 1), by rank; empty without one.
    std::vector<std::map<std::string, std::uint64_t>> bytesInStepsByAxis;
    std::vector<std::int64_t> peakBytesPerNode;
    std::vector<net::MemoryByCategory> memoryPerNode; // at the end of the last step
    std::vector<double> lossCurve;
    torch::Tensor finalParams; // flat, namedParameters() order
    AsyncStats async;          // asynchronous strategies (edp): what the server did
    std::vector<int> lostRanks; // cluster runs: ranks of the last epoch lost mid-run (edp trains on)
    // Figures a strategy measured (Strategy::stats()), each the mean over the
    // nodes; pipeline: "bubble_fraction" and "bubble_fraction_formula".
    std::map<std::string, double> extra;

    // A run's summary begun: what ran and its loss curve (finalLoss its
    // last point; NaN when no step finished).
    static TrainSummary of(const std::string &strategy, int nodes, std::int64_t steps,
                           std::vector<double> lossCurve);
    // The final parameters and the figures read from them (count, checksum, L2).
    void setFinalParams(const torch::Tensor &params);
};

// Throws std::invalid_argument for a bad config (one line), DataError for
// missing data, std::runtime_error naming the node for a failure mid-run.
TrainSummary runTraining(const TrainConfig &config, TrainObserver *observer = nullptr);

// Checks a config the way runTraining() does (std::invalid_argument, one
// line), without data: strategy, sizes, links, backend.
void validateConfig(const TrainConfig &config);
// The part of validateConfig() about the backend (what Gloo runs), for a
// cluster run to refuse before it waits for any node.
void checkBackend(const TrainConfig &config);
// The part about --compress and --allreduce.
void checkCompression(const TrainConfig &config);
// The all-reduce our communicators run for `config` (TrainConfig::allReduce).
net::AllReduceAlgorithm allReduceAlgorithmOf(const TrainConfig &config);
// What rank `rank` of `config.nodes` is told about the run (the strategy's
// NodeContext without its communicator, data or sinks).
NodeContext nodeContextOf(const TrainConfig &config, int rank);

// A node's memory over one step: at its end, and each category at its
// largest during it. The peaks are taken at the step's probes (every
// collective boundary, the end of every forward, where the activations are
// at their largest, and the step's end), except `peak`, the tracking
// allocator's high-water mark within the step, and `live`, the largest live
// at a probe.
struct StepMemory {
    net::MemoryByCategory atEnd;
    net::MemoryByCategory peak;
};

// One node's part of a run: what runTraining()'s node threads and the
// cluster runtime's nodes (engine/cluster/) both execute, so an embedded
// node and a `smolctl node` process run the same code.
struct NodeRun {
    int rank = 0;
    int memorySlot = 0;                // memory_tracker node id the allocations are charged to
    net::Communicator *comm = nullptr; // null for a 1-node world
    std::shared_ptr<const DataSource> data;
    std::atomic<std::int64_t> *currentStep = nullptr; // optional: set before each step
    std::int64_t firstStep = 0;        // resume: the step to start at
    torch::Tensor initialParams;       // flat, namedParameters() order; undefined: the seed's weights
    OptimizerMoments initialMoments;   // Adam's moments at firstStep (undefined: start them at zero)
    // After every K-th step (counted from step 0), gather the full
    // parameters and hand them to onCheckpoint. 0: never. Lock-step
    // strategies: a collective, every rank the same K; an asynchronous one
    // (edp): the node's own copy, set on its server only.
    std::int64_t checkpointEvery = 0;
    std::function<void(std::int64_t step, double loss, const StepMemory &memory)> onStep;
    std::function<void(const SpanEvent &)> onSpan; // compute spans (NodeContext::onSpan)
    // true as the node begins a step, false when it has finished it.
    std::function<void(bool stepping)> onStepping;
    std::function<void(std::int64_t step, double loss)> onTestLoss; // rank 0, TrainConfig::testEvery
    // Memory by category before and after every collective (from the
    // communicator's hook, on this thread). Unset: none are taken.
    std::function<void(const MemorySnapshot &)> onCollectiveMemory;
    // params and (Adam, where the strategy supports it) the optimizer's moments.
    std::function<void(std::int64_t stepsDone, const torch::Tensor &params, const OptimizerMoments &moments)>
        onCheckpoint;
};

struct NodeResult {
    torch::Tensor finalParams; // every node: the full parameters at the end
    AsyncStats async;
    std::map<std::string, double> stats;
    double seconds = 0;
    net::MemoryByCategory memory;         // at the end of its last step
    bool momentsRestarted = false; // resumed with Adam but without moments to continue from
};

// `config` as runTraining() prepares it (model.seed and vocabSize set).
NodeResult runNode(const TrainConfig &config, const NodeRun &run);

// Parameters the calling node thread holds in full right now beyond its own
// shard (zero3 mid-step: the layers it has gathered), by name; empty for
// strategies that never gather, or off a node thread. For the shard map at
// a pause.
std::vector<std::string> gatheredParamsNow();

// The run's data, as every node loads it (vocabSize set on config.model for gpt).
std::shared_ptr<const DataSource> loadTrainingData(TrainConfig &config);
// An observer that reports each completed step's cluster-wide metrics (loss,
// samples/s) to `events`, then calls `next` (may be null).
std::unique_ptr<TrainObserver> makeMetricEmitter(SessionEventSink *events, TrainObserver *next);
// A node's step as events: its Step span, its memory at the end and its
// step's peaks (a MemorySample with stepPeak set; none when `memory.peak`
// is all zero, from a node that does not measure them), its loss (if any).
void emitStepEvents(SessionEventSink &events, int node, std::int64_t step, double loss,
                    const StepMemory &memory, std::int64_t startNs, std::int64_t endNs);
// Test accuracy of `params` loaded into a fresh replica; -1 for gpt.
double testAccuracyOf(const TrainConfig &config, const DataSource &data, const torch::Tensor &params);

} // namespace smol::engine
