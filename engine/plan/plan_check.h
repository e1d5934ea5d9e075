// `smolctl plan --check`: the predicted figures of run_prediction.h beside
// the ones a real in-process run measures, and their ratio.
//
// Measured, per node:
//   model states: params, grads and optimizer at the end of the last step
//     (TrainSummary::memoryPerNode): what the closed forms call "held
//     between steps" (zero2's gradient shard, zero3's shards);
//   activations: the largest of the step's peaks over the steps (the
//     step-peak memory samples: each category at its largest at the step's
//     probes, the end of every forward among them);
//   bytes: payload bytes the node sent inside its steps (sends before the
//     end of its last step: nothing is sent between steps of a run without
//     --test-every, and the final parameter gathers come after), divided by
//     the steps; a mesh's split by axis as DeviceMesh::byAxis splits them.
// Model states and bytes pass within 5% (kTolerance); the activations'
// error is printed and never fails the check.
//
// No LibTorch here.
#pragma once

#include "run_prediction.h"

#include "net/memory_by_category.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace smol::engine::plan {

constexpr double kTolerance = 0.05;

// What a run measured, by rank.
struct MeasuredRun {
    std::int64_t steps = 0;
    std::vector<net::MemoryByCategory> heldAtEnd;
    std::vector<std::int64_t> peakActivations;
    std::vector<double> bytesPerStep;
    std::vector<std::map<std::string, double>> bytesByAxis; // a mesh's axes above 1
};

struct FigureCheck {
    std::string figure; // "model states (rank 0)"
    double predicted = 0;
    double measured = 0;
    bool checked = true; // false: printed only (the activations)
    // measured / predicted (1 when both are 0).
    double ratio() const;
    bool off() const; // checked and further than kTolerance from 1
};

// Runs `config` in process (runTraining) and measures it. Throws what
// runTraining throws.
MeasuredRun measureRun(const TrainConfig &config);

// One FigureCheck per figure both sides have, by rank: params, grads,
// optimizer, model states, activations, bytes a step and each axis's.
std::vector<FigureCheck> compareRun(const RunPrediction &predicted, const MeasuredRun &measured);

// The same figures before a run: compareRun's rows with nothing measured
// (measured 0), for the window's Plan page.
std::vector<FigureCheck> predictedFigures(const RunPrediction &predicted);

// "model states (rank 0)      predicted   1.234 MiB   measured   1.234 MiB   ratio 1.000   ok"
std::string checkLine(const FigureCheck &f);

} // namespace smol::engine::plan
