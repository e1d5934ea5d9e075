// What the views show about a run before it runs, from its configuration
// alone, as the strategy describes itself (engine/strategies/
// strategy_description.h): the shard map (who owns which range of each
// parameter), the closed-form params + grads + optimizer bytes per node, and
// the topology the cluster view draws. Shared by the live bridge
// (EngineController) and the replay (ReplayController), which gets the
// configuration from a session file's header.
//
// No LibTorch in this header; planRun builds the model (CPU, a few ms) to
// learn the parameter sizes.
#pragma once

#include "widgets/cluster_state.h"

#include <QString>
#include <QVector>

#include <cstdint>
#include <optional>

namespace smol::engine {
struct TrainConfig;
}

namespace smol::app {

struct RunPlan {
    QVector<widgets::ShardCell> shards;    // empty when the config cannot be planned
    std::optional<std::int64_t> predicted; // per node, bytes; empty when no formula applies
};

// Never throws: a config whose model cannot be built plans to nothing (the
// run itself reports a bad config).
RunPlan planRun(const engine::TrainConfig &c);

// The strategy's topology (its StrategyDescription): a ring, a star with
// rank 0 at the centre, or a chain of stages.
widgets::Topology topologyOf(const QString &strategy);

} // namespace smol::app
