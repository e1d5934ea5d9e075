// zero1: ZeRO stage 1, optimizer state sharded (Rajbhandari et al., "ZeRO",
// section 5.1 and 7: P_os).
//
// The flat parameter vector (P elements) is cut into N contiguous shards;
// node r owns shard r (net::Communicator::chunk). Per step:
//   1. every node computes gradients on its B/N samples (uneven B: the first
//      B % N nodes take one more, losses weighted by rows: batchWeight);
//      with --accumulate K, K micro-steps of B/N samples each, their
//      gradients adding up in the full buffer (forwardBackward);
//   2. once, after the last micro-step: reduce-scatter (average) the gradient vector: node r needs only its
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
#include "zero1.h"

#include "flat_state.h"

#include "engine/tensor_bridge.h"

namespace smol::engine {

namespace {

class Zero1Strategy : public ShardedOptimizerState {
public:
    std::string name() const override { return strategies::kZero1.name; }

    void setup(NodeContext &ctx) override
    {
        holdOptimizerChunk(ctx);
        m_flat->attachGrads(); // stage 1 keeps the full gradient buffer
    }

    double step(std::int64_t step) override
    {
        m_flat->grads().zero_();
        const double loss = forwardBackward(m_ctx, step);
        m_ctx.comm->reduceScatter(viewOf(m_flat->grads()), net::ReduceOp::Average, "grads");
        timed(m_ctx, SpanEvent::Kind::Optimizer, step, [&] { m_opt->step(mine(m_flat->values()), mine(m_flat->grads())); });
        m_ctx.comm->allGather(viewOf(m_flat->values()), "params");
        return loss;
    }

    net::MemoryByCategory memory() const override { return heldBytes(m_flat->values(), m_flat->grads(), m_opt.get()); }
};

} // namespace

std::unique_ptr<Strategy> strategies::makeZero1() { return std::make_unique<Zero1Strategy>(); }

} // namespace smol::engine
