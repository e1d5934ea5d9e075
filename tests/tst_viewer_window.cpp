// A student's window (issue 27), offscreen, on loopback: a teacher's
// EngineController with 2 local nodes and ViewerFeeds connected to its
// coordinator with its token. The feed shows the teacher's nodes and its
// steps advance; the run's end is runFinished; a pause set on the teacher is
// pausedAt on the viewer with the held tensors; a feed given a node id marks
// that node "you"; the window is read-only; two viewers' predictions reach
// the teacher's LessonRunner with their values and its class answers.
#include "app/bridge/engine_controller.h"
#include "app/feed/viewer_feed.h"
#include "app/lessons/lesson.h"
#include "app/lessons/lesson_runner.h"
#include "app/window/mainwindow.h"
#include "app/window/run_controls.h"
#include "engine/cluster/viewer_client.h"

#include <QtTest>

#include <QMenu>
#include <QMenuBar>

using namespace smol;
using namespace smol::app;

namespace {

constexpr int kLong = 90000; // ms: generous, never a timing under test

engine::ViewerClientOptions viewerOptions(const EngineController &teacher, const char *name, int node = -1)
{
    engine::ViewerClientOptions o;
    o.host = "127.0.0.1";
    o.port = teacher.port();
    o.token = teacher.token().toStdString();
    o.name = name;
    o.node = node;
    return o;
}

RunSettings shortRun(qint64 steps)
{
    RunSettings s;
    s.strategy = QStringLiteral("ddp");
    s.nodes = 2;
    s.steps = steps;
    s.globalBatch = 32;
    s.testEvery = 0;
    return s;
}

} // namespace

class TestViewerWindow : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase();
    void cleanupTestCase();
    void viewerFollowsRun();
    void viewerSeesPause();
    void windowIsReadOnly();
    void badTokenIsRefused();
    void predictionsReachTeacher();

private:
    EngineController *m_teacher = nullptr;
};

void TestViewerWindow::initTestCase()
{
    m_teacher = new EngineController(ClusterOptions{2, 0, QStringLiteral("class7"), QString(), QStringLiteral("127.0.0.1")});
    QTRY_VERIFY_WITH_TIMEOUT(m_teacher->readyNodes() == 2, kLong);
}

void TestViewerWindow::cleanupTestCase()
{
    delete m_teacher;
}

void TestViewerWindow::viewerFollowsRun()
{
    ViewerFeed feed;
    QString error;
    QVERIFY2(feed.connectTo(viewerOptions(*m_teacher, "alice", /*node=*/1), &error), qPrintable(error));
    QSignalSpy started(&feed, &RunFeed::runStarted), steps(&feed, &RunFeed::stepAvailable),
        finished(&feed, &RunFeed::runFinished), timeline(&feed, &RunFeed::timelineEvents);
    QTRY_VERIFY_WITH_TIMEOUT(feed.state() && feed.state()->nodes.size() == 2, kLong);
    m_teacher->start(shortRun(20));
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, kLong);
    QCOMPARE(started.count(), 1);
    QVERIFY2(steps.count() >= 2, qPrintable(QString::number(steps.count())));
    const auto first = steps.first().first().value<widgets::StepPoint>();
    const auto last = steps.last().first().value<widgets::StepPoint>();
    QVERIFY(last.step > first.step);
    QVERIFY(timeline.count() > 0);
    // The picture: the teacher's two nodes, this viewer's own one marked "you".
    QTRY_VERIFY_WITH_TIMEOUT(feed.state()->step == 19, kLong);
    const widgets::ClusterStatePtr state = feed.state();
    QCOMPARE(state->strategy, QStringLiteral("ddp"));
    QCOMPARE(state->steps, 20);
    int you = 0;
    for (const widgets::NodeState &n : state->nodes) {
        QCOMPARE(n.you, n.id == 1);
        you += n.you;
    }
    QCOMPARE(you, 1);
    QVERIFY(!state->shards.isEmpty()); // the run's plan, from its configuration
    QVERIFY(!feed.isRunning());
}

void TestViewerWindow::viewerSeesPause()
{
    ViewerFeed feed;
    QString error;
    QVERIFY2(feed.connectTo(viewerOptions(*m_teacher, "bob"), &error), qPrintable(error));
    QSignalSpy paused(&feed, &RunFeed::pausedAt), ended(&feed, &RunFeed::pauseEnded),
        finished(&feed, &RunFeed::runFinished);
    QSignalSpy teacherPaused(m_teacher, &RunFeed::pausedAt), teacherFinished(m_teacher, &RunFeed::runFinished);
    m_teacher->addBreakpoint(QStringLiteral("allreduce@step=2"));
    m_teacher->start(shortRun(6));
    QTRY_VERIFY_WITH_TIMEOUT(teacherPaused.count() >= 1, kLong);
    QTRY_VERIFY_WITH_TIMEOUT(paused.count() >= 1, kLong);
    const PauseView view = paused.last().first().value<PauseView>();
    QVERIFY(!view.inputs.isEmpty()); // the held tensors, for the inspector
    QCOMPARE(view.step(), 2);
    QVERIFY(feed.isPaused());
    QTRY_VERIFY_WITH_TIMEOUT(feed.state() && feed.state()->current == 2, kLong);
    m_teacher->clearBreakpoints();
    m_teacher->resume();
    QTRY_COMPARE_WITH_TIMEOUT(teacherFinished.count(), 1, kLong);
    // (A viewer arriving between runs is told of the previous run's end first.)
    QTRY_VERIFY_WITH_TIMEOUT(!finished.isEmpty() && finished.last().first().toString().contains(QStringLiteral("6 steps")),
                             kLong);
    QVERIFY(ended.count() >= 1);
    QVERIFY(!feed.isPaused());
}

void TestViewerWindow::windowIsReadOnly()
{
    ViewerFeed feed;
    QString error;
    QVERIFY2(feed.connectTo(viewerOptions(*m_teacher, "carol", 0), &error), qPrintable(error));
    EngineController idle(ClusterOptions{0, 0, QString(), QString(), QStringLiteral("127.0.0.1")});
    MainWindow window(&idle);
    window.watch(&feed);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    QVERIFY(window.windowTitle().contains(QStringLiteral("watching 127.0.0.1:%1").arg(m_teacher->port())));
    QVERIFY(!window.runControls()->isVisible());
    QVERIFY(!window.runControls()->startAction()->isEnabled());
    QVERIFY(!window.runControls()->stopAction()->isEnabled());
    QVERIFY(!window.runControls()->pauseAction()->isEnabled());
    // No menu entry acts on a cluster or opens a lesson of its own.
    for (QAction *menu : window.menuBar()->actions()) {
        QVERIFY2(!menu->isVisible() || (menu->text() != QStringLiteral("&Cluster") && menu->text() != QStringLiteral("&Lessons")),
                 qPrintable(menu->text()));
        if (menu->menu())
            for (QAction *a : menu->menu()->actions())
                if (a->text().contains(QStringLiteral("lesson"), Qt::CaseInsensitive) ||
                    a->text().contains(QStringLiteral("Record")) || a->text().contains(QStringLiteral("Open session")))
                    QVERIFY2(!a->isEnabled(), qPrintable(a->text()));
    }
    QTRY_VERIFY_WITH_TIMEOUT(window.viewer()->state() && window.viewer()->state()->nodes.size() == 2, kLong);
}

void TestViewerWindow::badTokenIsRefused()
{
    ViewerFeed feed;
    engine::ViewerClientOptions o = viewerOptions(*m_teacher, "mallory");
    o.token = "not-the-token";
    QString error;
    QVERIFY(!feed.connectTo(o, &error));
    QVERIFY(!error.isEmpty());
    QVERIFY(!error.contains(QLatin1Char('\n')));
}

void TestViewerWindow::predictionsReachTeacher()
{
    const Lesson lesson = parseLesson(QStringLiteral("lesson: Predict\n"
                                                     "step: The ring\n"
                                                     "run: name=ring strategy=ddp nodes=2 model=mlp batch=32 steps=10\n"
                                                     "until: end\n"
                                                     "reveal: Bytes each node sends per step\n"
                                                     "measure: ring.bytes_per_step\n"
                                                     "unit: bytes\n"
                                                     "tolerance: 10%\n"),
                                      QStringLiteral("predict.lesson"));
    ViewerFeed alice, bob;
    QString error;
    QVERIFY2(alice.connectTo(viewerOptions(*m_teacher, "alice"), &error), qPrintable(error));
    QVERIFY2(bob.connectTo(viewerOptions(*m_teacher, "bob"), &error), qPrintable(error));
    QSignalSpy predictions(m_teacher, &EngineController::predictionReceived);
    LessonRunner runner(m_teacher);
    QSignalSpy reached(&runner, &LessonRunner::stepReached);
    runner.open(lesson);
    // Each viewer sees the step and its question.
    for (ViewerFeed *f : {&alice, &bob})
        QTRY_VERIFY_WITH_TIMEOUT(f->lesson().value(QStringLiteral("question")).toString() ==
                                     QStringLiteral("Bytes each node sends per step"),
                                 kLong);
    QCOMPARE(alice.lesson().value(QStringLiteral("index")).toInt(), 0);
    QVERIFY(alice.sendPrediction(0, 1000));
    QTest::qWait(600); // the coordinator reads at most 4 answers a second per viewer
    QVERIFY(alice.sendPrediction(0, 2000)); // the last one counts
    QVERIFY(bob.sendPrediction(0, 5000));
    QTRY_COMPARE_WITH_TIMEOUT(predictions.count(), 3, kLong);
    QTRY_COMPARE_WITH_TIMEOUT(runner.classAnswers().count(0), 2, kLong);
    QTRY_COMPARE_WITH_TIMEOUT(reached.count(), 1, kLong);
    const std::optional<ClassSummary> summary = runner.classSummary(0);
    QVERIFY(summary);
    QCOMPARE(summary->answered, 2);
    QCOMPARE(summary->median, 3500.0);
    QCOMPARE(summary->answers.front(), (std::pair<QString, double>(QStringLiteral("alice"), 2000)));
    QCOMPARE(summary->answers.back(), (std::pair<QString, double>(QStringLiteral("bob"), 5000)));
    // At the reveal the teacher's panel shows them.
    runner.next();
    const widgets::LessonStepView v = runner.view();
    QVERIFY(v.reveals.front().revealed);
    QVERIFY2(v.reveals.front().classAnswers.contains(QStringLiteral("2 answers")),
             qPrintable(v.reveals.front().classAnswers));
    QTRY_VERIFY_WITH_TIMEOUT(alice.lesson().value(QStringLiteral("revealed")).toBool(), kLong);
    runner.close();
}

QTEST_MAIN(TestViewerWindow)
#include "tst_viewer_window.moc"
