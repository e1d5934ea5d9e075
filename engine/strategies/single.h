// single (single.cpp): one node, the reference. It holds everything (4P + 4P
// + optimizer) and sends nothing; the view draws its one node as a ring of one.
// Its description (strategy_description.h) is read by the window, the lessons
// and compare; makeSingle() is in single.cpp.
#pragma once

#include "strategy_description.h"

namespace smol::engine::strategies {

inline std::optional<WireBytes> singleSendsNothing(const ClosedFormInput &)
{
    return WireBytes{};
}
inline constexpr StrategyDescription kSingle{"single", StrategyTopology::Ring, closed_form::replicated,
                                             &singleSendsNothing, ShardPlan::Replicated,
                                             closed_form::replicatedHeld,
                                             "held: 4P params + 4P grads + opt (Adam 8P, SGD 0); sent: nothing"};
std::unique_ptr<Strategy> makeSingle();

} // namespace smol::engine::strategies
