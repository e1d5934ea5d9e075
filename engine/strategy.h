// The interface every training strategy implements (engine/strategies/, one
// file each, each opening with who sends what to whom per step, what each
// node holds, and the bytes on the wire). A strategy object lives on one
// node's compute thread; the trainer calls setup() once, then step() per step.
#pragma once

#include "engine/compression_config.h"
#include "engine/data/data_source.h"
#include "flat_optimizer.h"
#include "engine/models/model.h"
#include "net/memory_by_category.h"
#include "session/session_events.h"
#include "strategies/strategy_registry.h"

#include <torch/torch.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace smol::net {
class Communicator;
struct ChunkRange;
}

namespace smol::engine {

// Per-node behaviour for heterogeneous, elastic clusters on one machine.
// slowdown applies to every strategy (the trainer sleeps after each step; edp
// stretches its own compute); leaveAfter and joinAfterMs are honoured by
// strategies that tolerate changing membership (edp).
struct NodeBehaviour {
    double slowdown = 1;           // compute takes this many times longer (see stretchCompute)
    std::int64_t leaveAfter = -1;  // leave after this many of its own steps (-1: stay)
    std::int64_t joinAfterMs = 0;  // the trainer starts the node this late
};

// pipeline: GPipe runs every micro-batch's forward, then every backward;
// 1F1B alternates one forward and one backward once the pipeline is full.
enum class PipelineSchedule { GPipe, OneFOneB };
const char *pipelineScheduleName(PipelineSchedule schedule);

// One entry of a stage's order in a step: the forward or the backward of
// micro-batch `microBatch`.
struct PipelineOp {
    bool forward = true;
    std::int64_t microBatch = 0;
};
// Stage `stage` of `stages`'s order of M micro-batches' forwards and
// backwards: GPipe: F0 .. F(M-1), B0 .. B(M-1); 1F1B: min(stages-1-stage, M)
// forwards to fill the pipe, then F and B alternately, then the remaining Bs.
std::vector<PipelineOp> pipelineOrder(PipelineSchedule schedule, int stages, int stage, std::int64_t microBatches);

// The largest cluster the engine runs: a whole class, one node each
// (validateConfig, smolctl train and bench allreduce check against it).
constexpr int kMaxNodes = 64;

struct NodeContext {
    int rank = 0;
    int nodes = 1;
    net::Communicator *comm = nullptr; // null for `single`
    std::shared_ptr<const DataSource> data;
    TrainModel *model = nullptr;       // built by the trainer with the run's seed
    OptimizerConfig optimizer;
    std::int64_t globalBatch = 64;         // samples per micro-step (the whole step's without accumulation)
    std::int64_t accumulate = 1;           // micro-steps per optimizer step (TrainConfig::accumulate)
    std::int64_t bucketBytes = 256 * 1024; // ddp gradient buckets
    CompressionConfig compression;         // ddp and a mesh's dp axis (grad_compressor.h)
    std::int64_t steps = 0;                // the run's --steps
    std::int64_t firstStep = 0;            // where the run resumes (edp: the server's first version)
    std::int64_t maxStaleness = 4;         // edp: bound on a push's staleness
    // pipeline: layer placement ("" or "auto": balanced by parameter count;
    // engine/placement.h), micro-batches per step, and their schedule.
    std::string placement;
    std::int64_t microBatches = 1;
    PipelineSchedule schedule = PipelineSchedule::OneFOneB;
    NodeBehaviour behaviour;
    // Compute spans (forward, backward, optimizer) for the session and the
    // timeline, on the node's thread; empty: none are taken.
    std::function<void(const SpanEvent &)> onSpan;
};

// Takes the calling node thread's memory into its step's peaks (StepMemory,
// trainer.h): the end of a forward, when the activations are at their
// largest. Nothing off a node thread.
void noteStepMemory();

// Runs f() and, when the node reports spans, reports it as a `kind` span of
// `step` (forward, backward, optimizer). Returns what f() returns. The end of
// a forward is also one of the step's memory probes (noteStepMemory).
template <typename F>
auto timed(const NodeContext &ctx, SpanEvent::Kind kind, std::int64_t step, F &&f) -> decltype(f())
{
    const std::int64_t startNs = ctx.onSpan ? net::monotonicNs() : 0;
    auto finish = [&] {
        if (kind == SpanEvent::Kind::Forward)
            noteStepMemory();
        if (!ctx.onSpan)
            return;
        SpanEvent s;
        s.node = ctx.rank;
        s.kind = kind;
        s.name = spanKindName(kind);
        s.step = step;
        s.startNs = startNs;
        s.endNs = net::monotonicNs();
        ctx.onSpan(s);
    };
    if constexpr (std::is_void_v<decltype(f())>) {
        f();
        finish();
    } else {
        auto result = f();
        finish();
        return result;
    }
}

// What an asynchronous strategy's server did over a run (edp); empty for the
// lock-step strategies. Per-node vectors are indexed by rank.
struct AsyncStats {
    std::int64_t updates = 0;      // pushes applied
    std::int64_t maxStaleness = 0; // over applied pushes
    std::vector<std::int64_t> pushes;     // applied pushes per node
    std::vector<std::int64_t> discarded;  // pushes that arrived after the last update
    std::vector<std::int64_t> waits;      // times the bound made a node wait for fresh weights
    std::vector<std::int64_t> joinedAt;   // server version at a node's first pull (-1: never)
    std::vector<std::int64_t> lost;       // 1: the node's connection was lost mid-run
    std::vector<std::int64_t> stalenessHistogram; // [s] = applied pushes with staleness s
};

// Adam's first and second moments, each (P) float32; undefined for SGD.
// --precision bf16 (either optimizer): also the float32 master weights (P),
// of which the bf16 parameters are the rounding; undefined in fp32 runs.
struct OptimizerMoments {
    torch::Tensor exp;
    torch::Tensor expSq;
    torch::Tensor master;
    bool defined() const { return exp.defined() && expSq.defined(); }
};

class Strategy {
public:
    virtual ~Strategy() = default;
    virtual std::string name() const = 0;
    virtual void setup(NodeContext &ctx) = 0;
    // One optimisation step on this node's share of the global batch; returns
    // this node's mean loss. All nodes call it for the same step.
    virtual double step(std::int64_t step) = 0;
    // Bytes of the tensors this node holds, by role: params, grads,
    // optimizer, comm (what memory_tracker charges is the total; the trainer
    // fills in live, peak and activations = the total minus these).
    virtual net::MemoryByCategory memory() const = 0;
    // Every parameter, flattened in namedParameters() order. A collective for
    // sharded strategies: every node must call it.
    virtual torch::Tensor fullParameters() = 0;
    virtual std::vector<ShardRange> shards() const = 0;
    // Data-parallel strategies split the global batch over the nodes.
    virtual bool isDataParallel() const { return true; }
    // How many nodes share one step's global batch, each taking a contiguous
    // part as even as it goes (batchRows; batchWeight makes the mean gradient
    // exact when the parts differ by a row): every node for data parallelism;
    // the workers, ranks 1..N-1, when a server (rank 0) computes nothing
    // (syncps, edp); 1 when every node computes on the whole batch (tensor,
    // pipeline: override). The trainer rejects fewer than 1 share, and a
    // global batch with fewer rows than shares.
    virtual int batchShares(int nodes) const { return isDataParallel() ? nodes : nodes - 1; }
    // Throws std::invalid_argument (one line) when this strategy cannot run
    // `model` with these settings: `ctx` as setup() will get it, without model,
    // data and communicator (tensor: heads per node; pipeline: placement,
    // micro-batches). The trainer asks before starting any node.
    virtual void checkContext(const ModelConfig & /*model*/, const NodeContext & /*ctx*/) const {}
    // Figures this node measured over the run, by name (pipeline:
    // "bubble_fraction"); the trainer reports each one's mean over the nodes.
    virtual std::map<std::string, double> stats() const { return {}; }

    // Asynchronous strategies (edp): nodes take different numbers of steps.
    // Rank 0's step k is the run's step k (what observers see); the others
    // step at their own pace until finished() says they are done.
    virtual bool isAsynchronous() const { return false; }
    virtual bool finished() const { return false; }
    // Training samples one step of the run consumes; `stepBatch` is the
    // step's whole batch (the global batch x --accumulate).
    virtual std::int64_t samplesPerStep(std::int64_t stepBatch, int /*nodes*/) const { return stepBatch; }
    virtual AsyncStats asyncStats() const { return {}; }

    // Checkpoints of the optimizer (Adam's moments over the whole flat
    // parameter vector, namedParameters() order). Sharded strategies gather
    // them: a collective, every node calls it, like fullParameters().
    // Undefined moments: SGD, or a strategy that does not support it (its
    // run then restarts the moments after a resume or re-form).
    virtual OptimizerMoments fullOptimizerState() { return {}; }
    // After setup(), before the first step: continue after `steps` updates
    // with these moments (undefined for SGD). False: not supported.
    virtual bool loadOptimizerState(const OptimizerMoments & /*moments*/, std::int64_t /*steps*/) { return false; }
};

// The strategy called `name` (strategies/strategy_registry.h lists them);
// throws std::invalid_argument for an unknown name. With a device mesh
// ("dp=2,tp=2", net/device_mesh.h): the mesh strategy (strategies/mesh.h),
// `name` saying what its dp axis does (ddp, zero1, zero2).
std::unique_ptr<Strategy> makeStrategy(const std::string &name);
std::unique_ptr<Strategy> makeStrategy(const std::string &name, const std::string &mesh);
// The shard map the window draws before a run of `strategy` (its
// description's ShardPlan); throws std::invalid_argument for an unknown name.
std::vector<ShardRange> planShards(const std::string &strategy, const ShardPlanInput &input);

// True while a memory snapshot is being taken at the end of a collective
// (its result is in the buffer): what memory() counts a buffer as can
// depend on it (zero3: a gathered layer is params once gathered, comm while
// it is being filled).
bool atCollectiveResult();

// Which part of a step's batch a node computes on: share `share` of
// `shares` (a data-parallel node: rank of nodes; a server's worker: rank - 1
// of nodes - 1; a mesh's replica: its dp coordinate of dp).
struct BatchShare {
    int share = 0;
    int shares = 1;
};
// Gradient accumulation (NodeContext::accumulate = K micro-steps a step):
// micro-step `micro` of share s of S takes share micro x S + s of K x S of
// the step's K x B rows (B = ctx.globalBatch; batchRows), so the union over
// the micro-steps and the shares is exactly the batch a run with
// --global-batch K x B draws for the step, whatever K. K = 1, micro 0: share
// s of S of B rows, as without accumulation.
Batch shareBatch(const NodeContext &ctx, std::int64_t step, BatchShare share, std::int64_t micro);
// The rows of that micro-batch.
std::int64_t shareRows(const NodeContext &ctx, BatchShare share, std::int64_t micro);
// Its loss weight: batchWeight(K x B, micro x S + s, K x S) / K, so the
// average over the shares of the gradients summed over the micro-steps is
// the mean over the K x B rows. Exactly 1 when K = 1 and B splits evenly.
double shareWeight(const NodeContext &ctx, BatchShare share, std::int64_t micro);
// This data-parallel node's: share ctx.rank of ctx.nodes.
Batch localBatch(const NodeContext &ctx, std::int64_t step, std::int64_t micro = 0);
// A share's loss is the mean over its own rows; scaled by
// rows x shares / B before backward, the average of the shares' gradients
// (ReduceOp::Average, syncps's server) is the mean over the whole global
// batch, as single computes it, also when the shares differ by a row.
// Exactly 1 when the batch splits evenly. The first form is localBatch's
// (share ctx.rank of ctx.nodes, micro-step `micro`: shareWeight); servers'
// workers pass rank - 1 of nodes - 1.
double batchWeight(const NodeContext &ctx, std::int64_t micro = 0);
double batchWeight(std::int64_t globalBatch, int share, int shares);
// The loss to call backward() on: loss x weight, or loss itself (no multiply
// at all) when weight is 1, so even splits stay bit-for-bit what they were.
torch::Tensor weightedLoss(const torch::Tensor &loss, double weight);

// How a step's micro-steps run (forwardBackward).
struct MicroSteps {
    BatchShare share;
    // Called before micro-step j's forward, j = 0 .. K-1 (ddp and zero3
    // hold their gradient collectives back until j = K - 1 begins).
    std::function<void(std::int64_t micro)> before;
    // A micro-batch's mean loss (empty: ctx.model->loss).
    std::function<torch::Tensor(const Batch &)> loss;
};
// A step's forward and backward on this node, written once for the
// data-parallel strategies (single, ddp, zero1/2/3, syncps's workers): K =
// ctx.accumulate micro-steps, each a forward span (the micro-batch's loss)
// and a backward span (backward() of loss x shareWeight), the gradients
// adding up in the parameters' .grad. Returns the figure the node reports:
// the mean loss over its rows of the step (K = 1: the loss itself, as
// lossRows expects).
double forwardBackward(const NodeContext &ctx, std::int64_t step, const MicroSteps &how);
// Share ctx.rank of ctx.nodes, the model's loss, nothing held back.
double forwardBackward(const NodeContext &ctx, std::int64_t step);
// Throws std::invalid_argument (one line) when ctx asks for accumulation
// (K > 1) of a strategy that has none: `why` says why ("edp is
// asynchronous..."). Called from those strategies' checkContext.
void refuseAccumulation(const NodeContext &ctx, const std::string &why);
// Throws std::invalid_argument (one line) when `kind` cannot split a global
// batch of B rows over `nodes` nodes: fewer than 1 share (a server needs a
// worker), or fewer rows than shares (a share would get none). The trainer
// and the coordinator ask before starting any node.
void checkBatchSplit(const Strategy &kind, std::int64_t globalBatch, int nodes);
// The rows each rank's reported loss is the mean over, by rank (0: reports
// none, a server), to weight a step's loss over the nodes as single computes
// it; empty when a plain mean is already that (an even split, one share, or
// an asynchronous run, whose step loss is rank 0's alone). With
// `accumulate` K micro-steps a step, a rank's rows are its micro-batches'
// (shareRows) summed.
std::vector<std::int64_t> lossRows(const Strategy &kind, std::int64_t globalBatch, int nodes,
                                   std::int64_t accumulate = 1);
// A step's loss from the (rank, loss) pairs reported for it, in report order:
// their plain mean when `rows` is empty, else weighted by rows[rank]; NaN
// when there are none.
double stepLoss(const std::vector<std::pair<int, double>> &losses, const std::vector<std::int64_t> &rows);

// A slower machine, simulated: sleeps (behaviour.slowdown - 1) x the time
// since computeStart (the forward and backward just done). No-op at 1.
void stretchCompute(const NodeContext &ctx, std::chrono::steady_clock::time_point computeStart);

struct ParamSlot;
class FlatOptimizer;
// Bytes held by a strategy whose roles are these tensors (any may be undefined).
net::MemoryByCategory heldBytes(const torch::Tensor &params, const torch::Tensor &grads, const FlatOptimizer *optimizer);
// Adam's moments (and a bf16 run's master weights) for a checkpoint or a
// re-form, undefined under SGD (but the master). Held whole (single, ddp,
// syncps's server): copies.
OptimizerMoments copiedMoments(const FlatOptimizer &optimizer);
// Held as this node's chunk `shard` of flat vectors of `numel` elements
// (zero1, zero2, each zero3 layer): every node's chunk all-gathered, so every
// node calls it at the same point.
OptimizerMoments gatheredMoments(const FlatOptimizer &optimizer, std::int64_t numel, const net::ChunkRange &shard,
                                 net::Communicator &comm);
// This node's chunk of whole moments loaded (undefined moments: fresh),
// and of the master weights when they are defined.
void loadMomentsChunk(FlatOptimizer &optimizer, const OptimizerMoments &moments, const net::ChunkRange &shard,
                      std::int64_t steps);
// Shard maps for the GUI: every parameter held whole by every node, or cut
// by net::Communicator::chunk over the flat vector. materialisedOwner: the
// rank whose shards alone are held (zero3), -1 when every node holds all.
std::vector<ShardRange> replicatedShardMap(const std::vector<ParamSlot> &slots);
std::vector<ShardRange> chunkedShardMap(const std::vector<ParamSlot> &slots, std::int64_t numel, int nodes,
                                        int materialisedOwner);
// The same maps planned from a model's sizes alone (planShards): every
// parameter replicated (owner -1), or the flat vector of `params` cut into
// `nodes` chunks.
std::vector<ShardRange> replicatedPlan(const ShardPlanInput &input);
std::vector<ShardRange> chunkedPlan(const std::vector<PlannedParam> &params, int nodes);

} // namespace smol::engine
