// What the views show about a run before it runs, from its configuration
// alone, as the strategy describes itself (engine/strategies/
// strategy_description.h): the shard map (who owns which range of each
// parameter), the closed-form params + grads + optimizer bytes per node, and
// the topology the cluster view draws. A device mesh is planned by
// engine/strategies/mesh_plan.h: each rank's holdings and bytes. Shared by
// the live bridge (EngineController) and the replay (ReplayController),
// which gets the configuration from a session file's header.
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

// Params + grads + optimizer bytes a node holds between steps, by the
// closed forms: one figure for every node (the strategies alone), or each
// rank's own (a device mesh: its stage, tp slice and optimizer shard).
struct PredictedBytes {
    std::optional<std::int64_t> everyNode;
    QVector<std::int64_t> byRank;
    // Empty when no formula applies to `rank`.
    std::optional<std::int64_t> of(int rank) const
    {
        if (rank >= 0 && rank < byRank.size())
            return byRank[rank];
        return everyNode;
    }
};

struct RunPlan {
    QVector<widgets::ShardCell> shards; // empty when the config cannot be planned
    PredictedBytes predicted;
    // A mesh: what each rank's column of the shard map says (by rank).
    QVector<widgets::ShardColumn> columns;
};

// Never throws: a config whose model cannot be built plans to nothing (the
// run itself reports a bad config).
RunPlan planRun(const engine::TrainConfig &c);

// The strategy's topology (its StrategyDescription): a ring, a star with
// rank 0 at the centre, or a chain of stages.
widgets::Topology topologyOf(const QString &strategy);

} // namespace smol::app
