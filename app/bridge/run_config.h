// A run's settings (RunSettings, what the window's controls hold) and the
// engine's configuration (engine::TrainConfig) are one fact in two
// vocabularies: "adam" is OptimizerConfig::Kind::Adam, "gpipe" is
// PipelineSchedule::GPipe, "gloo" is Backend::Gloo. Both directions are
// here: the live bridge starts a run from settings, a replay shows a
// recording's configuration as settings.
//
// No LibTorch in this header.
#pragma once

#include "engine_controller.h"
#include "engine/plan/run_prediction.h"

#include <optional>

namespace smol::engine {
struct TrainConfig;
}

namespace smol::app {

// Everything but what depends on the cluster (nodes' behaviour and links:
// NodeEmulation) and the held-out cadence's default (-1: about 25 points).
engine::TrainConfig trainConfigOf(const RunSettings &settings);
// Strategy, model, nodes, steps, batch, seed, optimizer, lr, placement,
// micro-batches, schedule, backend and mesh; the rest keeps RunSettings' defaults.
RunSettings runSettingsOf(const engine::TrainConfig &config);
// What a run of `settings` will hold and send (engine/plan/run_prediction.h);
// nullopt with `why` (one line) when it cannot be predicted: settings that
// cannot run, a model that cannot be built.
std::optional<engine::plan::RunPrediction> predictionOf(const RunSettings &settings, QString *why);

} // namespace smol::app
