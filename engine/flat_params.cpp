#include "flat_params.h"

#include <stdexcept>

namespace smol::engine {

FlatParams::FlatParams(const std::vector<std::pair<std::string, torch::Tensor>> &named)
{
    if (!named.empty())
        m_dtype = named.front().second.scalar_type();
    if (m_dtype != torch::kFloat32 && m_dtype != torch::kBFloat16)
        throw std::invalid_argument("parameter " + named.front().first + " is " + c10::toString(m_dtype) +
                                    "; strategies flatten float32 or bfloat16 parameters only");
    for (const auto &[name, p] : named) {
        if (p.scalar_type() != m_dtype)
            throw std::invalid_argument("parameter " + name + " is " + c10::toString(p.scalar_type()) + ", " +
                                        named.front().first + " " + c10::toString(m_dtype) +
                                        "; a flat buffer holds one dtype");
        ParamSlot s;
        s.name = name;
        s.shape = p.sizes().vec();
        s.offset = m_numel;
        s.numel = p.numel();
        s.param = p;
        m_numel += s.numel;
        m_slots.push_back(std::move(s));
    }
    torch::NoGradGuard noGrad;
    torch::Tensor flat = torch::empty({m_numel}, m_dtype);
    for (const auto &s : m_slots)
        flat.narrow(0, s.offset, s.numel).copy_(s.param.reshape({-1}));
    adoptValues(flat);
}

void FlatParams::adoptValues(const torch::Tensor &flat)
{
    m_values = flat;
    for (auto &s : m_slots)
        s.param.set_data(flat.narrow(0, s.offset, s.numel).view(s.shape));
    if (m_grads.defined())
        for (auto &s : m_slots)
            s.param.mutable_grad() = m_grads.narrow(0, s.offset, s.numel).view(s.shape);
}

void FlatParams::releaseValues()
{
    m_values = torch::Tensor();
    const torch::Tensor empty = torch::empty({0}, m_dtype);
    for (auto &s : m_slots)
        s.param.set_data(empty);
}

torch::Tensor FlatParams::attachGrads()
{
    m_grads = torch::zeros({m_numel}, m_dtype);
    for (auto &s : m_slots)
        s.param.mutable_grad() = m_grads.narrow(0, s.offset, s.numel).view(s.shape);
    return m_grads;
}

void FlatParams::detachGrads()
{
    for (auto &s : m_slots)
        s.param.mutable_grad() = torch::Tensor();
    m_grads = torch::Tensor();
}

} // namespace smol::engine
