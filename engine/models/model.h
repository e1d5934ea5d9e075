// The models smolcluster trains: a fixed, ordered list of named parameters
// (the order strategies flatten and shard them in) and a loss.
#pragma once

#include "engine/data/data_source.h"
#include "engine/models/model_config.h"

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace smol::engine {

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
// Throws std::invalid_argument (one line) when `config.kind` cannot run in
// `config.precision` (bf16: mlp and gpt only, not TorchScript).
void checkPrecision(const ModelConfig &config);

// The model of `config`, its parameters in config.precision's dtype
// (bf16: the seed's float32 weights rounded). Throws std::invalid_argument
// for an unknown kind or bad sizes, and DataError for an unreadable
// TorchScript file.
std::unique_ptr<TrainModel> makeModel(const ModelConfig &config);

} // namespace smol::engine
