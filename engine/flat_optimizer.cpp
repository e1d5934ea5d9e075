// SGD and Adam over a flat range, with float32 master weights for bfloat16
// parameters; see flat_optimizer.h.
#include "flat_optimizer.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace smol::engine {

const char *optimizerName(OptimizerConfig::Kind kind)
{
    return kind == OptimizerConfig::Kind::Adam ? "adam" : "sgd";
}

FlatOptimizer::FlatOptimizer(const OptimizerConfig &config, std::int64_t numel)
    : m_config(config)
    , m_numel(numel)
{
    if (config.kind == OptimizerConfig::Kind::Adam) {
        m_exp = torch::zeros({numel}, torch::kFloat32);
        m_expSq = torch::zeros({numel}, torch::kFloat32);
    }
    if (config.masterWeights)
        m_master = torch::zeros({numel}, torch::kFloat32);
}

namespace {
// Elements a bf16 update widens at a time: its float32 temporaries (the
// widened gradients, Adam's denominator) stay this small, not 4P each.
constexpr std::int64_t kWidenChunk = 1 << 16;
} // namespace

void FlatOptimizer::update(torch::Tensor &target, const torch::Tensor &grads, torch::Tensor exp, torch::Tensor expSq)
{
    if (m_config.kind == OptimizerConfig::Kind::Sgd) {
        target.add_(grads, -m_config.lr);
        return;
    }
    const double bc1 = 1 - std::pow(m_config.beta1, double(m_step));
    const double bc2 = 1 - std::pow(m_config.beta2, double(m_step));
    exp.mul_(m_config.beta1).add_(grads, 1 - m_config.beta1);
    expSq.mul_(m_config.beta2).addcmul_(grads, grads, 1 - m_config.beta2);
    const torch::Tensor denom = (expSq.sqrt() / std::sqrt(bc2)).add_(m_config.eps);
    target.addcdiv_(exp, denom, -m_config.lr / bc1);
}

void FlatOptimizer::step(torch::Tensor params, const torch::Tensor &grads)
{
    torch::NoGradGuard noGrad;
    if (params.numel() != m_numel || grads.numel() != m_numel || !grads.is_floating_point())
        throw std::invalid_argument("optimizer of " + std::to_string(m_numel) + " elements stepped with " +
                                    std::to_string(params.numel()) + " parameters and " +
                                    std::to_string(grads.numel()) + " " + c10::toString(grads.scalar_type()) +
                                    " gradients");
    ++m_step;
    if (params.scalar_type() == torch::kFloat32) {
        update(params, grads, m_exp, m_expSq);
        return;
    }
    if (params.scalar_type() != torch::kBFloat16)
        throw std::invalid_argument(std::string("the optimizer updates float32 or bfloat16 parameters, not ") +
                                    c10::toString(params.scalar_type()));
    if (!m_masterFilled) {
        if (!m_master.defined())
            m_master = torch::empty({m_numel}, torch::kFloat32);
        m_master.copy_(params);
        m_masterFilled = true;
    }
    // Element-wise, so chunk by chunk is the whole update, bit for bit.
    const bool adam = m_config.kind == OptimizerConfig::Kind::Adam;
    for (std::int64_t at = 0; at < m_numel; at += kWidenChunk) {
        const std::int64_t n = std::min(kWidenChunk, m_numel - at);
        torch::Tensor master = m_master.narrow(0, at, n);
        update(master, grads.narrow(0, at, n).to(torch::kFloat32), adam ? m_exp.narrow(0, at, n) : torch::Tensor(),
               adam ? m_expSq.narrow(0, at, n) : torch::Tensor());
        params.narrow(0, at, n).copy_(master); // rounded to nearest even
    }
}

void FlatOptimizer::load(const torch::Tensor &exp, const torch::Tensor &expSq, std::int64_t steps)
{
    m_step = steps;
    if (m_config.kind != OptimizerConfig::Kind::Adam)
        return;
    if (!exp.defined() && !expSq.defined()) {
        m_exp.zero_();
        m_expSq.zero_();
        return;
    }
    if (!exp.defined() || !expSq.defined() || exp.numel() != m_exp.numel() || expSq.numel() != m_expSq.numel())
        throw std::invalid_argument("optimizer state of " + std::to_string(exp.defined() ? exp.numel() : 0) +
                                    " elements for an optimizer of " + std::to_string(m_exp.numel()));
    m_exp.copy_(exp);
    m_expSq.copy_(expSq);
}

void FlatOptimizer::loadMaster(const torch::Tensor &master)
{
    if (!master.defined() || master.numel() != m_numel)
        throw std::invalid_argument("master weights of " + std::to_string(master.defined() ? master.numel() : 0) +
                                    " elements for an optimizer of " + std::to_string(m_numel));
    if (!m_master.defined())
        m_master = torch::empty({m_numel}, torch::kFloat32);
    m_master.copy_(master.reshape({-1}));
    m_masterFilled = true;
}

std::vector<torch::Tensor> FlatOptimizer::state() const
{
    std::vector<torch::Tensor> out;
    if (m_master.defined())
        out.push_back(m_master);
    if (m_config.kind == OptimizerConfig::Kind::Adam) {
        out.push_back(m_exp);
        out.push_back(m_expSq);
    }
    return out;
}

} // namespace smol::engine
