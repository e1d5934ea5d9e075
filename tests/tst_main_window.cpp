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
// line, and closing the replay shows the live cluster again. A replay has one
// set of controls: the replay bar's (Space, N); the run controls hide until
// it closes.
// One step number at a pause: the header, the inspector and the replay bar
// name the held collective's step, live and in the recording of the run, at
// zero3's held-out-loss gathers too (after their step was reported).
// A class: the command line's --listen/--token/--advertise/--nodes are
// checked (one-line errors), the Remote nodes dialog remembers a port and
// token that the next start listens with (the same join command), and 64
// local nodes fit the cluster view of a 1024x768 projector window, apart and
// in rank order, idle and after a run.
// The Log tab keeps to its budget (kMaxLogLines), the newest lines kept.
#include "app/window/gui_options.h"
#include "app/window/mainwindow.h"
#include "app/replay/replay_controller.h"
#include "engine/session/session_reader.h"
#include "widgets/cluster/cluster_view.h"
#include "widgets/step_number.h"
#include "widgets/tensor_inspector.h"
#include "widgets/timeline/timeline_view.h"

#include <QtTest>

#include <algorithm>
#include <map>

#include <QAction>
#include <QApplication>
#include <QDialog>
#include <QDialogButtonBox>
#include <QLineEdit>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTcpServer>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QStatusBar>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTextBlock>
#include <QTextDocument>
#include <QToolBar>

using namespace smol;
using namespace smol::app;

class TestMainWindow : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase();
    void startPauseStepResume();
    void replayInTheWindow();
    void oneStepNumberAtAPause();
    void commandLineIsChecked_data();
    void commandLineIsChecked();
    void remoteNodesDialogRemembers();
    void sixtyFourNodesFitAProjector();
    void logKeepsItsBudget();
};

namespace {

QAction *action(QMainWindow &w, const QString &text)
{
    for (QAction *a : w.findChildren<QAction *>())
        if (a->text() == text)
            return a;
    return nullptr;
}

// The cluster view's boxes: inside it, apart; in reading order by rank
// (the nodes in the run), then by id (the rest).
void verifyBoxes(const widgets::ClusterView &view, const widgets::ClusterState &state)
{
    QVector<const widgets::NodeState *> order;
    for (const widgets::NodeState &n : state.nodes)
        order << &n;
    std::sort(order.begin(), order.end(), [](auto *a, auto *b) {
        return std::pair(a->rank < 0, a->rank < 0 ? a->id : a->rank) < std::pair(b->rank < 0, b->rank < 0 ? b->id : b->rank);
    });
    QVector<QRectF> seen;
    for (const widgets::NodeState *n : order) {
        const QRectF r = view.nodeRect(n->id);
        QVERIFY2(!r.isEmpty(), qPrintable(QStringLiteral("node %1 has no box").arg(n->id)));
        QVERIFY2(QRectF(view.rect()).contains(r), qPrintable(QStringLiteral("node %1 is off the view").arg(n->id)));
        for (const QRectF &other : seen)
            QVERIFY2(!r.intersects(other), qPrintable(QStringLiteral("node %1 overlaps another").arg(n->id)));
        if (!seen.isEmpty() && view.isCompact()) {
            const QRectF &before = seen.last();
            QVERIFY2((r.left() > before.right() && std::abs(r.top() - before.top()) < 1e-6) || r.top() > before.bottom(),
                     qPrintable(QStringLiteral("node %1 out of order").arg(n->id)));
        }
        seen << r;
    }
}

// The inspector's title line ("Paused (...) at all-gather 'params.fc2', step 1: 2 node(s)").
QString inspectorTitle(const widgets::TensorInspector &inspector)
{
    for (const QLabel *l : inspector.findChildren<QLabel *>())
        if (l->text().startsWith(QStringLiteral("Paused")))
            return l->text();
    return {};
}

// The replay bar's position ("0.690 / 1.352 s, step 4").
QString replayBarPosition(QMainWindow &window)
{
    if (auto *bar = window.findChild<QToolBar *>(QStringLiteral("replay")))
        for (const QLabel *l : bar->findChildren<QLabel *>())
            if (l->text().contains(QStringLiteral(" s")))
                return l->text();
    return {};
}

} // namespace

void TestMainWindow::initTestCase()
{
    // The dialog's QSettings go to a test location, not the user's.
    QStandardPaths::setTestModeEnabled(true);
    rememberListenSettings({});
}

void TestMainWindow::commandLineIsChecked_data()
{
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QString>("error"); // a word the one-line error has; "" = accepted
    QTest::addColumn<int>("port");
    QTest::addColumn<QString>("token");
    QTest::newRow("join command") << QStringList{"--listen", "7080", "--token", "class7"} << "" << 7080 << "class7";
    QTest::newRow("with advertise") << QStringList{"--listen", "1", "--token", "t", "--advertise", "192.168.1.20"} << ""
                                    << 1 << "t";
    QTest::newRow("highest port") << QStringList{"--listen", "65535"} << "" << 65535 << "";
    QTest::newRow("nothing") << QStringList{} << "" << 0 << "";
    QTest::newRow("64 nodes") << QStringList{"--nodes", "64"} << "" << 0 << "";
    QTest::newRow("port 0") << QStringList{"--listen", "0"} << "--listen" << 0 << "";
    QTest::newRow("port too big") << QStringList{"--listen", "65536"} << "--listen" << 0 << "";
    QTest::newRow("port not a number") << QStringList{"--listen", "http"} << "--listen" << 0 << "";
    QTest::newRow("port missing") << QStringList{"--listen"} << "listen" << 0 << "";
    QTest::newRow("empty token") << QStringList{"--listen", "7080", "--token", ""} << "--token" << 0 << "";
    QTest::newRow("blank token") << QStringList{"--token", "  "} << "--token" << 0 << "";
    QTest::newRow("token with a space") << QStringList{"--token", "class 7"} << "spaces" << 0 << "";
    QTest::newRow("bad advertise") << QStringList{"--advertise", "my laptop!"} << "advertise" << 0 << "";
    QTest::newRow("65 nodes") << QStringList{"--nodes", "65"} << "--nodes" << 0 << "";
    QTest::newRow("0 nodes") << QStringList{"--nodes", "0"} << "--nodes" << 0 << "";
    QTest::newRow("gloo") << QStringList{"--backend", "gloo"} << "" << 0 << "";
    QTest::newRow("unknown backend") << QStringList{"--backend", "nccl"} << "--backend takes ours or gloo" << 0 << "";
    QTest::newRow("break") << QStringList{"--break", "allgather@step=5"} << "" << 0 << "";
    QTest::newRow("break next") << QStringList{"--break", "next"} << "" << 0 << "";
    QTest::newRow("bad break") << QStringList{"--break", "allgather@step=x"} << "--break allgather@step=x" << 0 << "";
    QTest::newRow("break in a replay") << QStringList{"--replay", "a.smolrec", "--break", "next"} << "--replay" << 0
                                       << "";
    QTest::newRow("view") << QStringList{"--view", "charts"} << "" << 0 << "";
    QTest::newRow("unknown view") << QStringList{"--view", "graphs"} << "--view takes one of" << 0 << "";
}

void TestMainWindow::commandLineIsChecked()
{
    QFETCH(QStringList, args);
    QFETCH(QString, error);
    QFETCH(int, port);
    QFETCH(QString, token);
    const GuiOptions o = parseGuiOptions(QStringList{QStringLiteral("smolcluster")} + args);
    if (error.isEmpty()) {
        QVERIFY2(o.parsed && o.error.isEmpty(), qPrintable(o.error));
        QCOMPARE(int(o.listen.port), port);
        QCOMPARE(o.listen.token, token);
        return;
    }
    QVERIFY2(o.error.contains(error), qPrintable(o.error));
    QVERIFY(!o.error.contains('\n'));
}

void TestMainWindow::remoteNodesDialogRemembers()
{
    QTcpServer probe; // a port free right now
    QVERIFY(probe.listen(QHostAddress::Any, 0));
    const quint16 port = probe.serverPort();
    probe.close();
    QCOMPARE(rememberedListenSettings(), ListenSettings());
    {
        EngineController engine(0);
        MainWindow window(&engine);
        window.show();
        QVERIFY(QTest::qWaitForWindowExposed(&window));
        QString note;
        bool filled = false;
        // The dialog is modal: fill it in from inside its event loop.
        QTimer::singleShot(200, &window, [&] {
            auto *dialog = qobject_cast<QDialog *>(QApplication::activeModalWidget());
            if (!dialog)
                return;
            auto *p = dialog->findChild<QSpinBox *>(QStringLiteral("remotePort"));
            auto *t = dialog->findChild<QLineEdit *>(QStringLiteral("remoteToken"));
            auto *a = dialog->findChild<QLineEdit *>(QStringLiteral("remoteAdvertise"));
            auto *n = dialog->findChild<QLabel *>(QStringLiteral("remoteNote"));
            QPushButton *remember = nullptr;
            for (QPushButton *b : dialog->findChildren<QPushButton *>())
                if (b->text() == QStringLiteral("Remember"))
                    remember = b;
            if (!p || !t || !a || !n || !remember) {
                dialog->reject();
                return;
            }
            // Nothing remembered yet: the dialog offers to keep today's port and token.
            filled = p->value() == engine.port() && t->text() == engine.token();
            t->setText(QStringLiteral("bad token")); // refused: it would not survive the board
            remember->click();
            const bool refused = rememberedListenSettings() == ListenSettings() && n->text().contains("Not remembered");
            p->setValue(port);
            t->setText(QStringLiteral("class7"));
            a->setText(QString());
            remember->click();
            note = refused ? n->text() : QString();
            dialog->accept();
        });
        action(window, QStringLiteral("&Remote nodes..."))->trigger();
        QVERIFY(filled);
        QVERIFY2(note.contains(QStringLiteral("next start")), qPrintable(note));
    }
    const ListenSettings remembered = rememberedListenSettings();
    QCOMPARE(int(remembered.port), int(port));
    QCOMPARE(remembered.token, QStringLiteral("class7"));
    // The next two starts listen with them: the same join command both times.
    QString first;
    for (int start = 0; start < 2; ++start) {
        const ListenSettings s = effectiveListenSettings({}, rememberedListenSettings());
        EngineController engine(ClusterOptions{0, s.port, s.token, s.advertise});
        QCOMPARE(engine.port(), port);
        QVERIFY(engine.joinCommand().contains(QStringLiteral(":%1 --token class7").arg(port)));
        if (start == 0)
            first = engine.joinCommand();
        else
            QCOMPARE(engine.joinCommand(), first);
    }
    // A flag wins over what is remembered.
    ListenSettings flags;
    flags.token = QStringLiteral("other");
    QCOMPARE(effectiveListenSettings(flags, remembered).token, QStringLiteral("other"));
    QCOMPARE(effectiveListenSettings(flags, remembered).port, port);
    rememberListenSettings({});
}

void TestMainWindow::sixtyFourNodesFitAProjector()
{
    EngineController engine(64);
    MainWindow window(&engine);
    window.resize(1024, 768);
    window.setProjectorMode(true);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    QTRY_VERIFY_WITH_TIMEOUT(engine.readyNodes() == 64, 60000);
    auto *cluster = window.findChild<widgets::ClusterView *>();
    QVERIFY(cluster);
    // The view itself is on the window, of a size worth drawing in.
    QVERIFY(QRect(QPoint(0, 0), window.size()).contains(QRect(cluster->mapTo(&window, QPoint(0, 0)), cluster->size())));
    QVERIFY(cluster->width() >= 400 && cluster->height() >= 200);
    QTRY_VERIFY_WITH_TIMEOUT(cluster->state() && cluster->state()->nodes.size() == 64, 5000);
    verifyBoxes(*cluster, *cluster->state());

    // In a run every node has a rank: the grid follows the ranks. Stop
    // (the tool bar's) ends it within seconds, and no node says "failed":
    // at 64 nodes the stop reaches many through a peer's closed connection.
    RunSettings s = window.settings();
    s.nodes = 64;
    s.steps = 100000;
    window.setSettings(s);
    QSignalSpy stopped(&engine, &EngineController::runStopped);
    QSignalSpy failed(&engine, &EngineController::runFailed);
    window.startRun();
    QTRY_VERIFY_WITH_TIMEOUT(cluster->state()->step >= 3 || !failed.isEmpty(), 120000);
    QVERIFY2(failed.isEmpty(), qPrintable(failed.isEmpty() ? QString() : failed.first().at(0).toString()));
    for (const widgets::NodeState &n : cluster->state()->nodes)
        QVERIFY(n.rank >= 0);
    QVERIFY(cluster->isCompact());
    verifyBoxes(*cluster, *cluster->state());
    QElapsedTimer t;
    t.start();
    action(window, QStringLiteral("Stop"))->trigger();
    QVERIFY(stopped.wait(10000));
    QVERIFY2(t.elapsed() < 3000, qPrintable(QStringLiteral("stopped after %1 ms").arg(t.elapsed())));
    QVERIFY2(window.statusBar()->currentMessage().startsWith(QStringLiteral("Stopped at step")),
             qPrintable(window.statusBar()->currentMessage()));
    QVERIFY(action(window, QStringLiteral("Start"))->isEnabled());
    QTRY_VERIFY_WITH_TIMEOUT(!engine.isRunning() && cluster->state() && engine.readyNodes() == 64, 10000);
    QTest::qWait(100); // the snapshot after the end
    for (const widgets::NodeState &n : cluster->state()->nodes)
        QVERIFY2(n.state != widgets::NodeRunState::Failed, qPrintable(n.name + ": " + n.reason));
    verifyBoxes(*cluster, *cluster->state());
    // The timeline has a lane per rank, all inside it.
    QCOMPARE(window.timeline()->data().laneCount(), 64);
}

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
    // One set of controls: the replay bar; the run controls and the Node
    // tab's live buttons hide, their actions off (no key reaches them).
    auto *runControls = window.findChild<QWidget *>(QStringLiteral("runControls"));
    QVERIFY(runControls && runControls->isHidden());
    QVERIFY(!window.findChild<QToolBar *>(QStringLiteral("replay"))->isHidden());
    for (const QString &name : {QStringLiteral("Step"), QStringLiteral("Stop")})
        QVERIFY(!action(window, name)->isEnabled());
    QPushButton *kill = nullptr;
    for (QPushButton *b : window.findChildren<QPushButton *>())
        if (b->text() == QStringLiteral("Kill node"))
            kill = b;
    QVERIFY(kill && window.showView(QStringLiteral("node")));
    QVERIFY(!kill->isVisible());
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

    // Space plays and pauses the replay; N goes to the next collective.
    QTest::keyClick(&window, Qt::Key_Space);
    QVERIFY(replay->isPlaying());
    QTest::keyClick(&window, Qt::Key_Space);
    QVERIFY(!replay->isPlaying());
    const qint64 before = replay->positionNs();
    QTest::keyClick(&window, Qt::Key_N);
    QVERIFY(replay->positionNs() > before);
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
    QVERIFY(!runControls->isHidden()); // the run controls are back
    QVERIFY(window.showView(QStringLiteral("node")));
    QVERIFY(kill->isVisible());
    QVERIFY(window.findChild<QToolBar *>(QStringLiteral("replay"))->isHidden());
    QCOMPARE(window.timeline()->data().packetCount(), std::size_t(0));
}

// zero3 gathers params.fc2 in step 1 forward, backward, and after step 1
// has been reported: for the held-out loss and the cluster's checkpoint
// (where "the step after the newest completed one" says 2). At each pause,
// live and in the recording, every view names step 1.
void TestMainWindow::oneStepNumberAtAPause()
{
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("zero3.smolrec"));
    EngineController engine(2);
    MainWindow window(&engine);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    QTRY_VERIFY_WITH_TIMEOUT(engine.readyNodes() == 2, 30000);
    auto *cluster = window.findChild<widgets::ClusterView *>();
    auto *inspector = window.findChild<widgets::TensorInspector *>();
    RunSettings s = window.settings();
    s.strategy = QStringLiteral("zero3");
    s.nodes = 2;
    s.steps = 4;
    s.testEvery = 2;
    s.recordPath = path;
    QSignalSpy paused(&engine, &EngineController::pausedAt);
    QSignalSpy finished(&engine, &EngineController::runFinished);
    engine.addBreakpoint(QStringLiteral("allgather@step=1,name=fc2"));
    engine.start(s);
    int afterItsStep = 0; // pauses after step 1 was reported (the held-out loss's, a checkpoint's)
    for (int i = 0;; ++i) {
        QTRY_VERIFY_WITH_TIMEOUT(paused.count() > i || !engine.isRunning(), 60000);
        if (paused.count() <= i)
            break;
        const PauseView pause = paused.at(i).at(0).value<PauseView>();
        QCOMPARE(pause.step(), qint64(1));
        // Wait for the step before it to be reported (for the held-out loss's: step 1 itself).
        const bool afterStep = pause.inputs.front().name == QStringLiteral("params.fc2") && i > 0;
        QTRY_VERIFY_WITH_TIMEOUT(engine.state() && engine.state()->step >= (afterStep ? 1 : 0), 10000);
        afterItsStep += engine.state()->step == 1;
        QTest::qWait(100); // a few snapshots later
        const QString step = widgets::stepText(pause.step());
        QVERIFY2(cluster->headerText().contains(step + QStringLiteral(" / 4")),
                 qPrintable(QStringLiteral("pause %1: header '%2', held %3").arg(i).arg(cluster->headerText(), step)));
        QVERIFY2(inspectorTitle(*inspector).contains(step + QStringLiteral(":")), qPrintable(inspectorTitle(*inspector)));
        engine.resume();
    }
    // isRunning() turns false on the run's thread; runFinished is queued to this one.
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 10000);
    QVERIFY(paused.count() >= 3);
    QVERIFY(afterItsStep >= 1);

    // The recording, seeked into each recorded pause: the header, the
    // inspector and the replay bar.
    QString error;
    QVERIFY2(window.openSession(path, &error, true), qPrintable(error));
    const engine::SessionReader &reader = *window.replay()->reader();
    const auto [t0, t1] = reader.timeRange();
    std::map<std::uint64_t, std::int64_t> pauses; // id -> the time of one of its tensors
    for (const engine::TensorRecord &r : reader.tensors(t0, t1))
        pauses.emplace(r.pauseId, r.tNs);
    QCOMPARE(pauses.size(), std::size_t(paused.count()));
    const QString step = widgets::stepText(1);
    for (const auto &[id, t] : pauses) {
        window.replay()->seek(t);
        QVERIFY(window.replay()->isPaused());
        QVERIFY2(cluster->headerText().contains(step + QStringLiteral(" / 4")), qPrintable(cluster->headerText()));
        QVERIFY2(inspectorTitle(*inspector).contains(step + QStringLiteral(":")), qPrintable(inspectorTitle(*inspector)));
        QVERIFY2(replayBarPosition(window).endsWith(QStringLiteral(", ") + step), qPrintable(replayBarPosition(window)));
    }
    window.closeReplay();
}

// The Log tab's budget: fed twice its lines and more through the feed, it
// keeps at most MainWindow::kMaxLogLines, the newest last, the oldest gone.
void TestMainWindow::logKeepsItsBudget()
{
    EngineController engine(0);
    MainWindow window(&engine);
    const int fed = 2 * MainWindow::kMaxLogLines + 3;
    for (int i = 0; i < fed; ++i)
        Q_EMIT engine.logLine(QStringLiteral("line %1").arg(i));
    const QTextDocument *log = window.logView()->document();
    QVERIFY2(log->blockCount() <= MainWindow::kMaxLogLines, qPrintable(QString::number(log->blockCount())));
    QCOMPARE(log->lastBlock().text(), QStringLiteral("line %1").arg(fed - 1));
    QCOMPARE(log->firstBlock().text(), QStringLiteral("line %1").arg(fed - log->blockCount()));
}

QTEST_MAIN(TestMainWindow)
#include "tst_main_window.moc"
