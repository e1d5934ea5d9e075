// What a strategy is, told once beside its implementation: the topology the
// cluster view draws, its closed forms for the model states a node holds and
// the bytes it sends per step (docs/strategies.md's table, the ZeRO paper's
// formulas), and which shard map the window plans before a run. Each
// strategy's header (zero1.h beside zero1.cpp, ...) holds its description
// and declares its factory; strategy_registry.h lists the strategies, one
// line each. The window's plan
// (app/bridge/run_plan.cpp), the lessons' formulas and `smolctl compare` read
// it; none of them names a strategy.
//
// No LibTorch and no Qt: engine/session and app/ read the closed forms
// without building a model. The factory is defined in the strategy's .cpp,
// on the LibTorch side; the plans are computed from a model's sizes alone by
// engine/strategy.cpp's planShards (engine/strategy.h's makeStrategy and
// planShards reach them through the registry).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace smol::engine {

class Strategy;

// How the cluster view draws the nodes: a ring (the collectives' neighbours),
// a star (rank 0 is a server at the centre), a chain (pipeline stages).
enum class StrategyTopology { Ring, Star, Chain };

// What the closed forms depend on: P parameters (float32: 4 bytes each;
// bfloat16 under --precision bf16: 2, and their gradients the same), N
// nodes, the optimizer, whose state is 8P bytes with Adam (two moments) and
// 0 with SGD, plus a 4P float32 master copy of the weights with bf16 (so
// Adam bf16: 2P + 2P + 12P = 16P, the ZeRO paper's mixed-precision count),
// and the micro-steps a step (--accumulate K: the gradients still go out
// once a step, so only zero3, which gathers the layers for every
// micro-step, sends more).
struct ClosedFormInput {
    std::int64_t params = 0; // P
    int nodes = 1;           // N
    bool adam = false;
    std::int64_t accumulate = 1; // K
    bool bf16 = false;           // --precision bf16
    std::int64_t elementBytes() const { return bf16 ? 2 : 4; } // a parameter's, a gradient's
    std::int64_t optimizerBytes() const { return (adam ? 8 * params : 0) + (bf16 ? 4 * params : 0); }
};

// Bytes sent per node per step: the mean over the nodes and the busiest
// node's (a parameter server's link carries N-1 workers' traffic).
struct WireBytes {
    double mean = 0;
    double busiest = 0;
};

// Model-state bytes one node holds between steps, by category: what
// modelStateBytes totals (smolctl plan prints and checks each).
struct HeldBytes {
    std::int64_t params = 0;
    std::int64_t grads = 0;
    std::int64_t optimizer = 0; // the optimizer's state (and a bf16 run's float32 master)
    std::int64_t total() const { return params + grads + optimizer; }
};

// One contiguous range of a parameter and its owner: what the GUI's shard
// map draws (Strategy::shards() live, planShards() before the run).
struct ShardRange {
    std::string param;  // parameter name
    std::int64_t begin; // element offset within that parameter
    std::int64_t end;
    int owner;         // rank that owns (updates) it; -1 = replicated on all
    bool materialised; // held in full on this node right now
};

// A model as the shard plan sees it: its parameters in namedParameters()
// order (the flat vector's) and its layers (TrainModel::layers()) in order.
struct PlannedParam {
    std::string name;
    std::int64_t numel = 0;
};
struct PlannedLayer {
    std::string name;
    std::vector<PlannedParam> params;
};
struct ShardPlanInput {
    std::vector<PlannedParam> params;
    std::vector<PlannedLayer> layers;
    int nodes = 1;
    std::string placement; // pipeline's --placement ("" or "auto": balanced)
};

// The shard map a strategy will have, planned from a ShardPlanInput before
// the run: every parameter on every node (owner -1); the flat vector of all
// parameters cut into N chunks (zero1, zero2); each layer's flat vector cut
// on its own (zero3); whole layers on the nodes of the pipeline placement;
// or no plan (tensor cuts inside weights: not planned yet).
enum class ShardPlan { Replicated, ChunkedFlat, ChunkedByLayer, ByPlacement, NotPlanned };

struct StrategyDescription {
    const char *name;
    StrategyTopology topology;
    // Params + grads + optimizer state one node holds between steps; nullopt
    // when that is no closed form of P and N alone (a server and its workers
    // differ, a pipeline stage holds its layers, tensor its slices).
    std::optional<std::int64_t> (*modelStateBytes)(const ClosedFormInput &);
    // Bytes each node sends per step; nullopt when they depend on more than
    // P and N (tensor and pipeline move activations).
    std::optional<WireBytes> (*bytesPerStep)(const ClosedFormInput &);
    ShardPlan shards;
    // modelStateBytes by category (the same total); nullptr: no closed form.
    std::optional<HeldBytes> (*heldByCategory)(const ClosedFormInput &) = nullptr;
    // The closed forms above as one line of text, for `smolctl plan`;
    // nullptr: none written.
    const char *formulas = nullptr;
    // A run measures a pipeline bubble (stages waiting for each other).
    bool measuresBubble() const { return topology == StrategyTopology::Chain; }
};

// Closed forms several strategies share.
namespace closed_form {
inline std::optional<std::int64_t> none(const ClosedFormInput &)
{
    return std::nullopt;
}
inline std::optional<WireBytes> noBytes(const ClosedFormInput &)
{
    return std::nullopt;
}
// Every node holds everything: 4P params + 4P grads + the optimizer's state
// (bf16: 2P + 2P + it).
inline std::optional<std::int64_t> replicated(const ClosedFormInput &c)
{
    return c.elementBytes() * c.params + c.elementBytes() * c.params + c.optimizerBytes();
}
// A ring all-reduce of the 4P gradient bytes (bf16: 2P), or a reduce-scatter
// and an all-gather of them: 2(N-1)/N x 4P from every node.
inline std::optional<WireBytes> ringAllReduce(const ClosedFormInput &c)
{
    const double bytes = 2.0 * (c.nodes - 1) / c.nodes * double(c.elementBytes()) * double(c.params);
    return WireBytes{bytes, bytes};
}
// replicated(), by category.
inline std::optional<HeldBytes> replicatedHeld(const ClosedFormInput &c)
{
    return HeldBytes{c.elementBytes() * c.params, c.elementBytes() * c.params, c.optimizerBytes()};
}
inline constexpr const char *kReplicatedRingFormulas =
    "held: 4P params + 4P grads + opt (Adam 8P, SGD 0; bf16: 2P + 2P + opt + 4P master); "
    "sent: 2(N-1)/N x 4P a step (ring all-reduce of the gradients, once per optimizer step)";
} // namespace closed_form

} // namespace smol::engine
