// zero1 (zero1.cpp): optimizer state sharded. A node holds 4P + 4P + opt/N and
// sends ddp's 2(N-1)/N x 4P per step (reduce-scatter, all-gather).
// Its description (strategy_description.h) is read by the window, the lessons
// and compare; makeZero1() is in zero1.cpp.
#pragma once

#include "strategy_description.h"

namespace smol::engine::strategies {

inline std::optional<std::int64_t> zero1ModelStateBytes(const ClosedFormInput &c)
{
    return c.elementBytes() * c.params + c.elementBytes() * c.params + c.optimizerBytes() / c.nodes;
}
inline std::optional<HeldBytes> zero1HeldBytes(const ClosedFormInput &c)
{
    return HeldBytes{c.elementBytes() * c.params, c.elementBytes() * c.params, c.optimizerBytes() / c.nodes};
}
inline constexpr StrategyDescription kZero1{
    "zero1", StrategyTopology::Ring, &zero1ModelStateBytes, closed_form::ringAllReduce, ShardPlan::ChunkedFlat,
    &zero1HeldBytes,
    "held: 4P params + 4P grads + opt/N; sent: 2(N-1)/N x 4P a step (reduce-scatter of the gradients, "
    "all-gather of the updated parameters)"};
std::unique_ptr<Strategy> makeZero1();

} // namespace smol::engine::strategies
