// A small decoder-only character transformer (GPT), for the text corpus.
//
// What it does: token + learned position embeddings, nLayer pre-LayerNorm
// blocks (causal self-attention with nHead heads, then an MLP of 4 x nEmbd
// with GELU, each added to the residual stream), a final LayerNorm and a
// linear head over the vocabulary. Loss: mean cross-entropy over every
// position of every block. Attention uses separate query/key/value Linear
// layers (not nn::MultiheadAttention) so a tensor-parallel strategy can split
// them by heads (columns) and the output projection by rows. Weights follow
// GPT-2: N(0, 0.02) for Linear and embeddings, N(0, 0.02/sqrt(2 nLayer)) for
// the two projections into the residual stream, zero biases, drawn in
// construction order from a generator seeded with the config seed (never the
// global one).
//
// Activation recomputation (ModelConfig::recompute, engine/models/recompute.h):
// full recomputes each block's forward in backward (the block's input is all
// it keeps), also in layers(); selective recomputes the attention core alone
// (scores, mask, softmax, weighted values: what grows with T^2), as
// Megatron's selective recomputation. The parameters' gradients are
// bit-identical either way.
//
// What it does not do: no dropout (runs must be deterministic), no weight
// tying between embedding and head (every parameter is its own tensor, which
// keeps sharding simple), no KV cache or sampling.
#pragma once

#include "engine/models/model.h"

#include <ATen/core/Generator.h>
#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace smol::engine {

struct CausalSelfAttentionImpl : torch::nn::Module {
    CausalSelfAttentionImpl(const ModelConfig &config, at::Generator &gen);
    torch::Tensor forward(const torch::Tensor &x); // (B, T, C) -> (B, T, C)

    torch::nn::Linear query{nullptr}, key{nullptr}, value{nullptr}, proj{nullptr};
    std::int64_t nHead;
    torch::Tensor future; // (blockSize, blockSize) bool, true where a key is after its query
    bool recomputeCore;   // --recompute selective: q, k, v to y recomputed in backward
};
TORCH_MODULE(CausalSelfAttention);

struct GptBlockImpl : torch::nn::Module {
    GptBlockImpl(const ModelConfig &config, at::Generator &gen);
    torch::Tensor forward(const torch::Tensor &x); // (B, T, C) -> (B, T, C)

    torch::nn::LayerNorm ln1{nullptr};
    CausalSelfAttention attn{nullptr};
    torch::nn::LayerNorm ln2{nullptr};
    torch::nn::Linear fc{nullptr};   // C -> 4C
    torch::nn::Linear proj{nullptr}; // 4C -> C
};
TORCH_MODULE(GptBlock);

struct GptImpl : torch::nn::Module {
    // Throws std::invalid_argument for sizes that cannot work (vocabSize < 1,
    // nEmbd not divisible by nHead, ...).
    explicit GptImpl(const ModelConfig &config);
    torch::Tensor forward(const torch::Tensor &idx); // (B, T) int64, T <= blockSize -> (B, T, vocab) logits
    // Block i over x (B, T, C), recomputed in backward under --recompute full.
    torch::Tensor blockForward(std::size_t i, const torch::Tensor &x);

    torch::nn::Embedding tokenEmbedding{nullptr};
    torch::nn::Embedding positionEmbedding{nullptr};
    torch::nn::ModuleList blocks{nullptr}; // of GptBlock
    torch::nn::LayerNorm lnFinal{nullptr};
    torch::nn::Linear lmHead{nullptr};
    std::int64_t blockSize;
    Recompute recompute;
};
TORCH_MODULE(Gpt);

class GptModel : public TrainModel {
public:
    explicit GptModel(const ModelConfig &config);
    std::string name() const override { return "gpt"; }
    std::vector<std::pair<std::string, torch::Tensor>> namedParameters() override;
    torch::Tensor loss(const Batch &batch) override;
    std::vector<ModelLayer> layers() override;
    torch::Tensor lossFromOutput(const torch::Tensor &output, const Batch &batch) override;
    double accuracy(const Batch &) override { return -1.0; }

    Gpt &module() { return m_net; }

private:
    Gpt m_net{nullptr};
};

} // namespace smol::engine
