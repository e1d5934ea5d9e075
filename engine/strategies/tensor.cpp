// tensor: Megatron-style tensor parallelism for the gpt model.
//
// Every node runs every layer on the whole global batch (this is not data
// parallelism: no batch split, no gradient averaging). Inside each block,
// the two big matrix products are cut across the N nodes:
//   attention: node r owns heads [r H/N, (r+1) H/N): its rows (output
//              features) of query, key and value, and the matching columns
//              (input features) of the output projection;
//   MLP:       node r owns rows [r 4C/N, (r+1) 4C/N) of fc (column-parallel)
//              and the same columns of proj (row-parallel).
// Each half of a block is then  f -> column-parallel -> local -> row-parallel -> g:
//   f: identity forward; all-reduce (sum) of the input's gradient backward,
//      since every node's slice contributes to it;
//   g: all-reduce (sum) of the partial outputs forward; identity backward.
// The row-parallel bias is added once, after g, not once per node.
//
// Replicated on every node: token and position embeddings, every LayerNorm,
// the row-parallel biases, ln_final and lm_head. They see identical inputs
// (g's result is bit-identical on all nodes) and identical gradients (f's
// all-reduce is too), so every node applies the identical update to them:
// no collective is needed to keep them in sync.
//
// Per step, per block: 2 all-reduces forward (g after attention, g after
// the MLP), 2 backward (f before each), each of one (B, T, C) float32
// activation. Nothing else moves; fullParameters() all-gathers the slices.
//
// Holds: replicated parameters whole, 1/N of each split weight; gradients
// and optimizer state alike (one flat vector, one FlatOptimizer).
// Bytes on the wire per node per step: 4 nLayer ring all-reduces of 4BTC
// bytes = 4 nLayer x 2(N-1)/N x 4BTC sent, the same received. Activations,
// not parameters: it grows with batch and sequence, not with model size.
#include "tensor.h"

#include "engine/strategy.h"

#include "engine/flat_params.h"
#include "engine/models/gpt_model.h"
#include "engine/strategies/gpt_parallel.h"
#include "engine/tensor_bridge.h"
#include "net/communicator.h"

#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>

namespace smol::engine {

namespace {

using gpt_parallel::Split;

class TensorStrategy : public Strategy {
public:
    std::string name() const override { return strategies::kTensorParallel.name; }
    bool isDataParallel() const override { return false; }
    int batchShares(int) const override { return 1; }
    void checkContext(const ModelConfig &model, const NodeContext &ctx) const override
    {
        refuseAccumulation(ctx, "tensor parallelism is not data parallel: every node computes on the whole "
                                "batch; give it a larger --global-batch instead");
        gpt_parallel::checkTensorParallel(model.kind, model.nHead, ctx.nodes);
    }

    void setup(NodeContext &ctx) override
    {
        m_ctx = ctx;
        auto *gpt = dynamic_cast<GptModel *>(ctx.model);
        if (!gpt)
            throw std::invalid_argument("tensor parallelism splits gpt's attention heads and MLP; model " +
                                        ctx.model->name() + " is not gpt");
        const std::int64_t nHead = gpt->module()->blocks->ptr<GptBlockImpl>(0)->attn->nHead;
        gpt_parallel::checkTensorParallel("gpt", nHead, ctx.nodes);

        // This node's part of every parameter, cut from the seed's full
        // initial weights, so all nodes start exactly where single does.
        std::vector<std::pair<std::string, torch::Tensor>> local;
        {
            torch::NoGradGuard noGrad;
            for (auto &[name, p] : gpt->namedParameters()) {
                const Split split = gpt_parallel::splitOf(name);
                local.emplace_back(name, gpt_parallel::sliceOf(p, split, ctx.rank, ctx.nodes).requires_grad_(true));
                m_splits.push_back(split);
                m_fullShapes.push_back(p.sizes().vec());
            }
        }
        m_flat = std::make_unique<FlatParams>(local);
        m_flat->attachGrads();
        m_opt = std::make_unique<FlatOptimizer>(ctx.optimizer, m_flat->numel());
        // The layers compute with the flat buffer's views (FlatParams
        // re-pointed `local`); the full copies go: from here on the node
        // holds only its parts.
        m_layers = gpt_parallel::layers(*gpt, std::map<std::string, torch::Tensor>(local.begin(), local.end()),
                                        gpt_parallel::NodeCut{ctx.comm, ctx.rank, ctx.nodes});
        torch::NoGradGuard noGrad;
        for (auto &[name, p] : gpt->namedParameters())
            p.set_data(torch::empty({0}, p.options()));
    }

    double step(std::int64_t step) override
    {
        m_flat->grads().zero_();
        // The whole global batch on every node.
        const Batch batch = m_ctx.data->trainBatch(step, m_ctx.globalBatch, /*rank=*/0, /*nodes=*/1);
        const torch::Tensor loss =
            timed(m_ctx, SpanEvent::Kind::Forward, step, [&] { return m_ctx.model->lossFromOutput(forward(batch.input), batch); });
        timed(m_ctx, SpanEvent::Kind::Backward, step, [&] { loss.backward(); }); // runs f's all-reduces, last block first
        timed(m_ctx, SpanEvent::Kind::Optimizer, step, [&] { m_opt->step(m_flat->values(), m_flat->grads()); });
        return loss.item<double>();
    }

    net::MemoryByCategory memory() const override
    {
        net::MemoryByCategory m;
        m.params = std::int64_t(m_flat->values().nbytes());
        m.grads = std::int64_t(m_flat->grads().nbytes());
        for (const auto &t : m_opt->state())
            m.optimizer += std::int64_t(t.nbytes());
        return m;
    }

    torch::Tensor fullParameters() override
    {
        std::vector<torch::Tensor> slices;
        for (const auto &slot : m_flat->slots())
            slices.push_back(slot.param);
        return gpt_parallel::assembleFull(slices, m_splits, m_ctx.comm, m_ctx.rank, m_ctx.nodes);
    }

    std::vector<ShardRange> shards() const override
    {
        std::vector<ShardRange> out;
        const int n = m_ctx.nodes;
        const auto &slots = m_flat->slots();
        for (std::size_t i = 0; i < slots.size(); ++i) {
            const std::string &name = slots[i].name;
            const auto &shape = m_fullShapes[i];
            std::int64_t numel = 1;
            for (auto d : shape)
                numel *= d;
            switch (m_splits[i]) {
            case Split::Replicated:
                out.push_back({name, 0, numel, -1, true});
                break;
            case Split::Output: // one contiguous block of rows per node
                for (int r = 0; r < n; ++r)
                    out.push_back({name, r * numel / n, (r + 1) * numel / n, r, r == m_ctx.rank});
                break;
            case Split::Input: { // (out, in): every row has one run per node
                const std::int64_t rows = shape[0], cols = shape[1], w = cols / n;
                for (std::int64_t row = 0; row < rows; ++row)
                    for (int r = 0; r < n; ++r)
                        out.push_back(
                            {name, row * cols + r * w, row * cols + (r + 1) * w, r, r == m_ctx.rank});
                break;
            }
            }
        }
        return out;
    }

private:
    // gpt's forward (gpt_parallel::layers) with this node's heads and MLP slice.
    torch::Tensor forward(const torch::Tensor &idx) // (B, T) -> (B, T, vocab)
    {
        torch::Tensor x = idx;
        for (const auto &layer : m_layers)
            x = layer.forward(x);
        return x;
    }

    NodeContext m_ctx;
    std::unique_ptr<FlatParams> m_flat; // this node's parameters, namedParameters() order
    std::unique_ptr<FlatOptimizer> m_opt;
    std::vector<Split> m_splits;                         // by slot
    std::vector<std::vector<std::int64_t>> m_fullShapes; // by slot, before the split
    std::vector<ModelLayer> m_layers;
};

} // namespace

std::unique_ptr<Strategy> strategies::makeTensorParallel() { return std::make_unique<TensorStrategy>(); }

} // namespace smol::engine
