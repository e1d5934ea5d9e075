// A non-owning view of typed memory: how tensors cross into net/ without a
// copy and without net/ knowing LibTorch. The caller owns the memory and keeps
// it alive for the duration of the call that receives the view.
#pragma once

#include "dtype.h"

#include <array>
#include <cstdint>

namespace smol::net {

// At most kMaxDims dimensions travel in a frame header.
constexpr int kMaxDims = 8;

struct Shape {
    std::uint8_t ndim = 0;
    std::array<std::int64_t, kMaxDims> dims{};

    static Shape vector(std::int64_t n)
    {
        Shape s;
        s.ndim = 1;
        s.dims[0] = n;
        return s;
    }
    // Product of dims, or -1 on a negative dim or overflow past 2^62.
    std::int64_t numel() const;
};

struct TensorView {
    void *data = nullptr;
    std::size_t count = 0; // elements
    DType dtype = DType::Float32;
    Shape shape;           // informational (hooks, traces); empty = 1-D of count

    std::size_t bytes() const { return count * dtypeSize(dtype); }
    char *bytePtr() const { return static_cast<char *>(data); }
    // Elements [offset, offset + n) as a 1-D view.
    TensorView slice(std::size_t offset, std::size_t n) const
    {
        return TensorView{bytePtr() + offset * dtypeSize(dtype), n, dtype, Shape::vector(std::int64_t(n))};
    }
};

template <typename T> DType dtypeOf();
template <> inline DType dtypeOf<float>() { return DType::Float32; }
template <> inline DType dtypeOf<double>() { return DType::Float64; }
template <> inline DType dtypeOf<std::int64_t>() { return DType::Int64; }
template <> inline DType dtypeOf<std::int32_t>() { return DType::Int32; }
template <> inline DType dtypeOf<std::uint8_t>() { return DType::UInt8; }

template <typename T> TensorView viewOf(T *data, std::size_t count)
{
    return TensorView{data, count, dtypeOf<T>(), Shape::vector(std::int64_t(count))};
}

} // namespace smol::net
