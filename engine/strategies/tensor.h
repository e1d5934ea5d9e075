// tensor (tensor.cpp): Megatron-style tensor parallelism. The nodes all-reduce
// activations in a ring, 4L x 2(N-1)/N x 4BTC bytes per step: no closed form
// of P alone, nor of memory (the replicated rest R plus 1/N of the split
// layers). It cuts inside weights (rows, columns): that map is not planned yet.
// Its description (strategy_description.h) is read by the window, the lessons
// and compare; makeTensorParallel() is in tensor.cpp.
#pragma once

#include "strategy_description.h"

namespace smol::engine::strategies {

inline constexpr StrategyDescription kTensorParallel{"tensor", StrategyTopology::Ring, closed_form::none,
                                                     closed_form::noBytes, ShardPlan::NotPlanned};
std::unique_ptr<Strategy> makeTensorParallel();

} // namespace smol::engine::strategies
