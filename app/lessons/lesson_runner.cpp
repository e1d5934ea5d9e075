#include "lesson_runner.h"

#include "engine/strategies/strategy_registry.h"
#include "net/device_mesh.h"
#include "widgets/paint/palette.h"
#include "widgets/step_number.h"

#include <QJsonObject>
#include <QSet>

#include <algorithm>
#include <cmath>

namespace smol::app {

namespace {

constexpr int kNodeWaitMs = 200;
constexpr int kNodeWaitTicks = 150; // 30 s for local nodes to join
constexpr int kPauseSettleMs = 400; // for the held nodes' reports to reach the snapshots

RunSettings settingsOf(const LessonRun &run)
{
    RunSettings s;
    const auto &m = run.settings;
    const auto get = [&](const char *k) { return m.value(QLatin1String(k)); };
    // The lesson's value of `key`, when it gives one, into `field`.
    const auto take = [&](const char *key, auto &field, auto convert) {
        if (m.contains(QLatin1String(key)))
            field = convert(get(key));
    };
    const auto text = [](const QString &v) { return v; };
    const auto whole = [](const QString &v) { return v.toLongLong(); };
    s.strategy = get("strategy");
    take("model", s.model, text);
    take("nodes", s.nodes, [](const QString &v) { return v.toInt(); });
    take("batch", s.globalBatch, whole);
    take("steps", s.steps, whole);
    take("optimizer", s.optimizer, text);
    if (m.contains(QStringLiteral("lr")))
        s.lr = get("lr").toDouble();
    else if (s.optimizer == QLatin1String("adam"))
        s.lr = 0.001;
    take("seed", s.seed, [](const QString &v) { return v.toULongLong(); });
    take("placement", s.placement, text);
    take("micro-batches", s.microBatches, whole);
    take("schedule", s.schedule, text);
    take("mesh", s.mesh, text);
    s.testEvery = m.value(QStringLiteral("test-every"), QStringLiteral("0")).toLongLong();
    take("slow-motion", s.slowMotion, [](const QString &v) { return v.toDouble(); });
    take("compress", s.compression, text);
    take("compress-start", s.compressStart, whole);
    take("allreduce", s.allReduce, text);
    take("recompute", s.recompute, text);
    take("accumulate", s.accumulate, whole);
    take("precision", s.precision, text);
    return s;
}

} // namespace

LessonRunner::LessonRunner(EngineController *engine, QObject *parent) : QObject(parent), m_engine(engine)
{
    connect(engine, &EngineController::stateChanged, this, &LessonRunner::onState);
    connect(engine, &EngineController::pausedAt, this, &LessonRunner::onPaused);
    connect(engine, &EngineController::runMeasured, this, &LessonRunner::onMeasured);
    connect(engine, &EngineController::stepAvailable, this, &LessonRunner::onStepPoint);
    connect(engine, &EngineController::runFinished, this, [this] { onRunEnded(QString(), false); });
    connect(engine, &EngineController::runFailed, this, [this](const QString &why) { onRunEnded(why, false); });
    connect(engine, &EngineController::runStopped, this, [this](const QString &what) { onRunEnded(what, true); });
    connect(engine, &EngineController::errorOccurred, this, [this](const QString &why) {
        // Only what answers the runner's own start fails its step ("the run
        // needs 4 nodes; 3 are idle").
        if (m_inStart)
            fail(why);
    });
    connect(engine, &EngineController::predictionReceived, this, [this](const ClassPrediction &p) {
        m_class.add(p.viewer, p.name, p.step, p.value);
        if (m_open && p.step == m_index && m_steps[m_index].phase == Phase::Revealed)
            Q_EMIT viewChanged(); // the reveal's count goes on growing
    });
    connect(this, &LessonRunner::viewChanged, this, &LessonRunner::publishStep);
    m_nodeWait.setInterval(kNodeWaitMs);
    connect(&m_nodeWait, &QTimer::timeout, this, [this] {
        if (m_engine->readyNodes() >= m_runSettings.nodes) {
            m_nodeWait.stop();
            startRun();
        } else if (++m_nodeWaitTicks > kNodeWaitTicks) {
            m_nodeWait.stop();
            fail(tr("the run needs %1 nodes; %2 are idle").arg(m_runSettings.nodes).arg(m_engine->readyNodes()));
        }
    });
}

LessonRunner::~LessonRunner() = default;

void LessonRunner::open(const Lesson &lesson)
{
    close();
    m_lesson = lesson;
    m_steps = QVector<StepState>(lesson.steps.size());
    m_runs.clear();
    m_figures.clear();
    m_lastRun.clear();
    m_recordings.clear();
    m_recordDir.reset();
    m_class.clear();
    m_open = true;
    m_index = -1;
    enter(0);
}

void LessonRunner::close()
{
    if (!m_open)
        return;
    m_open = false;
    m_nodeWait.stop();
    m_startWhenStopped = false;
    abandonRun();
    if (m_engine && m_state)
        for (const widgets::NodeState &n : m_state->nodes) {
            m_engine->setNodeSlowdown(n.id, 1);
            m_engine->setNodeLink(n.id, 0, 0);
        }
    m_index = -1;
    Q_EMIT viewChanged();
}

bool LessonRunner::busy() const
{
    return m_open && m_index >= 0 && m_steps[m_index].phase == Phase::Waiting;
}

bool LessonRunner::reached(int step) const
{
    return step >= 0 && step < m_steps.size() &&
           (m_steps[step].phase == Phase::Reached || m_steps[step].phase == Phase::Revealed);
}

bool LessonRunner::failed() const { return m_open && m_index >= 0 && m_steps[m_index].phase == Phase::Failed; }

QVector<LessonRunner::Result> LessonRunner::results() const
{
    return m_open && m_index >= 0 ? m_steps[m_index].results : QVector<Result>();
}

void LessonRunner::next()
{
    if (!m_open || m_index < 0)
        return;
    StepState &st = m_steps[m_index];
    switch (st.phase) {
    case Phase::Waiting:
        return;
    case Phase::Failed:
        st.phase = Phase::NotStarted;
        enter(m_index);
        return;
    case Phase::Reached:
        if (!m_lesson.steps[m_index].reveals.isEmpty()) {
            st.phase = Phase::Revealed;
            Q_EMIT viewChanged();
            return;
        }
        break;
    case Phase::NotStarted:
    case Phase::Revealed:
        break;
    }
    if (m_index + 1 >= m_lesson.steps.size()) {
        Q_EMIT finished();
        return;
    }
    enter(m_index + 1);
}

void LessonRunner::back()
{
    if (!m_open || m_index <= 0 || busy())
        return;
    m_index -= 1;
    Q_EMIT focusRequested(m_lesson.steps[m_index].focus);
    Q_EMIT viewChanged();
}

void LessonRunner::enter(int index)
{
    m_index = index;
    StepState &st = m_steps[index];
    if (st.phase != Phase::NotStarted) { // done before: show it again
        Q_EMIT focusRequested(m_lesson.steps[index].focus);
        Q_EMIT viewChanged();
        return;
    }
    st.results.clear();
    st.status.clear();
    startWork();
}

void LessonRunner::startWork()
{
    const LessonStep &step = m_lesson.steps[m_index];
    StepState &st = m_steps[m_index];
    st.phase = Phase::Waiting;
    if (step.run) {
        m_runSettings = settingsOf(*step.run);
        m_runName = step.run->name;
        st.status = tr("Starting %1 on %2 nodes...").arg(m_runSettings.strategy).arg(m_runSettings.nodes);
        Q_EMIT settingsApplied(m_runSettings);
        Q_EMIT viewChanged();
        abandonRun();
        if (m_engine->isRunning()) { // ours, stopping; or one the teacher started: stop it too
            m_startWhenStopped = true;
            m_engine->clearBreakpoints();
            m_engine->stop();
            return;
        }
        startRun();
        return;
    }
    if (step.edit || step.until.kind != LessonUntil::Kind::None) {
        continueRun();
        return;
    }
    if (!step.compareA.isEmpty())
        abandonRun(); // the window replays the two recordings: no live run held meanwhile
    reach(); // text and reveals only
}

QVector<int> LessonRunner::idleNodeIds() const
{
    QVector<int> ids;
    if (m_state)
        for (const widgets::NodeState &n : m_state->nodes)
            if (n.state == widgets::NodeRunState::Idle)
                ids.push_back(n.id);
    std::sort(ids.begin(), ids.end());
    return ids;
}

void LessonRunner::startRun()
{
    if (!m_open || m_index < 0)
        return;
    const LessonStep &step = m_lesson.steps[m_index];
    if (m_engine->readyNodes() < m_runSettings.nodes) {
        if (!m_nodeWait.isActive()) {
            // Nodes still joining count; only what the cluster lacks is added.
            int have = 0;
            if (m_state)
                for (const widgets::NodeState &n : m_state->nodes)
                    have += n.state != widgets::NodeRunState::Lost ? 1 : 0;
            for (int i = m_state ? have : m_runSettings.nodes; i < m_runSettings.nodes; ++i)
                m_engine->addLocalNode();
            m_nodeWaitTicks = 0;
            m_steps[m_index].status = tr("Waiting for %1 nodes to be idle...").arg(m_runSettings.nodes);
            Q_EMIT viewChanged();
            m_nodeWait.start();
        }
        return;
    }
    // Slowdowns and links by rank: ranks go to the idle nodes in id order.
    if (m_state)
        for (const widgets::NodeState &n : m_state->nodes) {
            m_engine->setNodeSlowdown(n.id, 1);
            m_engine->setNodeLink(n.id, 0, 0);
        }
    const QVector<int> ids = idleNodeIds();
    for (auto it = step.run->slowdown.cbegin(); it != step.run->slowdown.cend(); ++it)
        m_engine->setNodeSlowdown(it.key() < ids.size() ? ids[it.key()] : it.key(), it.value());
    for (auto it = step.run->links.cbegin(); it != step.run->links.cend(); ++it)
        m_engine->setNodeLink(it.key() < ids.size() ? ids[it.key()] : it.key(), it->mbit, it->latencyMs);
    m_engine->clearBreakpoints();
    const QString spec = step.until.breakpoint();
    if (!spec.isEmpty())
        m_engine->addBreakpoint(spec);
    m_runSettings.recordPath.clear();
    if (step.run->record) {
        if (!m_recordDir)
            m_recordDir = std::make_unique<QTemporaryDir>();
        if (!m_recordDir->isValid()) {
            fail(tr("cannot make a folder for the lesson's recordings: %1").arg(m_recordDir->errorString()));
            return;
        }
        m_runSettings.recordPath = m_recordDir->filePath(QStringLiteral("%1.smolrec").arg(step.run->name));
        m_recordings.insert(step.run->name, m_runSettings.recordPath);
    }
    m_pause = {};
    m_pauseState.reset();
    m_runStep = -1;
    m_runActive = true;
    m_steps[m_index].status = tr("Running %1 on %2 nodes").arg(m_runSettings.strategy).arg(m_runSettings.nodes);
    Q_EMIT viewChanged();
    m_inStart = true;
    m_engine->start(m_runSettings); // a bad config fails at once (runFailed, while m_inStart)
    m_inStart = false;
}

void LessonRunner::abandonRun()
{
    if (!m_runActive)
        return;
    // Its end (runStopped, or runMeasured and runFinished if it ended first)
    // is still to come, queued: it must not be taken for the next run's.
    ++m_pendingEnds;
    m_runActive = false;
    m_pause = {};
    if (m_engine && m_engine->isRunning()) {
        m_engine->clearBreakpoints();
        m_engine->stop();
    }
}

void LessonRunner::continueRun()
{
    const LessonStep &step = m_lesson.steps[m_index];
    if (!m_runActive || !m_engine->isRunning()) {
        fail(tr("no run is going for this step to continue (the step before it ended its run)"));
        return;
    }
    if (m_pause.id == 0 && step.until.kind != LessonUntil::Kind::End) {
        fail(tr("the run is not held at a collective"));
        return;
    }
    if (step.edit) {
        m_engine->editTensor(step.edit->rank, step.edit->op, step.edit->factor);
        if (step.until.kind == LessonUntil::Kind::None) {
            reach();
            return;
        }
    }
    m_engine->clearBreakpoints();
    const QString spec = step.until.breakpoint();
    if (!spec.isEmpty())
        m_engine->addBreakpoint(spec);
    const bool wasPaused = m_pause.id != 0;
    m_pause = {};
    m_pauseState.reset();
    m_steps[m_index].status = tr("Running %1 on %2 nodes").arg(m_runSettings.strategy).arg(m_runSettings.nodes);
    Q_EMIT viewChanged();
    if (!wasPaused)
        return;
    if (step.until.kind == LessonUntil::Kind::Next)
        m_engine->stepCollective();
    else
        m_engine->resume();
}

void LessonRunner::reach()
{
    StepState &st = m_steps[m_index];
    st.phase = Phase::Reached;
    const LessonUntil &u = m_lesson.steps[m_index].until;
    if (m_pause.id != 0)
        st.status = m_pause.inputs.isEmpty() // where, with the step the header and the inspector name
                        ? tr("Paused: %1").arg(m_pause.reason)
                        : tr("Paused at %1 '%2', %3 (%4)")
                              .arg(m_pause.inputs.front().collective, m_pause.inputs.front().name,
                                   widgets::stepText(m_pause.step()), m_pause.reason);
    else if (u.kind == LessonUntil::Kind::End || m_lesson.steps[m_index].run)
        st.status = tr("Done: %1 on %2 nodes, %3 steps").arg(m_runSettings.strategy).arg(m_runSettings.nodes)
                        .arg(m_runSettings.steps);
    evaluate();
    const LessonStep &step = m_lesson.steps[m_index];
    if (!step.compareA.isEmpty())
        st.status = tr("Side by side: %1 and %2 (one scrubber moves both)").arg(step.compareA, step.compareB);
    if (!step.compareA.isEmpty())
        Q_EMIT compareRequested(m_recordings.value(step.compareA), m_recordings.value(step.compareB));
    Q_EMIT focusRequested(m_lesson.steps[m_index].focus);
    Q_EMIT stepReached(m_index);
    Q_EMIT viewChanged();
}

void LessonRunner::fail(const QString &reason)
{
    if (!m_open || m_index < 0)
        return;
    StepState &st = m_steps[m_index];
    st.phase = Phase::Failed;
    st.status = reason;
    Q_EMIT stepFailed(m_index, reason);
    Q_EMIT viewChanged();
}

void LessonRunner::evaluate()
{
    StepState &st = m_steps[m_index];
    st.results.clear();
    const auto look = [this](const QString &name) { return lookup(name); };
    for (const LessonReveal &r : m_lesson.steps[m_index].reveals) {
        Result res;
        try {
            res.measured = r.measure.evaluate(look);
            if (!r.formula.isEmpty())
                res.formula = r.formula.evaluate(look);
            res.agrees = !res.formula || r.agrees(res.measured, *res.formula);
        } catch (const LessonError &e) {
            res.error = QString::fromUtf8(e.what());
            res.agrees = false;
        }
        st.results.push_back(res);
    }
}

// ---- figures ---------------------------------------------------------------

std::optional<double> LessonRunner::lookup(const QString &name) const
{
    QString base = name;
    int rank = -1;
    const int at = int(name.indexOf('@'));
    if (at >= 0) {
        bool ok = false;
        rank = name.mid(at + 1).toInt(&ok);
        if (!ok)
            return std::nullopt;
        base = name.left(at);
    }
    const QStringList parts = base.split('.');
    const QString run = parts.size() == 2 ? parts[0] : QString();
    const QString figure = parts.last();
    if (run == QLatin1String("pause"))
        return pauseFigure(figure, rank);
    if (isConfigName(base))
        return configFigure(run, figure);
    const QString which = run.isEmpty() ? m_lastRun : run;
    const auto it = m_runs.constFind(which);
    if (it == m_runs.cend())
        throw LessonError((run.isEmpty() ? tr("'%1' needs a finished run before it").arg(name)
                                         : tr("'%1': no finished run named '%2'").arg(name, run))
                              .toStdString());
    return runFigure(it.key(), figure, rank);
}

std::optional<double> LessonRunner::runFigure(const QString &run, const QString &f, int rank) const
{
    const RunMeasurement &m = *m_runs.constFind(run);
    if (rank >= m.ranks.size())
        throw LessonError(tr("rank %1 is not in the %2-node run").arg(rank).arg(m.ranks.size()).toStdString());
    if (m.ranks.isEmpty())
        return std::nullopt;
    const engine::Figure *figure = engine::lessonFigure(f.toStdString(), /*pause=*/false);
    return figure ? valued(*figure, f, rank, figure->of(*m_figures.constFind(run), rank)) : std::nullopt;
}

std::optional<double> LessonRunner::pauseFigure(const QString &f, int rank) const
{
    if (m_pause.id == 0 || !m_pauseState)
        throw LessonError(tr("'pause.%1' needs the run held at a collective").arg(f).toStdString());
    const engine::Figure *figure = engine::lessonFigure(f.toStdString(), /*pause=*/true);
    return figure ? valued(*figure, f, rank, figure->of(pauseFigures(), rank)) : std::nullopt;
}

// A figure's value, or the figure's reason why there is none.
std::optional<double> LessonRunner::valued(const engine::Figure &figure, const QString &name, int rank,
                                           std::optional<double> value)
{
    if (value || !figure.missing)
        return value;
    throw LessonError(
        QString::fromLatin1(figure.missing).replace(QLatin1String("%1"), name).replace(QLatin1String("%2"), QString::number(rank))
            .toStdString());
}

// What a finished run measured, as the figure table reads it.
engine::RunFigures LessonRunner::runFigures(const RunMeasurement &m)
{
    engine::RunFigures r;
    const double steps = std::max<qint64>(1, m.steps);
    r.samplesPerS = m.samplesPerSecond;
    r.finalLoss = m.finalLoss;
    r.testAccuracy = m.testAccuracy;
    if (m.extra.contains(QStringLiteral("bubble_fraction")))
        r.bubble = m.extra.value(QStringLiteral("bubble_fraction"));
    r.seconds = m.seconds;
    r.meanStepTimeS = m.seconds / steps;
    r.maxStaleness = double(m.maxStaleness);
    r.updates = double(m.asyncUpdates);
    r.nanParams = std::isnan(m.paramChecksum) || std::isnan(m.finalLoss) ? 1.0 : 0.0;
    for (int rank = 0; rank < m.ranks.size(); ++rank) {
        const NodeMeasurement &n = m.ranks[rank];
        engine::NodeFigures &f = r.byNode[rank];
        f.bytesSentPerStep = double(n.stepBytesSent) / steps;
        auto axis = [&](const char *name) -> std::optional<double> {
            const auto it = n.stepBytesByAxis.constFind(QLatin1String(name));
            return it == n.stepBytesByAxis.cend() ? std::nullopt : std::optional<double>(double(*it) / steps);
        };
        f.dpBytesPerStep = axis("dp");
        f.tpBytesPerStep = axis("tp");
        f.ppBytesPerStep = axis("pp");
        f.cpBytesPerStep = axis("cp");
        f.idleShare = n.idleShare;
        f.heldAtStepEnd = double(n.memory.params + n.memory.grads + n.memory.optimizer);
        f.paramsAtEnd = double(n.memory.params);
        f.gradsAtEnd = double(n.memory.grads);
        f.optimizerAtEnd = double(n.memory.optimizer);
        f.activationsAtEnd = double(n.memory.activations);
        f.activationPeak = double(n.activationPeak);
        f.computeSeconds = n.computeSeconds;
    }
    return r;
}

// The cluster held at the current pause, by rank: the tensors at the
// collective (its results once it has run) and what each node reported.
engine::PauseFigures LessonRunner::pauseFigures() const
{
    engine::PauseFigures p;
    const QVector<widgets::PausedTensor> &tensors = m_pause.results.isEmpty() ? m_pause.inputs : m_pause.results;
    for (const widgets::PausedTensor &t : tensors)
        if (t.nanCount > 0)
            p.byRank[t.rank].nanTensor = true;
    for (const widgets::PausedTensor &t : m_pause.inputs)
        p.byRank[t.rank].tensorBytes += 4 * t.count;
    if (!m_pause.inputs.isEmpty())
        p.step = double(m_pause.inputs.front().step);
    for (const widgets::NodeState &n : m_pauseState->nodes) {
        if (n.rank < 0)
            continue;
        QSet<QString> layers;
        for (const widgets::ShardCell &c : m_pauseState->shards)
            if (c.materialisedOn.contains(n.rank))
                layers.insert(c.layer);
        engine::PauseNodeFigures &f = p.byRank[n.rank];
        f.reported = true;
        f.materialisedLayers = std::max(f.materialisedLayers, int(layers.size()));
        const auto &mb = n.memory;
        f.params = std::max(f.params, std::int64_t(mb.params));
        f.grads = std::max(f.grads, std::int64_t(mb.grads));
        f.optimizer = std::max(f.optimizer, std::int64_t(mb.optimizer));
        f.activations = std::max(f.activations, std::int64_t(mb.activations));
        f.comm = std::max(f.comm, std::int64_t(mb.comm));
        f.live = std::max(f.live, std::int64_t(mb.live));
    }
    return p;
}

std::optional<double> LessonRunner::configFigure(const QString &run, const QString &f) const
{
    // A finished run's own figures; the current run's settings before it ends.
    const auto it = m_runs.constFind(run.isEmpty() ? (m_runActive ? m_runName : m_lastRun) : run);
    const bool finished = it != m_runs.cend() && (!run.isEmpty() || !m_runActive);
    if (!run.isEmpty() && it == m_runs.cend())
        throw LessonError(tr("no finished run named '%1'").arg(run).toStdString());
    const RunSettings &s = finished ? it->settings : m_runSettings;
    if (f == QLatin1String("N"))
        return double(finished ? it->nodes : s.nodes);
    if (f == QLatin1String("B"))
        return double(s.globalBatch);
    if (f == QLatin1String("M"))
        return double(std::max<qint64>(1, s.microBatches));
    for (net::MeshAxis axis : net::kMeshAxes) // a mesh's axes (1 without one)
        if (f == QLatin1String(net::meshAxisName(axis)))
            return double(s.mesh.isEmpty() ? 1 : net::DeviceMesh::parse(s.mesh.toStdString()).size(axis));
    if (f == QLatin1String("steps"))
        return double(finished ? it->steps : s.steps);
    // Parameters: the finished run's count, or the shard map's (every
    // parameter's elements, as the planned run cuts them).
    qint64 params = finished ? it->paramCount : 0;
    QSet<QString> layers;
    const widgets::ClusterStatePtr state = m_pauseState ? m_pauseState : m_state;
    if (state) {
        QMap<QString, qint64> sizes;
        for (const widgets::ShardCell &c : state->shards) {
            sizes[c.param] = std::max<qint64>(sizes.value(c.param), c.end);
            layers.insert(c.layer);
        }
        if (params == 0)
            for (qint64 n : sizes)
                params += n;
    }
    if (f == QLatin1String("P"))
        return double(params);
    if (f == QLatin1String("S")) // the gradients' bytes: 4 an element, 2 in bf16
        return (s.precision == QLatin1String("bf16") ? 2.0 : 4.0) * double(params);
    if (f == QLatin1String("layers"))
        return double(layers.size());
    if (f.startsWith(QLatin1String("planned_"))) {
        engine::ClosedFormInput in{params, finished ? it->nodes : s.nodes, s.optimizer == QLatin1String("adam")};
        in.accumulate = std::max<qint64>(1, s.accumulate);
        in.bf16 = s.precision == QLatin1String("bf16");
        return plannedFigure(s.strategy, f, in);
    }
    return std::nullopt;
}

// What the run's strategy says in closed form (its StrategyDescription).
std::optional<double> LessonRunner::plannedFigure(const QString &strategy, const QString &f,
                                                  const engine::ClosedFormInput &in)
{
    const engine::StrategyDescription *d = engine::describeStrategy(strategy.toStdString());
    if (!d)
        return std::nullopt;
    if (f == QLatin1String("planned_model_states")) {
        if (const auto bytes = d->modelStateBytes(in))
            return double(*bytes);
    } else if (const auto wire = d->bytesPerStep(in)) {
        return f == QLatin1String("planned_bytes_per_step_max") ? wire->busiest : wire->mean;
    }
    throw LessonError(tr("'%1': %2 has no closed form for it").arg(f, strategy).toStdString());
}

// ---- what the engine says --------------------------------------------------

void LessonRunner::onState(const widgets::ClusterStatePtr &state)
{
    m_state = state;
    if (m_pause.id != 0)
        m_pauseState = state; // the held cluster: who holds which layer, memory at the collective
}

void LessonRunner::onStepPoint(const widgets::StepPoint &point)
{
    if (!busy() || !m_runActive)
        return;
    m_runStep = point.step;
    m_steps[m_index].status = tr("Running %1 on %2 nodes: step %3 of %4")
                                  .arg(m_runSettings.strategy)
                                  .arg(m_runSettings.nodes)
                                  .arg(point.step + 1)
                                  .arg(m_runSettings.steps);
    Q_EMIT viewChanged();
}

void LessonRunner::onPaused(const PauseView &pause)
{
    if (!m_open || !m_runActive || pause.id == m_pause.id)
        return;
    m_pause = pause;
    m_pauseState = m_state;
    if (!busy())
        return;
    const LessonUntil::Kind k = m_lesson.steps[m_index].until.kind;
    if (k != LessonUntil::Kind::Collective && k != LessonUntil::Kind::Step && k != LessonUntil::Kind::Next)
        return;
    // The nodes report what they hold at the pause (gathered layers, memory)
    // just after it: the snapshots of the next moment show it.
    const quint64 id = pause.id;
    QTimer::singleShot(kPauseSettleMs, this, [this, id] {
        if (m_open && busy() && m_pause.id == id)
            reach();
    });
}

void LessonRunner::onMeasured(const RunMeasurement &m)
{
    if (!m_open || !m_runActive || (m_pendingEnds > 0 && !m_inStart))
        return;
    m_runs.insert(m_runName, m);
    m_figures.insert(m_runName, runFigures(m));
    m_lastRun = m_runName;
}

void LessonRunner::onRunEnded(const QString &what, bool stopped)
{
    const bool current = m_inStart || (m_pendingEnds == 0 && m_runActive);
    if (!current) {
        if (m_pendingEnds > 0 && !m_inStart)
            --m_pendingEnds; // a run the runner left behind
        if (m_startWhenStopped && m_open && !m_engine->isRunning()) {
            m_startWhenStopped = false;
            startRun();
        }
        return;
    }
    m_runActive = false;
    m_pause = {};
    if (!m_open || !busy())
        return;
    if (stopped) {
        fail(tr("the run was stopped (%1); Next runs the step again").arg(what));
        return;
    }
    if (!what.isEmpty()) {
        fail(tr("the run failed: %1").arg(what));
        return;
    }
    const LessonUntil::Kind k = m_lesson.steps[m_index].until.kind;
    if (k == LessonUntil::Kind::End || k == LessonUntil::Kind::None)
        reach();
    else
        fail(tr("the run ended before it reached %1").arg(m_lesson.steps[m_index].until.breakpoint()));
}

// ---- the panel's view ------------------------------------------------------

widgets::LessonStepView LessonRunner::view() const
{
    widgets::LessonStepView v;
    if (!m_open || m_index < 0)
        return v;
    const LessonStep &step = m_lesson.steps[m_index];
    const StepState &st = m_steps[m_index];
    v.lesson = m_lesson.title;
    v.index = m_index;
    v.count = int(m_lesson.steps.size());
    v.title = step.title;
    v.text = step.text;
    v.status = st.status;
    v.busy = st.phase == Phase::Waiting;
    v.failed = st.phase == Phase::Failed;
    const bool shown = st.phase == Phase::Revealed;
    for (int i = 0; i < step.reveals.size(); ++i) {
        const LessonReveal &r = step.reveals[i];
        widgets::LessonReveal out;
        out.label = r.label;
        out.formula = r.show.isEmpty() ? r.formula.text() : r.show;
        if (i < st.results.size()) {
            const Result &res = st.results[i];
            out.measured = res.error.isEmpty() ? formatLessonValue(res.measured, r.unit) : res.error;
            if (res.formula)
                out.formulaValue = formatLessonValue(*res.formula, r.unit);
            out.agrees = res.agrees;
        }
        out.revealed = shown;
        if (i == 0 && shown) // the class was asked the first reveal's question
            if (const std::optional<ClassSummary> c = classSummary(m_index); c && c->answered > 0) {
                out.classAnswers = tr("Class: %1").arg(classAnswersText(*c, r.unit, 6));
                out.classHistogram = tr("%1  (%2 to %3)")
                                         .arg(histogramText(c->histogram), formatLessonValue(c->low, r.unit),
                                              formatLessonValue(c->high, r.unit));
            }
        v.reveals.push_back(out);
    }
    v.canBack = m_index > 0 && !v.busy;
    v.canNext = !v.busy;
    if (v.failed)
        v.nextLabel = tr("Retry");
    else if (v.busy)
        v.nextLabel = tr("Running...");
    else if (st.phase == Phase::Reached && !step.reveals.isEmpty())
        v.nextLabel = tr("Reveal");
    else if (m_index + 1 >= m_lesson.steps.size())
        v.nextLabel = tr("Finish");
    else
        v.nextLabel = tr("Next");
    return v;
}

// ---- the students' windows ---------------------------------------------------

namespace {
constexpr int kMaxStepTextChars = 4000; // a step's text, as sent to every viewer
} // namespace

QJsonObject LessonRunner::stepJson() const
{
    if (!m_open || m_index < 0)
        return {};
    const LessonStep &step = m_lesson.steps[m_index];
    const StepState &st = m_steps[m_index];
    QJsonObject o{{QStringLiteral("lesson"), m_lesson.title},
                  {QStringLiteral("index"), m_index},
                  {QStringLiteral("count"), int(m_lesson.steps.size())},
                  {QStringLiteral("title"), step.title},
                  {QStringLiteral("text"), step.text.left(kMaxStepTextChars)}};
    if (!step.reveals.isEmpty()) {
        const LessonReveal &r = step.reveals.front();
        o.insert(QStringLiteral("question"), r.label);
        o.insert(QStringLiteral("unit"), lessonUnitName(r.unit));
        o.insert(QStringLiteral("tolerance"), r.tolerance);
        o.insert(QStringLiteral("absolute"), r.absolute);
        const bool revealed = st.phase == Phase::Revealed;
        o.insert(QStringLiteral("revealed"), revealed);
        if (revealed && !st.results.isEmpty() && st.results.front().error.isEmpty())
            o.insert(QStringLiteral("measured"), formatLessonValue(st.results.front().measured, r.unit));
    }
    return o;
}

void LessonRunner::publishStep()
{
    const QJsonObject step = stepJson();
    if (step == m_published || !m_engine)
        return;
    m_published = step;
    m_engine->publishLesson(step);
}

std::optional<ClassSummary> LessonRunner::classSummary(int step) const
{
    if (!m_open || step < 0 || step >= m_steps.size() || m_lesson.steps[step].reveals.isEmpty() ||
        m_steps[step].results.isEmpty() || !m_steps[step].results.front().error.isEmpty())
        return std::nullopt;
    const LessonReveal &r = m_lesson.steps[step].reveals.front();
    return m_class.summarize(step, m_steps[step].results.front().measured, r.tolerance, r.absolute);
}

} // namespace smol::app
