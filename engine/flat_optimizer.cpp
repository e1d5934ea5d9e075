#include "flat_optimizer.h"

#include <cmath>

namespace smol::engine {

const char *optimizerName(OptimizerConfig::Kind kind)
{
    return kind == OptimizerConfig::Kind::Adam ? "adam" : "sgd";
}

FlatOptimizer::FlatOptimizer(const OptimizerConfig &config, std::int64_t numel)
    : m_config(config)
{
    if (config.kind == OptimizerConfig::Kind::Adam) {
        m_exp = torch::zeros({numel}, torch::kFloat32);
        m_expSq = torch::zeros({numel}, torch::kFloat32);
    }
}

void FlatOptimizer::step(torch::Tensor params, const torch::Tensor &grads)
{
    torch::NoGradGuard noGrad;
    ++m_step;
    if (m_config.kind == OptimizerConfig::Kind::Sgd) {
        params.add_(grads, -m_config.lr);
        return;
    }
    const double bc1 = 1 - std::pow(m_config.beta1, double(m_step));
    const double bc2 = 1 - std::pow(m_config.beta2, double(m_step));
    m_exp.mul_(m_config.beta1).add_(grads, 1 - m_config.beta1);
    m_expSq.mul_(m_config.beta2).addcmul_(grads, grads, 1 - m_config.beta2);
    const torch::Tensor denom = (m_expSq.sqrt() / std::sqrt(bc2)).add_(m_config.eps);
    params.addcdiv_(m_exp, denom, -m_config.lr / bc1);
}

void FlatOptimizer::load(const torch::Tensor &exp, const torch::Tensor &expSq, std::int64_t steps)
{
    m_step = steps;
    if (m_config.kind != OptimizerConfig::Kind::Adam)
        return;
    if (!exp.defined() || !expSq.defined() || exp.numel() != m_exp.numel() || expSq.numel() != m_expSq.numel())
        throw std::invalid_argument("optimizer state of " + std::to_string(exp.defined() ? exp.numel() : 0) +
                                    " elements for an optimizer of " + std::to_string(m_exp.numel()));
    m_exp.copy_(exp);
    m_expSq.copy_(expSq);
}

std::vector<torch::Tensor> FlatOptimizer::state() const
{
    if (m_config.kind == OptimizerConfig::Kind::Adam)
        return {m_exp, m_expSq};
    return {};
}

} // namespace smol::engine
