#include "gpt_parallel.h"

#include "engine/models/gpt_model.h"
#include "engine/tensor_bridge.h"
#include "net/communicator.h"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace smol::engine::gpt_parallel {

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

// One step of the cp ring: forward sends x to the right neighbour and
// returns the left's; backward sends the gradient back to the left (where
// the block came from) and returns the right's (for the block sent there).
struct RingPass : torch::autograd::Function<RingPass> {
    static torch::Tensor forward(AutogradContext *ctx, torch::Tensor x, net::Communicator *comm, std::string name)
    {
        ctx->saved_data["comm"] = reinterpret_cast<std::int64_t>(comm);
        ctx->saved_data["name"] = name;
        const int n = comm->worldSize(), r = comm->rank();
        const torch::Tensor out = x.contiguous();
        torch::Tensor in = torch::empty_like(out);
        comm->send((r + 1) % n, viewOf(out), name);
        comm->recv((r + n - 1) % n, viewOf(in), name);
        return in;
    }
    static variable_list backward(AutogradContext *ctx, variable_list grads)
    {
        net::Communicator *comm = commOf(ctx);
        const std::string name = ctx->saved_data["name"].toStringRef() + ".grad";
        const int n = comm->worldSize(), r = comm->rank();
        const torch::Tensor g = grads[0].contiguous();
        torch::Tensor back = torch::empty_like(g);
        comm->send((r + n - 1) % n, viewOf(g), name);
        comm->recv((r + 1) % n, viewOf(back), name);
        return {back, torch::Tensor(), torch::Tensor()};
    }
};

// (B, S, C) -> (N, B, S/N, C), contiguous: node r's positions are chunk r
// of the flat buffer, as the ring collectives cut it.
torch::Tensor sequenceBlocks(const torch::Tensor &full, std::int64_t n)
{
    return full.view({full.size(0), n, full.size(1) / n, full.size(2)}).permute({1, 0, 2, 3}).contiguous();
}
// (N, B, s, C) -> (B, N s, C)
torch::Tensor sequenceWhole(const torch::Tensor &blocks)
{
    return blocks.permute({1, 0, 2, 3}).reshape({blocks.size(1), blocks.size(0) * blocks.size(2), blocks.size(3)});
}
torch::Tensor gatherAlongSequence(const torch::Tensor &local, net::Communicator *comm, const std::string &name)
{
    const int n = comm->worldSize();
    torch::Tensor blocks = torch::empty({n, local.size(0), local.size(1), local.size(2)}, local.options());
    blocks[comm->rank()].copy_(local);
    comm->allGather(viewOf(blocks), name);
    return sequenceWhole(blocks);
}
torch::Tensor scatterAlongSequence(const torch::Tensor &full, net::Communicator *comm, const std::string &name)
{
    torch::Tensor blocks = sequenceBlocks(full, comm->worldSize());
    comm->reduceScatter(viewOf(blocks), net::ReduceOp::Sum, name);
    return blocks[comm->rank()].clone();
}

// SP's f: all-gather along the sequence forward, reduce-scatter backward.
struct GatherSequence : torch::autograd::Function<GatherSequence> {
    static torch::Tensor forward(AutogradContext *ctx, torch::Tensor local, net::Communicator *comm, std::string name)
    {
        ctx->saved_data["comm"] = reinterpret_cast<std::int64_t>(comm);
        ctx->saved_data["name"] = name;
        return gatherAlongSequence(local.contiguous(), comm, name);
    }
    static variable_list backward(AutogradContext *ctx, variable_list grads)
    {
        return {scatterAlongSequence(grads[0].contiguous(), commOf(ctx), ctx->saved_data["name"].toStringRef()),
                torch::Tensor(), torch::Tensor()};
    }
};

// SP's g: reduce-scatter along the sequence forward, all-gather backward.
struct ScatterSequence : torch::autograd::Function<ScatterSequence> {
    static torch::Tensor forward(AutogradContext *ctx, torch::Tensor partial, net::Communicator *comm,
                                 std::string name)
    {
        ctx->saved_data["comm"] = reinterpret_cast<std::int64_t>(comm);
        ctx->saved_data["name"] = name;
        return scatterAlongSequence(partial.contiguous(), comm, name);
    }
    static variable_list backward(AutogradContext *ctx, variable_list grads)
    {
        return {gatherAlongSequence(grads[0].contiguous(), commOf(ctx), ctx->saved_data["name"].toStringRef()),
                torch::Tensor(), torch::Tensor()};
    }
};

struct Block {
    torch::Tensor ln1Weight, ln1Bias;
    torch::Tensor queryWeight, queryBias, keyWeight, keyBias, valueWeight, valueBias; // (C/N, C), (C/N)
    torch::Tensor attnProjWeight, attnProjBias; // (C, C/N), (C) replicated
    torch::Tensor ln2Weight, ln2Bias;
    torch::Tensor fcWeight, fcBias;     // (4C/N, C), (4C/N)
    torch::Tensor projWeight, projBias; // (C, 4C/N), (C) replicated
};

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

// Causal attention of this node's queries over the whole sequence, the K/V
// blocks coming round the cp ring. q, k, v: (B, h, T/C, hs); future: the
// (T/C, T/C) mask of a block against itself.
torch::Tensor ringAttention(const torch::Tensor &q, const torch::Tensor &k, const torch::Tensor &v,
                            const torch::Tensor &future, double scale, const NodeCut &cut, const std::string &id)
{
    const int C = cut.cpNodes, c = cut.cpRank;
    const std::int64_t hs = q.size(-1);
    torch::Tensor block = torch::cat({k, v}, -1); // (B, h, T/C, 2 hs): one message per pass
    torch::Tensor out, lse, unseen;
    for (int t = 0; t < C; ++t) {
        if (t > 0)
            block = RingPass::apply(block, cut.cp, "kv.pass" + std::to_string(t) + id);
        const int source = (c - t + C) % C; // the cp node whose positions `block` holds
        if (source > c) {                   // later positions: not looked at, still passed on
            const torch::Tensor nothing = block.sum() * 0;
            unseen = unseen.defined() ? unseen + nothing : nothing;
            continue;
        }
        torch::Tensor scores = q.matmul(block.narrow(-1, 0, hs).transpose(-2, -1)) * scale; // (B, h, T/C, T/C)
        if (source == c)
            scores = scores.masked_fill(future, kMinusInf);
        const torch::Tensor blockLse = torch::logsumexp(scores, -1, /*keepdim=*/true); // (B, h, T/C, 1)
        const torch::Tensor blockOut = torch::exp(scores - blockLse).matmul(block.narrow(-1, hs, hs));
        if (!out.defined()) { // t = 0: its own block, never fully masked
            out = blockOut;
            lse = blockLse;
            continue;
        }
        const torch::Tensor merged = torch::logaddexp(lse, blockLse); // the online softmax's running sum
        out = out * torch::exp(lse - merged) + blockOut * torch::exp(blockLse - merged);
        lse = merged;
    }
    return unseen.defined() ? out + unseen : out;
}

torch::Tensor blockForward(const Block &b, torch::Tensor x, std::int64_t nHead, const torch::Tensor &futureFull,
                           const NodeCut &cut, const std::string &id)
{
    namespace F = torch::nn::functional;
    const bool sp = cut.sequenceParallel && cut.tp;
    const std::int64_t B = x.size(0), T = x.size(1) * (sp ? cut.tpNodes : 1), C = x.size(2);
    const std::int64_t hs = C / nHead, localHeads = nHead / cut.tpNodes;
    auto f = [&](const torch::Tensor &t, const std::string &name) {
        return sp ? GatherSequence::apply(t, cut.tp, name) : CopyToParallel::apply(t, cut.tp, name);
    };
    auto g = [&](const torch::Tensor &t, const std::string &name) {
        return sp ? ScatterSequence::apply(t, cut.tp, name) : ReduceFromParallel::apply(t, cut.tp, name);
    };
    // Attention over this node's heads: (B, T, C) -> (B, lh, T, hs)
    const torch::Tensor h = f(torch::layer_norm(x, {C}, b.ln1Weight, b.ln1Bias), "f.attn" + id);
    auto heads = [&](const torch::Tensor &t) { return t.view({B, T, localHeads, hs}).transpose(1, 2); };
    const torch::Tensor q = heads(F::linear(h, b.queryWeight, b.queryBias));
    const torch::Tensor k = heads(F::linear(h, b.keyWeight, b.keyBias));
    const torch::Tensor v = heads(F::linear(h, b.valueWeight, b.valueBias));
    const torch::Tensor future = futureFull.slice(0, 0, T).slice(1, 0, T);
    const double scale = 1.0 / std::sqrt(double(hs));
    torch::Tensor attended;
    if (cut.cpNodes > 1) {
        attended = ringAttention(q, k, v, future, scale, cut, id);
    } else {
        torch::Tensor att = q.matmul(k.transpose(-2, -1)) * scale; // (B, lh, T, T)
        att = torch::softmax(att.masked_fill(future, kMinusInf), /*dim=*/-1);
        attended = att.matmul(v);
    }
    const torch::Tensor y = attended.transpose(1, 2).contiguous().view({B, T, localHeads * hs});
    x = x + (g(F::linear(y, b.attnProjWeight), "g.attn" + id) + b.attnProjBias); // (B, T, C)
    // MLP over this node's 4C/N hidden features.
    const torch::Tensor m = f(torch::layer_norm(x, {C}, b.ln2Weight, b.ln2Bias), "f.mlp" + id);
    const torch::Tensor hidden = torch::gelu(F::linear(m, b.fcWeight, b.fcBias)); // (B, T, 4C/N)
    return x + (g(F::linear(hidden, b.projWeight), "g.mlp" + id) + b.projBias);    // (B, T, C)
}

} // namespace

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

torch::Tensor sliceOf(const torch::Tensor &full, Split split, int rank, int nodes)
{
    torch::Tensor part = full.detach();
    if (split != Split::Replicated && nodes > 1) {
        const int dim = split == Split::Output ? 0 : 1;
        const std::int64_t n = full.size(dim) / nodes;
        part = part.narrow(dim, rank * n, n);
    }
    return part.clone(at::MemoryFormat::Contiguous);
}

void checkTensorParallel(const std::string &kind, std::int64_t nHead, int nodes)
{
    if (kind != "gpt")
        throw std::invalid_argument("tensor parallelism splits gpt's attention heads and MLP; --model " + kind +
                                    " is not gpt");
    if (nHead % nodes != 0)
        throw std::invalid_argument("tensor parallelism gives each node n_head / N heads: n_head " +
                                    std::to_string(nHead) + " is not divisible by " + std::to_string(nodes) +
                                    " nodes");
}

std::vector<ModelLayer> layers(GptModel &model, const std::map<std::string, torch::Tensor> &local, const NodeCut &cut)
{
    namespace F = torch::nn::functional;
    Gpt &net = model.module();
    const std::int64_t nHead = net->blocks->ptr<GptBlockImpl>(0)->attn->nHead;
    const std::int64_t blockSize = net->blockSize;
    const torch::Tensor future = net->blocks->ptr<GptBlockImpl>(0)->attn->future;
    auto at = [&](const std::string &n) { return local.at(n); };
    std::vector<ModelLayer> out;
    const torch::Tensor tokens = at("token_embedding.weight"), positions = at("position_embedding.weight");
    out.push_back({"embed", {"token_embedding.weight", "position_embedding.weight"},
                   [tokens, positions, cut, blockSize](const torch::Tensor &idx) {
                       if (idx.dim() != 2 || idx.size(1) * cut.cpNodes > blockSize || idx.scalar_type() != torch::kInt64)
                           throw std::invalid_argument("gpt expects int64 tokens (B, T) with T <= " +
                                                       std::to_string(blockSize));
                       // This node's positions: its cp block, and with SP its tp share of it.
                       const int shares = cut.sequenceParallel ? cut.tpNodes : 1;
                       const std::int64_t T = idx.size(1) / shares, share = cut.sequenceParallel ? cut.tpRank : 0;
                       const std::int64_t first = cut.cpRank * idx.size(1) + share * T;
                       return F::embedding(idx.narrow(1, share * T, T), tokens) +
                              F::embedding(torch::arange(first, first + T, torch::kInt64), positions); // (B, T, C)
                   }});
    for (std::size_t i = 0; i < net->blocks->size(); ++i) {
        const std::string p = "blocks." + std::to_string(i) + ".";
        std::vector<std::string> names;
        for (const char *n : {"ln1.weight", "ln1.bias", "attn.query.weight", "attn.query.bias", "attn.key.weight",
                              "attn.key.bias", "attn.value.weight", "attn.value.bias", "attn.proj.weight",
                              "attn.proj.bias", "ln2.weight", "ln2.bias", "fc.weight", "fc.bias", "proj.weight",
                              "proj.bias"})
            names.push_back(p + n);
        const Block b{at(names[0]),  at(names[1]),  at(names[2]),  at(names[3]),  at(names[4]),  at(names[5]),
                      at(names[6]),  at(names[7]),  at(names[8]),  at(names[9]),  at(names[10]), at(names[11]),
                      at(names[12]), at(names[13]), at(names[14]), at(names[15])};
        const std::string id = ".block" + std::to_string(i);
        out.push_back({"block" + std::to_string(i), names, [b, nHead, future, cut, id](const torch::Tensor &x) {
                           return blockForward(b, x, nHead, future, cut, id);
                       }});
    }
    const torch::Tensor lnW = at("ln_final.weight"), lnB = at("ln_final.bias");
    const torch::Tensor headW = at("lm_head.weight"), headB = at("lm_head.bias");
    out.push_back({"head", {"ln_final.weight", "ln_final.bias", "lm_head.weight", "lm_head.bias"},
                   [lnW, lnB, headW, headB](const torch::Tensor &x) {
                       return F::linear(torch::layer_norm(x, {x.size(-1)}, lnW, lnB), headW, headB); // (B, T, vocab)
                   }});
    return out;
}

torch::Tensor assembleFull(const std::vector<torch::Tensor> &slices, const std::vector<Split> &splits,
                           net::Communicator *tp, int tpRank, int tpNodes)
{
    torch::NoGradGuard noGrad;
    // Pack this node's split slices, all-gather the packs (node r's is chunk
    // r), then put each slice back where it sits in the full tensor: a column
    // slice is not a contiguous range of the flat storage.
    std::int64_t packed = 0;
    for (std::size_t i = 0; i < slices.size(); ++i)
        if (splits[i] != Split::Replicated)
            packed += slices[i].numel();
    torch::Tensor all = torch::empty({tpNodes * packed}, slices.empty() ? torch::kFloat32 : slices.front().scalar_type());
    std::int64_t at = tpRank * packed;
    for (std::size_t i = 0; i < slices.size(); ++i)
        if (splits[i] != Split::Replicated) {
            all.narrow(0, at, slices[i].numel()).copy_(slices[i].reshape({-1}));
            at += slices[i].numel();
        }
    if (tp)
        tp->allGather(viewOf(all), "params");
    std::vector<torch::Tensor> parts;
    std::int64_t offset = 0; // within a pack
    for (std::size_t i = 0; i < slices.size(); ++i) {
        if (splits[i] == Split::Replicated || tpNodes == 1) {
            parts.push_back(slices[i].reshape({-1}).clone());
            offset += splits[i] == Split::Replicated ? 0 : slices[i].numel();
            continue;
        }
        std::vector<torch::Tensor> pieces; // in rank order
        for (int r = 0; r < tpNodes; ++r)
            pieces.push_back(all.narrow(0, r * packed + offset, slices[i].numel()).view(slices[i].sizes()));
        parts.push_back(torch::cat(pieces, splits[i] == Split::Output ? 0 : 1).reshape({-1}));
        offset += slices[i].numel();
    }
    return torch::cat(parts);
}

} // namespace smol::engine::gpt_parallel
