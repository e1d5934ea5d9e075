// The reference side of `smolctl bench allreduce`: c10d's ProcessGroupGloo
// all-reduce (SUM, float32) with N ranks as threads of this process over
// loopback. No LibTorch in this header, so the caller need not parse it.
#pragma once

#include <cstddef>
#include <vector>

namespace smol::engine {

struct GlooAllreduceResult {
    double secondsPerIter = 0; // mean over the timed iterations; per iteration the max over ranks
    std::vector<float> result; // rank 0's output of the last iteration
    bool ranksAgree = false;   // every rank's final output equals rank 0's bit for bit
};

// Rank r's input element i. Integer-valued and small, so the sum over ranks
// is exact in float32 whatever order the reduction adds in.
inline float benchInputValue(int rank, std::size_t i)
{
    return float((rank + 1) * int((i % 251) + 1));
}

// nodes ranks, each all-reducing bytes / 4 floats of benchInputValue(rank, i),
// refilled (untimed) before every iteration; `warmup` untimed iterations,
// then `iters` timed ones. Throws std::runtime_error with a one-line reason.
GlooAllreduceResult runGlooAllreduce(int nodes, std::size_t bytes, int warmup, int iters);

} // namespace smol::engine
