// zero3 (zero3.cpp): parameters, gradients and optimizer state sharded, layer by
// layer. A node holds (8P + opt)/N between steps and sends 3(N-1)/N x 4P per
// step (two all-gathers and a reduce-scatter): 1.5x ddp's traffic; with
// --accumulate K, (2K + 1)(N-1)/N x 4P (the gathers repeat per micro-step).
// Its description (strategy_description.h) is read by the window, the lessons
// and compare; makeZero3() is in zero3.cpp.
#pragma once

#include "strategy_description.h"

namespace smol::engine::strategies {

inline std::optional<std::int64_t> zero3ModelStateBytes(const ClosedFormInput &c)
{
    return (2 * c.elementBytes() * c.params + c.optimizerBytes()) / c.nodes;
}
inline std::optional<WireBytes> zero3BytesPerStep(const ClosedFormInput &c)
{
    // Two all-gathers per micro-step, one reduce-scatter per step.
    const double bytes = double(2 * c.accumulate + 1) * (c.nodes - 1) / c.nodes * double(c.elementBytes()) * double(c.params);
    return WireBytes{bytes, bytes};
}
inline std::optional<HeldBytes> zero3HeldBytes(const ClosedFormInput &c)
{
    return HeldBytes{c.elementBytes() * c.params / c.nodes, c.elementBytes() * c.params / c.nodes,
                     c.optimizerBytes() / c.nodes};
}
inline constexpr StrategyDescription kZero3{
    "zero3", StrategyTopology::Ring, &zero3ModelStateBytes, &zero3BytesPerStep, ShardPlan::ChunkedByLayer,
    &zero3HeldBytes,
    "held: 4P/N params + 4P/N grads + opt/N; sent: (2K+1)(N-1)/N x 4P a step (each layer all-gathered for "
    "forward and for backward in each of K micro-steps, its gradients reduce-scattered once)"};
std::unique_ptr<Strategy> makeZero3();

} // namespace smol::engine::strategies
