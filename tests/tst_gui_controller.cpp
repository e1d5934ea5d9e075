// The GUI's bridge to the engine, driven as the window drives it: a local
// cluster joins, a run starts, snapshots arrive at most 30 times a second
// with the engine's measured memory, the cluster pauses at the next
// collective with every node's tensor, an edit reaches the engine, resume
// finishes the run; the placement validator is the engine's.
// A class's cluster: the coordinator listens on the port and token asked
// for (and says so in the join command), local nodes are named after their
// ids, a failed epoch shows at once (the run fails, the nodes say why, no
// silent retry), a lost node's re-form is announced, and Stop stops.
#include "app/bridge/engine_controller.h"

#include <QTcpServer>
#include <QtTest>

#include <cmath>
#include <stdexcept>

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
    void pauseShowsTheMemoryOfThatInstant();
    void listensOnTheGivenPortAndToken();
    void localNodesAreNamedByTheirIds();
    void failedEpochIsShownAtOnce();
    void lostNodeReformIsAnnounced();
    void everyNodeLostWaitsForNewOnes();
    void stopEndsTheRunWithinSeconds();
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

// A port nothing listens on right now.
quint16 freePort()
{
    QTcpServer server;
    server.listen(QHostAddress::Any, 0);
    return server.serverPort();
}

widgets::ClusterStatePtr newestState(QSignalSpy &states)
{
    return states.isEmpty() ? nullptr : states.last().at(0).value<widgets::ClusterStatePtr>();
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
    QSignalSpy stopped(&engine, &EngineController::runStopped);
    QVERIFY(stopped.wait(30000)); // a stopped run ends as stopped
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

// At a pause inside a zero3 reduce-scatter every node holds the layer's full
// gradient buffer: the cluster state the views draw says so (comm = the
// buffer entering the collective), not the last step's figures.
void TestGuiController::pauseShowsTheMemoryOfThatInstant()
{
    EngineController engine(3);
    QVERIFY(waitForNodes(engine, 3));
    QSignalSpy states(&engine, &EngineController::stateChanged);
    QSignalSpy paused(&engine, &EngineController::pausedAt);
    QSignalSpy finished(&engine, &EngineController::runFinished);
    engine.addBreakpoint(QStringLiteral("reducescatter@step=1,name=fc2"));
    RunSettings s;
    s.strategy = QStringLiteral("zero3");
    s.nodes = 3;
    s.steps = 3;
    engine.start(s);
    QVERIFY(paused.wait(30000));
    const PauseView pause = paused.first().at(0).value<PauseView>();
    QCOMPARE(pause.inputs.size(), 3);
    const qint64 buffer = 4 * pause.inputs.first().count; // float32, the whole layer's gradients
    QVERIFY(buffer > 0);
    auto showsTheBuffer = [&] {
        if (states.isEmpty())
            return false;
        const auto state = states.last().at(0).value<widgets::ClusterStatePtr>();
        int held = 0;
        for (const widgets::NodeState &n : state->nodes)
            held += n.rank >= 0 && n.memory.comm == buffer && n.memory.params > 0;
        return held == 3;
    };
    QTRY_VERIFY_WITH_TIMEOUT(showsTheBuffer(), 5000);
    engine.clearBreakpoints();
    engine.resume();
    QVERIFY(finished.wait(60000));
}

void TestGuiController::listensOnTheGivenPortAndToken()
{
    const quint16 port = freePort();
    QVERIFY(port > 0);
    EngineController engine(ClusterOptions{1, port, QStringLiteral("class7"), QStringLiteral("teacher.local")});
    QCOMPARE(engine.port(), port);
    QCOMPARE(engine.token(), QStringLiteral("class7"));
    QCOMPARE(engine.joinCommand(),
             QStringLiteral("smolctl node --join teacher.local:%1 --token class7 --name NAME").arg(port));
    QVERIFY(waitForNodes(engine, 1));
    // The port is taken now: a second window says so, in one line.
    try {
        EngineController second(ClusterOptions{0, port, QStringLiteral("class7"), QString()});
        QFAIL("a second coordinator listened on a taken port");
    } catch (const std::runtime_error &e) {
        const QString what = QString::fromUtf8(e.what());
        QVERIFY2(what.contains(QString::number(port)) && !what.contains('\n'), e.what());
    }
    // Without a port or a token: any free port and a random token, new each time.
    EngineController a(0), b(0);
    QVERIFY(a.port() != 0 && a.port() != b.port());
    QVERIFY(a.token().size() >= 16 && a.token() != b.token());
}

void TestGuiController::localNodesAreNamedByTheirIds()
{
    EngineController engine(12);
    QVERIFY(waitForNodes(engine, 12));
    QSignalSpy states(&engine, &EngineController::stateChanged);
    engine.setNodeSlowdown(0, 1); // something new to publish
    QVERIFY(states.wait(2000));
    const auto state = newestState(states);
    QCOMPARE(state->nodes.size(), 12);
    for (const widgets::NodeState &n : state->nodes)
        QCOMPARE(n.name, QStringLiteral("local-%1").arg(n.id));
    engine.addLocalNode();
    QVERIFY(waitForNodes(engine, 13));
    QTRY_VERIFY_WITH_TIMEOUT(newestState(states)->nodes.size() == 13, 2000);
    QCOMPARE(newestState(states)->nodes.last().name, QStringLiteral("local-12"));
}

void TestGuiController::failedEpochIsShownAtOnce()
{
    // Local nodes that listen on 127.0.0.1 only but advertise 127.0.0.2
    // (loopback: nothing leaves the machine), where nobody answers: their
    // peers cannot connect, the epoch fails on every node, and no node is
    // lost, so the run ends with the reason: no re-forming.
    ClusterOptions cluster{2, 0, QString(), QStringLiteral("127.0.0.2")};
    cluster.bindAddress = QStringLiteral("127.0.0.1");
    EngineController engine(cluster);
    QVERIFY(waitForNodes(engine, 2));
    QSignalSpy states(&engine, &EngineController::stateChanged);
    QSignalSpy failed(&engine, &EngineController::runFailed);
    QSignalSpy finished(&engine, &EngineController::runFinished);
    QSignalSpy reforming(&engine, &EngineController::runReforming);
    RunSettings s;
    s.nodes = 2;
    s.steps = 50;
    engine.start(s);
    QVERIFY2(failed.wait(90000), finished.isEmpty() ? "the run did not end" : "the run finished");
    const QString reason = failed.first().at(0).toString();
    QVERIFY2(reason.contains(QStringLiteral("127.0.0.2")), qPrintable(reason));
    QCOMPARE(reforming.count(), 0);
    QVERIFY(!engine.isRunning());
    QTRY_VERIFY_WITH_TIMEOUT(!states.isEmpty(), 2000);
    int failedNodes = 0;
    for (const widgets::NodeState &n : newestState(states)->nodes)
        if (n.state == widgets::NodeRunState::Failed) {
            ++failedNodes;
            QVERIFY2(!n.reason.isEmpty(), qPrintable(n.name));
        }
    QVERIFY(failedNodes >= 1);
}

void TestGuiController::lostNodeReformIsAnnounced()
{
    EngineController engine(3);
    QVERIFY(waitForNodes(engine, 3));
    QSignalSpy steps(&engine, &EngineController::stepAvailable);
    QSignalSpy reforming(&engine, &EngineController::runReforming);
    QSignalSpy finished(&engine, &EngineController::runFinished);
    QSignalSpy failed(&engine, &EngineController::runFailed);
    RunSettings s;
    s.nodes = 3;
    s.steps = 100000;
    s.slowMotion = 3;
    engine.start(s);
    QTRY_VERIFY_WITH_TIMEOUT(steps.count() >= 3, 30000);
    engine.killNode(2);
    QVERIFY2(reforming.wait(30000), failed.isEmpty() ? "no re-form" : qPrintable(failed.first().at(0).toString()));
    const QString what = reforming.first().at(0).toString();
    QVERIFY2(QRegularExpression(QStringLiteral("^re-forming: attempt 1 of \\d+, 2 nodes from step \\d+: .+"))
                 .match(what)
                 .hasMatch(),
             qPrintable(what));
    QSignalSpy stopped(&engine, &EngineController::runStopped);
    engine.stop();
    QVERIFY(stopped.wait(30000));
}

// The only node is killed: the window says the run waits for nodes, and a
// node added then resumes it to the end.
void TestGuiController::everyNodeLostWaitsForNewOnes()
{
    EngineController engine(1);
    QVERIFY(waitForNodes(engine, 1));
    QSignalSpy steps(&engine, &EngineController::stepAvailable);
    QSignalSpy waiting(&engine, &EngineController::runWaitingForNodes);
    QSignalSpy finished(&engine, &EngineController::runFinished);
    QSignalSpy failed(&engine, &EngineController::runFailed);
    RunSettings s;
    s.strategy = QStringLiteral("single");
    s.nodes = 1;
    s.steps = 400;
    s.slowMotion = 3;
    engine.start(s);
    QTRY_VERIFY_WITH_TIMEOUT(steps.count() >= 3, 30000);
    engine.killNode(0);
    QVERIFY2(waiting.wait(30000), failed.isEmpty() ? "no wait" : qPrintable(failed.first().at(0).toString()));
    QVERIFY(waiting.first().at(0).toString().contains(QStringLiteral("waiting up to")));
    engine.addLocalNode();
    QVERIFY2(finished.wait(120000), failed.isEmpty() ? "did not finish" : qPrintable(failed.first().at(0).toString()));
}

void TestGuiController::stopEndsTheRunWithinSeconds()
{
    EngineController engine(3);
    QVERIFY(waitForNodes(engine, 3));
    QSignalSpy steps(&engine, &EngineController::stepAvailable);
    QSignalSpy stopped(&engine, &EngineController::runStopped);
    QSignalSpy failed(&engine, &EngineController::runFailed);
    RunSettings s;
    s.nodes = 3;
    s.steps = 100000;
    engine.start(s);
    QTRY_VERIFY_WITH_TIMEOUT(steps.count() >= 2, 30000);
    QElapsedTimer t;
    t.start();
    engine.stop();
    QVERIFY(stopped.wait(10000));
    QVERIFY2(t.elapsed() < 3000, qPrintable(QStringLiteral("stopped after %1 ms").arg(t.elapsed())));
    QVERIFY(!engine.isRunning());
    QCOMPARE(failed.count(), 0);
    QVERIFY2(stopped.first().at(0).toString().startsWith(QStringLiteral("Stopped at step")),
             qPrintable(stopped.first().at(0).toString()));
    // And the nodes are ready for the next run, none of them "failed": the
    // stop reaching a node through its peers is not a failure of its own.
    QTRY_COMPARE_WITH_TIMEOUT(engine.readyNodes(), 3, 5000);
    QSignalSpy states(&engine, &EngineController::stateChanged);
    engine.setNodeSlowdown(0, 1); // something new to publish
    QVERIFY(states.wait(2000));
    for (const widgets::NodeState &n : newestState(states)->nodes)
        QVERIFY2(n.state != widgets::NodeRunState::Failed, qPrintable(n.name + ": " + n.reason));
}

QTEST_MAIN(TestGuiController)
#include "tst_gui_controller.moc"
