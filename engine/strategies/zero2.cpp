// zero2: ZeRO stage 2, optimizer state and gradients sharded.
//
// Node r owns shard r of the flat parameter vector (P elements, N shards).
// Per step:
//   1. every node computes gradients on its B/N samples (uneven B: the first
//      B % N nodes take one more, losses weighted by rows: batchWeight) into
//      a full, temporary gradient buffer;
//   2. reduce-scatter (average): node r receives the averaged gradient of
//      its shard only, keeps that, and frees the full buffer;
//   3. node r updates its shard of the parameters;
//   4. all-gather the updated shards.
//
// Holds between steps: all parameters, gradients and optimizer state for
// P/N elements (the full gradient buffer lives only during backward).
// Bytes on the wire per node per step: (N-1)/N x 4P (reduce-scatter) +
// (N-1)/N x 4P (all-gather) = 2(N-1)/N x 4P sent, the same received: the
// same traffic as ddp, with less memory.
#include "strategies.h"

#include "engine/flat_params.h"
#include "engine/tensor_bridge.h"
#include "net/communicator.h"

namespace smol::engine {

namespace {

class Zero2Strategy : public Strategy {
public:
    std::string name() const override { return "zero2"; }

    void setup(NodeContext &ctx) override
    {
        m_ctx = ctx;
        m_flat = std::make_unique<FlatParams>(ctx.model->namedParameters());
        m_shard = net::Communicator::chunk(std::size_t(m_flat->numel()), ctx.nodes, ctx.rank);
        m_gradShard = torch::zeros({std::int64_t(m_shard.count)}, torch::kFloat32);
        m_opt = std::make_unique<FlatOptimizer>(ctx.optimizer, std::int64_t(m_shard.count));
    }

    double step(std::int64_t step) override
    {
        torch::Tensor full = m_flat->attachGrads();
        const torch::Tensor loss =
            timed(m_ctx, SpanEvent::Kind::Forward, step, [&] { return m_ctx.model->loss(localBatch(m_ctx, step)); });
        timed(m_ctx, SpanEvent::Kind::Backward, step,
              [&] { weightedLoss(loss, batchWeight(m_ctx)).backward(); });
        m_ctx.comm->reduceScatter(viewOf(full), net::ReduceOp::Average, "grads");
        m_gradShard.copy_(mine(full));
        full = torch::Tensor();
        m_flat->detachGrads();
        timed(m_ctx, SpanEvent::Kind::Optimizer, step, [&] { m_opt->step(mine(m_flat->values()), m_gradShard); });
        m_ctx.comm->allGather(viewOf(m_flat->values()), "params");
        return loss.item<double>();
    }

    MemoryBreakdown memory() const override { return heldBytes(m_flat->values(), m_gradShard, m_opt.get()); }

    // Every node holds its chunk of the moments.
    OptimizerMoments fullOptimizerState() override
    {
        return gatheredMoments(*m_opt, m_flat->numel(), m_shard, *m_ctx.comm);
    }
    bool loadOptimizerState(const OptimizerMoments &m, std::int64_t steps) override
    {
        loadMomentsChunk(*m_opt, m, m_shard, steps);
        return true;
    }

    torch::Tensor fullParameters() override { return m_flat->values().clone(); }

    std::vector<ShardRange> shards() const override
    {
        return chunkedShardMap(m_flat->slots(), m_flat->numel(), m_ctx.nodes, /*materialisedOwner=*/-1);
    }

private:
    torch::Tensor mine(const torch::Tensor &flat) const
    {
        return flat.narrow(0, std::int64_t(m_shard.offset), std::int64_t(m_shard.count));
    }

    NodeContext m_ctx;
    std::unique_ptr<FlatParams> m_flat;
    std::unique_ptr<FlatOptimizer> m_opt;
    net::ChunkRange m_shard;
    torch::Tensor m_gradShard;
};

} // namespace

std::unique_ptr<Strategy> makeZero2Strategy()
{
    return std::make_unique<Zero2Strategy>();
}

} // namespace smol::engine
