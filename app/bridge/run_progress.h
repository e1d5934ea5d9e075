// What a live run leaves for the next snapshot: written by the engine's
// threads (the run thread, its observer, the coordinator's sinks), taken by
// the GUI thread at most 30 times a second (EngineController::publish).
// Everything below is guarded by `mutex`.
#pragma once

#include "engine_controller.h"
#include "run_plan.h"

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace smol::app {

struct RunProgress {
    std::mutex mutex;
    RunSettings settings;                                  // of the newest run
    std::vector<widgets::StepPoint> steps;                 // not yet published
    std::vector<std::pair<std::int64_t, double>> testLoss; // (step, loss), not yet published
    std::map<int, std::vector<std::string>> gathered;      // rank -> params held in full at the current pause
    QVector<widgets::ShardCell> shards;                    // the run's plan (app/bridge/run_plan.h)
    PredictedBytes predicted;                              // per node, by the closed forms
    QVector<widgets::ShardColumn> shardColumns;            // a mesh's, by rank (run_plan.h)
    std::int64_t lastStep = -1;
    bool dirty = true; // the cluster view's picture changed

    bool onGloo()
    {
        std::lock_guard lock(mutex);
        return settings.backend == QLatin1String("gloo");
    }
};

} // namespace smol::app
