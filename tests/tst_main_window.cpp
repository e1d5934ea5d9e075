// The window wired to a real local cluster, driven through its own actions
// and widgets as a teacher would: Start, Space to pause (the inspector
// shows every node's tensor), N to step one collective, Space to resume,
// and the run's summary in the status bar; clicking a node shows its
// details; projector mode switches every view.
#include "app/mainwindow.h"
#include "widgets/cluster_view.h"
#include "widgets/tensor_inspector.h"

#include <QtTest>

#include <QAction>
#include <QLabel>
#include <QStatusBar>
#include <QTabWidget>

using namespace smol;
using namespace smol::app;

class TestMainWindow : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void startPauseStepResume();
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

    window.setProjectorMode(true);
    QVERIFY(window.projectorMode());
    QVERIFY(!window.grab().isNull());
}

QTEST_MAIN(TestMainWindow)
#include "tst_main_window.moc"
