// Shared by the strategy tests: does a run's final parameter vector equal the
// single-node reference's? Relative error of the vector,
// ||p - p_single|| / ||p_single|| <= 1e-5, and every element within 1e-5.
// (An element-wise relative bound is not meaningful under Adam: where a
// gradient is pure rounding noise, m / sqrt(v) is O(1) either way, so those
// few weights move by ~lr times noise; see docs/strategies.md.)
#pragma once

#include "engine/trainer.h"

#include <QString>

namespace smol::test {

// Empty when the parameters match, else a readable reason.
inline QString paramMismatch(const engine::TrainSummary &got, const engine::TrainSummary &want)
{
    if (got.paramCount != want.paramCount)
        return QString("%1 parameters, reference has %2").arg(got.paramCount).arg(want.paramCount);
    const auto d = got.finalParams.to(torch::kFloat64) - want.finalParams.to(torch::kFloat64);
    const double normRelative = (d.norm() / want.finalParams.to(torch::kFloat64).norm()).item<double>();
    const double maxAbs = d.abs().max().item<double>();
    if (normRelative <= 1e-5 && maxAbs <= 1e-5)
        return {};
    return QString("relative error %1, max abs difference %2").arg(normRelative).arg(maxAbs);
}

} // namespace smol::test
