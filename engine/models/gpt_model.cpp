// The character GPT: attention, block, model and loss; see gpt_model.h.
#include "engine/models/gpt_model.h"

#include "engine/models/recompute.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <limits>
#include <stdexcept>

namespace smol::engine {

namespace {

constexpr double kInitStd = 0.02;

torch::nn::Linear normalLinear(std::int64_t in, std::int64_t out, double std, at::Generator &gen)
{
    torch::nn::Linear layer(in, out);
    torch::NoGradGuard noGrad;
    layer->weight.normal_(/*mean=*/0.0, std, gen);
    layer->bias.zero_();
    return layer;
}

torch::nn::Embedding normalEmbedding(std::int64_t count, std::int64_t dim, at::Generator &gen)
{
    torch::nn::Embedding embedding(count, dim);
    torch::NoGradGuard noGrad;
    embedding->weight.normal_(/*mean=*/0.0, kInitStd, gen);
    return embedding;
}

torch::nn::LayerNorm layerNorm(std::int64_t dim)
{
    return torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim}));
}

// Residual projections get a smaller init, so the stream's variance does not
// grow with depth (GPT-2).
double residualStd(const ModelConfig &config)
{
    return kInitStd / std::sqrt(2.0 * double(config.nLayer));
}

void checkConfig(const ModelConfig &c)
{
    auto fail = [](const std::string &why) { throw std::invalid_argument("gpt: " + why); };
    if (c.vocabSize < 1)
        fail("vocabSize is " + std::to_string(c.vocabSize) + "; take it from the DataSource");
    if (c.nLayer < 1 || c.nHead < 1 || c.nEmbd < 1 || c.blockSize < 1)
        fail("nLayer, nHead, nEmbd and blockSize must be positive");
    if (c.nEmbd % c.nHead != 0)
        fail("nEmbd " + std::to_string(c.nEmbd) + " is not divisible by nHead " + std::to_string(c.nHead));
}

// The attention core: each query's softmax-weighted mean of the values of
// the keys not after it. q, k, v (B, nh, T, hs) -> (B, nh, T, hs).
torch::Tensor attend(const torch::Tensor &q, const torch::Tensor &k, const torch::Tensor &v,
                     const torch::Tensor &future)
{
    const std::int64_t T = q.size(2), hs = q.size(3);
    torch::Tensor att = q.matmul(k.transpose(-2, -1)) * (1.0 / std::sqrt(double(hs))); // (B, nh, T, T)
    att = att.masked_fill(future.slice(0, 0, T).slice(1, 0, T), -std::numeric_limits<float>::infinity());
    att = torch::softmax(att, /*dim=*/-1);
    return att.matmul(v);
}

} // namespace

CausalSelfAttentionImpl::CausalSelfAttentionImpl(const ModelConfig &config, at::Generator &gen)
    : nHead(config.nHead)
    , recomputeCore(config.recompute == Recompute::Selective)
{
    const std::int64_t c = config.nEmbd;
    query = register_module("query", normalLinear(c, c, kInitStd, gen));
    key = register_module("key", normalLinear(c, c, kInitStd, gen));
    value = register_module("value", normalLinear(c, c, kInitStd, gen));
    proj = register_module("proj", normalLinear(c, c, residualStd(config), gen));
    future = register_buffer(
        "future", torch::ones({config.blockSize, config.blockSize}, torch::kBool).triu(/*diagonal=*/1));
}

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor &x)
{
    const std::int64_t B = x.size(0), T = x.size(1), C = x.size(2), hs = C / nHead;
    // (B, T, C) -> (B, nh, T, hs)
    auto heads = [&](const torch::Tensor &t) { return t.view({B, T, nHead, hs}).transpose(1, 2); };
    const torch::Tensor q = heads(query(x));
    const torch::Tensor k = heads(key(x));
    const torch::Tensor v = heads(value(x));
    const torch::Tensor y = // (B, nh, T, hs)
        recomputeCore ? recomputed([mask = future](const std::vector<torch::Tensor> &in) {
                                       return attend(in[0], in[1], in[2], mask);
                                   },
                                   {q, k, v}, /*params=*/{})
                      : attend(q, k, v, future);
    return proj(y.transpose(1, 2).contiguous().view({B, T, C})); // (B, T, C)
}

GptBlockImpl::GptBlockImpl(const ModelConfig &config, at::Generator &gen)
{
    const std::int64_t c = config.nEmbd;
    ln1 = register_module("ln1", layerNorm(c));
    attn = register_module("attn", CausalSelfAttention(config, gen));
    ln2 = register_module("ln2", layerNorm(c));
    fc = register_module("fc", normalLinear(c, 4 * c, kInitStd, gen));
    proj = register_module("proj", normalLinear(4 * c, c, residualStd(config), gen));
}

torch::Tensor GptBlockImpl::forward(const torch::Tensor &x)
{
    torch::Tensor h = x + attn(ln1(x));       // (B, T, C)
    return h + proj(torch::gelu(fc(ln2(h)))); // (B, T, C), via (B, T, 4C)
}

GptImpl::GptImpl(const ModelConfig &config)
    : blockSize(config.blockSize)
    , recompute(config.recompute)
{
    checkConfig(config);
    at::Generator gen = at::detail::createCPUGenerator(config.seed);
    tokenEmbedding = register_module("token_embedding", normalEmbedding(config.vocabSize, config.nEmbd, gen));
    positionEmbedding =
        register_module("position_embedding", normalEmbedding(config.blockSize, config.nEmbd, gen));
    blocks = register_module("blocks", torch::nn::ModuleList());
    for (std::int64_t i = 0; i < config.nLayer; ++i)
        blocks->push_back(GptBlock(config, gen));
    lnFinal = register_module("ln_final", layerNorm(config.nEmbd));
    lmHead = register_module("lm_head", normalLinear(config.nEmbd, config.vocabSize, kInitStd, gen));
}

torch::Tensor GptImpl::forward(const torch::Tensor &idx)
{
    if (idx.dim() != 2 || idx.size(1) > blockSize || idx.scalar_type() != torch::kInt64)
        throw std::invalid_argument("gpt expects int64 tokens (B, T) with T <= " + std::to_string(blockSize) +
                                    "; got " + c10::str(idx.scalar_type()) + " " + c10::str(idx.sizes()));
    const std::int64_t T = idx.size(1);
    const torch::Tensor positions = torch::arange(T, torch::kInt64);      // (T)
    torch::Tensor x = tokenEmbedding(idx) + positionEmbedding(positions); // (B, T, C)
    for (std::size_t i = 0; i < blocks->size(); ++i)
        x = blockForward(i, x);
    return lmHead(lnFinal(x)); // (B, T, vocab)
}

torch::Tensor GptImpl::blockForward(std::size_t i, const torch::Tensor &x)
{
    std::shared_ptr<GptBlockImpl> block = blocks->ptr<GptBlockImpl>(i);
    if (recompute != Recompute::Full)
        return block->forward(x);
    return recomputed([block](const torch::Tensor &in) { return block->forward(in); }, x, block->parameters());
}

GptModel::GptModel(const ModelConfig &config)
    : m_net(config)
{
}

std::vector<std::pair<std::string, torch::Tensor>> GptModel::namedParameters()
{
    std::vector<std::pair<std::string, torch::Tensor>> out;
    for (const auto &item : m_net->named_parameters(/*recurse=*/true))
        out.emplace_back(item.key(), item.value());
    return out;
}

torch::Tensor GptModel::loss(const Batch &batch)
{
    return lossFromOutput(m_net->forward(batch.input), batch); // logits (B, T, vocab)
}

torch::Tensor GptModel::lossFromOutput(const torch::Tensor &logits, const Batch &batch)
{
    if (batch.target.sizes() != logits.sizes().slice(0, 2))
        throw std::invalid_argument("gpt expects target " + c10::str(logits.sizes().slice(0, 2)) + ", got " +
                                    c10::str(batch.target.sizes()));
    // In float32 whatever the logits' dtype (bf16 under --precision bf16).
    const torch::Tensor flat = logits.reshape({-1, logits.size(-1)}).to(torch::kFloat32); // (B*T, vocab)
    return torch::nn::functional::cross_entropy(flat, batch.target.reshape({-1}));       // (B*T)
}

std::vector<ModelLayer> GptModel::layers()
{
    Gpt net = m_net;
    // Parameter names of a submodule, prefixed as namedParameters() has them.
    auto namesOf = [](const torch::nn::Module &m, const std::string &prefix) {
        std::vector<std::string> names;
        for (const auto &item : m.named_parameters(/*recurse=*/true))
            names.push_back(prefix + item.key());
        return names;
    };
    std::vector<ModelLayer> out;
    std::vector<std::string> embed = namesOf(*net->tokenEmbedding, "token_embedding.");
    for (const auto &n : namesOf(*net->positionEmbedding, "position_embedding."))
        embed.push_back(n);
    out.push_back({"embed", embed, [net](const torch::Tensor &idx) mutable {
                       if (idx.dim() != 2 || idx.size(1) > net->blockSize || idx.scalar_type() != torch::kInt64)
                           throw std::invalid_argument("gpt expects int64 tokens (B, T) with T <= " +
                                                       std::to_string(net->blockSize));
                       const torch::Tensor positions = torch::arange(idx.size(1), torch::kInt64); // (T)
                       return net->tokenEmbedding(idx) + net->positionEmbedding(positions);      // (B, T, C)
                   }});
    for (std::size_t i = 0; i < net->blocks->size(); ++i)
        out.push_back({"block" + std::to_string(i), namesOf(*net->blocks->ptr(i), "blocks." + std::to_string(i) + "."),
                       [net, i](const torch::Tensor &x) mutable { return net->blockForward(i, x); }}); // (B, T, C)
    std::vector<std::string> head = namesOf(*net->lnFinal, "ln_final.");
    for (const auto &n : namesOf(*net->lmHead, "lm_head."))
        head.push_back(n);
    out.push_back({"head", head, [net](const torch::Tensor &x) mutable { return net->lmHead(net->lnFinal(x)); }}); // (B, T, vocab)
    return out;
}

} // namespace smol::engine
