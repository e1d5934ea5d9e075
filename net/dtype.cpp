#include "dtype.h"
#include "half_convert.h"
#include "tensor_view.h"


namespace smol::net {

bool isValidDType(std::uint8_t raw)
{
    return raw >= std::uint8_t(DType::Float32) && raw <= std::uint8_t(DType::BFloat16);
}

std::size_t dtypeSize(DType dtype)
{
    switch (dtype) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Int64: return 8;
    case DType::Int32: return 4;
    case DType::UInt8: return 1;
    case DType::Float16: return 2;
    case DType::BFloat16: return 2;
    }
    return 1;
}

const char *dtypeName(DType dtype)
{
    switch (dtype) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int64: return "int64";
    case DType::Int32: return "int32";
    case DType::UInt8: return "uint8";
    case DType::Float16: return "float16";
    case DType::BFloat16: return "bfloat16";
    }
    return "?";
}

std::uint16_t floatToHalf(float f) { return half::fromFloat(f); }
float halfToFloat(std::uint16_t h) { return half::toFloat(h); }
std::uint16_t floatToBFloat16(float f) { return bfloat16::fromFloat(f); }
float bfloat16ToFloat(std::uint16_t b) { return bfloat16::toFloat(b); }

bool isValidCollectiveKind(std::uint8_t raw)
{
    return raw <= std::uint8_t(CollectiveKind::Pull);
}

const char *collectiveName(CollectiveKind kind)
{
    switch (kind) {
    case CollectiveKind::None: return "none";
    case CollectiveKind::SendRecv: return "send/recv";
    case CollectiveKind::Broadcast: return "broadcast";
    case CollectiveKind::Barrier: return "barrier";
    case CollectiveKind::ReduceScatter: return "reduce-scatter";
    case CollectiveKind::AllGather: return "all-gather";
    case CollectiveKind::AllReduce: return "all-reduce";
    case CollectiveKind::Gather: return "gather";
    case CollectiveKind::Scatter: return "scatter";
    case CollectiveKind::Push: return "push";
    case CollectiveKind::Pull: return "pull";
    }
    return "?";
}

std::int64_t Shape::numel() const
{
    std::int64_t n = 1;
    for (int i = 0; i < ndim; ++i) {
        const std::int64_t d = dims[std::size_t(i)];
        if (d < 0)
            return -1;
        if (d != 0 && n > (std::int64_t(1) << 62) / d)
            return -1;
        n *= d;
    }
    return n;
}

} // namespace smol::net
