// ReplayController: a ReplaySource driven from the GUI thread, whose events
// are turned into the live bridge's signals. The sink (Private) only records
// what the source emits, and updates the picture (memory per node, newest
// step); the signals go out once the source call has returned, so a slot
// may call back into the controller. Traffic (the links' bytes of the last
// second, each step's bytes per node) comes from an index of cumulative
// bytes per link built once when the file opens, so a seek costs the same
// wherever it lands.
#include "replay_controller.h"

#include "app/bridge/paused_tensor.h"
#include "app/bridge/run_config.h"
#include "app/bridge/run_plan.h"

#include "engine/cluster/config_json.h"
#include "engine/session/replay_source.h"
#include "engine/session/session_reader.h"
#include "engine/trainer.h"
#include "net/dtype.h"

#include <QElapsedTimer>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTimer>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

namespace smol::app {

namespace {

constexpr std::int64_t kSecondNs = 1'000'000'000;
constexpr int kTickMs = 16;

QString oneLine(const char *what)
{
    return QString::fromUtf8(what).simplified();
}

// What a snapshot shows that a replay can change (the rest is the header's).
bool sameState(const widgets::ClusterState &a, const widgets::ClusterState &b)
{
    if (a.step != b.step || a.current != b.current || a.nodes.size() != b.nodes.size() || a.links.size() != b.links.size())
        return false;
    for (int i = 0; i < a.nodes.size(); ++i) {
        const widgets::NodeState &x = a.nodes[i], &y = b.nodes[i];
        if (x.state != y.state || x.memory != y.memory || x.stepPeak != y.stepPeak || x.lastLog != y.lastLog)
            return false;
    }
    for (int i = 0; i < a.links.size(); ++i)
        if (a.links[i].src != b.links[i].src || a.links[i].dst != b.links[i].dst ||
            a.links[i].bytesPerSecond != b.links[i].bytesPerSecond)
            return false;
    return true;
}

} // namespace

struct ReplayController::Private : engine::SessionEventSink {
    // A signal to send once the source call returns, in event order.
    struct Pending {
        enum class Kind { Step, TestLoss, TestAccuracy, Log, Tensor } kind;
        widgets::StepPoint point;
        qint64 step = -1;
        double value = 0;
        QString text;
        std::uint64_t pauseId = 0;
    };
    // Per link (src, dst): (send completion time, bytes sent up to and
    // including it), in time order.
    using Cumulative = std::vector<std::pair<std::int64_t, std::uint64_t>>;
    // The recorded pause the inspector shows: its tensors' and Pause spans' extent.
    struct ShownPause {
        std::uint64_t id = 0;
        std::int64_t startNs = 0, endNs = 0;
        std::int64_t step = -1; // the held collective's (PauseView::step())
    };

    explicit Private(ReplayController *owner)
        : q(owner)
    {
    }

    ReplayController *q;
    QString path;
    std::unique_ptr<engine::SessionReader> reader;
    std::unique_ptr<engine::ReplaySource> source; // declared after reader: destroyed first
    engine::SessionInfo info;
    RunPlan plan;
    std::int64_t firstSpanNs = 0;               // before it, every node is idle
    std::vector<std::int64_t> collectiveStarts; // sorted, distinct (as ReplaySource keeps them)

    QTimer timer;
    QElapsedTimer wall;
    bool playing = false;
    double speed = 1;

    // The picture at the position, kept up to date by the sink calls.
    std::map<int, engine::MemorySample> memory; // by rank
    std::map<int, net::MemoryByCategory> stepPeaks; // by rank
    std::map<std::pair<int, int>, Cumulative> traffic; // built by open()
    std::int64_t lastStep = -1;
    std::map<int, QString> lastLog; // by rank
    ShownPause shown;
    widgets::ClusterStatePtr lastState;

    // Between a source call and flush().
    std::vector<Pending> pending;
    std::map<std::int64_t, double> samplesPerS; // by step

    std::int64_t position() const { return source ? source->position() : 0; }

    void resetPicture()
    {
        memory.clear();
        stepPeaks.clear();
        lastStep = -1;
        lastLog.clear();
        pending.clear();
        samplesPerS.clear();
        lastState.reset();
    }

    static std::uint64_t sentUpTo(const Cumulative &c, std::int64_t t)
    {
        const auto it = std::upper_bound(c.begin(), c.end(), t,
                                         [](std::int64_t x, const auto &e) { return x < e.first; });
        return it == c.begin() ? 0 : std::prev(it)->second;
    }
    // Bytes per link whose sends completed in (t - 1 s, t].
    std::map<std::pair<int, int>, double> lastSecond(std::int64_t t) const
    {
        std::map<std::pair<int, int>, double> out;
        for (const auto &[link, c] : traffic) {
            const std::uint64_t bytes = sentUpTo(c, t) - sentUpTo(c, t - kSecondNs);
            if (bytes > 0)
                out[link] = double(bytes);
        }
        return out;
    }

    // SessionEventSink: called by the source on this thread, inside its calls.
    void onMemory(const engine::MemorySample &m) override
    {
        if (m.stepPeak)
            stepPeaks[m.node] = m.memory;
        else
            memory[m.node] = m;
    }
    void onMetric(const engine::MetricSample &m) override
    {
        if (m.node != -1)
            return; // per-node losses: the charts show the cluster's
        if (m.name == "loss") {
            Pending p{Pending::Kind::Step, {}, m.step, m.value, {}, 0};
            p.point.step = m.step;
            p.point.seconds = double(m.tNs - reader->header().startNs) / 1e9;
            p.point.loss = m.value;
            std::vector<double> sent(std::size_t(std::max(0, reader->header().nodes)), 0.0);
            for (const auto &[link, bytes] : lastSecond(m.tNs))
                if (link.first >= 0 && std::size_t(link.first) < sent.size())
                    sent[std::size_t(link.first)] += bytes;
            p.point.bytesPerSecondPerNode = QVector<double>(sent.begin(), sent.end());
            pending.push_back(p);
            lastStep = m.step;
        } else if (m.name == "samples_per_s") {
            samplesPerS[m.step] = m.value;
        } else if (m.name == "test_loss") {
            pending.push_back(Pending{Pending::Kind::TestLoss, {}, m.step, m.value, {}, 0});
        } else if (m.name == "test_accuracy") {
            pending.push_back(Pending{Pending::Kind::TestAccuracy, {}, m.step, m.value, {}, 0});
        }
    }
    void onLog(const engine::LogLine &l) override
    {
        const QString text = QString::fromStdString(l.text);
        // The coordinator's lines read as the live log shows them; a node's carry its rank.
        const QString line = l.node < 0 ? text : QStringLiteral("[node %1] %2").arg(l.node).arg(text);
        if (l.node >= 0)
            lastLog[l.node] = text;
        pending.push_back(Pending{Pending::Kind::Log, {}, -1, 0, line, 0});
    }
    void onTensor(const engine::TensorRecord &t) override
    {
        if (t.pauseId == shown.id)
            return;
        for (const Pending &p : pending)
            if (p.kind == Pending::Kind::Tensor && p.pauseId == t.pauseId)
                return;
        pending.push_back(Pending{Pending::Kind::Tensor, {}, -1, 0, {}, t.pauseId});
    }

    // One recorded pause, whole; its extent is that of its tensors and of the
    // Pause spans overlapping them.
    PauseView pauseView(std::uint64_t id, ShownPause *extent) const
    {
        PauseView view;
        const std::vector<engine::TensorRecord> records = reader->tensorsOfPause(id);
        if (records.empty())
            return view;
        std::int64_t t0 = records.front().tNs, t1 = t0;
        for (const engine::TensorRecord &r : records) {
            t0 = std::min(t0, r.tNs);
            t1 = std::max(t1, r.tNs);
        }
        view.id = id;
        view.reason = tr("recorded pause");
        view.complete = true;
        ShownPause e{id, t0, t1, -1};
        bool named = false;
        for (const engine::SpanEvent &s : reader->spans(t0, t1)) {
            if (s.kind != engine::SpanEvent::Kind::Pause)
                continue;
            if (!named && !s.name.empty()) {
                view.reason = QString::fromStdString(s.name);
                named = true;
            }
            e.startNs = std::min(e.startNs, s.startNs);
            e.endNs = std::max(e.endNs, s.endNs);
        }
        for (const engine::TensorRecord &r : records)
            (r.before ? view.inputs : view.results).append(pausedTensorOf(r));
        e.step = view.step();
        if (extent)
            *extent = e;
        return view;
    }

    static QString tr(const char *text) { return ReplayController::tr(text); }

    void showPause(std::uint64_t id)
    {
        ShownPause extent;
        const PauseView view = pauseView(id, &extent);
        if (view.id == 0)
            return;
        if (shown.id != 0)
            Q_EMIT q->pauseEnded();
        shown = extent;
        Q_EMIT q->pausedAt(view);
    }

    // The signals of what the last source call emitted.
    void flush()
    {
        std::vector<Pending> out;
        out.swap(pending);
        std::map<std::int64_t, double> rates;
        rates.swap(samplesPerS);
        for (Pending &p : out) {
            switch (p.kind) {
            case Pending::Kind::Step: {
                const auto it = rates.find(p.step);
                if (it != rates.end())
                    p.point.samplesPerSecond = it->second;
                Q_EMIT q->stepAvailable(p.point);
                break;
            }
            case Pending::Kind::TestLoss:
                Q_EMIT q->testLossAvailable(p.step, p.value);
                break;
            case Pending::Kind::TestAccuracy:
                Q_EMIT q->testAccuracyAvailable(p.step, p.value);
                break;
            case Pending::Kind::Log:
                Q_EMIT q->logLine(p.text);
                break;
            case Pending::Kind::Tensor:
                showPause(p.pauseId);
                break;
            }
        }
    }

    void leavePauseIfOutside()
    {
        const std::int64_t p = position();
        if (shown.id != 0 && (p > shown.endNs || p < shown.startNs)) {
            shown = {};
            Q_EMIT q->pauseEnded();
        }
    }

    // After a seek: the recorded pause whose Pause spans contain the
    // position (0: none).
    std::uint64_t pauseAround(std::int64_t p) const
    {
        std::int64_t t0 = std::numeric_limits<std::int64_t>::max(),
                     t1 = std::numeric_limits<std::int64_t>::min();
        for (const engine::SpanEvent &s : reader->spans(p, p))
            if (s.kind == engine::SpanEvent::Kind::Pause) {
                t0 = std::min(t0, s.startNs);
                t1 = std::max(t1, s.endNs);
            }
        if (t0 > t1)
            return 0;
        const std::vector<engine::TensorRecord> records = reader->tensors(t0, t1);
        return records.empty() ? 0 : records.front().pauseId;
    }

    widgets::ClusterStatePtr buildState()
    {
        const std::int64_t p = position();
        const engine::SessionHeader &h = reader->header();
        auto state = std::make_shared<widgets::ClusterState>();
        state->strategy = QString::fromStdString(h.strategy);
        state->topology = topologyOf(state->strategy);
        state->mesh = QJsonDocument::fromJson(h.configJson).object().value(QStringLiteral("mesh")).toString();
        state->step = lastStep;
        state->current = shown.id != 0 ? shown.step : -1; // one step number at a pause (widgets/step_number.h)
        state->steps = h.steps;
        state->shards = plan.shards;
        state->shardColumns = plan.columns;
        std::set<int> paused;
        for (const engine::SpanEvent &s : reader->spans(p, p))
            if (s.kind == engine::SpanEvent::Kind::Pause)
                paused.insert(s.node);
        const bool idle = p < firstSpanNs || p >= info.lastEventNs;
        for (const engine::SessionNode &n : h.nodeList) {
            widgets::NodeState ns;
            ns.id = n.rank;
            ns.rank = n.rank;
            ns.name = QString::fromStdString(n.name);
            ns.host = QString::fromStdString(n.host);
            ns.role = QString::fromStdString(n.role);
            ns.state = idle                   ? widgets::NodeRunState::Idle
                       : paused.count(n.rank) ? widgets::NodeRunState::Paused
                                              : widgets::NodeRunState::Running;
            const auto m = memory.find(n.rank);
            if (m != memory.end())
                ns.memory = m->second.memory;
            if (const auto peak = stepPeaks.find(n.rank); peak != stepPeaks.end())
                ns.stepPeak = peak->second;
            ns.predictedBytes = plan.predicted.of(n.rank);
            const auto log = lastLog.find(n.rank);
            if (log != lastLog.end())
                ns.lastLog = log->second;
            state->nodes.append(ns);
        }
        for (const auto &[link, bytes] : lastSecond(p))
            state->links.append(widgets::LinkState{link.first, link.second, bytes, 0, 0});
        return state;
    }

    void publish(bool force)
    {
        widgets::ClusterStatePtr state = buildState();
        if (!force && lastState && sameState(*lastState, *state))
            return;
        lastState = state;
        Q_EMIT q->stateChanged(state);
    }

    // A damaged file found while playing: stop, say so in one line.
    void fail(const std::exception &e)
    {
        pending.clear();
        samplesPerS.clear();
        q->pause();
        Q_EMIT q->errorOccurred(oneLine(e.what()));
    }

    // Moves to `t` (clamped by the source) and rebuilds every view.
    void seekTo(std::int64_t t)
    {
        if (!source)
            return;
        try {
            const bool hadPause = shown.id != 0;
            const std::uint64_t oldPause = shown.id;
            resetPicture();
            shown = {};
            Q_EMIT q->cleared();
            source->seek(t);
            const std::int64_t p = position();
            const std::uint64_t pauseId = pauseAround(p);
            std::vector<Pending> out;
            for (Pending &e : pending) // a seek shows the pause it lands in, below
                if (e.kind != Pending::Kind::Tensor)
                    out.push_back(std::move(e));
            pending.swap(out);
            flush();
            if (hadPause && pauseId != oldPause)
                Q_EMIT q->pauseEnded();
            if (pauseId != 0)
                showPause(pauseId);
            publish(/*force=*/true);
            Q_EMIT q->positionChanged(p);
        } catch (const std::exception &e) {
            fail(e);
        }
    }
};

ReplayController::ReplayController(QObject *parent)
    : RunFeed(parent)
    , d(std::make_unique<Private>(this))
{
    d->timer.setInterval(kTickMs);
    d->timer.setTimerType(Qt::PreciseTimer);
    connect(&d->timer, &QTimer::timeout, this, [this] {
        const qint64 ns = d->wall.nsecsElapsed();
        d->wall.restart();
        advance(ns);
    });
}

ReplayController::~ReplayController()
{
    d->timer.stop();
    d->source.reset();
    d->reader.reset();
}

bool ReplayController::open(const QString &path, QString *error)
{
    close();
    try {
        auto reader = std::make_unique<engine::SessionReader>(path);
        engine::SessionInfo info = reader->info();
        auto source = std::make_unique<engine::ReplaySource>(*reader, d.get());
        std::vector<std::int64_t> starts;
        for (const engine::CollectiveBoundary &c : reader->collectives())
            starts.push_back(c.startNs);
        std::sort(starts.begin(), starts.end());
        starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
        // The first span to start: every node is idle before it.
        std::int64_t firstSpan = std::numeric_limits<std::int64_t>::max();
        {
            struct Found { };
            try {
                reader->forEachSpanByStart([&](const engine::SpanEvent &s) {
                    firstSpan = s.startNs;
                    throw Found{};
                });
            } catch (const Found &) {
            }
        }
        // Every link's cumulative bytes, in one pass over the frames.
        std::map<std::pair<int, int>, Private::Cumulative> traffic;
        reader->forEachFrame([&](const net::FrameEvent &e) {
            if (e.side != net::FrameEvent::Side::Send || e.src == e.dst)
                return;
            Private::Cumulative &c = traffic[{e.src, e.dst}];
            c.emplace_back(e.sendCompleteNs, (c.empty() ? 0 : c.back().second) + e.bytes);
        });
        RunPlan plan;
        const QJsonDocument config = QJsonDocument::fromJson(reader->header().configJson);
        if (config.isObject()) {
            try {
                plan = planRun(engine::configFromJson(config.object()));
            } catch (const std::exception &) {
                // A config this build cannot read: no shard map, no formula.
            }
        }
        d->path = path;
        d->info = std::move(info);
        d->plan = std::move(plan);
        d->firstSpanNs = firstSpan;
        d->traffic = std::move(traffic);
        d->collectiveStarts = std::move(starts);
        d->reader = std::move(reader);
        d->source = std::move(source);
        d->source->setSpeed(
            std::clamp(d->speed, engine::ReplaySource::kMinSpeed, engine::ReplaySource::kMaxSpeed));
    } catch (const std::exception &e) {
        d->source.reset();
        d->reader.reset();
        const QString reason = oneLine(e.what());
        if (error)
            *error = reason;
        Q_EMIT errorOccurred(reason);
        return false;
    }
    d->resetPicture();
    d->shown = {};
    Q_EMIT cleared();
    Q_EMIT opened(describe());
    try {
        d->publish(/*force=*/true);
    } catch (const std::exception &e) {
        d->fail(e);
    }
    Q_EMIT positionChanged(positionNs());
    return true;
}

void ReplayController::close()
{
    if (!d->source)
        return;
    pause();
    d->source.reset();
    d->reader.reset();
    d->path.clear();
    d->info = {};
    d->plan = {};
    d->collectiveStarts.clear();
    d->traffic.clear();
    d->resetPicture();
    d->shown = {};
    Q_EMIT closed();
}

bool ReplayController::isOpen() const
{
    return d->source != nullptr;
}
QString ReplayController::path() const
{
    return d->path;
}
const engine::SessionReader *ReplayController::reader() const
{
    return d->reader.get();
}
qint64 ReplayController::beginNs() const
{
    return d->source ? d->source->begin() - 1 : 0;
}
qint64 ReplayController::endNs() const
{
    return d->source ? d->source->end() : 0;
}
qint64 ReplayController::positionNs() const
{
    return d->position();
}
double ReplayController::speed() const
{
    return d->speed;
}
bool ReplayController::isPlaying() const
{
    return d->playing;
}

QString ReplayController::describe() const
{
    if (!d->reader)
        return {};
    const engine::SessionInfo &i = d->info;
    return tr("%1, %2, %3 node(s), %4 of %5 steps recorded, %6 s, %7")
        .arg(QString::fromStdString(i.strategy), QString::fromStdString(i.model))
        .arg(i.nodes)
        .arg(i.stepsRecorded)
        .arg(i.stepsPlanned)
        .arg(double(i.durationNs) / 1e9, 0, 'f', 1)
        .arg(i.complete ? tr("complete") : tr("interrupted"));
}

std::optional<RunSettings> ReplayController::recordedSettings() const
{
    if (!d->reader)
        return std::nullopt;
    const QJsonDocument config = QJsonDocument::fromJson(d->reader->header().configJson);
    if (!config.isObject())
        return std::nullopt;
    try {
        return runSettingsOf(engine::configFromJson(config.object()));
    } catch (const std::exception &) {
        return std::nullopt;
    }
}

widgets::ClusterStatePtr ReplayController::state() const
{
    return d->lastState;
}

bool ReplayController::isPaused() const
{
    return d->shown.id != 0;
}

PauseView ReplayController::pauseAt(qint64 step, int collectiveKind, quint64 seq) const
{
    if (!d->reader)
        return {};
    try {
        const auto [t0, t1] = d->reader->timeRange();
        for (const engine::TensorRecord &r : d->reader->tensors(t0, t1))
            if (r.step == step && int(r.collective) == collectiveKind && r.seq == seq)
                return d->pauseView(r.pauseId, nullptr);
    } catch (const std::exception &) {
        // A damaged file: nothing to show (playback reports it).
    }
    return {};
}

void ReplayController::play()
{
    if (!d->source || d->playing)
        return;
    if (d->source->atEnd())
        seek(beginNs());
    d->playing = true;
    d->wall.start();
    d->timer.start();
    Q_EMIT playingChanged(true);
}

void ReplayController::pause()
{
    if (!d->playing)
        return;
    d->playing = false;
    d->timer.stop();
    Q_EMIT playingChanged(false);
}

void ReplayController::togglePlay()
{
    if (d->playing)
        pause();
    else
        play();
}

void ReplayController::setSpeed(double speed)
{
    if (!std::isfinite(speed))
        return;
    d->speed = std::clamp(speed, engine::ReplaySource::kMinSpeed, engine::ReplaySource::kMaxSpeed);
    if (d->source)
        d->source->setSpeed(d->speed);
}

void ReplayController::seek(qint64 ns)
{
    d->seekTo(ns);
}

bool ReplayController::seekToStep(qint64 step)
{
    if (!d->reader)
        return false;
    std::optional<std::int64_t> start;
    try {
        start = d->reader->stepStart(step);
    } catch (const std::exception &e) {
        d->fail(e);
        return false;
    }
    if (!start)
        return false;
    d->seekTo(*start - 1); // as ReplaySource::seekToStep: just before the step's first event
    return true;
}

// As ReplaySource does, landing at s - 1 for a collective starting at s; the
// seek is ours so that cleared() goes out only when the position moves.
bool ReplayController::nextCollective()
{
    if (!d->source)
        return false;
    const std::int64_t p = d->position();
    const std::int64_t after = p < std::numeric_limits<std::int64_t>::max() ? p + 1 : p;
    const auto it = std::upper_bound(d->collectiveStarts.begin(), d->collectiveStarts.end(), after);
    if (it == d->collectiveStarts.end())
        return false;
    d->seekTo(*it - 1);
    return true;
}

bool ReplayController::previousCollective()
{
    if (!d->source)
        return false;
    const auto it = std::upper_bound(d->collectiveStarts.begin(), d->collectiveStarts.end(), d->position());
    if (it == d->collectiveStarts.begin())
        return false;
    d->seekTo(*std::prev(it) - 1);
    return true;
}

std::size_t ReplayController::advance(qint64 wallNs)
{
    if (!d->source)
        return 0;
    const std::int64_t before = d->position();
    std::size_t emitted = 0;
    try {
        emitted = d->source->advance(std::max<qint64>(0, wallNs));
        d->flush();
        d->leavePauseIfOutside();
        d->publish(/*force=*/false);
    } catch (const std::exception &e) {
        d->fail(e);
        return emitted;
    }
    const std::int64_t p = d->position();
    if (p != before)
        Q_EMIT positionChanged(p);
    if (d->source && d->source->atEnd())
        pause();
    return emitted;
}

} // namespace smol::app
