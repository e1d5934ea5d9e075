#include "paused_tensor.h"

#include "app/feed/timeline_feed.h"

#include "engine/breakpoints/breakpoints.h"
#include "engine/cluster/admission.h"
#include "engine/session/session_events.h"
#include "net/dtype.h"

namespace smol::app {

namespace {

// Names and axes reach here from the nodes (a cluster run's RPC) or a file:
// printable and bounded before a label shows them.
constexpr int kMaxNameChars = 200;
QString shown(const std::string &text) { return QString::fromStdString(engine::printableText(text, kMaxNameChars)); }

} // namespace

widgets::PausedTensor pausedTensorOf(const engine::TensorSnapshot &s)
{
    widgets::PausedTensor t;
    t.rank = s.node;
    t.name = shown(s.name);
    t.collective = net::collectiveName(s.kind);
    t.step = s.step;
    t.count = s.count;
    t.before = s.before;
    t.part = QString::fromStdString(engine::partLabel(s));
    t.min = s.stats.min;
    t.max = s.stats.max;
    t.mean = s.stats.mean;
    t.std = s.stats.std;
    t.l2 = s.stats.l2;
    t.nanCount = s.stats.nanCount;
    t.values = QVector<double>(s.values.begin(), s.values.end());
    t.downsampled = QVector<double>(s.downsampled.begin(), s.downsampled.end());
    for (auto h : s.histogram)
        t.histogram.append(h);
    t.histogramMin = s.histogramMin;
    t.histogramMax = s.histogramMax;
    for (auto d : s.shape)
        t.shape.append(d);
    t.bytes = s.count * qint64(net::dtypeSize(s.dtype));
    if (!s.members.empty()) { // a group's collective
        t.axis = shown(s.axis);
        t.members = QVector<int>(s.members.begin(), s.members.end());
        t.tensorName = shown(s.bufferName);
    }
    for (const engine::TensorSnapshot &r : s.related) { // read-only, beside the input (PowerSGD's Q, error)
        t.related.push_back(pausedTensorOf(r));
        t.related.back().rank = s.node;
        t.related.back().collective = t.collective;
    }
    return t;
}

widgets::PauseView pauseViewOf(const engine::PauseState &state)
{
    widgets::PauseView view;
    view.id = state.id;
    view.reason = QString::fromStdString(state.reason);
    view.complete = state.complete;
    view.hitRank = state.hitNode;
    for (const auto &t : state.inputs)
        view.inputs.append(pausedTensorOf(t));
    for (const auto &t : state.results)
        view.results.append(pausedTensorOf(t));
    return view;
}

widgets::PausedTensor pausedTensorOf(const engine::TensorRecord &r)
{
    engine::TensorSnapshot s = engine::snapshotFromJson(r.snapshotJson);
    s.node = r.node;
    s.name = r.name;
    s.kind = r.collective;
    s.seq = r.seq;
    s.step = r.step;
    s.before = r.before;
    return pausedTensorOf(s);
}

widgets::PauseView pauseIfAt(const widgets::PauseView &pause, qint64 step, int collectiveKind)
{
    // The timeline names collectives as timeline_feed does.
    const QString name = collectiveNames().value(collectiveKind);
    for (const widgets::PausedTensor &t : pause.inputs)
        if (t.step == step && t.collective == name)
            return pause;
    return {};
}

} // namespace smol::app
