// Element types that cross the wire, and the collective vocabulary shared by
// frames, trace events and hooks. Values are part of the wire format
// (docs/protocol.md): append, never renumber.
#pragma once

#include <cstddef>
#include <cstdint>

namespace smol::net {

enum class DType : std::uint8_t {
    Float32 = 1,
    Float64 = 2,
    Int64 = 3,
    Int32 = 4,
    UInt8 = 5,
    // Half precision for compressed gradients (engine/compression.h): IEEE
    // binary16 and bfloat16 (float32's top 16 bits), little-endian. Reduced
    // in float32 and rounded to nearest even after every addition.
    Float16 = 6,
    BFloat16 = 7,
};

bool isValidDType(std::uint8_t raw);
std::size_t dtypeSize(DType dtype);
const char *dtypeName(DType dtype);
// Round to nearest even, as the hardware conversions do; NaN stays NaN.
std::uint16_t floatToHalf(float f);
float halfToFloat(std::uint16_t h);
std::uint16_t floatToBFloat16(float f);
float bfloat16ToFloat(std::uint16_t b);

enum class CollectiveKind : std::uint8_t {
    None = 0,  // control or raw frames outside any collective
    SendRecv = 1,
    Broadcast = 2,
    Barrier = 3,
    ReduceScatter = 4,
    AllGather = 5,
    AllReduce = 6,
    Gather = 7,
    Scatter = 8,
    Push = 9,  // parameter server: worker -> server
    Pull = 10, // parameter server: server -> worker
};

bool isValidCollectiveKind(std::uint8_t raw);
const char *collectiveName(CollectiveKind kind);

enum class ReduceOp : std::uint8_t { Sum, Average };

} // namespace smol::net
