// zero1: ZeRO stage 1, optimizer state sharded (Rajbhandari et al., "ZeRO",
// section 5.1 and 7: P_os).
//
// The flat parameter vector (P elements) is cut into N contiguous shards;
// node r owns shard r (net::Communicator::chunk). Per step:
//   1. every node computes gradients on its B/N samples (uneven B: the first
//      B % N nodes take one more, losses weighted by rows: batchWeight);
//   2. reduce-scatter (average) the gradient vector: node r needs only its
//      shard averaged, since it updates only that shard (the rest of its
//      gradient buffer is left as the scatter's scratch);
//   3. node r updates only its shard of the parameters, with optimizer state
//      for that shard only;
//   4. all-gather the updated shards, so every node has all parameters again.
//
// Holds: all parameters, all gradients (stage 1 keeps the full buffer; stage
// 2 frees it), optimizer state for P/N elements.
// Bytes on the wire per node per step: (N-1)/N x 4P (reduce-scatter) +
// (N-1)/N x 4P (all-gather) = 2(N-1)/N x 4P sent, the same received: ddp's
// traffic, as the paper has it (only stage 3 costs 1.5x).
#include "strategies.h"

#include "engine/flat_params.h"
#include "engine/tensor_bridge.h"
#include "net/communicator.h"

namespace smol::engine {

namespace {

class Zero1Strategy : public Strategy {
public:
    std::string name() const override { return "zero1"; }

    void setup(NodeContext &ctx) override
    {
        m_ctx = ctx;
        m_flat = std::make_unique<FlatParams>(ctx.model->namedParameters());
        m_flat->attachGrads();
        m_shard = net::Communicator::chunk(std::size_t(m_flat->numel()), ctx.nodes, ctx.rank);
        m_opt = std::make_unique<FlatOptimizer>(ctx.optimizer, std::int64_t(m_shard.count));
    }

    double step(std::int64_t step) override
    {
        m_flat->grads().zero_();
        const torch::Tensor loss =
            timed(m_ctx, SpanEvent::Kind::Forward, step, [&] { return m_ctx.model->loss(localBatch(m_ctx, step)); });
        timed(m_ctx, SpanEvent::Kind::Backward, step,
              [&] { weightedLoss(loss, batchWeight(m_ctx)).backward(); });
        m_ctx.comm->reduceScatter(viewOf(m_flat->grads()), net::ReduceOp::Average, "grads");
        timed(m_ctx, SpanEvent::Kind::Optimizer, step, [&] { m_opt->step(mine(m_flat->values()), mine(m_flat->grads())); });
        m_ctx.comm->allGather(viewOf(m_flat->values()), "params");
        return loss.item<double>();
    }

    MemoryBreakdown memory() const override { return heldBytes(m_flat->values(), m_flat->grads(), m_opt.get()); }

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
};

} // namespace

std::unique_ptr<Strategy> makeZero1Strategy()
{
    return std::make_unique<Zero1Strategy>();
}

} // namespace smol::engine
