// What a model is built from (its kind, sizes, seed and recomputation),
// apart from the model itself: no LibTorch here, so the lessons and the
// window's settings read and check it without building one.
#pragma once

#include <cstdint>
#include <string>

namespace smol::engine {

// Activation recomputation (--recompute): none keeps every activation of the
// forward for backward; full keeps only each layer's input (mlp: fc1, fc2,
// fc3; gpt: each block) and runs that layer's forward again in backward;
// selective (gpt only, as Megatron's) recomputes the attention core alone
// (scores, mask, softmax, weighted values: the activations that grow with
// T^2). The parameters a run ends with do not change.
enum class Recompute { None, Selective, Full };
const char *recomputeName(Recompute recompute);
// "none", "selective" or "full"; false for anything else.
bool parseRecompute(const std::string &text, Recompute *out);

// Mixed precision (--precision): fp32 everywhere, or bf16 parameters,
// activations and gradients (for compute and on the wire) with fp32 master
// weights and Adam moments in the optimizer (engine/flat_optimizer.h): 2P +
// 2P + 12P bytes of model states with Adam, as the ZeRO paper counts them.
enum class Precision { Fp32, Bf16 };
const char *precisionName(Precision precision);
// "fp32" or "bf16"; false for anything else.
bool parsePrecision(const std::string &text, Precision *out);

struct ModelConfig {
    std::string kind = "mlp"; // "mlp", "gpt", or a path to a TorchScript .pt file
    // Initial weights are a function of the seed only: drawn from a private
    // generator seeded with it, never LibTorch's global one, so nodes may
    // build models concurrently on any thread. (TorchScript: from the file.)
    std::uint64_t seed = 0;
    // gpt
    std::int64_t nLayer = 2;
    std::int64_t nHead = 4;
    std::int64_t nEmbd = 64;
    std::int64_t blockSize = 64;
    std::int64_t vocabSize = 0; // from the DataSource
    Recompute recompute = Recompute::None; // mlp: none or full; gpt: any
    Precision precision = Precision::Fp32;  // the parameters' dtype (mlp, gpt)
};

} // namespace smol::engine
