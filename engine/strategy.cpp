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

namespace {

// Micro-step `micro` of share s of S as a share of the step's K x B rows
// (shareBatch says why).
BatchShare microShare(const NodeContext &ctx, BatchShare s, std::int64_t micro)
{
    return {int(micro * s.shares + s.share), int(ctx.accumulate * s.shares)};
}

std::int64_t stepBatch(const NodeContext &ctx) { return ctx.globalBatch * ctx.accumulate; }

// A node's step loss over its micro-steps: the mean over its rows (K = 1:
// the one loss as it is, not rows x loss / rows).
class RowMean {
public:
    void add(double loss, std::int64_t rows)
    {
        if (m_count++ == 0)
            m_first = loss;
        m_sum += loss * double(rows);
        m_rows += rows;
    }
    double value() const { return m_count == 1 ? m_first : m_sum / double(m_rows); }

private:
    int m_count = 0;
    double m_first = 0, m_sum = 0;
    std::int64_t m_rows = 0;
};

} // namespace

Batch shareBatch(const NodeContext &ctx, std::int64_t step, BatchShare share, std::int64_t micro)
{
    const BatchShare m = microShare(ctx, share, micro);
    return ctx.data->trainBatch(step, stepBatch(ctx), m.share, m.shares);
}

std::int64_t shareRows(const NodeContext &ctx, BatchShare share, std::int64_t micro)
{
    const BatchShare m = microShare(ctx, share, micro);
    return batchRows(stepBatch(ctx), m.share, m.shares).count;
}

double shareWeight(const NodeContext &ctx, BatchShare share, std::int64_t micro)
{
    const BatchShare m = microShare(ctx, share, micro);
    return batchWeight(stepBatch(ctx), m.share, m.shares) / double(ctx.accumulate);
}

Batch localBatch(const NodeContext &ctx, std::int64_t step, std::int64_t micro)
{
    return shareBatch(ctx, step, {ctx.rank, ctx.nodes}, micro);
}

double batchWeight(const NodeContext &ctx, std::int64_t micro)
{
    return shareWeight(ctx, {ctx.rank, ctx.nodes}, micro);
}

double forwardBackward(const NodeContext &ctx, std::int64_t step, const MicroSteps &how)
{
    RowMean mean;
    for (std::int64_t j = 0; j < ctx.accumulate; ++j) {
        if (how.before)
            how.before(j);
        const torch::Tensor loss = timed(ctx, SpanEvent::Kind::Forward, step, [&] {
            const Batch batch = shareBatch(ctx, step, how.share, j);
            return how.loss ? how.loss(batch) : ctx.model->loss(batch);
        });
        const double weight = shareWeight(ctx, how.share, j);
        timed(ctx, SpanEvent::Kind::Backward, step, [&] { weightedLoss(loss, weight).backward(); });
        mean.add(loss.item<double>(), shareRows(ctx, how.share, j));
    }
    return mean.value();
}

double forwardBackward(const NodeContext &ctx, std::int64_t step)
{
    return forwardBackward(ctx, step, MicroSteps{{ctx.rank, ctx.nodes}, {}, {}});
}

void refuseAccumulation(const NodeContext &ctx, const std::string &why)
{
    if (ctx.accumulate > 1)
        throw std::invalid_argument("--accumulate " + std::to_string(ctx.accumulate) + ": " + why);
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

std::vector<std::int64_t> lossRows(const Strategy &kind, std::int64_t globalBatch, int nodes, std::int64_t accumulate)
{
    const int shares = kind.batchShares(nodes);
    if (kind.isAsynchronous() || shares < 1 || globalBatch % shares == 0)
        return {};
    // The shares are the last `shares` ranks: rank 0 is the server when
    // there is one.
    NodeContext ctx;
    ctx.globalBatch = globalBatch;
    ctx.accumulate = accumulate;
    std::vector<std::int64_t> rows(std::size_t(nodes), 0);
    for (int share = 0; share < shares; ++share)
        for (std::int64_t j = 0; j < accumulate; ++j)
            rows[std::size_t(nodes - shares + share)] += shareRows(ctx, {share, shares}, j);
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
    OptimizerMoments m;
    if (optimizer.exp().defined())
        m.exp = optimizer.exp().clone(), m.expSq = optimizer.expSq().clone();
    if (optimizer.hasMaster())
        m.master = optimizer.master().clone();
    return m;
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
    OptimizerMoments full;
    std::vector<std::pair<const torch::Tensor *, torch::Tensor *>> parts;
    if (optimizer.exp().defined())
        parts = {{&optimizer.exp(), &full.exp}, {&optimizer.expSq(), &full.expSq}};
    if (optimizer.hasMaster()) // every node has stepped as often: all gather it, or none
        parts.emplace_back(&optimizer.master(), &full.master);
    for (auto [part, out] : parts) {
        *out = torch::zeros({numel}, torch::kFloat32);
        chunkOf(*out, shard).copy_(*part);
        comm.allGather(viewOf(*out), "optimizer");
    }
    return full;
}

void loadMomentsChunk(FlatOptimizer &optimizer, const OptimizerMoments &m, const net::ChunkRange &shard,
                      std::int64_t steps)
{
    if (m.master.defined())
        optimizer.loadMaster(chunkOf(m.master, shard));
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
