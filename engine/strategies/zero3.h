// zero3 (zero3.cpp): parameters, gradients and optimizer state sharded, layer by
// layer. A node holds (8P + opt)/N between steps and sends 3(N-1)/N x 4P per
// step (two all-gathers and a reduce-scatter): 1.5x ddp's traffic.
// Its description (strategy_description.h) is read by the window, the lessons
// and compare; makeZero3() is in zero3.cpp.
#pragma once

#include "strategy_description.h"

namespace smol::engine::strategies {

inline std::optional<std::int64_t> zero3ModelStateBytes(const ClosedFormInput &c)
{
    return (8 * c.params + c.optimizerBytes()) / c.nodes;
}
inline std::optional<WireBytes> zero3BytesPerStep(const ClosedFormInput &c)
{
    const double bytes = 3.0 * (c.nodes - 1) / c.nodes * 4.0 * double(c.params);
    return WireBytes{bytes, bytes};
}
inline constexpr StrategyDescription kZero3{"zero3", StrategyTopology::Ring, &zero3ModelStateBytes,
                                            &zero3BytesPerStep, ShardPlan::ChunkedByLayer};
std::unique_ptr<Strategy> makeZero3();

} // namespace smol::engine::strategies
