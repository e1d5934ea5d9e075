// single: one node, the reference every other strategy is compared with.
//
// Per step: forward and backward on the whole global batch, then one
// optimizer update of the whole flat parameter buffer. With --accumulate K:
// K forwards and backwards of B samples each, their gradients added up (each
// loss weighted 1/K), then the update: the step of a K x B batch.
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
        const double loss = forwardBackward(m_ctx, step);
        timed(m_ctx, SpanEvent::Kind::Optimizer, step, [&] { m_opt->step(m_flat->values(), m_flat->grads()); });
        return loss;
    }
};

} // namespace

std::unique_ptr<Strategy> strategies::makeSingle() { return std::make_unique<SingleStrategy>(); }

} // namespace smol::engine
