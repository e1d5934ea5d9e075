// zero2: ZeRO stage 2, optimizer state and gradients sharded.
//
// Node r owns shard r of the flat parameter vector (P elements, N shards).
// Per step:
//   1. every node computes gradients on its B/N samples (uneven B: the first
//      B % N nodes take one more, losses weighted by rows: batchWeight) into
//      a full, temporary gradient buffer (with --accumulate K: K micro-steps
//      of B/N samples each, adding up in that buffer, attached throughout);
//   2. once, after the last micro-step: reduce-scatter (average): node r receives the averaged gradient of
//      its shard only, keeps that, and frees the full buffer;
//   3. node r updates its shard of the parameters;
//   4. all-gather the updated shards.
//
// Holds between steps: all parameters, gradients and optimizer state for
// P/N elements (the full gradient buffer lives only during backward).
// Bytes on the wire per node per step: (N-1)/N x 4P (reduce-scatter) +
// (N-1)/N x 4P (all-gather) = 2(N-1)/N x 4P sent, the same received: the
// same traffic as ddp, with less memory.
#include "zero2.h"

#include "flat_state.h"

#include "engine/tensor_bridge.h"

namespace smol::engine {

namespace {

class Zero2Strategy : public ShardedOptimizerState {
public:
    std::string name() const override { return strategies::kZero2.name; }

    void setup(NodeContext &ctx) override
    {
        holdOptimizerChunk(ctx);
        m_gradShard = torch::zeros({std::int64_t(m_shard.count)}, m_flat->dtype());
    }

    double step(std::int64_t step) override
    {
        torch::Tensor full = m_flat->attachGrads();
        const double loss = forwardBackward(m_ctx, step);
        m_ctx.comm->reduceScatter(viewOf(full), net::ReduceOp::Average, "grads");
        m_gradShard.copy_(mine(full));
        full = torch::Tensor();
        m_flat->detachGrads();
        timed(m_ctx, SpanEvent::Kind::Optimizer, step, [&] { m_opt->step(mine(m_flat->values()), m_gradShard); });
        m_ctx.comm->allGather(viewOf(m_flat->values()), "params");
        return loss;
    }

    net::MemoryByCategory memory() const override { return heldBytes(m_flat->values(), m_gradShard, m_opt.get()); }

private:
    torch::Tensor m_gradShard; // this node's chunk of the averaged gradient, between steps
};

} // namespace

std::unique_ptr<Strategy> strategies::makeZero2() { return std::make_unique<Zero2Strategy>(); }

} // namespace smol::engine
