#include "tensor_bridge.h"

#include <stdexcept>

namespace smol::engine {

net::TensorView viewOf(const torch::Tensor &t)
{
    if (!t.defined())
        return {};
    if (!t.is_contiguous() || t.device().type() != torch::kCPU)
        throw std::logic_error("collectives need contiguous CPU tensors");
    net::TensorView v;
    v.data = t.data_ptr();
    v.count = std::size_t(t.numel());
    switch (t.scalar_type()) {
    case torch::kFloat32: v.dtype = net::DType::Float32; break;
    case torch::kFloat64: v.dtype = net::DType::Float64; break;
    case torch::kInt64: v.dtype = net::DType::Int64; break;
    case torch::kInt32: v.dtype = net::DType::Int32; break;
    case torch::kUInt8: v.dtype = net::DType::UInt8; break;
    case torch::kHalf: v.dtype = net::DType::Float16; break;
    case torch::kBFloat16: v.dtype = net::DType::BFloat16; break;
    default: throw std::logic_error(std::string("no wire dtype for ") + c10::toString(t.scalar_type()));
    }
    v.shape.ndim = std::uint8_t(std::min<int64_t>(t.dim(), net::kMaxDims));
    for (int i = 0; i < v.shape.ndim; ++i)
        v.shape.dims[std::size_t(i)] = t.size(i);
    return v;
}

} // namespace smol::engine
