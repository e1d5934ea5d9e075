// The GUI's bridge to the engine, driven as the window drives it: a local
// cluster joins, a run starts, snapshots arrive at most 30 times a second
// with the engine's measured memory, the cluster pauses at the next
// collective with every node's tensor, an edit reaches the engine, resume
// finishes the run; the placement validator is the engine's.
#include "app/engine_controller.h"

#include <QtTest>

#include <cmath>

using namespace smol;
using namespace smol::app;

class TestGuiController : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void runPauseInspectResume();
    void snapshotsAreCoalesced();
    void placementIsCheckedByTheEngine();
    void linkLimitsReachTheRun();
    void addAndRemoveNodes();
    void zero3GatheredLayersAtAPause();
};

namespace {

bool waitForNodes(EngineController &engine, int n)
{
    QElapsedTimer t;
    t.start();
    while (engine.readyNodes() < n && t.elapsed() < 30000)
        QTest::qWait(50);
    return engine.readyNodes() >= n;
}

} // namespace

void TestGuiController::runPauseInspectResume()
{
    EngineController engine(3);
    QVERIFY(waitForNodes(engine, 3));
    QSignalSpy states(&engine, &EngineController::stateChanged);
    QSignalSpy paused(&engine, &EngineController::pausedAt);
    QSignalSpy finished(&engine, &EngineController::runFinished);
    QSignalSpy failed(&engine, &EngineController::runFailed);
    QSignalSpy steps(&engine, &EngineController::stepAvailable);
    QSignalSpy testLoss(&engine, &EngineController::testLossAvailable);
    RunSettings s;
    s.strategy = QStringLiteral("zero2");
    s.nodes = 3;
    s.steps = 400;
    engine.start(s);
    QVERIFY(engine.isRunning());
    QTRY_VERIFY_WITH_TIMEOUT(steps.count() >= 3, 30000);
    engine.pause();
    QVERIFY2(paused.wait(30000), "no pause within 30 s");
    const PauseView pause = paused.takeFirst().at(0).value<PauseView>();
    QVERIFY(pause.complete);
    QCOMPARE(pause.inputs.size(), 3);
    for (const PausedTensor &t : pause.inputs) {
        QCOMPARE(t.collective, pause.inputs[0].collective);
        QCOMPARE(t.name, pause.inputs[0].name);
        QCOMPARE(t.step, pause.inputs[0].step);
        QVERIFY(t.count > 0);
        QVERIFY(!t.histogram.isEmpty());
    }
    QVERIFY(engine.isPaused());
    // The snapshots say so, with the engine's memory figures.
    auto pausedIn = [](const widgets::ClusterStatePtr &state) {
        int n = 0;
        for (const widgets::NodeState &node : state->nodes)
            n += node.rank >= 0 && node.state == widgets::NodeRunState::Paused;
        return n;
    };
    QTRY_VERIFY_WITH_TIMEOUT(!states.isEmpty() && pausedIn(states.last().at(0).value<widgets::ClusterStatePtr>()) == 3,
                             2000);
    const auto state = states.last().at(0).value<widgets::ClusterStatePtr>();
    QCOMPARE(state->strategy, QStringLiteral("zero2"));
    for (const widgets::NodeState &n : state->nodes)
        if (n.rank >= 0) {
            QVERIFY(n.memory.params > 0 && n.memory.live >= n.memory.params);
            QVERIFY(n.predictedBytes.has_value());
        }
    QVERIFY(!state->shards.isEmpty());
    // Step one collective: the results arrive with the next pause.
    engine.editTensor(1, QStringLiteral("scale"), 2.0);
    engine.stepCollective();
    QVERIFY(paused.wait(30000));
    const PauseView next = paused.takeFirst().at(0).value<PauseView>();
    QCOMPARE(next.results.size(), 3);
    QCOMPARE(next.reason, QStringLiteral("step"));
    engine.resume();
    QVERIFY2(finished.wait(120000), failed.isEmpty() ? "no end" : qPrintable(failed.first().at(0).toString()));
    QVERIFY(!engine.isRunning());
    QVERIFY(steps.count() >= 390); // coalesced per publish, none lost
    QTRY_COMPARE_WITH_TIMEOUT(testLoss.count(), 400 / 16, 2000); // every 16 steps (s.steps / 25), the last among them
    QCOMPARE(testLoss.last().at(0).toLongLong(), 399);
    QVERIFY(testLoss.last().at(1).toDouble() < testLoss.first().at(1).toDouble()); // it learns
}

void TestGuiController::snapshotsAreCoalesced()
{
    EngineController engine(2);
    QVERIFY(waitForNodes(engine, 2));
    QSignalSpy states(&engine, &EngineController::stateChanged);
    QSignalSpy finished(&engine, &EngineController::runFinished);
    RunSettings s;
    s.nodes = 2;
    s.steps = 100000;
    engine.start(s);
    QElapsedTimer t;
    t.start();
    QTest::qWait(2000);
    const int count = int(states.count());
    const double seconds = double(t.elapsed()) / 1000;
    engine.stop();
    QVERIFY2(count <= int(30 * seconds) + 3, qPrintable(QString("%1 snapshots in %2 s").arg(count).arg(seconds)));
    QVERIFY(count >= 10); // and they do flow while training
    QSignalSpy failed(&engine, &EngineController::runFailed);
    QVERIFY(failed.wait(30000)); // a stopped run ends as stopped
}

void TestGuiController::placementIsCheckedByTheEngine()
{
    EngineController engine(0);
    const QStringList layers = engine.layerNames(QStringLiteral("mlp"));
    QCOMPARE(layers.size(), 3);
    QVERIFY(engine.checkPlacement(QStringLiteral("mlp"), QStringLiteral("0:0,1-2:1"), 2).isEmpty());
    QVERIFY(!engine.checkPlacement(QStringLiteral("mlp"), QStringLiteral("0:0,1:1,2:0"), 2).isEmpty());
}

void TestGuiController::linkLimitsReachTheRun()
{
    EngineController engine(2);
    QVERIFY(waitForNodes(engine, 2));
    QSignalSpy states(&engine, &EngineController::stateChanged);
    QSignalSpy finished(&engine, &EngineController::runFinished);
    QSignalSpy logs(&engine, &EngineController::logLine);
    engine.setNodeLink(1, 50, 2); // node 1: 50 Mbit/s, 2 ms
    RunSettings s;
    s.nodes = 2;
    s.steps = 20; // ~19 MB each way: ~3 s at 50 Mbit/s, a fraction of a second unshaped
    engine.start(s);
    QVERIFY(finished.wait(60000));
    QTRY_VERIFY_WITH_TIMEOUT(!states.isEmpty(), 2000);
    const auto state = states.last().at(0).value<widgets::ClusterStatePtr>();
    QVERIFY(!state->links.isEmpty()); // traffic of the last second
    for (const widgets::LinkState &l : state->links) {
        QCOMPARE(l.limitBitsPerSecond, 50e6);
        QCOMPARE(l.latencyMs, 2.0);
        // And the engine applied it: the last second carried no more than the link allows.
        QVERIFY2(l.bytesPerSecond <= 50e6 / 8 * 1.25, qPrintable(QString::number(l.bytesPerSecond)));
    }
}

void TestGuiController::addAndRemoveNodes()
{
    EngineController engine(2);
    QVERIFY(waitForNodes(engine, 2));
    engine.addLocalNode();
    QVERIFY(waitForNodes(engine, 3));
    QSignalSpy errors(&engine, &EngineController::errorOccurred);
    engine.removeNode(1);
    QTRY_COMPARE_WITH_TIMEOUT(engine.readyNodes(), 2, 5000);
    QCOMPARE(errors.count(), 0);
    engine.removeNode(1); // already gone
    QCOMPARE(errors.count(), 1);
    // The remaining two still train together.
    QSignalSpy finished(&engine, &EngineController::runFinished);
    RunSettings s;
    s.nodes = 2;
    s.steps = 5;
    engine.start(s);
    QVERIFY(finished.wait(60000));
}

void TestGuiController::zero3GatheredLayersAtAPause()
{
    EngineController engine(3);
    QVERIFY(waitForNodes(engine, 3));
    QSignalSpy states(&engine, &EngineController::stateChanged);
    QSignalSpy paused(&engine, &EngineController::pausedAt);
    QSignalSpy finished(&engine, &EngineController::runFinished);
    // The gradient reduce-scatter of a layer runs while zero3 holds the layer in full.
    engine.addBreakpoint(QStringLiteral("reducescatter@step=1,name=fc2"));
    RunSettings s;
    s.strategy = QStringLiteral("zero3");
    s.nodes = 3;
    s.steps = 4;
    engine.start(s);
    QVERIFY(paused.wait(30000));
    auto fc2Gathered = [](const widgets::ClusterStatePtr &state) {
        int cells = 0;
        for (const widgets::ShardCell &c : state->shards)
            if (c.layer == QLatin1String("fc2")) {
                for (int r = 0; r < 3; ++r) // every node but the cell's owner gathered it
                    if (r != c.owner && !c.materialisedOn.contains(r))
                        return false;
                ++cells;
            } else if (!c.materialisedOn.isEmpty()) {
                return false; // only the layer being worked on
            }
        return cells > 0;
    };
    engine.clearBreakpoints();
    engine.resume();
    QVERIFY(finished.wait(60000));
    QTRY_VERIFY_WITH_TIMEOUT(!fc2Gathered(states.last().at(0).value<widgets::ClusterStatePtr>()), 3000);
}

QTEST_MAIN(TestGuiController)
#include "tst_gui_controller.moc"
