// The Fashion-MNIST classifier: a 784-256-128-10 multilayer perceptron with
// ReLU, trained with mean cross-entropy.
//
// What it does: the smallest model that makes every strategy's traffic and
// memory visible: 235,146 parameters in six tensors (fc1.weight, fc1.bias,
// fc2..., fc3...). Initial weights use LibTorch's default distribution for
// Linear (uniform in +-1/sqrt(fan_in)), drawn from a generator seeded with
// the config seed, never the global one.
//
// --recompute full (ModelConfig::recompute, engine/models/recompute.h): fc1
// (+ReLU) and fc2 (+ReLU) keep only their inputs and run again in backward
// (fc3's output is the logits the loss keeps anyway), in forward() and in
// layers() alike; the gradients are bit-identical.
//
// What it does not do: no convolutions, no dropout or batch norm (nothing
// random or stateful outside the parameters, so strategies stay comparable).
#pragma once

#include "engine/models/model.h"

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace smol::engine {

struct MlpImpl : torch::nn::Module {
    // The seed and the recomputation of `config`.
    explicit MlpImpl(const ModelConfig &config);
    torch::Tensor forward(const torch::Tensor &x); // (B, 784) float32 -> (B, 10) logits, in the weights' dtype
    // ReLU(layer(x)), recomputed in backward under --recompute full.
    torch::Tensor hidden(const torch::nn::Linear &layer, const torch::Tensor &x);

    torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
    Recompute recompute;
};
TORCH_MODULE(Mlp);

class MlpModel : public TrainModel {
public:
    static constexpr std::int64_t kInputs = 28 * 28;
    static constexpr std::int64_t kClasses = 10;

    explicit MlpModel(const ModelConfig &config);
    std::string name() const override { return "mlp"; }
    std::vector<std::pair<std::string, torch::Tensor>> namedParameters() override;
    torch::Tensor loss(const Batch &batch) override;
    double accuracy(const Batch &batch) override;
    std::vector<ModelLayer> layers() override;
    torch::Tensor lossFromOutput(const torch::Tensor &output, const Batch &batch) override;

    Mlp &module() { return m_net; }

private:
    Mlp m_net{nullptr};
};

} // namespace smol::engine
