// SGD and Adam over a flat range of parameters. Every strategy, including the
// single-node reference, updates through this class, so a shard's update is
// element for element the update the full buffer would get: the heart of
// "ZeRO gives the same parameters as single".
//
// Adam follows torch::optim::Adam (no weight decay, no amsgrad):
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

namespace smol::engine {

struct OptimizerConfig {
    enum class Kind { Sgd, Adam };
    Kind kind = Kind::Sgd;
    double lr = 0.1;
    double beta1 = 0.9;
    double beta2 = 0.999;
    double eps = 1e-8;
};

const char *optimizerName(OptimizerConfig::Kind kind);

class FlatOptimizer {
public:
    // State for `numel` elements (a shard or the whole buffer).
    FlatOptimizer(const OptimizerConfig &config, std::int64_t numel);

    // params and grads: 1-D float32 tensors of numel elements; params in place.
    void step(torch::Tensor params, const torch::Tensor &grads);
    std::vector<torch::Tensor> state() const; // for memory accounting
    std::int64_t steps() const { return m_step; }
    // Adam's moments (undefined for SGD), for checkpoints.
    const torch::Tensor &exp() const { return m_exp; }
    const torch::Tensor &expSq() const { return m_expSq; }
    // Continue from a checkpoint: `steps` updates done, and (Adam) these
    // moments, copied in (numel elements each). SGD ignores the moments.
    void load(const torch::Tensor &exp, const torch::Tensor &expSq, std::int64_t steps);

private:
    OptimizerConfig m_config;
    std::int64_t m_step = 0;
    torch::Tensor m_exp;   // Adam first moment
    torch::Tensor m_expSq; // Adam second moment
};

} // namespace smol::engine
