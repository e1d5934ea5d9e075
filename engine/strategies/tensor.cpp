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
#include "engine/tensor_bridge.h"
#include "net/communicator.h"

#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>

namespace smol::engine {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

net::Communicator *commOf(AutogradContext *ctx)
{
    return reinterpret_cast<net::Communicator *>(ctx->saved_data["comm"].toInt());
}

// f: identity forward, all-reduce (sum) of the gradient backward. Sits
// before a column-parallel layer, whose input every node's slice uses.
struct CopyToParallel : torch::autograd::Function<CopyToParallel> {
    static torch::Tensor forward(AutogradContext *ctx, torch::Tensor x, net::Communicator *comm,
                                 std::string name)
    {
        ctx->saved_data["comm"] = reinterpret_cast<std::int64_t>(comm);
        ctx->saved_data["name"] = name;
        return x;
    }
    static variable_list backward(AutogradContext *ctx, variable_list grads)
    {
        torch::Tensor g = grads[0].clone(at::MemoryFormat::Contiguous); // (B, T, C), summed in place
        if (net::Communicator *comm = commOf(ctx))
            comm->allReduce(viewOf(g), net::ReduceOp::Sum, ctx->saved_data["name"].toStringRef());
        return {g, torch::Tensor(), torch::Tensor()};
    }
};

// g: all-reduce (sum) forward, identity backward. Sits after a row-parallel
// layer, whose output is one partial sum per node.
struct ReduceFromParallel : torch::autograd::Function<ReduceFromParallel> {
    static torch::Tensor forward(AutogradContext *, torch::Tensor partial, net::Communicator *comm,
                                 std::string name)
    {
        torch::Tensor out = partial.clone(at::MemoryFormat::Contiguous); // (B, T, C)
        if (comm)
            comm->allReduce(viewOf(out), net::ReduceOp::Sum, name);
        return out;
    }
    static variable_list backward(AutogradContext *, variable_list grads)
    {
        return {grads[0], torch::Tensor(), torch::Tensor()};
    }
};

// How a parameter is laid out across nodes.
// Output: dim 0 of the torch weight (out, in), i.e. Megatron's column-parallel
// layer; Input: dim 1, the row-parallel layer.
enum class Split { Replicated, Output, Input };

Split splitOf(const std::string &name)
{
    auto endsWith = [&](const std::string &s) {
        return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
    };
    if (name.rfind("blocks.", 0) != 0)
        return Split::Replicated;
    for (const char *p : {".attn.query.", ".attn.key.", ".attn.value.", ".fc."})
        if (name.find(p) != std::string::npos)
            return Split::Output; // column-parallel layer: weight and bias split by output feature
    if (endsWith("proj.weight"))
        return Split::Input;  // row-parallel layer (attn.proj, MLP proj): input features
    return Split::Replicated; // LayerNorms and row-parallel biases
}

void checkTensorParallel(const std::string &kind, std::int64_t nHead, int nodes)
{
    if (kind != "gpt")
        throw std::invalid_argument("tensor parallelism splits gpt's attention heads and MLP; --model " +
                                    kind + " is not gpt");
    if (nHead % nodes != 0)
        throw std::invalid_argument("tensor parallelism gives each node n_head / N heads: n_head " +
                                    std::to_string(nHead) + " is not divisible by " + std::to_string(nodes) +
                                    " nodes");
}

class TensorStrategy : public Strategy {
public:
    std::string name() const override { return strategies::kTensorParallel.name; }
    bool isDataParallel() const override { return false; }
    int batchShares(int) const override { return 1; }
    void checkContext(const ModelConfig &model, const NodeContext &ctx) const override
    {
        checkTensorParallel(model.kind, model.nHead, ctx.nodes);
    }

    void setup(NodeContext &ctx) override
    {
        m_ctx = ctx;
        auto *gpt = dynamic_cast<GptModel *>(ctx.model);
        if (!gpt)
            throw std::invalid_argument("tensor parallelism splits gpt's attention heads and MLP; model " +
                                        ctx.model->name() + " is not gpt");
        Gpt &net = gpt->module();
        m_nHead = net->blocks->ptr<GptBlockImpl>(0)->attn->nHead;
        checkTensorParallel("gpt", m_nHead, ctx.nodes);
        m_future = net->blocks->ptr<GptBlockImpl>(0)->attn->future;

        // This node's part of every parameter, cut from the seed's full
        // initial weights, so all nodes start exactly where single does.
        std::vector<std::pair<std::string, torch::Tensor>> local;
        {
            torch::NoGradGuard noGrad;
            for (auto &[name, p] : gpt->namedParameters()) {
                const Split split = splitOf(name);
                torch::Tensor part = p.detach();
                if (split != Split::Replicated) {
                    const int dim = split == Split::Output ? 0 : 1;
                    const std::int64_t n = p.size(dim) / ctx.nodes;
                    part = part.narrow(dim, ctx.rank * n, n);
                }
                local.emplace_back(name, part.clone(at::MemoryFormat::Contiguous).requires_grad_(true));
                m_splits.push_back(split);
                m_fullShapes.push_back(p.sizes().vec());
            }
            // The full copies go: from here on the node holds only its parts.
            for (auto &[name, p] : gpt->namedParameters())
                p.set_data(torch::empty({0}, torch::kFloat32));
        }
        m_flat = std::make_unique<FlatParams>(local);
        m_flat->attachGrads();
        m_opt = std::make_unique<FlatOptimizer>(ctx.optimizer, m_flat->numel());

        std::map<std::string, torch::Tensor> byName;
        for (const auto &[name, p] : local)
            byName[name] = p; // the flat buffer's views (FlatParams re-pointed them)
        auto at = [&](const std::string &n) { return byName.at(n); };
        m_tokenEmbedding = at("token_embedding.weight");
        m_positionEmbedding = at("position_embedding.weight");
        for (std::size_t i = 0; i < net->blocks->size(); ++i) {
            const std::string b = "blocks." + std::to_string(i) + ".";
            m_blocks.push_back(
                Block{at(b + "ln1.weight"), at(b + "ln1.bias"), at(b + "attn.query.weight"),
                      at(b + "attn.query.bias"), at(b + "attn.key.weight"), at(b + "attn.key.bias"),
                      at(b + "attn.value.weight"), at(b + "attn.value.bias"), at(b + "attn.proj.weight"),
                      at(b + "attn.proj.bias"), at(b + "ln2.weight"), at(b + "ln2.bias"), at(b + "fc.weight"),
                      at(b + "fc.bias"), at(b + "proj.weight"), at(b + "proj.bias")});
        }
        m_lnFinalWeight = at("ln_final.weight");
        m_lnFinalBias = at("ln_final.bias");
        m_headWeight = at("lm_head.weight");
        m_headBias = at("lm_head.bias");
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
        torch::NoGradGuard noGrad;
        const auto &slots = m_flat->slots();
        // Pack this node's slices, all-gather the packs (rank r's is chunk r),
        // then put each slice back where it sits in the full tensor: a column
        // slice is not a contiguous range of the flat storage.
        std::int64_t packed = 0;
        for (std::size_t i = 0; i < slots.size(); ++i)
            if (m_splits[i] != Split::Replicated)
                packed += slots[i].numel;
        torch::Tensor all = torch::empty({m_ctx.nodes * packed}, torch::kFloat32);
        std::int64_t at = m_ctx.rank * packed;
        for (std::size_t i = 0; i < slots.size(); ++i)
            if (m_splits[i] != Split::Replicated) {
                all.narrow(0, at, slots[i].numel).copy_(slots[i].param.reshape({-1}));
                at += slots[i].numel;
            }
        if (m_ctx.comm)
            m_ctx.comm->allGather(viewOf(all), "params");

        std::vector<torch::Tensor> parts;
        std::int64_t offset = 0; // within a pack
        for (std::size_t i = 0; i < slots.size(); ++i) {
            if (m_splits[i] == Split::Replicated) {
                parts.push_back(slots[i].param.reshape({-1}).clone());
                continue;
            }
            std::vector<torch::Tensor> pieces; // in rank order
            for (int r = 0; r < m_ctx.nodes; ++r)
                pieces.push_back(all.narrow(0, r * packed + offset, slots[i].numel).view(slots[i].shape));
            parts.push_back(torch::cat(pieces, m_splits[i] == Split::Output ? 0 : 1).reshape({-1}));
            offset += slots[i].numel;
        }
        return torch::cat(parts);
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
    struct Block {
        torch::Tensor ln1Weight, ln1Bias;
        torch::Tensor queryWeight, queryBias, keyWeight, keyBias, valueWeight, valueBias; // (C/N, C), (C/N)
        torch::Tensor attnProjWeight, attnProjBias; // (C, C/N), (C) replicated
        torch::Tensor ln2Weight, ln2Bias;
        torch::Tensor fcWeight, fcBias;     // (4C/N, C), (4C/N)
        torch::Tensor projWeight, projBias; // (C, 4C/N), (C) replicated
    };

    torch::Tensor f(const torch::Tensor &x, const std::string &name)
    {
        return CopyToParallel::apply(x, m_ctx.comm, name);
    }
    torch::Tensor g(const torch::Tensor &x, const std::string &name)
    {
        return ReduceFromParallel::apply(x, m_ctx.comm, name);
    }

    // gpt's forward (gpt_model.cpp) with this node's heads and MLP slice.
    torch::Tensor forward(const torch::Tensor &idx) // (B, T) -> (B, T, vocab)
    {
        namespace F = torch::nn::functional;
        const std::int64_t B = idx.size(0), T = idx.size(1), C = m_tokenEmbedding.size(1);
        const std::int64_t hs = C / m_nHead, localHeads = m_nHead / m_ctx.nodes;
        const torch::Tensor positions = torch::arange(T, torch::kInt64);
        torch::Tensor x =
            F::embedding(idx, m_tokenEmbedding) + F::embedding(positions, m_positionEmbedding); // (B, T, C)
        const torch::Tensor future = m_future.slice(0, 0, T).slice(1, 0, T);
        for (std::size_t i = 0; i < m_blocks.size(); ++i) {
            const Block &b = m_blocks[i];
            const std::string id = ".block" + std::to_string(i);
            // Attention over this node's heads: (B, T, C) -> (B, lh, T, hs)
            const torch::Tensor h = f(torch::layer_norm(x, {C}, b.ln1Weight, b.ln1Bias), "f.attn" + id);
            auto heads = [&](const torch::Tensor &t) {
                return t.view({B, T, localHeads, hs}).transpose(1, 2);
            };
            const torch::Tensor q = heads(F::linear(h, b.queryWeight, b.queryBias));
            const torch::Tensor k = heads(F::linear(h, b.keyWeight, b.keyBias));
            const torch::Tensor v = heads(F::linear(h, b.valueWeight, b.valueBias));
            torch::Tensor att =
                q.matmul(k.transpose(-2, -1)) * (1.0 / std::sqrt(double(hs))); // (B, lh, T, T)
            att =
                torch::softmax(att.masked_fill(future, -std::numeric_limits<float>::infinity()), /*dim=*/-1);
            const torch::Tensor y = att.matmul(v).transpose(1, 2).contiguous().view({B, T, localHeads * hs});
            x = x + (g(F::linear(y, b.attnProjWeight), "g.attn" + id) + b.attnProjBias); // (B, T, C)
            // MLP over this node's 4C/N hidden features.
            const torch::Tensor m = f(torch::layer_norm(x, {C}, b.ln2Weight, b.ln2Bias), "f.mlp" + id);
            const torch::Tensor hidden = torch::gelu(F::linear(m, b.fcWeight, b.fcBias)); // (B, T, 4C/N)
            x = x + (g(F::linear(hidden, b.projWeight), "g.mlp" + id) + b.projBias);      // (B, T, C)
        }
        return F::linear(torch::layer_norm(x, {C}, m_lnFinalWeight, m_lnFinalBias), m_headWeight, m_headBias);
    }

    NodeContext m_ctx;
    std::unique_ptr<FlatParams> m_flat; // this node's parameters, namedParameters() order
    std::unique_ptr<FlatOptimizer> m_opt;
    std::vector<Split> m_splits;                         // by slot
    std::vector<std::vector<std::int64_t>> m_fullShapes; // by slot, before the split
    std::int64_t m_nHead = 0;
    torch::Tensor m_future; // (blockSize, blockSize) bool causal mask
    torch::Tensor m_tokenEmbedding, m_positionEmbedding;
    std::vector<Block> m_blocks;
    torch::Tensor m_lnFinalWeight, m_lnFinalBias, m_headWeight, m_headBias;
};

} // namespace

std::unique_ptr<Strategy> strategies::makeTensorParallel() { return std::make_unique<TensorStrategy>(); }

} // namespace smol::engine
