// edp (edp.cpp): an elastic asynchronous parameter server, rank 0 at the centre
// of a star. Workers step at their own pace (4P + 32 bytes up and down per
// push), so a step of the run has no one figure of bytes.
// Its description (strategy_description.h) is read by the window, the lessons
// and compare; makeEdp() is in edp.cpp.
#pragma once

#include "strategy_description.h"

namespace smol::engine::strategies {

inline constexpr StrategyDescription kEdp{"edp", StrategyTopology::Star, closed_form::none,
                                          closed_form::noBytes, ShardPlan::Replicated};
std::unique_ptr<Strategy> makeEdp();

} // namespace smol::engine::strategies
