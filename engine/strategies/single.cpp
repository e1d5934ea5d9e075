// single: one node, the reference every other strategy is compared with.
//
// Per step: forward and backward on the whole global batch, then one
// optimizer update of the whole flat parameter buffer.
// Holds: all parameters, all gradients, all optimizer state.
// Bytes on the wire: none.
#include "single.h"

#include "flat_state.h"

namespace smol::engine {

namespace {

class SingleStrategy : public ReplicatedFlatState {
public:
    std::string name() const override { return strategies::kSingle.name; }

    void setup(NodeContext &ctx) override { holdEverything(ctx); }

    double step(std::int64_t step) override
    {
        m_flat->grads().zero_();
        const torch::Tensor loss =
            timed(m_ctx, SpanEvent::Kind::Forward, step, [&] { return m_ctx.model->loss(localBatch(m_ctx, step)); });
        timed(m_ctx, SpanEvent::Kind::Backward, step, [&] { loss.backward(); });
        timed(m_ctx, SpanEvent::Kind::Optimizer, step, [&] { m_opt->step(m_flat->values(), m_flat->grads()); });
        return loss.item<double>();
    }
};

} // namespace

std::unique_ptr<Strategy> strategies::makeSingle() { return std::make_unique<SingleStrategy>(); }

} // namespace smol::engine
