// zero2 (zero2.cpp): optimizer state and gradients sharded. A node holds
// 4P + 4P/N + opt/N between steps and sends 2(N-1)/N x 4P per step.
// Its description (strategy_description.h) is read by the window, the lessons
// and compare; makeZero2() is in zero2.cpp.
#pragma once

#include "strategy_description.h"

namespace smol::engine::strategies {

inline std::optional<std::int64_t> zero2ModelStateBytes(const ClosedFormInput &c)
{
    return c.elementBytes() * c.params + c.elementBytes() * c.params / c.nodes + c.optimizerBytes() / c.nodes;
}
inline std::optional<HeldBytes> zero2HeldBytes(const ClosedFormInput &c)
{
    return HeldBytes{c.elementBytes() * c.params, c.elementBytes() * c.params / c.nodes,
                     c.optimizerBytes() / c.nodes};
}
inline constexpr StrategyDescription kZero2{
    "zero2", StrategyTopology::Ring, &zero2ModelStateBytes, closed_form::ringAllReduce, ShardPlan::ChunkedFlat,
    &zero2HeldBytes,
    "held: 4P params + 4P/N grads + opt/N; sent: 2(N-1)/N x 4P a step (reduce-scatter of the gradients, "
    "all-gather of the updated parameters)"};
std::unique_ptr<Strategy> makeZero2();

} // namespace smol::engine::strategies
