// ddp (ddp.cpp): every node holds the whole model, 4P + 4P + optimizer, and
// averages the gradients with ring all-reduces: 2(N-1)/N x 4P sent per step.
// Its description (strategy_description.h) is read by the window, the lessons
// and compare; makeDdp() is in ddp.cpp.
#pragma once

#include "strategy_description.h"

namespace smol::engine::strategies {

inline constexpr StrategyDescription kDdp{"ddp", StrategyTopology::Ring, closed_form::replicated,
                                          closed_form::ringAllReduce, ShardPlan::Replicated,
                                          closed_form::replicatedHeld, closed_form::kReplicatedRingFormulas};
std::unique_ptr<Strategy> makeDdp();

} // namespace smol::engine::strategies
