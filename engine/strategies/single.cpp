// single: one node, the reference every other strategy is compared with.
//
// Per step: forward and backward on the whole global batch, then one
// optimizer update of the whole flat parameter buffer.
// Holds: all parameters, all gradients, all optimizer state.
// Bytes on the wire: none.
#include "strategies.h"

#include "engine/flat_params.h"

namespace smol::engine {

namespace {

class SingleStrategy : public Strategy {
public:
    std::string name() const override { return "single"; }

    void setup(NodeContext &ctx) override
    {
        m_ctx = ctx;
        m_flat = std::make_unique<FlatParams>(ctx.model->namedParameters());
        m_flat->attachGrads();
        m_opt = std::make_unique<FlatOptimizer>(ctx.optimizer, m_flat->numel());
    }

    double step(std::int64_t step) override
    {
        m_flat->grads().zero_();
        const torch::Tensor loss =
            timed(m_ctx, SpanEvent::Kind::Forward, step, [&] { return m_ctx.model->loss(localBatch(m_ctx, step)); });
        timed(m_ctx, SpanEvent::Kind::Backward, step, [&] { loss.backward(); });
        timed(m_ctx, SpanEvent::Kind::Optimizer, step, [&] { m_opt->step(m_flat->values(), m_flat->grads()); });
        return loss.item<double>();
    }

    MemoryBreakdown memory() const override { return heldBytes(m_flat->values(), m_flat->grads(), m_opt.get()); }

    OptimizerMoments fullOptimizerState() override { return copiedMoments(*m_opt); }
    bool loadOptimizerState(const OptimizerMoments &m, std::int64_t steps) override
    {
        m_opt->load(m.exp, m.expSq, steps);
        return true;
    }

    torch::Tensor fullParameters() override { return m_flat->values().clone(); }

    std::vector<ShardRange> shards() const override { return replicatedShardMap(m_flat->slots()); }

private:
    NodeContext m_ctx;
    std::unique_ptr<FlatParams> m_flat;
    std::unique_ptr<FlatOptimizer> m_opt;
};

} // namespace

std::unique_ptr<Strategy> makeSingleStrategy()
{
    return std::make_unique<SingleStrategy>();
}

} // namespace smol::engine
