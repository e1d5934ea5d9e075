#include "paused_tensor.h"

#include "engine/breakpoints/breakpoints.h"
#include "net/dtype.h"

namespace smol::app {

widgets::PausedTensor pausedTensorOf(const engine::TensorSnapshot &s)
{
    widgets::PausedTensor t;
    t.rank = s.node;
    t.name = QString::fromStdString(s.name);
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
    return t;
}

widgets::PauseView pauseViewOf(const engine::PauseState &state)
{
    widgets::PauseView view;
    view.id = state.id;
    view.reason = QString::fromStdString(state.reason);
    view.complete = state.complete;
    for (const auto &t : state.inputs)
        view.inputs.append(pausedTensorOf(t));
    for (const auto &t : state.results)
        view.results.append(pausedTensorOf(t));
    return view;
}

} // namespace smol::app
