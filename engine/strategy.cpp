#include "strategy.h"

#include "flat_params.h"
#include "placement.h"
#include "strategies/mesh.h"
#include "net/communicator.h"
#include "tensor_bridge.h"

#include <cmath>
#include <stdexcept>
#include <thread>

namespace smol::engine {

std::unique_ptr<Strategy> makeStrategy(const std::string &name)
{
    if (auto made = Strategies::make(name))
        return made;
    throw std::invalid_argument("unknown strategy '" + name + "'");
}

std::unique_ptr<Strategy> makeStrategy(const std::string &name, const std::string &mesh)
{
    if (mesh.empty())
        return makeStrategy(name);
    return strategies::makeMesh(name, mesh);
}

namespace {

// Whole layers on the nodes of the pipeline's placement (balanced when none
// is given).
std::vector<ShardRange> placementPlan(const ShardPlanInput &input)
{
    std::vector<std::int64_t> sizes;
    for (const PlannedLayer &layer : input.layers) {
        std::int64_t n = 0;
        for (const PlannedParam &p : layer.params)
            n += p.numel;
        sizes.push_back(n);
    }
    const int layers = int(input.layers.size());
    const Placement placement = input.placement.empty() || input.placement == "auto"
                                    ? Placement::balanced(sizes, input.nodes)
                                    : Placement::parse(input.placement, layers, input.nodes);
    std::vector<ShardRange> plan;
    for (int l = 0; l < layers; ++l)
        for (const PlannedParam &p : input.layers[std::size_t(l)].params)
            plan.push_back({p.name, 0, p.numel, placement.nodeOf(l), true});
    return plan;
}

} // namespace

std::vector<ShardRange> planShards(const std::string &strategy, const ShardPlanInput &input)
{
    const StrategyDescription *description = describeStrategy(strategy);
    if (!description)
        throw std::invalid_argument("unknown strategy '" + strategy + "'");
    switch (description->shards) {
    case ShardPlan::Replicated:
        return replicatedPlan(input);
    case ShardPlan::ChunkedFlat:
        return chunkedPlan(input.params, input.nodes);
    case ShardPlan::ChunkedByLayer: {
        std::vector<ShardRange> plan;
        for (const PlannedLayer &layer : input.layers) // each layer's flat vector is cut on its own
            for (ShardRange &r : chunkedPlan(layer.params, input.nodes))
                plan.push_back(std::move(r));
        return plan;
    }
    case ShardPlan::ByPlacement:
        return placementPlan(input);
    case ShardPlan::NotPlanned:
        break;
    }
    return {};
}

const char *pipelineScheduleName(PipelineSchedule schedule)
{
    return schedule == PipelineSchedule::GPipe ? "gpipe" : "1f1b";
}

std::vector<PipelineOp> pipelineOrder(PipelineSchedule schedule, int stages, int stage, std::int64_t M)
{
    std::vector<PipelineOp> order;
    if (schedule == PipelineSchedule::GPipe) {
        for (std::int64_t j = 0; j < M; ++j)
            order.push_back({true, j});
        for (std::int64_t j = 0; j < M; ++j)
            order.push_back({false, j});
        return order;
    }
    const std::int64_t warmup = std::min<std::int64_t>(stages - 1 - stage, M);
    for (std::int64_t j = 0; j < warmup; ++j)
        order.push_back({true, j});
    for (std::int64_t j = 0; j + warmup < M; ++j) {
        order.push_back({true, j + warmup});
        order.push_back({false, j});
    }
    for (std::int64_t j = M - warmup; j < M; ++j)
        order.push_back({false, j});
    return order;
}

Batch localBatch(const NodeContext &ctx, std::int64_t step)
{
    return ctx.data->trainBatch(step, ctx.globalBatch, ctx.rank, ctx.nodes);
}

double batchWeight(const NodeContext &ctx)
{
    return batchWeight(ctx.globalBatch, ctx.rank, ctx.nodes);
}

double batchWeight(std::int64_t globalBatch, int share, int shares)
{
    if (globalBatch % shares == 0)
        return 1; // exactly, not rows x shares / B rounded
    return double(batchRows(globalBatch, share, shares).count) * shares / double(globalBatch);
}

torch::Tensor weightedLoss(const torch::Tensor &loss, double weight)
{
    return weight == 1 ? loss : loss * weight;
}

void checkBatchSplit(const Strategy &kind, std::int64_t globalBatch, int nodes)
{
    const int shares = kind.batchShares(nodes);
    if (shares < 1)
        throw std::invalid_argument(kind.name() + " needs at least 2 nodes (a server and a worker)");
    if (globalBatch < shares)
        throw std::invalid_argument("--global-batch " + std::to_string(globalBatch) +
                                    " is smaller than the " + std::to_string(shares) +
                                    (shares == nodes ? " data-parallel nodes" : " workers"));
}

std::vector<std::int64_t> lossRows(const Strategy &kind, std::int64_t globalBatch, int nodes)
{
    const int shares = kind.batchShares(nodes);
    if (kind.isAsynchronous() || shares < 1 || globalBatch % shares == 0)
        return {};
    // The shares are the last `shares` ranks: rank 0 is the server when
    // there is one.
    std::vector<std::int64_t> rows(std::size_t(nodes), 0);
    for (int share = 0; share < shares; ++share)
        rows[std::size_t(nodes - shares + share)] = batchRows(globalBatch, share, shares).count;
    return rows;
}

double stepLoss(const std::vector<std::pair<int, double>> &losses, const std::vector<std::int64_t> &rows)
{
    if (losses.empty())
        return std::nan("");
    double sum = 0, weight = 0;
    for (const auto &[rank, loss] : losses) {
        const double w = rows.empty() ? 1 : double(rows[std::size_t(rank)]);
        sum += rows.empty() ? loss : w * loss;
        weight += w;
    }
    return sum / weight;
}

void stretchCompute(const NodeContext &ctx, std::chrono::steady_clock::time_point computeStart)
{
    if (ctx.behaviour.slowdown <= 1)
        return;
    const auto spent = std::chrono::steady_clock::now() - computeStart;
    std::this_thread::sleep_for(std::chrono::duration_cast<std::chrono::nanoseconds>(
        spent * (ctx.behaviour.slowdown - 1)));
}

net::MemoryByCategory heldBytes(const torch::Tensor &params, const torch::Tensor &grads, const FlatOptimizer *optimizer)
{
    net::MemoryByCategory m;
    m.params = params.defined() ? std::int64_t(params.nbytes()) : 0;
    m.grads = grads.defined() ? std::int64_t(grads.nbytes()) : 0;
    if (optimizer)
        for (const auto &t : optimizer->state())
            m.optimizer += std::int64_t(t.nbytes());
    return m;
}

OptimizerMoments copiedMoments(const FlatOptimizer &optimizer)
{
    if (!optimizer.exp().defined())
        return {};
    return {optimizer.exp().clone(), optimizer.expSq().clone()};
}

namespace {
torch::Tensor chunkOf(const torch::Tensor &flat, const net::ChunkRange &shard)
{
    return flat.narrow(0, std::int64_t(shard.offset), std::int64_t(shard.count));
}
} // namespace

OptimizerMoments gatheredMoments(const FlatOptimizer &optimizer, std::int64_t numel, const net::ChunkRange &shard,
                                 net::Communicator &comm)
{
    if (!optimizer.exp().defined())
        return {};
    OptimizerMoments full;
    for (auto [part, out] : {std::pair{&optimizer.exp(), &full.exp}, std::pair{&optimizer.expSq(), &full.expSq}}) {
        *out = torch::zeros({numel}, torch::kFloat32);
        chunkOf(*out, shard).copy_(*part);
        comm.allGather(viewOf(*out), "optimizer");
    }
    return full;
}

void loadMomentsChunk(FlatOptimizer &optimizer, const OptimizerMoments &m, const net::ChunkRange &shard,
                      std::int64_t steps)
{
    if (m.defined())
        optimizer.load(chunkOf(m.exp, shard), chunkOf(m.expSq, shard), steps);
    else
        optimizer.load({}, {}, steps);
}

std::vector<ShardRange> replicatedShardMap(const std::vector<ParamSlot> &slots)
{
    std::vector<ShardRange> out;
    for (const auto &s : slots)
        out.push_back({s.name, 0, s.numel, -1, true});
    return out;
}

std::vector<ShardRange> chunkedShardMap(const std::vector<ParamSlot> &slots, std::int64_t numel, int nodes,
                                        int materialisedOwner)
{
    std::vector<ShardRange> out;
    for (const auto &s : slots)
        for (int r = 0; r < nodes; ++r) {
            const auto c = net::Communicator::chunk(std::size_t(numel), nodes, r);
            const std::int64_t b = std::max<std::int64_t>(s.offset, std::int64_t(c.offset));
            const std::int64_t e = std::min<std::int64_t>(s.offset + s.numel, std::int64_t(c.offset + c.count));
            if (b < e)
                out.push_back({s.name, b - s.offset, e - s.offset, r, materialisedOwner < 0 || materialisedOwner == r});
        }
    return out;
}

std::vector<ShardRange> replicatedPlan(const ShardPlanInput &input)
{
    std::vector<ShardRange> out;
    for (const PlannedParam &p : input.params)
        out.push_back({p.name, 0, p.numel, -1, true});
    return out;
}

std::vector<ShardRange> chunkedPlan(const std::vector<PlannedParam> &params, int nodes)
{
    // The flat vector's slots, as FlatParams lays them out.
    std::vector<ParamSlot> slots;
    std::int64_t numel = 0;
    for (const PlannedParam &p : params) {
        ParamSlot slot;
        slot.name = p.name;
        slot.offset = numel;
        slot.numel = p.numel;
        slots.push_back(std::move(slot));
        numel += p.numel;
    }
    return chunkedShardMap(slots, numel, nodes, /*materialisedOwner=*/-1);
}

} // namespace smol::engine
