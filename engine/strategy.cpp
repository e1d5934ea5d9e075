#include "strategy.h"

#include "flat_params.h"
#include "net/communicator.h"
#include "strategies/strategies.h"
#include "tensor_bridge.h"

#include <cmath>
#include <stdexcept>
#include <thread>

namespace smol::engine {

std::vector<std::string> strategyNames()
{
    return {"single", "ddp", "zero1", "zero2", "zero3", "syncps", "edp", "tensor", "pipeline"};
}

std::unique_ptr<Strategy> makeStrategy(const std::string &name)
{
    if (name == "single")
        return makeSingleStrategy();
    if (name == "ddp")
        return makeDdpStrategy();
    if (name == "zero1")
        return makeZero1Strategy();
    if (name == "zero2")
        return makeZero2Strategy();
    if (name == "zero3")
        return makeZero3Strategy();
    if (name == "syncps")
        return makeSyncPsStrategy();
    if (name == "edp")
        return makeEdpStrategy();
    if (name == "tensor")
        return makeTensorStrategy();
    if (name == "pipeline")
        return makePipelineStrategy();
    throw std::invalid_argument("unknown strategy '" + name + "'");
}

const char *pipelineScheduleName(PipelineSchedule schedule)
{
    return schedule == PipelineSchedule::GPipe ? "gpipe" : "1f1b";
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

MemoryBreakdown heldBytes(const torch::Tensor &params, const torch::Tensor &grads, const FlatOptimizer *optimizer)
{
    MemoryBreakdown m;
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

} // namespace smol::engine
