// The window wired to a real local cluster, driven through its own actions
// and widgets as a teacher would: Start, Space to pause (the inspector
// shows every node's tensor), N to step one collective, Space to resume,
// and the run's summary in the status bar; clicking a node shows its
// details; projector mode switches every view; the timeline holds the run's
// packets (all received), spans and the pause.
// Replay: a run recorded with a breakpoint, opened in the window: the
// timeline holds every recorded packet, seeks move the playhead, a seek
// into the recorded pause (and a click on the paused collective) shows its
// tensors in the inspector, Space plays and pauses, the timeline exports as
// a PNG and the session as Chrome trace JSON, a bad file is refused in one
// line, and closing the replay shows the live cluster again.
#include "app/mainwindow.h"
#include "app/replay_controller.h"
#include "widgets/cluster_view.h"
#include "widgets/tensor_inspector.h"
#include "widgets/timeline_view.h"

#include <QtTest>

#include <QAction>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QPushButton>
#include <QStatusBar>
#include <QTabWidget>
#include <QTemporaryDir>

using namespace smol;
using namespace smol::app;

class TestMainWindow : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void startPauseStepResume();
    void replayInTheWindow();
};

namespace {

QAction *action(QMainWindow &w, const QString &text)
{
    for (QAction *a : w.findChildren<QAction *>())
        if (a->text() == text)
            return a;
    return nullptr;
}

} // namespace

void TestMainWindow::startPauseStepResume()
{
    EngineController engine(2);
    MainWindow window(&engine);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    QTRY_VERIFY_WITH_TIMEOUT(engine.readyNodes() == 2, 30000);
    RunSettings s = window.settings();
    s.nodes = 2;
    s.steps = 300;
    window.setSettings(s);
    QSignalSpy finished(&engine, &EngineController::runFinished);
    QSignalSpy paused(&engine, &EngineController::pausedAt);
    QAction *start = action(window, QStringLiteral("Start"));
    QVERIFY(start && start->isEnabled());
    start->trigger();
    QTRY_VERIFY_WITH_TIMEOUT(engine.isRunning(), 5000);
    QVERIFY(!start->isEnabled());

    // Space: pause at the next collective; the inspector shows both nodes.
    QTest::keyClick(&window, Qt::Key_Space);
    QVERIFY2(paused.wait(30000), "no pause after Space");
    auto *inspector = window.findChild<widgets::TensorInspector *>();
    QVERIFY(inspector);
    QTRY_COMPARE_WITH_TIMEOUT(inspector->model()->rowCount(), 2, 5000);
    auto *tabs = window.findChild<QTabWidget *>();
    QCOMPARE(tabs->tabText(tabs->currentIndex()), QStringLiteral("Inspector"));
    QTRY_COMPARE(action(window, QStringLiteral("Resume")) != nullptr, true);

    // N: one collective, then paused again with its results.
    QTest::keyClick(&window, Qt::Key_N);
    QVERIFY(paused.wait(30000));
    QTRY_COMPARE_WITH_TIMEOUT(inspector->model()->rowCount(), 4, 5000); // 2 inputs + 2 results

    // Click a node: its details.
    auto *cluster = window.findChild<widgets::ClusterView *>();
    QTRY_VERIFY_WITH_TIMEOUT(!cluster->nodeRect(0).isEmpty(), 5000);
    QTest::mouseClick(cluster, Qt::LeftButton, {}, cluster->nodeRect(0).center().toPoint());
    QCOMPARE(cluster->selectedNode(), 0);
    QTRY_VERIFY(tabs->currentIndex() == 0);

    // Space again: resume to the end.
    QTest::keyClick(&window, Qt::Key_Space);
    QVERIFY2(finished.wait(120000), "the run did not finish after resume");
    QTRY_VERIFY_WITH_TIMEOUT(window.statusBar()->currentMessage().contains("final loss"), 5000);
    QVERIFY(start->isEnabled());
    bool details = false;
    for (QLabel *l : window.findChildren<QLabel *>())
        details = details || l->text().contains("rank 0");
    QVERIFY(details);

    // The live timeline: every packet of the run arrived, its spans and the pause are there.
    const widgets::TimelineData &data = window.timeline()->data();
    QTRY_VERIFY_WITH_TIMEOUT(data.stepStarts().size() == 300, 5000);
    QCOMPARE(data.laneCount(), 2);
    QVERIFY(data.packetCount() > 0);
    QCOMPARE(data.inFlightCount(), std::size_t(0));
    QVERIFY(!data.spans(0, widgets::TimelineData::Row::Compute).empty());
    QVERIFY(!data.spans(1, widgets::TimelineData::Row::Collective).empty());
    QVERIFY(!data.spans(0, widgets::TimelineData::Row::Pause).empty());

    window.setProjectorMode(true);
    QVERIFY(window.projectorMode());
    QVERIFY(!window.grab().isNull());
}

void TestMainWindow::replayInTheWindow()
{
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("run.smolrec"));
    EngineController engine(2);
    MainWindow window(&engine);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    QTRY_VERIFY_WITH_TIMEOUT(engine.readyNodes() == 2, 30000);

    // Record a run that pauses at step 3's all-reduce.
    RunSettings s = window.settings();
    s.nodes = 2;
    s.steps = 12;
    s.recordPath = path;
    QSignalSpy finished(&engine, &EngineController::runFinished);
    QSignalSpy paused(&engine, &EngineController::pausedAt);
    engine.addBreakpoint(QStringLiteral("allreduce@step=3"));
    engine.start(s);
    QVERIFY2(paused.wait(60000), "the breakpoint did not pause the run");
    engine.clearBreakpoints();
    engine.resume();
    QVERIFY2(finished.wait(120000), "the recorded run did not finish");

    // Opening a session during nothing else: the whole recording in the window.
    QString error;
    QVERIFY2(window.openSession(path, &error, true), qPrintable(error));
    QVERIFY(window.isReplaying());
    ReplayController *replay = window.replay();
    const widgets::TimelineData &data = window.timeline()->data();
    QCOMPARE(data.laneCount(), 2);
    QVERIFY(data.packetCount() > 0);
    QCOMPARE(data.inFlightCount(), std::size_t(0)); // every recorded send met its receive
    QCOMPARE(data.stepStarts().size(), std::size_t(12));
    QVERIFY(!action(window, QStringLiteral("Start"))->isEnabled());
    auto *cluster = window.findChild<widgets::ClusterView *>();
    QTRY_VERIFY_WITH_TIMEOUT(!cluster->nodeRect(1).isEmpty(), 5000);

    // Seeks move the playhead to the replay's position.
    QVERIFY(replay->seekToStep(5));
    QCOMPARE(window.timeline()->playhead(), replay->positionNs());
    QVERIFY(replay->nextCollective());
    QCOMPARE(window.timeline()->playhead(), replay->positionNs());

    // Into the recorded pause: the inspector shows each node's tensor.
    const auto &pauses = data.spans(0, widgets::TimelineData::Row::Pause);
    QCOMPARE(pauses.size(), std::size_t(1));
    auto *inspector = window.findChild<widgets::TensorInspector *>();
    replay->seek((pauses[0].startNs + pauses[0].endNs) / 2);
    QTRY_VERIFY_WITH_TIMEOUT(inspector->model()->rowCount() >= 2, 5000);
    replay->seekToStep(8);
    QTRY_COMPARE_WITH_TIMEOUT(inspector->model()->rowCount(), 0, 5000);

    // A click on the paused collective (step 3's all-reduce on node 0) shows the recorded tensors too.
    const auto &collectives = data.spans(0, widgets::TimelineData::Row::Collective);
    std::size_t index = collectives.size();
    for (std::size_t i = 0; i < collectives.size() && index == collectives.size(); ++i)
        if (collectives[i].step == 3)
            index = i;
    QVERIFY(index < collectives.size());
    widgets::TimelineHit hit;
    hit.kind = widgets::TimelineHit::Kind::Span;
    hit.lane = 0;
    hit.row = widgets::TimelineData::Row::Collective;
    hit.first = index;
    hit.count = 1;
    hit.startNs = collectives[index].startNs;
    hit.endNs = collectives[index].endNs;
    window.timeline()->select(hit);
    Q_EMIT window.timeline()->activated(hit);
    QTRY_VERIFY_WITH_TIMEOUT(inspector->model()->rowCount() >= 2, 5000);
    // "Replay from here" moves the replay to where that collective starts.
    QPushButton *here = nullptr;
    for (QPushButton *b : window.findChildren<QPushButton *>())
        if (b->text() == QStringLiteral("Replay from here"))
            here = b;
    QVERIFY(here && here->isVisible());
    here->click();
    QCOMPARE(replay->positionNs(), qint64(collectives[index].startNs - 1));
    QCOMPARE(window.timeline()->playhead(), replay->positionNs());

    // Space plays and pauses the replay.
    QTest::keyClick(&window, Qt::Key_Space);
    QVERIFY(replay->isPlaying());
    QTest::keyClick(&window, Qt::Key_Space);
    QVERIFY(!replay->isPlaying());

    // Exports.
    const QString png = dir.filePath(QStringLiteral("timeline.png"));
    QVERIFY2(window.exportTimelinePng(png, &error), qPrintable(error));
    QImage image(png);
    QVERIFY(!image.isNull());
    QCOMPARE(image.size(), window.timeline()->size() * window.timeline()->devicePixelRatioF());
    QVERIFY(image.pixel(image.width() / 2, image.height() / 2) != image.pixel(2, 2) ||
            image.pixel(image.width() * 3 / 4, image.height() * 3 / 4) != image.pixel(2, 2));
    const QString trace = dir.filePath(QStringLiteral("session.trace.json"));
    QVERIFY2(window.exportChromeTrace(trace, &error), qPrintable(error));
    QFile traceFile(trace);
    QVERIFY(traceFile.open(QIODevice::ReadOnly));
    const QJsonDocument doc = QJsonDocument::fromJson(traceFile.readAll());
    QVERIFY(doc.object().value(QStringLiteral("traceEvents")).toArray().size() > 100);

    // A file that is not a session: refused in one line, nothing replaying.
    const QString bogus = dir.filePath(QStringLiteral("notes.smolrec"));
    {
        QFile f(bogus);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("these are my notes, not a session\n");
    }
    QVERIFY(!window.openSession(bogus, &error, true));
    QVERIFY(!error.isEmpty());
    QVERIFY(!error.contains('\n'));
    QVERIFY(!window.isReplaying());

    // Back to live after a replay closes.
    QVERIFY(window.openSession(path, &error, true));
    window.closeReplay();
    QVERIFY(!window.isReplaying());
    QVERIFY(action(window, QStringLiteral("Start"))->isEnabled());
    QCOMPARE(window.timeline()->data().packetCount(), std::size_t(0));
}

QTEST_MAIN(TestMainWindow)
#include "tst_main_window.moc"
