// syncps: synchronous parameter server.
//
// Rank 0 is a dedicated server: it holds the parameters and the optimizer
// state and computes nothing. Ranks 1..N-1 are workers; each takes
// B/(N-1) samples of the global batch (when N-1 does not divide B, workers
// 1..B % (N-1) take one more). Per step:
//   1. every worker computes gradients on its samples, its loss weighted by
//      rows x (N-1) / B (batchWeight; exactly 1 when the split is even);
//      with --accumulate K, K micro-steps of B/(N-1) samples each, their
//      gradients adding up (forwardBackward);
//   2. once a step: push: every worker sends its whole gradient to the server;
//   3. the server waits for all N-1 pushes, averages them (in rank order;
//      with the weights, the mean over the whole global batch), and applies
//      the optimizer;
//   4. pull: the server sends the new parameters to every worker.
//
// Holds: server: parameters, optimizer state, one gradient accumulator;
// workers: parameters and gradients.
// Bytes on the wire per step: each worker sends 4P and receives 4P; the
// server receives (N-1) x 4P and sends (N-1) x 4P. The server's link carries
// N-1 times a worker's traffic: the bottleneck ring all-reduce removes.
#include "syncps.h"

#include "engine/strategy.h"

#include "engine/flat_params.h"
#include "engine/tensor_bridge.h"
#include "net/communicator.h"

#include <cmath>
#include <stdexcept>

namespace smol::engine {

namespace {

class SyncPsStrategy : public Strategy {
public:
    std::string name() const override { return strategies::kSyncPs.name; }

    void setup(NodeContext &ctx) override
    {
        if (ctx.nodes < 2)
            throw std::invalid_argument("syncps needs at least 2 nodes (a server and a worker)");
        m_ctx = ctx;
        m_flat = std::make_unique<FlatParams>(ctx.model->namedParameters());
        if (isServer()) {
            m_opt = std::make_unique<FlatOptimizer>(ctx.optimizer, m_flat->numel());
            m_sum = torch::zeros({m_flat->numel()}, m_flat->dtype());
            m_incoming = torch::empty({m_flat->numel()}, m_flat->dtype());
        } else {
            m_flat->attachGrads();
        }
    }

    double step(std::int64_t step) override
    {
        if (isServer()) {
            m_sum.zero_();
            for (int w = 1; w < m_ctx.nodes; ++w) {
                m_ctx.comm->recv(w, viewOf(m_incoming), "grads", net::CollectiveKind::Push);
                m_sum.add_(m_incoming);
            }
            m_sum.div_(double(m_ctx.nodes - 1));
            timed(m_ctx, SpanEvent::Kind::Optimizer, step, [&] { m_opt->step(m_flat->values(), m_sum); });
            for (int w = 1; w < m_ctx.nodes; ++w)
                m_ctx.comm->send(w, viewOf(m_flat->values()), "params", net::CollectiveKind::Pull);
            return std::nan("");
        }
        m_flat->grads().zero_();
        const double loss = forwardBackward(m_ctx, step, MicroSteps{{m_ctx.rank - 1, m_ctx.nodes - 1}, {}, {}});
        m_ctx.comm->send(0, viewOf(m_flat->grads()), "grads", net::CollectiveKind::Push);
        m_ctx.comm->recv(0, viewOf(m_flat->values()), "params", net::CollectiveKind::Pull);
        return loss;
    }

    net::MemoryByCategory memory() const override
    {
        net::MemoryByCategory m;
        m.params = m_flat->values().nbytes();
        if (isServer()) {
            m.grads = m_sum.nbytes();
            m.comm = m_incoming.nbytes();
            for (const auto &t : m_opt->state())
                m.optimizer += t.nbytes();
        } else {
            m.grads = m_flat->grads().nbytes();
        }
        return m;
    }

    torch::Tensor fullParameters() override { return m_flat->values().clone(); }

    // Only the server holds the optimizer; workers return none (a re-form
    // that lost the server restarts the moments).
    OptimizerMoments fullOptimizerState() override
    {
        return isServer() ? copiedMoments(*m_opt) : OptimizerMoments{};
    }
    bool loadOptimizerState(const OptimizerMoments &m, std::int64_t steps) override
    {
        if (isServer()) // the whole vector, and a bf16 run's master weights with it
            loadMomentsChunk(*m_opt, m, net::ChunkRange{0, std::size_t(m_flat->numel())}, steps);
        return true;
    }

    std::vector<ShardRange> shards() const override
    {
        std::vector<ShardRange> out;
        for (const auto &s : m_flat->slots())
            out.push_back({s.name, 0, s.numel, 0, true}); // owned (updated) by the server, copied to all
        return out;
    }

    bool isDataParallel() const override { return false; }

private:
    bool isServer() const { return m_ctx.rank == 0; }

    NodeContext m_ctx;
    std::unique_ptr<FlatParams> m_flat;
    std::unique_ptr<FlatOptimizer> m_opt;
    torch::Tensor m_sum;
    torch::Tensor m_incoming;
};

} // namespace

std::unique_ptr<Strategy> strategies::makeSyncPs() { return std::make_unique<SyncPsStrategy>(); }

} // namespace smol::engine
