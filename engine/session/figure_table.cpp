// The figure table (figure_table.h): one line per figure, then how a run's
// value is made of its nodes' and a pause's of its ranks'.
#include "figure_table.h"

#include <algorithm>
#include <cmath>

namespace smol::engine {

namespace {

using Value = std::optional<double>;

template <Value RunFigures::*F>
Value runField(const RunFigures &r)
{
    return r.*F;
}

template <Value NodeFigures::*F>
Value nodeField(const NodeFigures &n)
{
    return n.*F;
}

// The largest of a pause category over the nodes that reported (of `rank`
// alone when it is >= 0); none reported: no value.
template <std::int64_t PauseNodeFigures::*F>
Value pauseLargest(const PauseFigures &p, int rank)
{
    Value most;
    for (const auto &[r, n] : p.byRank)
        if (n.reported && (rank < 0 || r == rank))
            most = std::max(most.value_or(-INFINITY), double(n.*F));
    return most;
}

Value nanRanks(const PauseFigures &p, int rank)
{
    int count = 0;
    for (const auto &[r, n] : p.byRank)
        count += n.nanTensor && (rank < 0 || r == rank) ? 1 : 0;
    return double(count);
}

Value materialisedLayers(const PauseFigures &p, int rank)
{
    int most = 0;
    for (const auto &[r, n] : p.byRank)
        if (n.reported && (rank < 0 || r == rank))
            most = std::max(most, n.materialisedLayers);
    return double(most);
}

// Rank 0's when no rank is named: the tensor the class looks at.
Value tensorBytes(const PauseFigures &p, int rank)
{
    const auto it = p.byRank.find(std::max(rank, 0));
    return double(it != p.byRank.end() ? it->second.tensorBytes : 0);
}

Value pauseStep(const PauseFigures &p, int)
{
    return p.step;
}

Figure run(const char *name, const char *key, const char *label, FigureUnit unit, const char *how,
           Value (*of)(const RunFigures &), const char *missing = nullptr)
{
    return Figure{name, key, label, unit, FigureScope::Run, how, of, nullptr, OverNodes::Mean, nullptr, missing};
}

Figure node(const char *name, const char *key, const char *label, FigureUnit unit, const char *how,
            Value (*of)(const NodeFigures &), OverNodes over)
{
    return Figure{name, key, label, unit, FigureScope::Node, how, nullptr, of, over};
}

// A memory category's largest over each node's samples, then over the nodes:
// compare's rows of what a node held.
Figure largestOverSamples(const char *key, const char *label, Value (*of)(const NodeFigures &))
{
    return node(nullptr, key, label, FigureUnit::Bytes, "largest over the node's samples", of, OverNodes::Largest);
}

Figure pause(const char *name, FigureUnit unit, const char *how, Value (*of)(const PauseFigures &, int),
             const char *missing = nullptr)
{
    return Figure{name, nullptr, name, unit, FigureScope::Pause, how, nullptr, nullptr, OverNodes::Mean, of, missing};
}

const char kNoNode[] = "'pause.%1': no node of rank %2 at this pause";

using U = FigureUnit;
using O = OverNodes;

} // namespace

// A device mesh's bytes per step by axis (lessons' only: not compare's rows).
static std::vector<Figure> meshAxisFigures()
{
    return {
        node("bytes_per_step_dp", nullptr, "bytes sent per step on the dp axis", U::Bytes,
             "a mesh's: bytes_per_step in its dp groups (the gradients' dp x cp group); mean over nodes",
             nodeField<&NodeFigures::dpBytesPerStep>, O::Mean),
        node("bytes_per_step_tp", nullptr, "bytes sent per step on the tp axis", U::Bytes,
             "a mesh's: bytes_per_step in its tp groups; mean over nodes", nodeField<&NodeFigures::tpBytesPerStep>,
             O::Mean),
        node("bytes_per_step_pp", nullptr, "bytes sent per step on the pp axis", U::Bytes,
             "a mesh's: bytes_per_step in its pp groups; mean over nodes", nodeField<&NodeFigures::ppBytesPerStep>,
             O::Mean),
        node("bytes_per_step_cp", nullptr, "bytes sent per step on the cp axis", U::Bytes,
             "a mesh's: bytes_per_step in its cp groups (K/V ring); mean over nodes",
             nodeField<&NodeFigures::cpBytesPerStep>, O::Mean)
    };
}

// A run's figures.
static std::vector<Figure> runFigures()
{
    return {
    run(nullptr, "steps", "steps", U::Count, "distinct step numbers among the step spans",
        runField<&RunFigures::steps>),
    run(nullptr, "step_time_median_s", "step time, median", U::Seconds,
        "per step, the earliest node's start to the latest node's end; the median",
        runField<&RunFigures::stepTimeMedianS>),
    run(nullptr, "step_time_p95_s", "step time, p95", U::Seconds, "the same, 95th percentile (nearest rank)",
        runField<&RunFigures::stepTimeP95S>),
    run("samples_per_s", "samples_per_s", "samples/s", U::PerSecond, "training samples per second of the run",
        runField<&RunFigures::samplesPerS>),
    run("final_loss", "final_loss", "final loss", U::Plain, "the last step's loss", runField<&RunFigures::finalLoss>),
    run("test_accuracy", "test_accuracy", "test accuracy", U::Share,
        "the final parameters on the held-out set", runField<&RunFigures::testAccuracy>),
    run("bubble", "bubble", "pipeline bubble", U::Share,
        "pipeline runs: the share of a step a stage waits, mean over stages", runField<&RunFigures::bubble>,
        "'%1' is measured by pipeline runs only"),
    run("seconds", nullptr, "wall time", U::Seconds, "the run's wall time", runField<&RunFigures::seconds>),
    run("step_time", nullptr, "step time, mean", U::Seconds, "wall time over steps",
        runField<&RunFigures::meanStepTimeS>),
    run("max_staleness", nullptr, "largest staleness", U::Count, "edp: the stalest push the server applied",
        runField<&RunFigures::maxStaleness>),
    run("updates", nullptr, "updates", U::Count, "edp: updates the server applied", runField<&RunFigures::updates>),
    run("nan_params", nullptr, "NaN parameters", U::Count, "1 when a parameter or the loss ended NaN, else 0",
        runField<&RunFigures::nanParams>),
    };
}

// A node's (a lesson without @R: over the nodes).
static std::vector<Figure> nodeFigures()
{
    return {
    node("bytes_per_step", "bytes_sent_per_step", "bytes sent per step", U::Bytes,
         "payload bytes the node sent inside its steps, over its steps; mean over nodes",
         nodeField<&NodeFigures::bytesSentPerStep>, O::Mean),
    node("bytes_per_step_max", nullptr, "bytes sent per step, busiest node", U::Bytes,
         "the same, the busiest node's", nodeField<&NodeFigures::bytesSentPerStep>, O::Largest),
    node(nullptr, "bytes_sent", "bytes sent, whole run", U::Bytes, "every send frame of the node",
         nodeField<&NodeFigures::bytesSent>, O::Mean),
    node("idle_share", "idle_share", "idle share", U::Share,
         "1 - time computing / its first step's start to its last step's end; mean over nodes",
         nodeField<&NodeFigures::idleShare>, O::Mean),
    node("idle_share_max", nullptr, "idle share, most idle node", U::Share, "the same, the largest",
         nodeField<&NodeFigures::idleShare>, O::Largest),
    node("idle_share_min", nullptr, "idle share, least idle node", U::Share, "the same, the smallest",
         nodeField<&NodeFigures::idleShare>, O::Smallest),
    node("model_states", "memory_held_at_step_end", "params+grads+optimizer at step end", U::Bytes,
         "params + grads + optimizer held at a step's end; largest over nodes",
         nodeField<&NodeFigures::heldAtStepEnd>, O::Largest),
    largestOverSamples("memory_params", "params, largest", nodeField<&NodeFigures::params>),
    largestOverSamples("memory_grads", "grads, largest", nodeField<&NodeFigures::grads>),
    largestOverSamples("memory_optimizer", "optimizer, largest", nodeField<&NodeFigures::optimizer>),
    largestOverSamples("memory_activations", "activations, largest", nodeField<&NodeFigures::activations>),
    largestOverSamples("memory_comm", "comm, largest", nodeField<&NodeFigures::comm>),
    node(nullptr, "memory_peak", "peak live", U::Bytes, "the allocator's peak, largest over the node's samples",
         nodeField<&NodeFigures::peak>, O::Largest),
    node("params", nullptr, "params at the end", U::Bytes, "held at the end of the last step; largest over nodes",
         nodeField<&NodeFigures::paramsAtEnd>, O::Largest),
    node("grads", nullptr, "grads at the end", U::Bytes, "held at the end of the last step; largest over nodes",
         nodeField<&NodeFigures::gradsAtEnd>, O::Largest),
    node("optimizer", nullptr, "optimizer at the end", U::Bytes,
         "held at the end of the last step; largest over nodes", nodeField<&NodeFigures::optimizerAtEnd>,
         O::Largest),
    node("activations", nullptr, "activations at the end", U::Bytes,
         "at the end of the last step; largest over nodes", nodeField<&NodeFigures::activationsAtEnd>,
         O::Largest),
    node("activation_peak", nullptr, "activations, most", U::Bytes,
         "the most activations at any collective boundary or step end; largest over nodes",
         nodeField<&NodeFigures::activationPeak>, O::Largest),
    node("compute_s", nullptr, "seconds computing", U::Seconds,
         "in forward, backward and optimizer spans, not in a collective or pause; mean over nodes",
         nodeField<&NodeFigures::computeSeconds>, O::Mean),
    };
}

// At a pause ("pause.X").
static std::vector<Figure> pauseFigures()
{
    return {
    pause("nan_ranks", U::Count, "ranks whose tensors at the collective hold a NaN", nanRanks),
    pause("materialised_layers", U::Count, "layers a node holds in full; the most over nodes",
          materialisedLayers),
    pause("params", U::Bytes, "held at the pause; largest over nodes", pauseLargest<&PauseNodeFigures::params>,
          kNoNode),
    pause("grads", U::Bytes, "held at the pause; largest over nodes", pauseLargest<&PauseNodeFigures::grads>,
          kNoNode),
    pause("optimizer", U::Bytes, "held at the pause; largest over nodes",
          pauseLargest<&PauseNodeFigures::optimizer>, kNoNode),
    pause("activations", U::Bytes, "at the pause; largest over nodes",
          pauseLargest<&PauseNodeFigures::activations>, kNoNode),
    pause("comm", U::Bytes, "comm buffers at the pause; largest over nodes", pauseLargest<&PauseNodeFigures::comm>,
          kNoNode),
    pause("live", U::Bytes, "all a node allocated at the pause; largest over nodes",
          pauseLargest<&PauseNodeFigures::live>, kNoNode),
    pause("tensor_bytes", U::Bytes, "float32 bytes of rank 0's tensors entering the collective", tensorBytes),
    pause("step", U::Count, "the held collective's step", pauseStep),
    };
}

const std::vector<Figure> &figureTable()
{
    static const std::vector<Figure> table = [] {
        std::vector<Figure> t;
        for (auto part : {runFigures, nodeFigures, pauseFigures, meshAxisFigures})
            for (Figure &f : part())
                t.push_back(std::move(f));
        return t;
    }();
    return table;
}

const Figure *lessonFigure(std::string_view name, bool atPause)
{
    for (const Figure &f : figureTable())
        if (f.name && name == f.name && (f.scope == FigureScope::Pause) == atPause)
            return &f;
    return nullptr;
}

std::optional<double> Figure::of(const RunFigures &run, int rank) const
{
    if (scope == FigureScope::Run)
        return ofRun ? ofRun(run) : std::nullopt;
    if (scope != FigureScope::Node || !ofNode)
        return std::nullopt;
    if (rank >= 0) {
        const auto it = run.byNode.find(rank);
        return it != run.byNode.end() ? ofNode(it->second) : std::nullopt;
    }
    // Over the nodes in rank order (a mean sums them in that order).
    double acc = over == OverNodes::Mean ? 0 : over == OverNodes::Largest ? -INFINITY : INFINITY;
    int count = 0;
    for (const auto &[r, n] : run.byNode) {
        const Value v = ofNode(n);
        if (!v)
            continue;
        acc = over == OverNodes::Mean ? acc + *v : over == OverNodes::Largest ? std::max(acc, *v) : std::min(acc, *v);
        ++count;
    }
    if (count == 0)
        return std::nullopt;
    return over == OverNodes::Mean ? acc / double(count) : acc;
}

std::optional<double> Figure::of(const PauseFigures &p, int rank) const
{
    return scope == FigureScope::Pause && ofPause ? ofPause(p, rank) : std::nullopt;
}

} // namespace smol::engine
