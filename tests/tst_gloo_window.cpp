// The window with `--backend gloo` chosen in the run settings: the run goes
// over c10d's Gloo between the window's own node agents (the rendezvous
// through the coordinator), every collective is a span per rank marked as
// Gloo's with its bytes and no packets, memory by category arrives as with
// ours, Pause stops at a collective with every node in the inspector, and
// the cluster view shows each node's collective bytes (links are unknown).
// With SMOL_SCREENSHOT_DIR set, saves the window at 1024x768 and 1600x1000.
#include "app/bridge/engine_controller.h"
#include "app/window/mainwindow.h"
#include "widgets/cluster/cluster_view.h"
#include "widgets/tensor_inspector.h"
#include "widgets/timeline/timeline_data.h"
#include "widgets/timeline/timeline_view.h"

#include <QtTest>

#include <QAction>
#include <QComboBox>
#include <QMainWindow>

using namespace smol;
using namespace smol::app;

namespace {

QAction *action(QMainWindow &w, const QString &text)
{
    for (QAction *a : w.findChildren<QAction *>())
        if (a->text().remove(QLatin1Char('&')) == text)
            return a;
    return nullptr;
}

void saveShot(QWidget &window, const QSize &size, const QString &name)
{
    const QString dir = qEnvironmentVariable("SMOL_SCREENSHOT_DIR");
    if (dir.isEmpty())
        return;
    window.resize(size);
    QTest::qWait(300);
    window.grab().save(dir + "/" + name);
}

} // namespace

class TestGlooWindow : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void glooRunInTheWindow();
};

void TestGlooWindow::glooRunInTheWindow()
{
    EngineController engine(3);
    MainWindow window(&engine);
    window.resize(1600, 1000);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    QTRY_VERIFY_WITH_TIMEOUT(engine.readyNodes() == 3, 30000);

    // The run settings offer the backend.
    auto *backend = window.findChild<QComboBox *>(QStringLiteral("backendChoice"));
    QVERIFY(backend);
    backend->setCurrentIndex(backend->findData(QStringLiteral("gloo")));
    RunSettings s = window.settings();
    QCOMPARE(s.backend, QStringLiteral("gloo"));
    s.strategy = QStringLiteral("zero3");
    s.nodes = 3;
    s.steps = 20000;
    window.setSettings(s);
    QCOMPARE(window.settings().backend, QStringLiteral("gloo"));

    QSignalSpy failed(&engine, &EngineController::runFailed);
    QSignalSpy paused(&engine, &EngineController::pausedAt);
    window.startRun();
    auto *cluster = window.findChild<widgets::ClusterView *>();
    QVERIFY(cluster);
    QTRY_VERIFY_WITH_TIMEOUT((cluster->state() && cluster->state()->step >= 5) || !failed.isEmpty(), 60000);
    QVERIFY2(failed.isEmpty(), qPrintable(failed.isEmpty() ? QString() : failed.first().at(0).toString()));

    // Pause: at the next collective (the hook is the Communicator's,
    // so Gloo's collectives stop as ours do); every node in the inspector.
    QAction *pause = action(window, QStringLiteral("Pause"));
    QVERIFY(pause && pause->isEnabled());
    pause->trigger();
    QVERIFY2(paused.wait(30000), "no pause after Pause");
    auto *inspector = window.findChild<widgets::TensorInspector *>();
    QVERIFY(inspector);
    QTRY_COMPARE_WITH_TIMEOUT(inspector->model()->rowCount(), 3, 5000);
    saveShot(window, QSize(1600, 1000), QStringLiteral("gloo_paused_1600x1000.png"));
    QAction *resume = action(window, QStringLiteral("Resume"));
    QVERIFY(resume);
    resume->trigger();
    QTRY_VERIFY_WITH_TIMEOUT(cluster->state()->step >= 40, 60000);

    // No links to draw traffic on: each node shows what it handed to Gloo.
    QVERIFY(!cluster->state()->linksKnown);
    bool someBytes = false;
    for (const widgets::NodeState &n : cluster->state()->nodes) {
        if (n.rank < 0)
            continue;
        QVERIFY(n.collectiveBytesPerSecond.has_value());
        someBytes = someBytes || *n.collectiveBytesPerSecond > 0;
        QVERIFY(n.memory.params > 0); // memory by category, as with ours
    }
    QVERIFY(someBytes);

    // The timeline: a lane per rank, Gloo's collectives as marked spans with
    // their bytes, and no packets (Gloo's are not visible).
    const widgets::TimelineData &data = window.timeline()->data();
    QCOMPARE(data.laneCount(), 3);
    for (int lane = 0; lane < 3; ++lane) {
        QCOMPARE(data.packets(lane).size(), std::size_t(0));
        const auto &spans = data.spans(lane, widgets::TimelineData::Row::Collective);
        QVERIFY(spans.size() > 10);
        for (const widgets::StoredSpan &sp : spans)
            QVERIFY2(widgets::isGlooSpanName(data.name(sp.name)), qPrintable(data.name(sp.name)));
        QVERIFY(spans.back().bytes > 0);
        QVERIFY(data.memory(lane).size() > 0);
    }
    saveShot(window, QSize(1024, 768), QStringLiteral("gloo_running_1024x768.png"));
    QSignalSpy stopped(&engine, &EngineController::runStopped);
    action(window, QStringLiteral("Stop"))->trigger();
    QVERIFY(stopped.wait(15000));
}

QTEST_MAIN(TestGlooWindow)
#include "tst_gloo_window.moc"
