// The figures a run or a pause is measured by, one entry each: its name, its
// unit, and how it is measured. The lesson parser accepts a measure's names
// from it, the lesson runner values them with it (app/lessons), and
// `smolctl compare` and the window's compare table take their rows from it
// (session_compare.h). A new figure is one entry in figure_table.cpp and, if
// no source fills it yet, one field below.
//
// Each source fills the plain structs below its own way: smolctl compare
// from a session file's events (measureRun), a lesson from the engine's
// measurement of a finished run and from the cluster held at a pause. A
// field a source cannot fill stays nullopt and the figure has no value there
// (compare shows "—"; a lesson says why).
//
// Qt Core only; no LibTorch.
#pragma once

#include <QJsonValue>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace smol::engine {

// One node's figures in one run; nullopt: the run has nothing to measure it by.
struct NodeFigures {
    std::optional<double> bytesSentPerStep;
    std::optional<double> bytesSent;
    // A device mesh's run: the same by axis (the mesh's axes above 1).
    std::optional<double> dpBytesPerStep, tpBytesPerStep, ppBytesPerStep, cpBytesPerStep;
    std::optional<double> idleShare;     // 0..1
    std::optional<double> heldAtStepEnd; // params + grads + optimizer at step end
    std::optional<double> params, grads, optimizer, activations, comm, peak; // largest over all samples
    // A lesson's run, measured by the engine: memory at the end of its last
    // step, the most activations at any boundary, seconds computing.
    std::optional<double> paramsAtEnd, gradsAtEnd, optimizerAtEnd, activationsAtEnd;
    std::optional<double> activationPeak;
    std::optional<double> computeSeconds;
};

// What one run measured.
struct RunFigures {
    std::string strategy, model;
    int nodes = 0;
    std::int64_t stepsPlanned = 0;
    bool complete = true; // has the end marker (set by the reader overload)
    // The configuration, flattened: header fields, then config_json's keys
    // ("optimizer.lr", "behaviour[3].slowdown"), then "node[r].name|host|role".
    std::map<std::string, QJsonValue> config;

    std::optional<double> steps;
    std::optional<double> stepTimeMedianS, stepTimeP95S;
    std::optional<double> samplesPerS;
    std::optional<double> finalLoss, testAccuracy;
    std::optional<double> bubble; // pipeline runs only
    // A lesson's run: wall seconds, their mean per step, edp's server, and
    // whether any parameter ended NaN (1) or not (0).
    std::optional<double> seconds, meanStepTimeS;
    std::optional<double> maxStaleness, updates;
    std::optional<double> nanParams;
    std::map<std::int64_t, double> lossByStep;
    std::map<int, NodeFigures> byNode; // by rank
};

// The cluster held at a pause, by rank: what the nodes reported holding and
// the tensors entering (or leaving) the held collective.
struct PauseNodeFigures {
    bool reported = false; // the node's snapshot is at hand (memory, layers)
    std::int64_t params = 0, grads = 0, optimizer = 0, activations = 0, comm = 0, live = 0;
    int materialisedLayers = 0; // layers held in full
    bool nanTensor = false;     // one of its tensors holds a NaN
    std::int64_t tensorBytes = 0; // float32 bytes of its tensors entering the collective
};
struct PauseFigures {
    std::map<int, PauseNodeFigures> byRank;
    std::optional<double> step; // the held collective's step
};

enum class FigureUnit { Count, Seconds, PerSecond, Bytes, Share, Plain };
enum class FigureScope { Run, Node, Pause };
// A node figure for a whole run, when a lesson names no rank.
enum class OverNodes { Mean, Largest, Smallest };

struct Figure {
    const char *name;       // a lesson's measure ("bytes_per_step", "pause.X"); null: compare's only
    const char *compareKey; // smolctl compare's JSON key; null: lessons' only
    const char *label;      // compare's table
    FigureUnit unit;
    FigureScope scope;
    const char *how;        // how it is measured (docs/session-format.md §9, docs/lessons.md)
    std::optional<double> (*ofRun)(const RunFigures &) = nullptr;
    std::optional<double> (*ofNode)(const NodeFigures &) = nullptr;
    OverNodes over = OverNodes::Mean;
    std::optional<double> (*ofPause)(const PauseFigures &, int rank) = nullptr;
    // Why a lesson gets no value ("%1": the name, "%2": the rank); null:
    // "not known here".
    const char *missing = nullptr;

    // Run and node figures of a run: rank >= 0 that node's value, else the
    // run's (a node figure `over` its nodes). Pause figures at a pause, of
    // `rank` (-1: as the figure says). nullopt: no value.
    std::optional<double> of(const RunFigures &run, int rank = -1) const;
    std::optional<double> of(const PauseFigures &pause, int rank = -1) const;
};

// Every figure, compare's rows in their table order.
const std::vector<Figure> &figureTable();
// A lesson's figure by name: a run's or a node's (pause false), or a pause's
// (the name without "pause."); null when there is none.
const Figure *lessonFigure(std::string_view name, bool pause);

} // namespace smol::engine
