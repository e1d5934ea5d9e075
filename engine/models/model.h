// The models smolcluster trains: a fixed, ordered list of named parameters
// (the order strategies flatten and shard them in) and a loss.
#pragma once

#include "engine/data/data_source.h"

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

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
};

// One stage of the model's forward pass. The layers, in order, compose to
// the whole model: mlp: fc1 (+ReLU), fc2 (+ReLU), fc3; gpt: the embeddings,
// each block, the final norm + head; TorchScript: the whole module. Pipeline
// parallelism places layers on nodes; zero3 gathers one layer at a time.
struct ModelLayer {
    std::string name;
    std::vector<std::string> paramNames; // consecutive in namedParameters() order
    std::function<torch::Tensor(const torch::Tensor &)> forward;
};

class TrainModel {
public:
    virtual ~TrainModel() = default;
    virtual std::string name() const = 0;
    // Leaf parameters in a fixed order; the same names and shapes on every
    // node for the same config.
    virtual std::vector<std::pair<std::string, torch::Tensor>> namedParameters() = 0;
    // Mean loss over the batch (a scalar with an autograd graph). Equal to
    // lossFromOutput(layers composed over batch.input, batch).
    virtual torch::Tensor loss(const Batch &batch) = 0;
    virtual std::vector<ModelLayer> layers() = 0;
    // The loss given the last layer's output.
    virtual torch::Tensor lossFromOutput(const torch::Tensor &output, const Batch &batch) = 0;
    // Classification accuracy (mlp, TorchScript) on `batch`, or -1 when the
    // model has no such notion (gpt). Runs under NoGradGuard.
    virtual double accuracy(const Batch &batch) = 0;
};

// Throws std::invalid_argument (one line) when `config.kind` cannot
// recompute as `config.recompute` asks (mlp: no selective; TorchScript: none).
void checkRecompute(const ModelConfig &config);

// Throws std::invalid_argument for an unknown kind or bad sizes, and
// DataError for an unreadable TorchScript file.
std::unique_ptr<TrainModel> makeModel(const ModelConfig &config);

} // namespace smol::engine
