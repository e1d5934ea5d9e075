// EngineController: the live cluster as a RunFeed. The life of one run:
//
//   1. start(): a second run is refused; the settings become a training
//      configuration (run_config.h) whose ranks go to the first idle nodes
//      in join order (idleNodesFor), with the slowdowns and links the user
//      set for those nodes (NodeEmulation); the engine validates it.
//   2. openRecorder(): a session file, when one is asked for.
//   3. resetForRun(): the previous run's picture goes, the sink forwards
//      to the recorder, the breakpoints expect the run's nodes; runStarted.
//   4. runOnThread(), on the run thread: the run's plan (shard map, ZeRO
//      formulas), then the coordinator's run() reporting to a StepObserver.
//      Meanwhile publish() turns what the sink and the observer gathered
//      into a snapshot at most 30 times a second, on the GUI thread.
//   5. endRun(), back on the GUI thread: the last snapshot, then runStopped
//      (the user's Stop), runFailed, or runMeasured and runFinished.
//
// Pauses arrive from the breakpoint controller's callback on a node's
// thread: recorded, then shown (pausedAt) on the GUI thread.
#include "engine_controller.h"
#include "live_sink.h"
#include "local_nodes.h"
#include "node_emulation.h"
#include "node_states.h"
#include "paused_tensor.h"
#include "queued_emit.h"
#include "run_config.h"
#include "run_measurement.h"
#include "run_plan.h"
#include "run_progress.h"
#include "step_observer.h"
#include "app/feed/timeline_feed.h"

#include "engine/breakpoints/breakpoint_spec.h"
#include "engine/breakpoints/breakpoints.h"
#include "engine/cluster/config_json.h"
#include "engine/cluster/coordinator.h"
#include "engine/memory_tracker.h"
#include "engine/models/model.h"
#include "engine/placement.h"
#include "engine/session/session_recorder.h"
#include "engine/strategy.h"
#include "engine/trainer.h"
#include "net/trace.h"

#include <QHostAddress>
#include <QNetworkInterface>
#include <QRandomGenerator>
#include <QTimer>

#include <algorithm>
#include <atomic>
#include <map>
#include <stdexcept>
#include <thread>

namespace smol::app {

using engine::ClusterNode;

namespace {

constexpr int kPublishMs = 34; // at most 30 snapshots a second

// The model the placement editor shows (the gpt at the vocabulary of the
// window's character corpus).
std::unique_ptr<engine::TrainModel> modelFor(const QString &model)
{
    engine::ModelConfig mc;
    mc.kind = model.toStdString();
    if (mc.kind == "gpt")
        mc.vocabSize = 96;
    return engine::makeModel(mc);
}

} // namespace

struct EngineController::Private {
    ClusterOptions cluster;
    engine::CoordinatorOptions options;
    std::unique_ptr<engine::Coordinator> coordinator;
    std::unique_ptr<LocalNodes> locals; // after the coordinator: gone before it
    std::atomic<bool> stopRequested{false};
    engine::BreakpointController breakpoints;
    LiveSink sink;
    std::unique_ptr<engine::SessionRecorder> recorder;
    std::thread runThread;
    std::atomic<bool> running{false};
    NodeEmulation emulation; // GUI thread only
    RunProgress progress;    // the run thread's reports, under its mutex
    // GUI thread only: what the last snapshot showed, to publish on change.
    widgets::ClusterStatePtr lastState;
    bool lastPaused = false;
    bool lastRunning = false;
    std::size_t lastNodeCount = 0;
    PauseView pause; // the run's newest pause (id 0: none yet)
    std::int64_t heldStep = -1; // its collective's step while the run is held there (-1: not held)

    // What the shard map and the memory view's formula bars show for a run:
    // who owns which range of each parameter (as the strategy cuts it), and
    // params + grads + optimizer state per node by the ZeRO paper's formulas.
    void plan(const engine::TrainConfig &c)
    {
        RunPlan p = planRun(c);
        std::lock_guard lock(progress.mutex);
        progress.shards = std::move(p.shards);
        progress.predicted = p.predicted;
        progress.shardColumns = std::move(p.columns);
        progress.dirty = true;
    }
};

// How a run ended, carried from the run thread to the GUI thread.
struct EngineController::RunEnd {
    QString summary, failure;
    RunMeasurement measured;
    double accuracy = -1;
    std::int64_t steps = 0;
    bool stopped = false;
    QString stoppedAt;
};

EngineController::EngineController(int localNodes, QObject *parent)
    : EngineController(ClusterOptions{localNodes, 0, QString(), QString()}, parent)
{
}

EngineController::EngineController(const ClusterOptions &cluster, QObject *parent)
    : RunFeed(parent), d(std::make_unique<Private>())
{
    qRegisterMetaType<RunSettings>();
    qRegisterMetaType<RunMeasurement>();
    qRegisterMetaType<ClassPrediction>();
    engine::memory::install();
    d->cluster = cluster;
    d->options.bindAddress = cluster.bindAddress.toStdString();
    d->options.port = cluster.port;
    d->options.token = !cluster.token.isEmpty()
                           ? cluster.token.toStdString()
                           : (QString::number(QRandomGenerator::system()->generate64(), 36) +
                              QString::number(QRandomGenerator::system()->generate64(), 36))
                                 .toStdString();
    d->cluster.token = QString::fromStdString(d->options.token);
    d->options.watchToken = cluster.watchToken.toStdString();
    try {
        d->coordinator = std::make_unique<engine::Coordinator>(d->options);
    } catch (const std::exception &e) {
        throw std::runtime_error(cluster.port ? "cannot listen on port " + std::to_string(cluster.port) + ": " + e.what()
                                              : std::string("cannot start the coordinator: ") + e.what());
    }
    QPointer<EngineController> self(this);
    d->coordinator->setLogSink(
        [self](const std::string &line) { emitQueued(self, &RunFeed::logLine, QString::fromStdString(line)); });
    d->breakpoints.setPausedCallback([this, self](std::shared_ptr<const engine::PauseState> state) {
        // A recording keeps the pause's tensors (the sink forwards them to the recorder, if any).
        engine::recordPause(*state, d->sink, net::monotonicNs());
        if (engine::SessionEventSink *viewers = d->coordinator->viewerEvents()) // students see the tensors too
            engine::recordPause(*state, *viewers, net::monotonicNs());
        const PauseView view = pauseViewOf(*state);
        QMetaObject::invokeMethod(
            QCoreApplication::instance(),
            [self, view] {
                if (!self)
                    return;
                self->d->pause = view;
                self->d->heldStep = view.step();
                Q_EMIT self->pausedAt(view);
            },
            Qt::QueuedConnection);
    });
    d->coordinator->setPredictionSink([self](const engine::Prediction &p) {
        const ClassPrediction c{p.viewer, QString::fromStdString(p.name), p.node, p.step, p.value};
        emitQueued(self, &EngineController::predictionReceived, c);
    });
    d->coordinator->setGatheredSink([this](int rank, const std::vector<std::string> &params) {
        std::lock_guard lock(d->progress.mutex);
        d->progress.gathered[rank] = params;
        d->progress.dirty = true;
    });
    engine::NodeAgentOptions agent;
    agent.token = d->options.token;
    agent.bindAddress = d->options.bindAddress;
    agent.advertise = cluster.advertise.toStdString();
    d->locals = std::make_unique<LocalNodes>(*d->coordinator, agent);
    for (int i = 0; i < std::min(cluster.localNodes, engine::memory::kMaxNodes); ++i)
        d->locals->add();
    auto *timer = new QTimer(this);
    timer->setInterval(kPublishMs);
    connect(timer, &QTimer::timeout, this, &EngineController::publish);
    timer->start();
}

EngineController::~EngineController()
{
    if (d->running)
        d->coordinator->stop();
    d->breakpoints.abort();
    if (d->runThread.joinable())
        d->runThread.join();
    d->locals->stop();
    d->coordinator->shutdownNodes();
    d->locals->join();
}

quint16 EngineController::port() const { return d->coordinator->port(); }
QString EngineController::token() const { return d->cluster.token; }
QString EngineController::advertise() const { return d->cluster.advertise; }

QString EngineController::joinCommand() const
{
    QString address = d->cluster.advertise.isEmpty() ? QStringLiteral("127.0.0.1") : d->cluster.advertise;
    if (d->cluster.advertise.isEmpty())
        for (const QHostAddress &a : QNetworkInterface::allAddresses())
            if (a.protocol() == QAbstractSocket::IPv4Protocol && !a.isLoopback()) {
                address = a.toString();
                break;
            }
    return QStringLiteral("smolctl node --join %1:%2 --token %3 --name NAME")
        .arg(address)
        .arg(port())
        .arg(QString::fromStdString(d->options.token));
}

int EngineController::viewerCount() const { return d->coordinator->viewerCount(); }

void EngineController::publishLesson(const QJsonObject &lesson) { d->coordinator->publishLesson(lesson); }

widgets::ClusterStatePtr EngineController::state() const { return d->lastState; }
bool EngineController::isRunning() const { return d->running; }
bool EngineController::isPaused() const { return d->breakpoints.isPaused(); }

PauseView EngineController::pauseAt(qint64 step, int collectiveKind, quint64 /*seq*/) const
{
    return pauseIfAt(d->pause, step, collectiveKind);
}

int EngineController::readyNodes() const
{
    int n = 0;
    for (const ClusterNode &node : d->coordinator->nodes())
        n += node.state == ClusterNode::State::Idle;
    return n;
}

QStringList EngineController::strategies() const
{
    QStringList out;
    for (const auto &s : engine::strategyNames())
        out << QString::fromStdString(s);
    return out;
}

QStringList EngineController::layerNames(const QString &model) const
{
    QStringList out;
    try {
        for (const auto &l : modelFor(model)->layers())
            out << QString::fromStdString(l.name);
    } catch (const std::exception &) {
    }
    return out;
}

QString EngineController::balancedPlacement(const QString &model, int nodes) const
{
    try {
        const auto m = modelFor(model);
        std::map<std::string, std::int64_t> size;
        for (auto &[name, p] : m->namedParameters())
            size[name] = p.numel();
        std::vector<std::int64_t> layerParams;
        for (const auto &layer : m->layers()) {
            std::int64_t n = 0;
            for (const auto &p : layer.paramNames)
                n += size[p];
            layerParams.push_back(n);
        }
        return QString::fromStdString(engine::Placement::balanced(layerParams, nodes).toString());
    } catch (const std::exception &) {
        return {};
    }
}

QString EngineController::checkPlacement(const QString &model, const QString &spec, int nodes) const
{
    try {
        engine::Placement::parse(spec.toStdString(), int(layerNames(model).size()), nodes);
        return {};
    } catch (const std::exception &e) {
        return QString::fromUtf8(e.what());
    }
}

void EngineController::start(const RunSettings &s)
{
    if (d->running) {
        Q_EMIT errorOccurred(tr("a run is already going: stop it first"));
        return;
    }
    if (d->runThread.joinable())
        d->runThread.join();
    // 1. The configuration, its ranks on the idle nodes as the user shaped them.
    engine::TrainConfig c = trainConfigOf(s);
    const std::optional<std::vector<int>> ranks = idleNodesFor(s);
    if (!ranks)
        return;
    const bool gloo = c.backend == engine::TrainConfig::Backend::Gloo;
    if (gloo && d->emulation.limitsAnyLink())
        Q_EMIT logLine(tr("emulated link limits shape our transport only: this run on Gloo ignores them"));
    d->emulation.applyTo(c, *ranks, s.slowMotion);
    try {
        engine::validateConfig(c);
    } catch (const std::exception &e) {
        Q_EMIT runFailed(QString::fromUtf8(e.what()));
        return;
    }
    // 2. and 3. The recorder, and a clean picture.
    if (!openRecorder(s, c))
        return;
    resetForRun(s);
    Q_EMIT runStarted(
        gloo ? tr("%1 on %2 nodes, %3 steps, collectives on Gloo").arg(s.strategy).arg(s.nodes).arg(s.steps)
             : tr("%1 on %2 nodes, %3 steps").arg(s.strategy).arg(s.nodes).arg(s.steps));
    // 4. The run, on its own thread.
    QPointer<EngineController> self(this);
    d->runThread = std::thread([this, self, c] { runOnThread(c, self); });
}

// Ranks go to the first idle nodes in join order: their ids, by rank.
std::optional<std::vector<int>> EngineController::idleNodesFor(const RunSettings &s)
{
    std::vector<int> idle;
    for (const ClusterNode &n : d->coordinator->nodes())
        if (n.state == ClusterNode::State::Idle)
            idle.push_back(n.id);
    if (int(idle.size()) < s.nodes) {
        Q_EMIT errorOccurred(tr("the run needs %1 nodes; %2 are idle").arg(s.nodes).arg(idle.size()));
        return std::nullopt;
    }
    idle.resize(std::size_t(s.nodes));
    return idle;
}

bool EngineController::openRecorder(const RunSettings &s, const engine::TrainConfig &c)
{
    d->recorder.reset();
    if (s.recordPath.isEmpty())
        return true;
    const engine::SessionHeader h = engine::sessionHeaderFor(c, "");
    try {
        d->recorder = std::make_unique<engine::SessionRecorder>(s.recordPath, h, /*overwrite=*/true);
    } catch (const std::exception &e) {
        Q_EMIT runFailed(QString::fromUtf8(e.what()));
        return false;
    }
    return true;
}

void EngineController::resetForRun(const RunSettings &s)
{
    d->sink.reset();
    d->sink.setForward(d->recorder.get());
    {
        std::lock_guard lock(d->progress.mutex);
        d->progress.settings = s;
        d->progress.steps.clear();
        d->progress.testLoss.clear();
        d->progress.lastStep = -1;
        d->progress.shards.clear();
        d->progress.predicted = {};
        d->progress.shardColumns.clear();
        d->progress.dirty = true;
    }
    d->pause = PauseView();
    d->heldStep = -1;
    d->running = true;
    d->stopRequested = false;
    d->breakpoints.beginRun(s.nodes);
}

void EngineController::runOnThread(const engine::TrainConfig &c, const QPointer<EngineController> &self)
{
    d->plan(c);
    StepObserver observer(d->sink, d->progress, QPointer<RunFeed>(self.data()));
    engine::ClusterRunOptions ro;
    ro.nodes = c.nodes;
    ro.breakpoints = &d->breakpoints;
    ro.events = &d->sink;
    RunEnd end;
    end.steps = c.steps;
    try {
        const engine::TrainSummary s = d->coordinator->run(c, ro, &observer);
        end.accuracy = s.testAccuracy;
        end.summary = tr("%1 on %2 node(s), %3 steps: final loss %4%5, %6 samples/s")
                          .arg(QString::fromStdString(s.strategy))
                          .arg(s.nodes)
                          .arg(s.steps)
                          .arg(s.finalLoss, 0, 'f', 4)
                          .arg(s.testAccuracy >= 0 ? tr(", test accuracy %1%").arg(100 * s.testAccuracy, 0, 'f', 1)
                                                   : QString())
                          .arg(s.samplesPerS, 0, 'f', 0);
        RunSettings settings;
        {
            std::lock_guard lock(d->progress.mutex);
            settings = d->progress.settings;
        }
        end.measured = measureRun(s, settings, d->sink.rankFigures(), d->coordinator->nodes());
        if (d->recorder)
            d->recorder->finish(s.finalLoss);
    } catch (const std::exception &e) {
        end.failure = QString::fromUtf8(e.what());
        if (d->recorder) {
            try {
                d->recorder->finish(std::nullopt);
            } catch (const std::exception &) {
            }
        }
    }
    d->sink.setForward(nullptr);
    end.stopped = !end.failure.isEmpty() && d->stopRequested;
    std::int64_t lastStep = -1;
    {
        std::lock_guard lock(d->progress.mutex);
        lastStep = d->progress.lastStep;
    }
    end.stoppedAt = lastStep >= 0 ? tr("Stopped at step %1 of %2.").arg(lastStep).arg(c.steps)
                                  : tr("Stopped before the first step.");
    d->running = false;
    QMetaObject::invokeMethod(
        QCoreApplication::instance(),
        [self, end] {
            if (self)
                self->endRun(end);
        },
        Qt::QueuedConnection);
}

void EngineController::endRun(const RunEnd &end)
{
    d->pause = PauseView(); // a pause's tensors belong to its run
    publish();
    if (end.stopped) {
        Q_EMIT runStopped(end.stoppedAt);
        return;
    }
    if (!end.failure.isEmpty()) {
        Q_EMIT runFailed(end.failure);
        return;
    }
    if (end.accuracy >= 0)
        Q_EMIT testAccuracyAvailable(end.steps - 1, end.accuracy);
    Q_EMIT runMeasured(end.measured);
    Q_EMIT runFinished(end.summary);
}

void EngineController::pause()
{
    if (d->running)
        d->breakpoints.pauseAtNext();
}

// The held step goes with the hold (the next pause brings its own).
void EngineController::resume()
{
    d->heldStep = -1;
    d->breakpoints.resume();
}

void EngineController::stepCollective()
{
    d->heldStep = -1;
    d->breakpoints.step();
}

void EngineController::stop()
{
    if (!d->running)
        return;
    d->stopRequested = true;
    d->coordinator->stop();
    d->breakpoints.abort(); // release held nodes so the stop reaches them
    // The engine ends a stopped run within a second; if it has not, say so
    // rather than leave the window looking as if Stop did nothing.
    QTimer::singleShot(2000, this, [this] {
        if (d->running && d->stopRequested)
            Q_EMIT errorOccurred(tr("Still stopping: waiting for the nodes to end their epoch "
                                    "(Kill node ends one at once)."));
    });
}

void EngineController::killNode(int id)
{
    try {
        d->coordinator->kill(id);
    } catch (const std::exception &e) {
        Q_EMIT errorOccurred(QString::fromUtf8(e.what()));
    }
}

void EngineController::addLocalNode()
{
    // Each local node has a memory accounting slot of its own.
    if (d->locals->count() >= engine::memory::kMaxNodes) {
        Q_EMIT errorOccurred(tr("this window has its %1 local nodes: add more from other machines "
                                "(Cluster > Remote nodes)").arg(engine::memory::kMaxNodes));
        return;
    }
    d->locals->add();
}

void EngineController::removeNode(int id)
{
    if (!d->coordinator->shutdownNode(id))
        Q_EMIT errorOccurred(tr("node %1 can only be removed while it is idle (kill it during a run)").arg(id));
    std::lock_guard lock(d->progress.mutex);
    d->progress.dirty = true;
}

void EngineController::setNodeSlowdown(int id, double factor)
{
    d->emulation.slowdown[id] = std::max(1.0, factor);
    std::lock_guard lock(d->progress.mutex);
    d->progress.dirty = true;
}

void EngineController::setNodeLink(int id, double mbitPerSecond, double latencyMs)
{
    d->emulation.links[id] = {std::max(0.0, mbitPerSecond), std::max(0.0, latencyMs)};
}

void EngineController::addBreakpoint(const QString &spec)
{
    try {
        d->breakpoints.addBreakpoint(engine::parseBreakpoint(spec.toStdString()));
    } catch (const std::exception &e) {
        Q_EMIT errorOccurred(QString::fromUtf8(e.what()));
    }
}

void EngineController::clearBreakpoints() { d->breakpoints.clearBreakpoints(); }

void EngineController::editTensor(int rank, const QString &op, double factor)
{
    engine::TensorEdit e;
    e.op = op == "zero" ? engine::TensorEdit::Op::Zero
           : op == "nan" ? engine::TensorEdit::Op::InjectNaN
                         : engine::TensorEdit::Op::Scale;
    e.factor = factor;
    e.index = op == "nan" ? 0 : -1;
    try {
        if (!d->breakpoints.edit(rank, e))
            Q_EMIT errorOccurred(tr("node %1 is not held at a collective").arg(rank));
    } catch (const std::exception &ex) {
        Q_EMIT errorOccurred(QString::fromUtf8(ex.what()));
    }
}

void EngineController::publish()
{
    publishJoinFailures();
    publishTimeline();
    bool dirty = d->sink.takeDirty();
    auto state = std::make_shared<widgets::ClusterState>();
    PredictedBytes predicted;
    publishProgress(*state, dirty, predicted);
    const std::vector<ClusterNode> nodes = d->coordinator->nodes();
    const bool paused = d->breakpoints.isPaused();
    const bool running = d->running;
    state->current = paused ? d->heldStep : -1; // one step number at a pause (widgets/step_number.h)
    if (!dirty && nodes.size() == d->lastNodeCount && paused == d->lastPaused && running == d->lastRunning &&
        !running)
        return; // nothing new, and no traffic window to slide
    d->lastNodeCount = nodes.size();
    d->lastPaused = paused;
    d->lastRunning = running;
    const LiveSink::Traffic traffic = d->sink.traffic();
    const bool gloo = d->progress.onGloo();
    const NodeFacts facts{d->sink.memory(), d->sink.stepPeaks(), traffic, d->emulation, predicted, gloo, paused, d->stopRequested};
    state->linksKnown = !gloo;
    for (const ClusterNode &n : nodes)
        state->nodes.append(nodeStateOf(n, state->strategy, facts));
    state->links = linkStatesOf(traffic, state->nodes, d->emulation);
    d->lastState = state;
    Q_EMIT stateChanged(state);
}

// Local nodes that could not join: in the log and the status bar.
void EngineController::publishJoinFailures()
{
    for (const std::string &f : d->locals->takeFailures()) {
        const QString line = tr("a local node could not join: %1").arg(QString::fromStdString(f));
        Q_EMIT logLine(line);
        Q_EMIT errorOccurred(line);
    }
}

// What the timeline gained, in its words; while a run goes on, also the
// clock alone, so packets in flight keep moving.
void EngineController::publishTimeline()
{
    std::vector<net::FrameEvent> frames;
    std::vector<engine::SpanEvent> spans;
    std::vector<engine::MemorySample> memory;
    d->sink.takeTimeline(frames, spans, memory);
    if (frames.empty() && spans.empty() && memory.empty() && !d->running)
        return;
    const TimelineBatch b = toTimeline(frames, spans, memory, d->progress.onGloo());
    Q_EMIT timelineEvents(b.frames, b.spans, b.memory, net::monotonicNs());
}

// The run's plan and progress since the last snapshot, taken under the lock;
// the charts' points go out at once.
void EngineController::publishProgress(widgets::ClusterState &state, bool &dirty,
                                       PredictedBytes &predicted)
{
    std::vector<widgets::StepPoint> steps;
    std::vector<std::pair<std::int64_t, double>> testLoss;
    {
        RunProgress &p = d->progress;
        std::lock_guard lock(p.mutex);
        steps.swap(p.steps);
        testLoss.swap(p.testLoss);
        dirty = dirty || p.dirty || !steps.empty();
        p.dirty = false;
        state.strategy = p.settings.strategy;
        state.topology = topologyOf(p.settings.strategy);
        state.mesh = p.settings.mesh;
        state.step = p.lastStep;
        state.steps = p.settings.steps;
        state.shards = p.shards;
        state.shardColumns = p.shardColumns;
        predicted = p.predicted;
        if (!d->breakpoints.isPaused())
            p.gathered.clear(); // a pause's picture ends with the pause
        for (widgets::ShardCell &cell : state.shards)
            for (const auto &[rank, params] : p.gathered)
                if (std::find(params.begin(), params.end(), cell.param.toStdString()) != params.end())
                    cell.materialisedOn.append(rank);
    }
    for (const auto &pt : steps)
        Q_EMIT stepAvailable(pt);
    for (const auto &[step, loss] : testLoss)
        Q_EMIT testLossAvailable(step, loss);
}

} // namespace smol::app
