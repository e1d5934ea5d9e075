// Whether the run settings can run, checked before Start from what the
// window knows (the models' layer counts): a pipeline needs a layer per
// stage (one stage per node) and micro-batches that divide the global
// batch; tensor parallelism splits the gpt. A problem says why in one line
// and offers the settings that fix it ("Use 3 nodes", "Use the gpt"), so
// a class never waits for a run that fails in its first second. A mesh
// ("dp=2,tp=2,pp=2") is checked as the engine checks it (its product is
// the node count; the dp axis runs ddp, zero1 or zero2; tp and cp need the
// gpt), with the mesh named in the line.
//
// No widgets; tests table it.
#pragma once

#include "engine_controller.h" // RunSettings

#include <QString>
#include <QVector>

#include <functional>
#include <optional>

namespace smol::app {

struct RunFix {
    QString label;        // the button: "Use 3 nodes"
    RunSettings settings; // what pressing it sets
};

struct RunProblem {
    QString text; // one line
    QVector<RunFix> fixes;
};

// `layerCount(model)`: the model's pipeline layers (0 when unknown).
std::optional<RunProblem> checkRun(const RunSettings &s,
                                   const std::function<int(const QString &)> &layerCount);

} // namespace smol::app
