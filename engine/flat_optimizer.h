// SGD and Adam over a flat range of parameters. Every strategy, including the
// single-node reference, updates through this class, so a shard's update is
// element for element the update the full buffer would get: the heart of
// "ZeRO gives the same parameters as single".
//
// Adam follows torch::optim::Adam (no weight decay, no amsgrad):
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
//
// Mixed precision (--precision bf16): the parameters and gradients handed to
// step() are bfloat16; the optimizer keeps a float32 master copy of its
// elements (filled from the parameters at the first step, or by
// loadMaster), applies the update above to the master with the gradients
// widened to float32 (64K elements at a time, so the float32 temporaries
// stay small), and writes the master rounded to nearest even back into the
// parameters. So the bf16 parameters are always the master's
// rounding. State per element: Adam 4 (master) + 8 (moments) = 12 bytes,
// SGD 4 (master); float32 runs keep no master and are unchanged bit for bit.
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
    // The parameters will be bfloat16: allocate the float32 master with the
    // moments, at construction (set by nodeContextOf from the model's
    // precision). Without it a master is still made at the first bf16 step.
    bool masterWeights = false;
};

const char *optimizerName(OptimizerConfig::Kind kind);

class FlatOptimizer {
public:
    // State for `numel` elements (a shard or the whole buffer).
    FlatOptimizer(const OptimizerConfig &config, std::int64_t numel);

    // params: 1-D float32 or bfloat16 tensor of numel elements, updated in
    // place; grads: numel elements of a floating dtype (widened to float32
    // for a bf16 update). Throws std::invalid_argument for other dtypes or
    // sizes.
    void step(torch::Tensor params, const torch::Tensor &grads);
    std::vector<torch::Tensor> state() const; // for memory accounting: master (if any), moments
    std::int64_t steps() const { return m_step; }
    // Adam's moments (undefined for SGD), for checkpoints.
    const torch::Tensor &exp() const { return m_exp; }
    const torch::Tensor &expSq() const { return m_expSq; }
    // The float32 master weights of a bf16 run (undefined before the first
    // bf16 step unless allocated at construction; see hasMaster).
    const torch::Tensor &master() const { return m_master; }
    // True once the master holds this run's weights (filled or loaded).
    bool hasMaster() const { return m_masterFilled; }
    // Continue from a checkpoint: `steps` updates done, and (Adam) these
    // moments, copied in (numel elements each); undefined moments: Adam's
    // start at zero. SGD ignores the moments.
    void load(const torch::Tensor &exp, const torch::Tensor &expSq, std::int64_t steps);
    // The master weights to continue from (numel float32 values, e.g. a
    // checkpoint's): the next bf16 step updates these rather than the
    // parameters' widening.
    void loadMaster(const torch::Tensor &master);

private:
    // The formulas above, in place, on `target` and the moments' range `exp`,
    // `expSq` (views; undefined for SGD).
    void update(torch::Tensor &target, const torch::Tensor &grads, torch::Tensor exp, torch::Tensor expSq);

    OptimizerConfig m_config;
    std::int64_t m_numel = 0;
    std::int64_t m_step = 0;
    torch::Tensor m_exp;    // Adam first moment
    torch::Tensor m_expSq;  // Adam second moment
    torch::Tensor m_master; // bf16 runs: float32 master weights
    bool m_masterFilled = false;
};

} // namespace smol::engine
