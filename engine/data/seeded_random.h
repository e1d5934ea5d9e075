// Draws that depend only on the generator's output, never on the standard
// library's distribution algorithms, so a sample order is the same on every
// machine and compiler for the same seed.
#pragma once

#include <cstdint>
#include <limits>
#include <random>

namespace smol::engine {

// An unbiased draw from [0, n): modulo of a rejection-sampled 64-bit word.
inline std::uint64_t uniformBelow(std::mt19937_64 &rng, std::uint64_t n)
{
    constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
    const std::uint64_t limit = kMax - kMax % n; // a multiple of n
    std::uint64_t x = rng();
    while (x >= limit)
        x = rng();
    return x % n;
}

} // namespace smol::engine
