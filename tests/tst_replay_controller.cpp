// The replay bridge, driven as the window drives it, on a session it records
// itself (ddp, 3 nodes, 12 steps, a breakpoint at step 5's all-reduce held
// for a moment): bad files fail in one line; opening shows the recorded
// nodes at the start; a seek clears the views and rebuilds exactly the
// file's loss curve up to the position and its memory; the collective jumps
// land where ReplaySource lands; playing to the end shows every step once;
// a seek into the recorded pause shows every node's tensor as recorded.
// One step number at every recorded pause of a zero3 run, the held-out
// loss's gathers after their step was reported among them.
#include "app/replay/replay_controller.h"
#include "app/feed/timeline_feed.h"

#include "engine/breakpoints/breakpoint_spec.h"
#include "engine/breakpoints/breakpoints.h"
#include "engine/cluster/config_json.h"
#include "engine/memory_tracker.h"
#include "engine/session/session_reader.h"
#include "engine/session/session_recorder.h"
#include "engine/breakpoints/tensor_snapshot.h"
#include "engine/trainer.h"
#include "widgets/cluster/cluster_painter.h"
#include "widgets/step_number.h"

#include <QtTest>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>

#include <atomic>
#include <limits>
#include <map>
#include <set>
#include <thread>

using namespace smol;
using namespace smol::app;
using namespace smol::engine;

namespace {

constexpr std::int64_t kLongAgo = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kFarAhead = std::numeric_limits<std::int64_t>::max();

TrainConfig config()
{
    TrainConfig c;
    c.strategy = "ddp";
    c.nodes = 3;
    c.steps = 12;
    c.seed = 3;
    c.globalBatch = 60;
    c.testEvery = 4;
    return c;
}

// A run recorded as `smolctl train --record --break` records it.
void record(const QString &path, TrainConfig c = config(), const char *breakpoint = "allreduce@step=5")
{
    SessionHeader h = sessionHeaderFor(c, "127.0.0.1");
    SessionRecorder rec(path, h);
    BreakpointController breakpoints;
    breakpoints.addBreakpoint(parseBreakpoint(breakpoint));
    breakpoints.setPausedCallback([&rec](std::shared_ptr<const PauseState> pause) {
        const std::int64_t now = net::monotonicNs();
        for (const auto *list : {&pause->inputs, &pause->results})
            for (const TensorSnapshot &t : *list)
                rec.onTensor(TensorRecord{now, pause->id, t.node, t.step, t.kind, t.seq, t.name, t.before,
                                          snapshotToJson(t)});
    });
    std::atomic<bool> done{false};
    std::thread resumer([&] { // hold each pause for a moment, as a user would
        std::uint64_t seen = 0;
        while (!done) {
            if (auto p = breakpoints.waitForPause(std::chrono::milliseconds(50), seen)) {
                seen = p->id;
                std::this_thread::sleep_for(std::chrono::milliseconds(30));
                breakpoints.resume();
            }
        }
    });
    c.events = &rec;
    c.breakpoints = &breakpoints;
    const TrainSummary s = runTraining(c);
    done = true;
    resumer.join();
    rec.finish(s.finalLoss);
}

struct LossMetric {
    std::int64_t step;
    std::int64_t t;
    double value;
};

std::vector<LossMetric> clusterLosses(const SessionReader &r, std::int64_t upTo = kFarAhead)
{
    std::vector<LossMetric> out;
    for (const MetricSample &m : r.metrics(kLongAgo, upTo, "loss"))
        if (m.node == -1)
            out.push_back({m.step, m.tNs, m.value});
    return out;
}

widgets::ClusterStatePtr lastState(const QSignalSpy &spy)
{
    return spy.isEmpty() ? nullptr : spy.last().at(0).value<widgets::ClusterStatePtr>();
}

} // namespace

class TestReplayController : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase();
    void badFilesFailInOneLine();
    void openShowsTheStart();
    void seekRebuildsTheViews();
    void collectiveJumps();
    void playThroughShowsEveryStepOnce();
    void timerPlaysToTheEnd();
    void recordedPause();
    void oneStepNumberAtRecordedPauses();
    void damageFoundWhilePlaying();
    void glooRecordingIsMarked();

private:
    QTemporaryDir m_dir;
    QString m_path;
};

void TestReplayController::initTestCase()
{
    memory::install();
    torch::set_num_threads(1);
    QVERIFY(m_dir.isValid());
    m_path = m_dir.filePath("run.smolrec");
    record(m_path);
    SessionReader reader(m_path);
    QVERIFY(reader.isComplete());
    QCOMPARE(clusterLosses(reader).size(), std::size_t(12));
    QVERIFY(reader.info().tensors >= 3);
}

void TestReplayController::badFilesFailInOneLine()
{
    ReplayController replay;
    QVERIFY(replay.open(m_path));
    QSignalSpy errors(&replay, &ReplayController::errorOccurred);
    QSignalSpy closed(&replay, &ReplayController::closed);

    const QString text = m_dir.filePath("notes.txt");
    {
        QFile f(text);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("this is not a session file\n");
    }
    QString error;
    QVERIFY(!replay.open(text, &error));
    QVERIFY(!error.isEmpty());
    QVERIFY(!error.contains('\n'));
    QVERIFY(error.contains("notes.txt"));
    QCOMPARE(errors.count(), 1);
    QCOMPARE(errors.last().at(0).toString(), error);
    QCOMPARE(closed.count(), 1); // the session open before is closed
    QVERIFY(!replay.isOpen());
    QVERIFY(replay.reader() == nullptr);
    QCOMPARE(replay.advance(1'000'000), std::size_t(0));

    // A truncated copy: SQLite's header survives, half the pages do not.
    const QString truncated = m_dir.filePath("truncated.smolrec");
    {
        QFile in(m_path);
        QVERIFY(in.open(QIODevice::ReadOnly));
        const QByteArray bytes = in.readAll();
        QFile out(truncated);
        QVERIFY(out.open(QIODevice::WriteOnly));
        out.write(bytes.left(bytes.size() / 2));
    }
    error.clear();
    QVERIFY(!replay.open(truncated, &error));
    QVERIFY(!error.isEmpty());
    QVERIFY(!error.contains('\n'));
    QCOMPARE(errors.count(), 2);
    QVERIFY(!replay.isOpen());

    QVERIFY(!replay.open(m_dir.filePath("missing.smolrec"), &error));
    QVERIFY(error.contains("missing.smolrec"));
}

void TestReplayController::openShowsTheStart()
{
    ReplayController replay;
    QStringList order;
    connect(&replay, &ReplayController::cleared, this, [&] { order << "cleared"; });
    connect(&replay, &ReplayController::opened, this, [&] { order << "opened"; });
    connect(&replay, &ReplayController::stateChanged, this, [&] { order << "state"; });
    QSignalSpy states(&replay, &ReplayController::stateChanged);
    QSignalSpy opened(&replay, &ReplayController::opened);
    QVERIFY(replay.open(m_path));
    QCOMPARE(order, (QStringList{"cleared", "opened", "state"}));
    QVERIFY(replay.isOpen());
    QCOMPARE(replay.path(), m_path);
    QVERIFY(replay.reader() != nullptr);
    QCOMPARE(replay.positionNs(), replay.beginNs());
    QVERIFY(replay.endNs() > replay.beginNs());
    const QString description = opened.at(0).at(0).toString();
    QCOMPARE(description, replay.describe());
    QVERIFY2(description.contains("ddp") && description.contains("12 of 12 steps") &&
                 description.contains("complete") && description.contains("3 node"),
             qPrintable(description));

    const auto state = lastState(states);
    QVERIFY(state);
    QCOMPARE(state->strategy, QString("ddp"));
    QCOMPARE(state->topology, widgets::Topology::Ring);
    QCOMPARE(state->step, std::int64_t(-1));
    QCOMPARE(state->steps, std::int64_t(12));
    QCOMPARE(state->nodes.size(), 3);
    for (int r = 0; r < 3; ++r) {
        const widgets::NodeState &n = state->nodes[r];
        QCOMPARE(n.rank, r);
        QCOMPARE(n.name, QString("node %1").arg(r));
        QCOMPARE(n.host, QString("127.0.0.1"));
        QCOMPARE(n.role, QString("worker"));
        QCOMPARE(n.state, widgets::NodeRunState::Idle);
        QCOMPARE(n.memory.live, std::int64_t(0));
        QVERIFY(n.predictedBytes.has_value() && *n.predictedBytes > 0); // ddp: 8P from the header's config
    }
    QVERIFY(!state->shards.isEmpty());
    for (const widgets::ShardCell &cell : state->shards)
        QCOMPARE(cell.owner, -1); // ddp replicates every parameter
    QVERIFY(state->links.isEmpty());
}

// seekToStep(n) lands just before step n's first event (as ReplaySource
// does). The steps shown are then those whose cluster-wide loss was recorded
// at or before that position: 0 .. n-1, or 0 .. n-2 when a node started
// step n before rank 0 reported step n-1's loss.
void TestReplayController::seekRebuildsTheViews()
{
    ReplayController replay;
    QVERIFY(replay.open(m_path));
    QStringList order;
    QVector<widgets::StepPoint> points;
    connect(&replay, &ReplayController::cleared, this, [&] { order << "cleared"; });
    connect(&replay, &ReplayController::stepAvailable, this, [&](const widgets::StepPoint &p) {
        order << QString("step %1").arg(p.step);
        points << p;
    });
    connect(&replay, &ReplayController::stateChanged, this, [&] { order << "state"; });
    QSignalSpy states(&replay, &ReplayController::stateChanged);
    QSignalSpy positions(&replay, &ReplayController::positionChanged);
    QSignalSpy testLoss(&replay, &ReplayController::testLossAvailable);

    QVERIFY(!replay.seekToStep(99)); // no such step: nothing moves, nothing clears
    QVERIFY(order.isEmpty());

    const SessionReader &reader = *replay.reader();
    for (const std::int64_t n : {6, 9, 3}) {
        order.clear();
        points.clear();
        testLoss.clear();
        QVERIFY(replay.seekToStep(n));
        const std::int64_t p = replay.positionNs();
        QCOMPARE(p, *reader.stepStart(n) - 1);
        QCOMPARE(positions.last().at(0).toLongLong(), p);
        const std::vector<LossMetric> expected = clusterLosses(reader, p);
        QVERIFY(expected.size() == std::size_t(n) || expected.size() == std::size_t(n - 1));
        QCOMPARE(order.first(), QString("cleared"));
        QCOMPARE(order.last(), QString("state"));
        QCOMPARE(order.count("state"), 1);
        QCOMPARE(std::size_t(points.size()), expected.size());
        for (std::size_t k = 0; k < expected.size(); ++k) {
            const widgets::StepPoint &pt = points[int(k)];
            QCOMPARE(pt.step, std::int64_t(k));
            QCOMPARE(pt.loss, expected[k].value);
            QCOMPARE(pt.seconds, double(expected[k].t - reader.header().startNs) / 1e9);
            QVERIFY(pt.samplesPerSecond > 0);
            QCOMPARE(pt.bytesPerSecondPerNode.size(), 3);
            QVERIFY(pt.bytesPerSecondPerNode[0] > 0); // ddp: every rank sends every step
        }
        // Test losses up to the position (testEvery = 4: after steps 3, 7, 11).
        int expectedTests = 0;
        for (const MetricSample &m : reader.metrics(kLongAgo, p, "test_loss"))
            expectedTests += m.node == -1;
        QCOMPARE(testLoss.count(), expectedTests);

        const auto state = lastState(states);
        QCOMPARE(state->step, expected.back().step);
        const std::vector<MemorySample> memory = reader.latestMemory(p);
        QCOMPARE(memory.size(), std::size_t(3));
        for (const MemorySample &m : memory) {
            const widgets::NodeState &ns = state->nodes[m.node];
            QCOMPARE(ns.memory.live, m.memory.live);
            QCOMPARE(ns.memory.params, m.memory.params);
            QCOMPARE(ns.memory.grads, m.memory.grads);
            QCOMPARE(ns.memory.peak, m.memory.peak);
            QCOMPARE(ns.state, widgets::NodeRunState::Running);
        }
        QVERIFY(!state->links.isEmpty()); // the second before a mid-run step saw traffic
    }
}

void TestReplayController::collectiveJumps()
{
    ReplayController replay;
    QVERIFY(replay.open(m_path));
    QSignalSpy positions(&replay, &ReplayController::positionChanged);
    QSignalSpy cleared(&replay, &ReplayController::cleared);
    std::vector<std::int64_t> starts;
    for (const CollectiveBoundary &c : replay.reader()->collectives())
        starts.push_back(c.startNs);
    std::sort(starts.begin(), starts.end());
    starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
    QVERIFY(starts.size() >= 12);

    QVERIFY(!replay.previousCollective()); // none before the start
    QCOMPARE(cleared.count(), 0);
    for (std::size_t k = 0; k < 3; ++k) {
        QVERIFY(replay.nextCollective());
        QCOMPARE(replay.positionNs(), starts[k] - 1);
        QCOMPARE(positions.last().at(0).toLongLong(), starts[k] - 1);
    }
    QVERIFY(replay.previousCollective());
    QCOMPARE(replay.positionNs(), starts[1] - 1);
    QCOMPARE(positions.last().at(0).toLongLong(), starts[1] - 1);
    QCOMPARE(cleared.count(), 4);

    replay.seek(replay.endNs());
    QVERIFY(!replay.nextCollective());
    QVERIFY(replay.previousCollective());
    QCOMPARE(replay.positionNs(), starts.back() - 1);
}

void TestReplayController::playThroughShowsEveryStepOnce()
{
    ReplayController replay;
    QVERIFY(replay.open(m_path));
    replay.setSpeed(1000);
    QCOMPARE(replay.speed(), 50.0);
    replay.setSpeed(0.001);
    QCOMPARE(replay.speed(), 0.1);
    replay.setSpeed(20);
    QCOMPARE(replay.speed(), 20.0);

    QSignalSpy steps(&replay, &ReplayController::stepAvailable);
    QSignalSpy states(&replay, &ReplayController::stateChanged);
    QSignalSpy testLoss(&replay, &ReplayController::testLossAvailable);
    QSignalSpy accuracy(&replay, &ReplayController::testAccuracyAvailable);
    QSignalSpy logs(&replay, &ReplayController::logLine);
    QSignalSpy cleared(&replay, &ReplayController::cleared);
    QSignalSpy errors(&replay, &ReplayController::errorOccurred);
    std::size_t events = 0;
    int calls = 0, publishes = 0;
    while (replay.positionNs() < replay.endNs() && calls < 100000) {
        const int before = states.count();
        events += replay.advance(250'000);     // 5 ms of recording per call
        QVERIFY(states.count() - before <= 1); // at most one snapshot per call
        publishes += states.count() - before;
        ++calls;
    }
    QCOMPARE(replay.positionNs(), replay.endNs());
    QCOMPARE(replay.advance(1'000'000), std::size_t(0));
    QCOMPARE(errors.count(), 0);
    QCOMPARE(cleared.count(), 0);
    QCOMPARE(std::uint64_t(events), replay.reader()->info().events());
    QVERIFY(publishes < calls); // quiet stretches publish nothing

    const std::vector<LossMetric> expected = clusterLosses(*replay.reader());
    QCOMPARE(steps.count(), 12);
    for (int k = 0; k < 12; ++k) {
        const auto pt = steps.at(k).at(0).value<widgets::StepPoint>();
        QCOMPARE(pt.step, std::int64_t(k));
        QCOMPARE(pt.loss, expected[std::size_t(k)].value);
        QVERIFY(pt.samplesPerSecond > 0);
        QVERIFY(pt.bytesPerSecondPerNode[1] > 0);
    }
    QCOMPARE(testLoss.count(), 3);
    QCOMPARE(testLoss.at(0).at(0).toLongLong(), 3);
    QCOMPARE(accuracy.count(), 1);
    QCOMPARE(accuracy.at(0).at(0).toLongLong(), 11);

    const auto state = lastState(states);
    QCOMPARE(state->step, std::int64_t(11));
    for (const widgets::NodeState &n : state->nodes)
        QCOMPARE(n.state, widgets::NodeRunState::Idle);
}

void TestReplayController::timerPlaysToTheEnd()
{
    ReplayController replay;
    QVERIFY(replay.open(m_path));
    replay.setSpeed(50);
    QSignalSpy playing(&replay, &ReplayController::playingChanged);
    QSignalSpy steps(&replay, &ReplayController::stepAvailable);
    replay.play();
    QVERIFY(replay.isPlaying());
    QCOMPARE(playing.count(), 1);
    QCOMPARE(playing.at(0).at(0).toBool(), true);
    replay.pause();
    QVERIFY(!replay.isPlaying());
    QCOMPARE(playing.at(1).at(0).toBool(), false);
    replay.togglePlay();
    QVERIFY(replay.isPlaying());
    QTRY_VERIFY_WITH_TIMEOUT(!replay.isPlaying(), 15000); // stops by itself at the end
    QCOMPARE(playing.last().at(0).toBool(), false);
    QCOMPARE(replay.positionNs(), replay.endNs());
    QCOMPARE(steps.count(), 12);

    QSignalSpy cleared(&replay, &ReplayController::cleared);
    replay.play(); // at the end: from the beginning
    QCOMPARE(cleared.count(), 1);
    QVERIFY(replay.isPlaying());
    QVERIFY(replay.positionNs() < replay.endNs());
    replay.close();
    QVERIFY(!replay.isPlaying());
    QVERIFY(!replay.isOpen());
}

void TestReplayController::recordedPause()
{
    ReplayController replay;
    QVERIFY(replay.open(m_path));
    const SessionReader &reader = *replay.reader();
    const auto [t0, t1] = reader.timeRange();
    const std::vector<TensorRecord> records = reader.tensors(t0, t1);
    QCOMPARE(records.size(), std::size_t(3));
    const std::uint64_t id = records.front().pauseId;
    std::int64_t pauseStart = kFarAhead, pauseEnd = kLongAgo;
    for (const SpanEvent &s : reader.spans(t0, t1))
        if (s.kind == SpanEvent::Kind::Pause) {
            pauseStart = std::min(pauseStart, s.startNs);
            pauseEnd = std::max(pauseEnd, s.endNs);
        }
    QVERIFY(pauseStart < records.front().tNs && records.front().tNs < pauseEnd);

    QSignalSpy paused(&replay, &ReplayController::pausedAt);
    QSignalSpy ended(&replay, &ReplayController::pauseEnded);
    QSignalSpy states(&replay, &ReplayController::stateChanged);
    auto checkView = [&](const PauseView &view) {
        QCOMPARE(view.id, id);
        QVERIFY(view.complete);
        QVERIFY(!view.reason.isEmpty());
        QCOMPARE(view.inputs.size(), 3);
        QVERIFY(view.results.isEmpty());
        std::set<int> ranks;
        for (const PausedTensor &t : view.inputs) {
            ranks.insert(t.rank);
            QCOMPARE(t.step, qint64(5));
            QCOMPARE(t.collective, QString::fromUtf8(net::collectiveName(net::CollectiveKind::AllReduce)));
            QVERIFY(t.before);
            const TensorRecord &r = *std::find_if(records.begin(), records.end(),
                                                  [&](const TensorRecord &x) { return x.node == t.rank; });
            const QJsonObject o = QJsonDocument::fromJson(r.snapshotJson).object();
            QCOMPARE(t.collective, o.value("kind").toString());
            QCOMPARE(t.count, qint64(o.value("count").toDouble()));
            QVERIFY(t.count > 0);
            QCOMPARE(t.mean, o.value("mean").toDouble());
            QCOMPARE(t.std, o.value("std").toDouble());
            QCOMPARE(t.l2, o.value("l2").toDouble());
            QCOMPARE(t.min, o.value("min").toDouble());
            QCOMPARE(t.max, o.value("max").toDouble());
            QCOMPARE(t.histogram.size(), o.value("histogram").toArray().size());
            QCOMPARE(t.values.size(), int(t.count)); // small: every value kept
            QCOMPARE(t.downsampled.size(), o.value("downsampled").toArray().size());
            QCOMPARE(t.shape.size(), o.value("shape").toArray().size());
            QVERIFY(t.l2 > 0);
        }
        QCOMPARE(ranks, (std::set<int>{0, 1, 2}));
    };

    // A seek into the middle of the pause shows it, and the nodes held.
    replay.seek(records.front().tNs);
    QCOMPARE(paused.count(), 1);
    checkView(paused.last().at(0).value<PauseView>());
    if (QTest::currentTestFailed())
        return;
    for (const widgets::NodeState &n : lastState(states)->nodes)
        QCOMPARE(n.state, widgets::NodeRunState::Paused);
    QCOMPARE(ended.count(), 0);
    // Inside the pause the views show each node's memory as it entered the
    // held all-reduce: the file's last sample, taken at that boundary.
    {
        const auto state = lastState(states);
        const std::vector<MemorySample> memory = reader.latestMemory(records.front().tNs);
        QCOMPARE(memory.size(), std::size_t(3));
        for (const MemorySample &m : memory) {
            QCOMPARE(m.collective, net::CollectiveKind::AllReduce);
            QVERIFY(m.before);
            QCOMPARE(m.step, std::int64_t(5));
            const widgets::NodeState &ns = state->nodes[m.node];
            QCOMPARE(ns.memory.params, m.memory.params);
            QCOMPARE(ns.memory.grads, m.memory.grads);
            QCOMPARE(ns.memory.activations, m.memory.activations);
            QCOMPARE(ns.memory.comm, m.memory.comm);
            QCOMPARE(ns.memory.live, m.memory.live);
        }
    }
    // Leaving it by a seek ends it.
    replay.seek(pauseEnd + 1'000'000);
    QCOMPARE(ended.count(), 1);
    QCOMPARE(paused.count(), 1);
    for (const widgets::NodeState &n : lastState(states)->nodes)
        QCOMPARE(n.state, widgets::NodeRunState::Running);

    // Playing into it shows it once, when its tensors come; playing on ends it.
    replay.seek(pauseStart - 1);
    QCOMPARE(paused.count(), 1);
    QCOMPARE(ended.count(), 1);
    replay.setSpeed(1);
    while (replay.positionNs() < pauseEnd + 50'000'000)
        replay.advance(100'000);
    QCOMPARE(paused.count(), 2);
    checkView(paused.last().at(0).value<PauseView>());
    if (QTest::currentTestFailed())
        return;
    QCOMPARE(ended.count(), 2);

    // The timeline's question: what did a pause record at this collective?
    const PauseView at = replay.pauseAt(5, int(records.front().collective), records.front().seq);
    checkView(at);
    if (QTest::currentTestFailed())
        return;
    QCOMPARE(replay.pauseAt(4, int(records.front().collective), records.front().seq).id, quint64(0));
}

// A file damaged while it is open: playing reports it in one line and stops.
// The header's step (and the replay bar's: both widgets::stepInProgress of
// the state) at a recorded pause is the held collective's. zero3 gathers
// params.fc2 three times in step 1: forward, backward, and for the held-out
// loss after step 1 has been reported, where "the step after the newest
// completed one" would say 2.
void TestReplayController::oneStepNumberAtRecordedPauses()
{
    const QString path = m_dir.filePath("zero3.smolrec");
    TrainConfig c = config();
    c.strategy = "zero3";
    c.nodes = 2;
    c.steps = 4;
    c.testEvery = 2;
    record(path, c, "allgather@step=1,name=fc2");
    ReplayController replay;
    QVERIFY(replay.open(path));
    const auto [t0, t1] = replay.reader()->timeRange();
    std::map<std::uint64_t, std::int64_t> pauses; // id -> the time of one of its tensors
    for (const TensorRecord &r : replay.reader()->tensors(t0, t1)) {
        QCOMPARE(r.step, std::int64_t(1));
        pauses.emplace(r.pauseId, r.tNs);
    }
    QCOMPARE(pauses.size(), std::size_t(3));
    QSignalSpy paused(&replay, &ReplayController::pausedAt);
    int afterItsStep = 0;
    for (const auto &[id, t] : pauses) {
        replay.seek(t);
        QVERIFY(replay.isPaused());
        const PauseView view = paused.last().at(0).value<PauseView>();
        QCOMPARE(view.id, id);
        QCOMPARE(view.step(), qint64(1));
        const widgets::ClusterStatePtr state = replay.state();
        QVERIFY(state);
        QCOMPARE(widgets::stepInProgress(*state), view.step());
        const QString header = widgets::ClusterPainter::headerTitle(*state, QString());
        QVERIFY2(header.contains(widgets::stepText(view.step()) + QStringLiteral(" / 4")), qPrintable(header));
        afterItsStep += state->step == view.step();
    }
    QCOMPARE(afterItsStep, 1); // the held-out loss's pause came after step 1's report
}

void TestReplayController::damageFoundWhilePlaying()
{
    const QString copy = m_dir.filePath("damaged.smolrec");
    QVERIFY(QFile::copy(m_path, copy));
    ReplayController replay;
    QVERIFY(replay.open(copy));
    QSignalSpy errors(&replay, &ReplayController::errorOccurred);
    QSignalSpy playing(&replay, &ReplayController::playingChanged);
    {
        QFile f(copy);
        QVERIFY(f.open(QIODevice::ReadWrite));
        const qint64 size = f.size();
        QVERIFY(f.seek(size / 4));
        f.write(QByteArray(int(size / 2), '\xab'));
        QVERIFY(f.seek(24)); // SQLite's file change counter: its page cache is stale now
        f.write(QByteArray(4, '\x5a'));
    }
    replay.play();
    replay.setSpeed(50);
    for (int k = 0; k < 2000 && replay.positionNs() < replay.endNs() && errors.isEmpty(); ++k)
        replay.advance(16'000'000);
    QCOMPARE(errors.count(), 1);
    QVERIFY(!errors.at(0).at(0).toString().contains('\n'));
    QVERIFY(!replay.isPlaying());
    QCOMPARE(playing.last().at(0).toBool(), false);
    replay.seek(replay.beginNs()); // still no crash
    QVERIFY(replay.isOpen());
}

QTEST_MAIN(TestReplayController)
// A run recorded on --backend gloo replays as the live window showed it:
// every collective span marked as Gloo's, its one event per collective not
// drawn as a packet; a run on ours keeps its names and packets.
void TestReplayController::glooRecordingIsMarked()
{
    const QString path = m_dir.filePath("gloo.smolrec");
    TrainConfig c = config();
    c.backend = TrainConfig::Backend::Gloo;
    c.steps = 3;
    {
        SessionRecorder rec(path, sessionHeaderFor(c, "127.0.0.1"));
        c.events = &rec;
        const TrainSummary s = runTraining(c);
        rec.finish(s.finalLoss);
    }
    const SessionReader gloo(path);
    QVERIFY(recordedOnGloo(gloo.header()));
    using Row = widgets::TimelineData::Row;
    // Collective spans, and how many of them are marked as Gloo's; packets.
    const auto count = [](const widgets::TimelineData &data, int *marked, std::size_t *packets) {
        int all = 0;
        *marked = 0;
        *packets = 0;
        for (int lane = 0; lane < data.laneCount(); ++lane) {
            for (const widgets::StoredSpan &t : data.spans(lane, Row::Collective)) {
                ++all;
                *marked += widgets::isGlooSpanName(data.name(t.name)) && t.bytes > 0;
            }
            for (const widgets::TimelinePacket &p : data.packets(lane))
                *packets += p.src != p.dst;
        }
        return all;
    };
    widgets::TimelineData data;
    loadTimeline(gloo, data);
    int marked = 0;
    std::size_t packets = 0;
    const int collectives = count(data, &marked, &packets);
    QVERIFY(collectives >= 3 * 3);
    QCOMPARE(marked, collectives);
    QCOMPARE(data.packetCount(), packets); // no src == dst event drawn as a packet

    const SessionReader ours(m_path);
    QVERIFY(!recordedOnGloo(ours.header()));
    loadTimeline(ours, data);
    QVERIFY(count(data, &marked, &packets) > 0);
    QCOMPARE(marked, 0);
    QVERIFY(packets > 0);
}

#include "tst_replay_controller.moc"
