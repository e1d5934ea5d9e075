#include "engine_controller.h"
#include "paused_tensor.h"
#include "run_plan.h"
#include "timeline_feed.h"

#include "engine/breakpoint_spec.h"
#include "engine/breakpoints.h"
#include "engine/cluster/coordinator.h"
#include "engine/cluster/node_agent.h"
#include "engine/flat_params.h"
#include "engine/memory_tracker.h"
#include "engine/model.h"
#include "engine/placement.h"
#include "engine/session/session_recorder.h"
#include "engine/session/span_time.h"
#include "engine/strategy.h"
#include "engine/trainer.h"
#include "engine/cluster/config_json.h"
#include "net/trace.h"

#include <QCoreApplication>
#include <QHostAddress>
#include <QJsonDocument>
#include <QNetworkInterface>
#include <QPointer>
#include <QRandomGenerator>
#include <QTimer>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace smol::app {

using engine::ClusterNode;

namespace {

constexpr int kPublishMs = 34; // at most 30 snapshots a second

// What the views need from the event stream: each rank's newest memory,
// bytes per link and per sender over the last second, the newest log line
// per rank; and everything forwarded to a recorder when recording.
class LiveSink : public engine::SessionEventSink {
public:
    void setForward(engine::SessionEventSink *next)
    {
        std::lock_guard lock(m_mutex);
        m_next = next;
    }
    void reset()
    {
        std::lock_guard lock(m_mutex);
        m_memory.clear();
        m_sends.clear();
        m_timelineFrames.clear();
        m_timelineSpans.clear();
        m_timelineMemory.clear();
        m_perRank.clear();
        m_dirty = true;
    }
    void onFrame(const net::FrameEvent &e) override
    {
        engine::SessionEventSink *next = nullptr;
        {
            std::lock_guard lock(m_mutex);
            if (e.side == net::FrameEvent::Side::Send) {
                // src == dst: --backend gloo's one event per collective, the
                // bytes this node handed to it; a node's, on no link (dst -1).
                m_sends.push_back({e.sendCompleteNs, e.src, e.src != e.dst ? e.dst : -1, e.bytes});
                m_dirty = true;
            }
            if (e.src != e.dst)
                m_timelineFrames.push_back(e);
            next = m_next;
        }
        if (next)
            next->onFrame(e);
    }
    void onSpan(const engine::SpanEvent &s) override
    {
        {
            std::lock_guard lock(m_mutex);
            m_timelineSpans.push_back(s);
            // A rank's spans for its idle share (bounded: past the bound the
            // figures are those of the run's first part, steps included).
            PerRank &r = m_perRank[s.node];
            using K = engine::SpanEvent::Kind;
            const std::size_t held = r.compute.size() + r.waits.size() + r.steps.size();
            if (held < kMaxRankSpans) {
                if (s.kind == K::Forward || s.kind == K::Backward || s.kind == K::Optimizer)
                    r.compute.emplace_back(s.startNs, s.endNs);
                else if (s.kind == K::Collective || s.kind == K::Pause)
                    r.waits.emplace_back(s.startNs, s.endNs);
                else if (s.kind == K::Step)
                    r.steps.emplace_back(s.startNs, s.endNs);
            }
        }
        forward([&](auto *n) { n->onSpan(s); });
    }
    void onMemory(const engine::MemorySample &m) override
    {
        {
            std::lock_guard lock(m_mutex);
            m_memory[m.node] = m;
            m_timelineMemory.push_back(m);
            PerRank &r = m_perRank[m.node];
            r.activationPeak = std::max(r.activationPeak, m.activations);
            m_dirty = true;
        }
        forward([&](auto *n) { n->onMemory(m); });
    }
    void onMetric(const engine::MetricSample &m) override { forward([&](auto *n) { n->onMetric(m); }); }
    void onLog(const engine::LogLine &l) override { forward([&](auto *n) { n->onLog(l); }); }
    void onTensor(const engine::TensorRecord &t) override { forward([&](auto *n) { n->onTensor(t); }); }

    struct Traffic {
        std::map<std::pair<int, int>, double> linkBytesPerSecond;
        std::map<int, double> sentPerSecond;
    };
    // Over the last second of the coordinator's clock.
    Traffic traffic()
    {
        const std::int64_t now = net::monotonicNs();
        std::lock_guard lock(m_mutex);
        while (!m_sends.empty() && m_sends.front().t < now - 1'000'000'000)
            m_sends.pop_front();
        Traffic t;
        for (const Send &s : m_sends) {
            if (s.dst >= 0)
                t.linkBytesPerSecond[{s.src, s.dst}] += double(s.bytes);
            t.sentPerSecond[s.src] += double(s.bytes);
        }
        return t;
    }
    std::map<int, engine::MemorySample> memory()
    {
        std::lock_guard lock(m_mutex);
        return m_memory;
    }
    // The frames, spans and memory samples since the last call, for the timeline.
    void takeTimeline(std::vector<net::FrameEvent> &frames, std::vector<engine::SpanEvent> &spans,
                      std::vector<engine::MemorySample> &memory)
    {
        std::lock_guard lock(m_mutex);
        frames.swap(m_timelineFrames);
        spans.swap(m_timelineSpans);
        memory.swap(m_timelineMemory);
    }
    // Per rank since reset(): its busy time (engine/session/span_time.h:
    // in compute spans, not in a collective or pause, from its first step's
    // start to its last step's end; what `smolctl compare` measures too) and
    // the most activations any memory sample showed.
    struct RankFigures {
        std::int64_t computeNs = 0;
        std::int64_t wallNs = 0;
        std::int64_t activationPeak = 0;
    };
    std::map<int, RankFigures> rankFigures()
    {
        using namespace engine::spantime;
        std::lock_guard lock(m_mutex);
        std::map<int, RankFigures> out;
        for (const auto &[rank, r] : m_perRank) {
            RankFigures f;
            if (const auto busy = busyTime(merged(r.steps), merged(r.compute), merged(r.waits))) {
                f.computeNs = busy->computeNs;
                f.wallNs = busy->wallNs;
            }
            f.activationPeak = r.activationPeak;
            out[rank] = f;
        }
        return out;
    }
    bool takeDirty()
    {
        std::lock_guard lock(m_mutex);
        return std::exchange(m_dirty, false);
    }

private:
    template <typename F> void forward(F f)
    {
        engine::SessionEventSink *next = nullptr;
        {
            std::lock_guard lock(m_mutex);
            next = m_next;
        }
        if (next)
            f(next);
    }
    struct Send {
        std::int64_t t;
        int src, dst;
        std::uint64_t bytes;
    };
    std::mutex m_mutex;
    engine::SessionEventSink *m_next = nullptr;
    std::map<int, engine::MemorySample> m_memory; // by rank
    std::deque<Send> m_sends;
    std::vector<net::FrameEvent> m_timelineFrames;
    std::vector<engine::SpanEvent> m_timelineSpans;
    std::vector<engine::MemorySample> m_timelineMemory;
    struct PerRank {
        engine::spantime::Intervals compute, waits, steps; // waits: collective and pause spans
        std::int64_t activationPeak = 0;
    };
    static constexpr std::size_t kMaxRankSpans = 1 << 17; // per rank: 2 MiB at most
    std::map<int, PerRank> m_perRank;
    bool m_dirty = true;
};


QString roleOf(const QString &strategy, int rank)
{
    if (rank < 0)
        return QStringLiteral("idle");
    return QString::fromStdString(engine::nodeRole(strategy.toStdString(), rank));
}

} // namespace

struct EngineController::Private {
    ClusterOptions cluster;
    engine::CoordinatorOptions options;
    std::unique_ptr<engine::Coordinator> coordinator;
    std::vector<std::thread> agents;
    // Local agents join one at a time (addAgent); `closing` turns away the
    // ones still waiting when the controller goes.
    std::mutex joinMutex;
    std::condition_variable joinCv;
    bool joining = false;
    bool closing = false;
    std::vector<std::string> joinFailures; // local nodes that could not join, for the log
    static constexpr int kJoinAttempts = 10;
    std::atomic<bool> stopRequested{false};
    engine::BreakpointController breakpoints;
    LiveSink sink;
    std::unique_ptr<engine::SessionRecorder> recorder;
    std::thread runThread;
    std::atomic<bool> running{false};
    std::map<int, double> slowdown; // node id -> factor
    std::map<int, std::pair<double, double>> linkLimit; // node id -> (Mbit/s, ms)

    std::mutex mutex; // guards the fields below (written by the run thread)
    RunSettings settings;
    std::vector<widgets::StepPoint> pendingSteps;
    std::vector<std::pair<std::int64_t, double>> pendingTestLoss;
    std::map<int, std::vector<std::string>> gathered; // rank -> params held in full at the current pause
    QVector<widgets::ShardCell> shards;
    std::optional<std::int64_t> predicted; // per node, by the ZeRO formulas
    std::int64_t lastStep = -1;
    bool stateDirty = true;
    // GUI thread only: what the last snapshot showed, to publish on change.
    bool lastPaused = false;
    bool lastRunning = false;
    std::size_t lastNodeCount = 0;

    // What the shard map and the memory view's formula bars show for a run:
    // who owns which range of each parameter (as the strategy cuts it), and
    // params + grads + optimizer state per node by the ZeRO paper's formulas.
    void plan(const engine::TrainConfig &c)
    {
        RunPlan p = planRun(c);
        std::lock_guard lock(mutex);
        shards = std::move(p.shards);
        predicted = p.predicted;
        stateDirty = true;
    }

    // What a finished run measured, by rank (RunMeasurement).
    RunMeasurement measurement(const engine::TrainSummary &s)
    {
        RunMeasurement m;
        {
            std::lock_guard lock(mutex);
            m.settings = settings;
        }
        m.strategy = QString::fromStdString(s.strategy);
        m.nodes = s.nodes;
        m.steps = s.steps;
        m.seconds = s.seconds;
        m.samplesPerSecond = s.samplesPerS;
        m.finalLoss = s.finalLoss;
        m.testAccuracy = s.testAccuracy;
        m.paramCount = s.paramCount;
        m.paramChecksum = s.paramChecksum;
        for (const auto &[k, v] : s.extra)
            m.extra.insert(QString::fromStdString(k), v);
        m.asyncUpdates = s.async.updates;
        m.maxStaleness = s.async.maxStaleness;
        const auto figures = sink.rankFigures();
        const auto nodes = coordinator->nodes();
        for (int r = 0; r < s.nodes; ++r) {
            NodeMeasurement n;
            n.rank = r;
            for (const ClusterNode &cn : nodes)
                if (cn.rank == r) {
                    n.id = cn.id;
                    n.name = QString::fromStdString(cn.name);
                }
            if (std::size_t(r) < s.bytesSentPerNode.size())
                n.bytesSent = qint64(s.bytesSentPerNode[std::size_t(r)]);
            const auto inSteps = s.extra.find("bytes_in_steps@" + std::to_string(r));
            n.stepBytesSent = inSteps != s.extra.end() ? qint64(inSteps->second) : n.bytesSent;
            if (std::size_t(r) < s.memoryPerNode.size()) {
                const engine::NodeMemory &nm = s.memoryPerNode[std::size_t(r)];
                n.memory = {nm.params, nm.grads, nm.optimizer, nm.activations, nm.comm, nm.live, nm.peak};
            }
            const auto f = figures.find(r);
            if (f != figures.end()) {
                n.activationPeak = f->second.activationPeak;
                n.computeSeconds = double(f->second.computeNs) * 1e-9;
                n.wallSeconds = double(f->second.wallNs) * 1e-9;
                n.idleShare = n.wallSeconds > 0 ? std::clamp(1 - n.computeSeconds / n.wallSeconds, 0.0, 1.0) : 0;
            }
            n.activationPeak = std::max<qint64>(n.activationPeak, n.memory.activations);
            m.ranks.push_back(n);
        }
        return m;
    }

    // A node thread of this process, joined over TCP like a remote one. Its
    // data plane listens where the coordinator does (every interface: the
    // window takes remote nodes, and the data plane is token-authenticated),
    // so other machines' nodes can reach it, at `cluster.advertise` if set.
    //
    // Agents join one after another, each named after the id the coordinator
    // is about to give it, so node i is "local-i": started together they
    // raced, and ids (join order, which ranks follow) came out of name order
    // (local-0, local-3, local-15, local-2, ... on the screen). A remote
    // node joining in the same instant can still take an id first.
    void addAgent()
    {
        const int slot = int(agents.size());
        engine::NodeAgentOptions o;
        o.port = coordinator->port();
        o.token = options.token;
        o.bindAddress = options.bindAddress;
        o.advertise = cluster.advertise.toStdString();
        o.memorySlot = slot;
        o.inProcess = true;
        agents.emplace_back([this, o]() mutable {
            {
                std::unique_lock lock(joinMutex);
                joinCv.wait(lock, [this] { return !joining || closing; });
                if (closing)
                    return;
                joining = true;
            }
            std::once_flag joined;
            const auto letNextJoin = [this, &joined] {
                std::call_once(joined, [this] {
                    {
                        std::lock_guard lock(joinMutex);
                        joining = false;
                    }
                    joinCv.notify_all();
                });
            };
            // A refused handshake (the coordinator bounds handshakes in
            // progress per address, and every local node comes from
            // 127.0.0.1) is tried again a few times before the node gives up.
            std::atomic<bool> inCluster{false};
            for (int attempt = 1;; ++attempt) {
                o.name = "local-" + std::to_string(coordinator->nodes().size());
                try {
                    engine::runNodeAgent(o, [&](const std::string &line) {
                        if (line.rfind("joined the coordinator", 0) == 0) {
                            inCluster = true;
                            letNextJoin();
                        }
                    });
                    break;
                } catch (const std::exception &e) {
                    std::unique_lock lock(joinMutex);
                    if (inCluster || closing || attempt >= kJoinAttempts) {
                        if (!inCluster && !closing)
                            joinFailures.push_back(o.name + ": " + e.what());
                        break;
                    }
                    joinCv.wait_for(lock, std::chrono::milliseconds(50 * attempt), [this] { return closing; });
                }
            }
            letNextJoin(); // it could not join, or it has left
        });
    }
};

EngineController::EngineController(int localNodes, QObject *parent)
    : EngineController(ClusterOptions{localNodes, 0, QString(), QString()}, parent)
{
}

EngineController::EngineController(const ClusterOptions &cluster, QObject *parent)
    : QObject(parent), d(std::make_unique<Private>())
{
    qRegisterMetaType<RunSettings>();
    qRegisterMetaType<RunMeasurement>();
    qRegisterMetaType<PauseView>();
    qRegisterMetaType<widgets::ClusterStatePtr>();
    qRegisterMetaType<widgets::StepPoint>();
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
    try {
        d->coordinator = std::make_unique<engine::Coordinator>(d->options);
    } catch (const std::exception &e) {
        throw std::runtime_error(cluster.port ? "cannot listen on port " + std::to_string(cluster.port) + ": " + e.what()
                                              : std::string("cannot start the coordinator: ") + e.what());
    }
    QPointer<EngineController> self(this);
    d->coordinator->setLogSink([self](const std::string &line) {
        const QString text = QString::fromStdString(line);
        QMetaObject::invokeMethod(
            QCoreApplication::instance(), [self, text] {
                if (self)
                    Q_EMIT self->logLine(text);
            },
            Qt::QueuedConnection);
    });
    d->breakpoints.setPausedCallback([this, self](std::shared_ptr<const engine::PauseState> state) {
        // A recording keeps the pause's tensors (the sink forwards them to the recorder, if any).
        engine::recordPause(*state, d->sink, net::monotonicNs());
        PauseView view;
        view.id = state->id;
        view.reason = QString::fromStdString(state->reason);
        view.complete = state->complete;
        for (const auto &t : state->inputs)
            view.inputs.append(pausedTensorOf(t));
        for (const auto &t : state->results)
            view.results.append(pausedTensorOf(t));
        QMetaObject::invokeMethod(
            QCoreApplication::instance(), [self, view] {
                if (self)
                    Q_EMIT self->pausedAt(view);
            },
            Qt::QueuedConnection);
    });
    d->coordinator->setGatheredSink([this](int rank, const std::vector<std::string> &params) {
        std::lock_guard lock(d->mutex);
        d->gathered[rank] = params;
        d->stateDirty = true;
    });
    for (int i = 0; i < std::min(cluster.localNodes, engine::memory::kMaxNodes); ++i)
        d->addAgent();
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
    {
        // No more joins; the one under way ends joining (or failing) first,
        // so the shutdown reaches it too.
        std::unique_lock lock(d->joinMutex);
        d->closing = true;
        d->joinCv.notify_all();
        d->joinCv.wait(lock, [this] { return !d->joining; });
    }
    d->coordinator->shutdownNodes();
    for (auto &t : d->agents)
        t.join();
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

bool EngineController::isRunning() const { return d->running; }

int EngineController::readyNodes() const
{
    int n = 0;
    for (const ClusterNode &node : d->coordinator->nodes())
        n += node.state == ClusterNode::State::Idle;
    return n;
}
bool EngineController::isPaused() const { return d->breakpoints.isPaused(); }

QStringList EngineController::strategies() const
{
    QStringList out;
    for (const auto &s : engine::strategyNames())
        out << QString::fromStdString(s);
    return out;
}

QStringList EngineController::layerNames(const QString &model) const
{
    engine::ModelConfig mc;
    mc.kind = model.toStdString();
    if (mc.kind == "gpt")
        mc.vocabSize = 96;
    QStringList out;
    try {
        for (const auto &l : engine::makeModel(mc)->layers())
            out << QString::fromStdString(l.name);
    } catch (const std::exception &) {
    }
    return out;
}

QString EngineController::balancedPlacement(const QString &model, int nodes) const
{
    engine::ModelConfig mc;
    mc.kind = model.toStdString();
    if (mc.kind == "gpt")
        mc.vocabSize = 96;
    try {
        const auto m = engine::makeModel(mc);
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
    engine::TrainConfig c;
    c.strategy = s.strategy.toStdString();
    c.nodes = s.nodes;
    c.model.kind = s.model.toStdString();
    c.steps = s.steps;
    c.globalBatch = s.globalBatch;
    c.seed = s.seed;
    c.optimizer.kind = s.optimizer == "adam" ? engine::OptimizerConfig::Kind::Adam : engine::OptimizerConfig::Kind::Sgd;
    c.optimizer.lr = s.lr;
    c.placement = s.placement.toStdString();
    c.microBatches = std::max<qint64>(1, s.microBatches);
    c.schedule = s.schedule == QLatin1String("gpipe") ? engine::PipelineSchedule::GPipe : engine::PipelineSchedule::OneFOneB;
    const bool gloo = s.backend == QLatin1String("gloo");
    c.backend = gloo ? engine::TrainConfig::Backend::Gloo : engine::TrainConfig::Backend::Ours;
    c.testEvery = s.testEvery >= 0 ? s.testEvery
                                   : std::max<std::int64_t>(1, s.steps / 25); // ~25 points on the chart's test curve
    // Ranks go to the first idle nodes in join order; slowdowns follow them.
    std::vector<int> idle;
    for (const ClusterNode &n : d->coordinator->nodes())
        if (n.state == ClusterNode::State::Idle)
            idle.push_back(n.id);
    if (int(idle.size()) < s.nodes) {
        Q_EMIT errorOccurred(tr("the run needs %1 nodes; %2 are idle").arg(s.nodes).arg(idle.size()));
        return;
    }
    for (int r = 0; r < s.nodes; ++r) {
        engine::NodeBehaviour b;
        const auto it = d->slowdown.find(idle[std::size_t(r)]);
        b.slowdown = (it == d->slowdown.end() ? 1.0 : it->second) * std::max(1.0, s.slowMotion);
        c.behaviour.push_back(b);
    }
    if (gloo && std::any_of(d->linkLimit.begin(), d->linkLimit.end(),
                            [](const auto &l) { return l.second.first > 0 || l.second.second > 0; }))
        Q_EMIT logLine(tr("emulated link limits shape our transport only: this run on Gloo ignores them"));
    for (int r = 0; r < s.nodes && !gloo; ++r) { // emulated links shape our transport only
        const auto it = d->linkLimit.find(idle[std::size_t(r)]);
        if (it == d->linkLimit.end() || (it->second.first <= 0 && it->second.second <= 0))
            continue;
        for (int q = 0; q < s.nodes; ++q) {
            if (q == r)
                continue;
            engine::TrainConfig::Link link;
            link.a = r;
            link.b = q;
            link.limit.bitsPerSecond = it->second.first * 1e6;
            link.limit.latency = std::chrono::nanoseconds(std::int64_t(it->second.second * 1e6));
            c.links.push_back(link);
        }
    }
    try {
        engine::validateConfig(c);
    } catch (const std::exception &e) {
        Q_EMIT runFailed(QString::fromUtf8(e.what()));
        return;
    }
    d->recorder.reset();
    if (!s.recordPath.isEmpty()) {
        const engine::SessionHeader h = engine::sessionHeaderFor(c, "");
        try {
            d->recorder = std::make_unique<engine::SessionRecorder>(s.recordPath, h, /*overwrite=*/true);
        } catch (const std::exception &e) {
            Q_EMIT runFailed(QString::fromUtf8(e.what()));
            return;
        }
    }
    d->sink.reset();
    d->sink.setForward(d->recorder.get());
    {
        std::lock_guard lock(d->mutex);
        d->settings = s;
        d->pendingSteps.clear();
        d->pendingTestLoss.clear();
        d->lastStep = -1;
        d->shards.clear();
        d->predicted.reset();
        d->stateDirty = true;
    }
    d->running = true;
    d->stopRequested = false;
    d->breakpoints.beginRun(s.nodes);
    Q_EMIT runStarted(
        gloo ? tr("%1 on %2 nodes, %3 steps, collectives on Gloo").arg(s.strategy).arg(s.nodes).arg(s.steps)
             : tr("%1 on %2 nodes, %3 steps").arg(s.strategy).arg(s.nodes).arg(s.steps));
    QPointer<EngineController> self(this);
    d->runThread = std::thread([this, self, c] {
        class StepObserver : public engine::TrainObserver {
        public:
            StepObserver(Private *p, QPointer<EngineController> self) : m_p(p), m_self(self) {}
            void onStep(const engine::StepReport &r) override
            {
                widgets::StepPoint pt;
                pt.step = r.step;
                pt.seconds = r.seconds;
                pt.loss = r.loss;
                pt.samplesPerSecond = r.samplesPerS;
                const auto traffic = m_p->sink.traffic();
                for (std::size_t i = 0; i < r.memory.size(); ++i) {
                    const auto it = traffic.sentPerSecond.find(int(i));
                    pt.bytesPerSecondPerNode.append(it == traffic.sentPerSecond.end() ? 0.0 : it->second);
                }
                std::lock_guard lock(m_p->mutex);
                m_p->pendingSteps.push_back(pt);
                m_p->lastStep = r.step;
                m_p->stateDirty = true;
            }

            void onTestLoss(std::int64_t step, double loss) override
            {
                std::lock_guard lock(m_p->mutex);
                m_p->pendingTestLoss.emplace_back(step, loss);
            }

            // Said at once, in the status bar and the log: a re-form is never silent.
            void onReform(int attempt, int maxAttempts, int nodes, std::int64_t fromStep,
                          const std::string &reason) override
            {
                const QString what = EngineController::tr("re-forming: attempt %1 of %2, %3 nodes from step %4: %5")
                                         .arg(attempt)
                                         .arg(maxAttempts)
                                         .arg(nodes)
                                         .arg(fromStep)
                                         .arg(QString::fromStdString(reason));
                QPointer<EngineController> self = m_self;
                QMetaObject::invokeMethod(
                    QCoreApplication::instance(), [self, what] {
                        if (self)
                            Q_EMIT self->runReforming(what);
                    },
                    Qt::QueuedConnection);
            }

            // Every node lost: the run waits for nodes to join again.
            void onWaitingForNodes(double seconds) override
            {
                const QString what =
                    EngineController::tr("every node is lost: waiting up to %1 s for nodes to join again "
                                         "(Cluster > Remote nodes shows the command)")
                        .arg(seconds, 0, 'f', 0);
                QPointer<EngineController> self = m_self;
                QMetaObject::invokeMethod(
                    QCoreApplication::instance(), [self, what] {
                        if (self)
                            Q_EMIT self->runWaitingForNodes(what);
                    },
                    Qt::QueuedConnection);
            }

        private:
            Private *m_p;
            QPointer<EngineController> m_self;
        };
        d->plan(c);
        StepObserver observer(d.get(), self);
        engine::ClusterRunOptions ro;
        ro.nodes = c.nodes;
        ro.breakpoints = &d->breakpoints;
        ro.events = &d->sink;
        QString summary, failure;
        RunMeasurement measured;
        double accuracy = -1;
        std::int64_t steps = c.steps;
        try {
            const engine::TrainSummary s = d->coordinator->run(c, ro, &observer);
            accuracy = s.testAccuracy;
            summary = tr("%1 on %2 node(s), %3 steps: final loss %4%5, %6 samples/s")
                          .arg(QString::fromStdString(s.strategy))
                          .arg(s.nodes)
                          .arg(s.steps)
                          .arg(s.finalLoss, 0, 'f', 4)
                          .arg(s.testAccuracy >= 0 ? tr(", test accuracy %1%").arg(100 * s.testAccuracy, 0, 'f', 1)
                                                   : QString())
                          .arg(s.samplesPerS, 0, 'f', 0);
            measured = d->measurement(s);
            if (d->recorder)
                d->recorder->finish(s.finalLoss);
        } catch (const std::exception &e) {
            failure = QString::fromUtf8(e.what());
            if (d->recorder) {
                try {
                    d->recorder->finish(std::nullopt);
                } catch (const std::exception &) {
                }
            }
        }
        d->sink.setForward(nullptr);
        const bool stopped = !failure.isEmpty() && d->stopRequested;
        std::int64_t lastStep = -1;
        {
            std::lock_guard lock(d->mutex);
            lastStep = d->lastStep;
        }
        const QString stoppedAt = lastStep >= 0 ? tr("Stopped at step %1 of %2.").arg(lastStep).arg(steps)
                                                : tr("Stopped before the first step.");
        d->running = false;
        QMetaObject::invokeMethod(
            QCoreApplication::instance(), [self, summary, failure, measured, accuracy, steps, stopped, stoppedAt] {
                if (!self)
                    return;
                self->publish();
                if (stopped) {
                    Q_EMIT self->runStopped(stoppedAt);
                    return;
                }
                if (!failure.isEmpty()) {
                    Q_EMIT self->runFailed(failure);
                    return;
                }
                if (accuracy >= 0)
                    Q_EMIT self->testAccuracyAvailable(steps - 1, accuracy);
                Q_EMIT self->runMeasured(measured);
                Q_EMIT self->runFinished(summary);
            },
            Qt::QueuedConnection);
    });
}

void EngineController::pause()
{
    if (d->running)
        d->breakpoints.pauseAtNext();
}

void EngineController::resume() { d->breakpoints.resume(); }
void EngineController::stepCollective() { d->breakpoints.step(); }

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
    if (int(d->agents.size()) >= engine::memory::kMaxNodes) {
        Q_EMIT errorOccurred(tr("this window has its %1 local nodes: add more from other machines "
                                "(Cluster > Remote nodes)").arg(engine::memory::kMaxNodes));
        return;
    }
    d->addAgent();
}

void EngineController::removeNode(int id)
{
    if (!d->coordinator->shutdownNode(id))
        Q_EMIT errorOccurred(tr("node %1 can only be removed while it is idle (kill it during a run)").arg(id));
    std::lock_guard lock(d->mutex);
    d->stateDirty = true;
}

void EngineController::setNodeSlowdown(int id, double factor)
{
    d->slowdown[id] = std::max(1.0, factor);
    std::lock_guard lock(d->mutex);
    d->stateDirty = true;
}

void EngineController::setNodeLink(int id, double mbitPerSecond, double latencyMs)
{
    d->linkLimit[id] = {std::max(0.0, mbitPerSecond), std::max(0.0, latencyMs)};
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
    std::vector<std::string> joinFailures;
    {
        std::lock_guard lock(d->joinMutex);
        joinFailures.swap(d->joinFailures);
    }
    for (const std::string &f : joinFailures) {
        const QString line = tr("a local node could not join: %1").arg(QString::fromStdString(f));
        Q_EMIT logLine(line);
        Q_EMIT errorOccurred(line);
    }
    {
        std::vector<net::FrameEvent> frames;
        std::vector<engine::SpanEvent> spans;
        std::vector<engine::MemorySample> memory;
        d->sink.takeTimeline(frames, spans, memory);
        bool gloo = false;
        {
            std::lock_guard lock(d->mutex);
            gloo = d->settings.backend == QLatin1String("gloo");
        }
        if (!frames.empty() || !spans.empty() || !memory.empty() || d->running) {
            QVector<widgets::TimelineFrameSide> f;
            f.reserve(qsizetype(frames.size()));
            for (const auto &e : frames)
                if (!gloo || glooFrameIsPacket(e)) // Gloo's one event per collective: its span shows it
                    f.append(toTimeline(e));
            QVector<widgets::TimelineSpan> sp;
            sp.reserve(qsizetype(spans.size()));
            for (const auto &e : spans) {
                widgets::TimelineSpan t = toTimeline(e);
                if (gloo)
                    markGlooSpan(t); // its packets are not visible
                sp.append(t);
            }
            QVector<widgets::TimelineMemorySample> mem;
            mem.reserve(qsizetype(memory.size()));
            for (const auto &m : memory)
                mem.append(toTimeline(m));
            Q_EMIT timelineEvents(f, sp, mem, net::monotonicNs());
        }
    }
    std::vector<widgets::StepPoint> steps;
    std::vector<std::pair<std::int64_t, double>> testLoss;
    bool dirty = d->sink.takeDirty();
    auto state = std::make_shared<widgets::ClusterState>();
    {
        std::lock_guard lock(d->mutex);
        steps.swap(d->pendingSteps);
        testLoss.swap(d->pendingTestLoss);
        dirty = dirty || d->stateDirty || !steps.empty();
        d->stateDirty = false;
        state->strategy = d->settings.strategy;
        state->topology = topologyOf(d->settings.strategy);
        state->step = d->lastStep;
        state->steps = d->settings.steps;
        state->shards = d->shards;
        if (!d->breakpoints.isPaused())
            d->gathered.clear(); // a pause's picture ends with the pause
        for (widgets::ShardCell &cell : state->shards)
            for (const auto &[rank, params] : d->gathered)
                if (std::find(params.begin(), params.end(), cell.param.toStdString()) != params.end())
                    cell.materialisedOn.append(rank);
    }
    for (const auto &p : steps)
        Q_EMIT stepAvailable(p);
    for (const auto &[step, loss] : testLoss)
        Q_EMIT testLossAvailable(step, loss);
    const std::vector<ClusterNode> nodes = d->coordinator->nodes();
    const bool paused = d->breakpoints.isPaused();
    const bool running = d->running;
    if (!dirty && nodes.size() == d->lastNodeCount && paused == d->lastPaused && running == d->lastRunning &&
        !running)
        return; // nothing new, and no traffic window to slide
    d->lastNodeCount = nodes.size();
    d->lastPaused = paused;
    d->lastRunning = running;
    const auto memory = d->sink.memory();
    const auto traffic = d->sink.traffic();
    std::optional<std::int64_t> predicted;
    bool gloo = false;
    {
        std::lock_guard lock(d->mutex);
        predicted = d->predicted;
        gloo = d->settings.backend == QLatin1String("gloo");
    }
    state->linksKnown = !gloo;
    for (const ClusterNode &n : nodes) {
        widgets::NodeState ns;
        ns.id = n.id;
        // A node keeps showing its rank (and memory) from the newest run it was in.
        ns.rank = n.state == ClusterNode::State::Lost ? -1 : n.rank;
        ns.name = QString::fromStdString(n.name);
        ns.host = QString::fromStdString(n.host);
        ns.role = roleOf(state->strategy, ns.rank);
        const auto slow = d->slowdown.find(n.id);
        ns.slowdown = slow == d->slowdown.end() ? 1.0 : slow->second;
        // Failed until its next epoch starts: the box says why at once. Not
        // after the user's Stop: then a node's "connection closed by rank 0"
        // is the stop reaching it through its peers, not a failure.
        const bool failed = !n.lastError.empty() && !d->stopRequested;
        if (n.state == ClusterNode::State::Lost)
            ns.state = widgets::NodeRunState::Lost;
        else if (failed)
            ns.state = widgets::NodeRunState::Failed;
        else if (n.state == ClusterNode::State::Running)
            ns.state = paused ? widgets::NodeRunState::Paused
                       : ns.slowdown > 1 ? widgets::NodeRunState::Slow
                                         : widgets::NodeRunState::Running;
        else
            ns.state = widgets::NodeRunState::Idle;
        if (ns.rank >= 0) {
            const auto it = memory.find(ns.rank);
            if (it != memory.end()) {
                const engine::MemorySample &m = it->second;
                ns.memory = widgets::MemoryBytes{m.params, m.grads, m.optimizer, m.activations, m.comm, m.live, m.peak};
            }
            ns.predictedBytes = predicted;
            if (gloo) { // links unknown: what this node handed to Gloo's collectives over the last second
                const auto sent = traffic.sentPerSecond.find(ns.rank);
                ns.collectiveBytesPerSecond = sent == traffic.sentPerSecond.end() ? 0.0 : sent->second;
            }
        }
        if (n.state == ClusterNode::State::Lost) {
            ns.lastLog = QString::fromStdString(n.lostReason);
            ns.reason = ns.lastLog;
        } else if (failed) {
            ns.reason = QString::fromStdString(n.lastError);
            ns.lastLog = ns.reason;
        }
        state->nodes.append(ns);
    }
    std::map<int, int> idOfRank;
    for (const widgets::NodeState &n : state->nodes)
        if (n.rank >= 0)
            idOfRank[n.rank] = n.id;
    for (const auto &[link, bytes] : traffic.linkBytesPerSecond) {
        widgets::LinkState ls{link.first, link.second, bytes, 0, 0};
        // The emulated limit the sender's (or receiver's) node was given.
        for (int end : {link.first, link.second}) {
            const auto id = idOfRank.find(end);
            const auto lim = id == idOfRank.end() ? d->linkLimit.end() : d->linkLimit.find(id->second);
            if (lim != d->linkLimit.end() && (lim->second.first > 0 || lim->second.second > 0)) {
                ls.limitBitsPerSecond = lim->second.first * 1e6;
                ls.latencyMs = lim->second.second;
            }
        }
        state->links.append(ls);
    }
    Q_EMIT stateChanged(state);
}

} // namespace smol::app
