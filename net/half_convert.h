// The 16-bit float conversions, inline for the reduction kernels' loops
// (net/collectives/reduce_kernels.cpp); everyone else calls dtype.h's
// floatToHalf and friends. Round to nearest even, as the hardware does.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace smol::net::halfbits {

inline std::uint32_t bitsOf(float f)
{
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

inline float floatOf(std::uint32_t u)
{
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

inline std::uint16_t halfFromFloat(float f)
{
    const std::uint32_t u = bitsOf(f);
    const std::uint16_t sign = std::uint16_t((u >> 16) & 0x8000u);
    const std::uint32_t absBits = u & 0x7fffffffu;
    if (absBits >= 0x7f800000u) // inf or NaN (NaN keeps a mantissa bit)
        return std::uint16_t(sign | 0x7c00u | (absBits > 0x7f800000u ? 0x200u : 0u));
    if (absBits >= 0x477ff000u) // rounds to beyond 65504: inf
        return std::uint16_t(sign | 0x7c00u);
    if (absBits < 0x38800000u) { // below 2^-14: a subnormal half (or zero)
        // Scale so the half's subnormal step (2^-24) is one unit, and let the
        // float addition round to nearest even.
        const float scaled = floatOf(absBits) * 16777216.0f; // 2^24
        const float rounded = std::nearbyint(scaled);
        return std::uint16_t(sign | std::uint16_t(rounded));
    }
    // Normal: rebias the exponent (127 -> 15) and round the 13 dropped bits.
    const std::uint32_t mant = absBits & 0x7fffffu;
    const std::uint32_t exp = (absBits >> 23) - 127 + 15;
    std::uint32_t h = (exp << 10) | (mant >> 13);
    const std::uint32_t rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
        ++h; // a carry into the exponent is still the right value
    return std::uint16_t(sign | h);
}

inline float halfToFloat(std::uint16_t h)
{
    const std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16;
    const std::uint32_t exp = (h >> 10) & 0x1fu;
    const std::uint32_t mant = h & 0x3ffu;
    if (exp == 0) { // zero or subnormal: mant x 2^-24
        const float v = float(mant) * (1.0f / 16777216.0f);
        return floatOf(bitsOf(v) | sign);
    }
    if (exp == 31)
        return floatOf(sign | 0x7f800000u | (mant << 13));
    return floatOf(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

inline std::uint16_t bfloat16FromFloat(float f)
{
    const std::uint32_t u = bitsOf(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return std::uint16_t((u >> 16) | 0x40u); // NaN stays a (quiet) NaN
    const std::uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
    return std::uint16_t((u + rounding) >> 16);
}

inline float bfloat16ToFloat(std::uint16_t b)
{
    return floatOf(std::uint32_t(b) << 16);
}

} // namespace smol::net::halfbits

namespace smol::net::half {
inline std::uint16_t fromFloat(float f) { return halfbits::halfFromFloat(f); }
inline float toFloat(std::uint16_t h) { return halfbits::halfToFloat(h); }
} // namespace smol::net::half

namespace smol::net::bfloat16 {
inline std::uint16_t fromFloat(float f) { return halfbits::bfloat16FromFloat(f); }
inline float toFloat(std::uint16_t b) { return halfbits::bfloat16ToFloat(b); }
} // namespace smol::net::bfloat16
