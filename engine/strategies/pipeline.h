// pipeline (pipeline.cpp): layers cut into stages, one per node, a chain. Each
// stage holds its own layers and sends activations (forward) and their
// gradients (back): closed forms of the placement and the batch, not of P.
// Its description (strategy_description.h) is read by the window, the lessons
// and compare; makePipeline() is in pipeline.cpp.
#pragma once

#include "strategy_description.h"

namespace smol::engine::strategies {

inline constexpr StrategyDescription kPipeline{"pipeline", StrategyTopology::Chain, closed_form::none,
                                               closed_form::noBytes, ShardPlan::ByPlacement};
std::unique_ptr<Strategy> makePipeline();

} // namespace smol::engine::strategies
