#include "viewer_feed.h"

#include "app/bridge/live_sink.h"
#include "app/bridge/node_states.h"
#include "app/bridge/paused_tensor.h"
#include "app/bridge/run_plan.h"
#include "app/feed/timeline_feed.h"

#include "engine/cluster/config_json.h"
#include "engine/cluster/viewer_client.h"

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QPointer>
#include <QTimer>

#include <map>
#include <mutex>

namespace smol::app {

namespace {

constexpr int kPublishMs = 34; // at most 30 snapshots a second

// On the GUI thread, unless the feed has gone meanwhile.
template <typename F> void onGui(const QPointer<ViewerFeed> &feed, F f)
{
    QMetaObject::invokeMethod(
        QCoreApplication::instance(),
        [feed, f = std::move(f)]() mutable {
            if (feed)
                f(*feed);
        },
        Qt::QueuedConnection);
}

// The coordinator's record of a node as the live bridge holds it.
engine::ClusterNode clusterNodeOf(const engine::ViewerNode &v)
{
    engine::ClusterNode n;
    n.id = v.id;
    n.name = v.name;
    n.host = v.host;
    n.rank = v.rank;
    n.state = v.state == "running" ? engine::ClusterNode::State::Running
              : v.state == "lost"  ? engine::ClusterNode::State::Lost
                                   : engine::ClusterNode::State::Idle;
    if (n.state == engine::ClusterNode::State::Lost)
        n.lostReason = v.reason;
    else
        n.lastError = v.reason;
    return n;
}

} // namespace

struct ViewerFeed::Private {
    std::unique_ptr<engine::ViewerClient> client;
    QString address;
    int node = -1;
    LiveSink sink;
    NodeEmulation emulation; // a viewer emulates nothing: no limits drawn
    QTimer timer;

    // The run, as its header and configuration say.
    engine::SessionHeader header;
    RunPlan plan;
    QString strategy, mesh;
    bool gloo = false;
    std::int64_t steps = 0;
    std::int64_t lastStep = -1;
    bool running = false;
    std::vector<engine::ClusterNode> nodes;
    std::map<std::int64_t, double> samplesPerS; // by step, until its loss arrives

    // The teacher's coordinator's clock, estimated: the newest batch's end
    // plus the time since it arrived.
    std::int64_t clockBase = 0;
    QElapsedTimer sinceBatch;
    std::int64_t now() const { return clockBase + (sinceBatch.isValid() ? sinceBatch.nsecsElapsed() : 0); }

    bool held = false;
    PauseView pause;  // the newest pause's tensors (id 0: none)
    bool dirty = true;
    bool aggregated = false;
    QJsonObject lesson;
    widgets::ClusterStatePtr lastState;
};

ViewerFeed::ViewerFeed(QObject *parent) : RunFeed(parent), d(std::make_unique<Private>())
{
    d->timer.setInterval(kPublishMs);
    connect(&d->timer, &QTimer::timeout, this, &ViewerFeed::publish);
}

ViewerFeed::~ViewerFeed()
{
    d->client.reset(); // joins the reader: no handler runs after this
}

bool ViewerFeed::connectTo(const engine::ViewerClientOptions &options, QString *error)
{
    close();
    QPointer<ViewerFeed> self(this);
    engine::ViewerClient::Handlers h;
    h.run = [self](const engine::SessionHeader &header, const QJsonObject &config) {
        onGui(self, [header, config](ViewerFeed &f) { f.onRun(header, config); });
    };
    h.nodes = [self](const std::vector<engine::ViewerNode> &nodes) {
        onGui(self, [nodes](ViewerFeed &f) { f.onNodes(nodes); });
    };
    h.lesson = [self](const QJsonObject &lesson) {
        onGui(self, [lesson](ViewerFeed &f) {
            f.d->lesson = lesson;
            Q_EMIT f.lessonChanged(lesson);
        });
    };
    h.pause = [self](bool held) { onGui(self, [held](ViewerFeed &f) { f.onPause(held); }); };
    h.events = [self](engine::ViewerBatch &batch) {
        auto shared = std::make_shared<engine::ViewerBatch>(std::move(batch));
        onGui(self, [shared](ViewerFeed &f) { f.onEvents(*shared); });
    };
    h.end = [self](bool ok, const std::string &summary) {
        onGui(self, [ok, s = QString::fromStdString(summary)](ViewerFeed &f) { f.onEnd(ok, s); });
    };
    h.closed = [self](const std::string &reason) {
        onGui(self, [r = QString::fromStdString(reason)](ViewerFeed &f) { f.onClosed(r); });
    };
    try {
        d->client = std::make_unique<engine::ViewerClient>(options, std::move(h));
    } catch (const std::exception &e) {
        if (error)
            *error = QString::fromUtf8(e.what()).simplified();
        return false;
    }
    d->address = QStringLiteral("%1:%2").arg(QString::fromStdString(options.host)).arg(options.port);
    d->node = options.node;
    d->timer.start();
    return true;
}

void ViewerFeed::close()
{
    d->timer.stop();
    d->client.reset();
}

bool ViewerFeed::isOpen() const { return d->client && d->client->isOpen(); }
QString ViewerFeed::address() const { return d->address; }
int ViewerFeed::ownNode() const { return d->node; }
QJsonObject ViewerFeed::lesson() const { return d->lesson; }
bool ViewerFeed::isAggregated() const { return d->aggregated; }
std::int64_t ViewerFeed::budgetBytesPerSecond() const { return d->client ? d->client->budgetBytesPerSecond() : 0; }
std::uint64_t ViewerFeed::bytesReceived() const { return d->client ? d->client->bytesReceived() : 0; }

bool ViewerFeed::sendPrediction(int step, double value)
{
    return d->client && d->client->sendPrediction(step, value);
}

widgets::ClusterStatePtr ViewerFeed::state() const { return d->lastState; }
bool ViewerFeed::isRunning() const { return d->running; }
bool ViewerFeed::isPaused() const { return d->held; }

PauseView ViewerFeed::pauseAt(qint64 step, int collectiveKind, quint64 /*seq*/) const
{
    return pauseIfAt(d->pause, step, collectiveKind);
}

void ViewerFeed::onRun(const engine::SessionHeader &header, const QJsonObject &config)
{
    d->sink.reset();
    d->header = header;
    d->strategy = QString::fromStdString(header.strategy);
    d->steps = header.steps;
    d->mesh = config.value(QStringLiteral("mesh")).toString();
    d->gloo = config.value(QStringLiteral("backend")).toString() == QLatin1String("gloo");
    d->plan = {};
    try {
        d->plan = planRun(engine::configFromJson(config));
    } catch (const std::exception &) {
        // A config this build cannot read: no shard map, no formula (as a replay).
    }
    d->lastStep = -1;
    d->samplesPerS.clear();
    d->pause = {};
    d->held = false;
    d->running = true;
    d->dirty = true;
    if (std::exchange(d->aggregated, false))
        Q_EMIT aggregatedChanged(false);
    Q_EMIT runStarted(tr("%1 on %2 nodes, %3 steps: the teacher's run at %4")
                          .arg(d->strategy)
                          .arg(header.nodes)
                          .arg(header.steps)
                          .arg(d->address));
}

void ViewerFeed::onNodes(const std::vector<engine::ViewerNode> &nodes)
{
    d->nodes.clear();
    for (const engine::ViewerNode &v : nodes)
        d->nodes.push_back(clusterNodeOf(v));
    d->dirty = true;
}

void ViewerFeed::onEvents(const engine::ViewerBatch &batch)
{
    d->clockBase = std::max(d->clockBase, batch.t1);
    d->sinceBatch.restart();
    if (batch.aggregated && !d->aggregated) { // said until the next run: the timeline lacks its packets
        d->aggregated = true;
        Q_EMIT aggregatedChanged(true);
    }
    for (const engine::LinkAggregate &l : batch.links)
        d->sink.addLinkBytes(l.src, l.dst, l.bytes, batch.t1);
    for (const net::FrameEvent &e : batch.events.frames)
        d->sink.onFrame(e);
    for (const engine::SpanEvent &s : batch.events.spans)
        d->sink.onSpan(s);
    for (const engine::MemorySample &m : batch.events.memory)
        d->sink.onMemory(m);
    for (const engine::LogLine &l : batch.events.logs) {
        const QString text = QString::fromStdString(l.text);
        Q_EMIT logLine(l.node < 0 ? text : QStringLiteral("[node %1] %2").arg(l.node).arg(text));
    }
    onMetrics(batch);
    onTensors(batch);
}

// The charts' points from the cluster-wide metrics, as the replay makes them.
void ViewerFeed::onMetrics(const engine::ViewerBatch &batch)
{
    std::vector<widgets::StepPoint> points;
    for (const engine::MetricSample &m : batch.events.metrics) {
        if (m.node != -1)
            continue; // per-node losses: the charts show the cluster's
        if (m.name == "loss") {
            widgets::StepPoint p;
            p.step = m.step;
            p.seconds = double(m.tNs - d->header.startNs) / 1e9;
            p.loss = m.value;
            std::vector<double> sent(std::size_t(std::max(0, d->header.nodes)), 0.0);
            for (const auto &[rank, bytes] : d->sink.traffic(m.tNs).sentPerSecond)
                if (rank >= 0 && std::size_t(rank) < sent.size())
                    sent[std::size_t(rank)] = bytes;
            p.bytesPerSecondPerNode = QVector<double>(sent.begin(), sent.end());
            points.push_back(p);
            d->lastStep = std::max(d->lastStep, m.step);
            d->dirty = true;
        } else if (m.name == "samples_per_s") {
            d->samplesPerS[m.step] = m.value;
        } else if (m.name == "test_loss") {
            Q_EMIT testLossAvailable(m.step, m.value);
        } else if (m.name == "test_accuracy") {
            Q_EMIT testAccuracyAvailable(m.step, m.value);
        }
    }
    for (widgets::StepPoint &p : points) {
        if (const auto it = d->samplesPerS.find(p.step); it != d->samplesPerS.end())
            p.samplesPerSecond = it->second;
        Q_EMIT stepAvailable(p);
    }
    // A rate whose loss came in an earlier batch has missed its point.
    while (!d->samplesPerS.empty() && d->samplesPerS.begin()->first <= d->lastStep - 2)
        d->samplesPerS.erase(d->samplesPerS.begin());
}

// A pause's tensors (engine::recordPause on the teacher's side): the
// inspector shows them, as the live pause's.
void ViewerFeed::onTensors(const engine::ViewerBatch &batch)
{
    if (batch.events.tensors.empty())
        return;
    for (const engine::TensorRecord &r : batch.events.tensors) {
        if (r.pauseId != d->pause.id) {
            d->pause = {};
            d->pause.id = r.pauseId;
            d->pause.reason = tr("the teacher's pause");
            d->pause.complete = true;
        }
        (r.before ? d->pause.inputs : d->pause.results).append(pausedTensorOf(r));
    }
    d->held = true;
    d->dirty = true;
    Q_EMIT pausedAt(d->pause);
}

void ViewerFeed::onPause(bool held)
{
    if (held == d->held)
        return;
    d->held = held;
    d->dirty = true;
    if (held) {
        if (d->pause.id != 0)
            Q_EMIT pausedAt(d->pause);
        return;
    }
    d->pause = {}; // the next pause brings its own tensors
    Q_EMIT pauseEnded();
}

void ViewerFeed::onEnd(bool ok, const QString &summary)
{
    if (d->held)
        onPause(false);
    d->running = false;
    d->dirty = true;
    publish();
    if (ok)
        Q_EMIT runFinished(summary);
    else
        Q_EMIT runFailed(summary);
}

void ViewerFeed::onClosed(const QString &reason)
{
    const QString line = tr("the teacher's stream at %1 ended: %2").arg(d->address, reason);
    d->running = false;
    d->dirty = true;
    publish();
    Q_EMIT logLine(line);
    Q_EMIT errorOccurred(line);
    Q_EMIT closed(reason);
}

void ViewerFeed::publish()
{
    const std::int64_t now = d->now();
    publishTimeline(now);
    const bool dirty = d->sink.takeDirty() || d->dirty;
    if (!dirty && !d->running)
        return; // nothing new, and no traffic window to slide
    d->dirty = false;
    auto state = std::make_shared<widgets::ClusterState>();
    state->strategy = d->strategy;
    state->topology = topologyOf(d->strategy);
    state->mesh = d->mesh;
    state->step = d->lastStep;
    state->steps = d->steps;
    state->current = d->held ? d->pause.step() : -1;
    state->shards = d->plan.shards;
    state->shardColumns = d->plan.columns;
    state->linksKnown = !d->gloo;
    const LiveSink::Traffic traffic = d->sink.traffic(now);
    const NodeFacts facts{d->sink.memory(), d->sink.stepPeaks(), traffic, d->emulation, d->plan.predicted,
                          d->gloo,          d->held,            false};
    for (const engine::ClusterNode &n : d->nodes) {
        widgets::NodeState ns = nodeStateOf(n, state->strategy, facts);
        ns.you = n.id == d->node;
        state->nodes.append(ns);
    }
    state->links = linkStatesOf(traffic, state->nodes, d->emulation);
    d->lastState = state;
    Q_EMIT stateChanged(state);
}

// What the timeline gained, in its words; while the run goes on also the
// clock alone, so packets in flight keep moving.
void ViewerFeed::publishTimeline(std::int64_t nowNs)
{
    std::vector<net::FrameEvent> frames;
    std::vector<engine::SpanEvent> spans;
    std::vector<engine::MemorySample> memory;
    d->sink.takeTimeline(frames, spans, memory);
    if (frames.empty() && spans.empty() && memory.empty() && !d->running)
        return;
    const TimelineBatch b = toTimeline(frames, spans, memory, d->gloo);
    Q_EMIT timelineEvents(b.frames, b.spans, b.memory, nowNs);
}

} // namespace smol::app
