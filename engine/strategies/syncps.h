// syncps (syncps.cpp): a synchronous parameter server, rank 0 at the centre of
// a star. A worker sends its 4P gradient per step; the server sends (N-1) x
// 4P of parameters back. Server and workers hold different things, so there
// is no one model-state figure per node.
// Its description (strategy_description.h) is read by the window, the lessons
// and compare; makeSyncPs() is in syncps.cpp.
#pragma once

#include "strategy_description.h"

namespace smol::engine::strategies {

inline std::optional<WireBytes> syncPsBytesPerStep(const ClosedFormInput &c)
{
    const double server = (c.nodes - 1) * double(c.elementBytes()) * double(c.params),
                 worker = double(c.elementBytes()) * double(c.params);
    return WireBytes{(server + (c.nodes - 1) * worker) / c.nodes, server};
}
inline constexpr StrategyDescription kSyncPs{"syncps", StrategyTopology::Star, closed_form::none,
                                             &syncPsBytesPerStep, ShardPlan::Replicated, nullptr,
                                             "sent: (N-1) x 4P a step from the server (the parameters to each "
                                             "worker), 4P from each worker (its gradients)"};
std::unique_ptr<Strategy> makeSyncPs();

} // namespace smol::engine::strategies
