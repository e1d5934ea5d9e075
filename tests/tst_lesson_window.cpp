// Lessons in the window, offscreen, on a real local cluster of 4 node
// threads: every shipped lesson runs through to its last step from the
// Lessons menu's runner (each step's run, pause, edit and reveal), the panel
// shows the measured values beside their formulas and they agree; the
// presenter keys drive it (Page Down reveals and goes on, Page Up goes back
// without running again, B blanks the window); a step's focus switches the
// window's tab; a lesson file with an error is refused in one line.
#include "app/lessons/lesson.h"
#include "app/lessons/lesson_runner.h"
#include "app/replay/compare_controller.h"
#include "app/window/lesson_ui.h"
#include "app/window/mainwindow.h"
#include "widgets/lesson_panel.h"

#include <QtTest>

#include <QApplication>
#include <QDockWidget>
#include <QLabel>
#include <QMenuBar>
#include <QTabWidget>
#include <QTemporaryDir>

using namespace smol;
using namespace smol::app;

class TestLessonWindow : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase();
    void cleanupTestCase();
    void presenterKeys();
    void everyLessonRunsThrough_data();
    void everyLessonRunsThrough();
    void badLessonFileIsRefused();

private:
    EngineController *m_engine = nullptr;
    MainWindow *m_window = nullptr;
};

void TestLessonWindow::initTestCase()
{
    m_engine = new EngineController(4);
    m_window = new MainWindow(m_engine);
    m_window->resize(1024, 768);
    m_window->setProjectorMode(true);
    m_window->show();
    QVERIFY(QTest::qWaitForWindowExposed(m_window));
    QTRY_VERIFY_WITH_TIMEOUT(m_engine->readyNodes() == 4, 30000);
    QVERIFY(m_window->lessons());
    // The Lessons menu lists the shipped lessons.
    QMenu *menu = m_window->lessons()->menu();
    QVERIFY(menu);
    QStringList titles;
    for (QAction *a : menu->actions())
        if (!a->isSeparator())
            titles << a->text();
    for (const char *t : {"Ring all-reduce", "ZeRO 1, 2, 3", "Stragglers", "Pipeline bubbles", "A bad gradient",
                          "Compression"})
        QVERIFY2(titles.contains(QLatin1String(t)), qPrintable(titles.join(", ")));
}

void TestLessonWindow::cleanupTestCase()
{
    delete m_window;
    delete m_engine;
}

void TestLessonWindow::everyLessonRunsThrough_data()
{
    QTest::addColumn<QString>("name");
    for (const QString &n : shippedLessons().keys())
        QTest::newRow(qPrintable(n)) << n;
}

void TestLessonWindow::everyLessonRunsThrough()
{
    QFETCH(QString, name);
    LessonUi *ui = m_window->lessons();
    QString error;
    QVERIFY2(ui->open(name, &error, true), qPrintable(error));
    QVERIFY(ui->dock()->isVisible());
    const Lesson &lesson = ui->runner()->lesson();
    bool done = false, ok = false;
    QString reason;
    ui->runTo(int(lesson.steps.size()), [&](bool good, const QString &why) {
        done = true;
        ok = good;
        reason = why;
    });
    QTRY_VERIFY_WITH_TIMEOUT(done, 240000);
    QVERIFY2(ok, qPrintable(reason));
    // On the way every step was reached; its numbers agree with their formulas.
    for (int i = 0; i < lesson.steps.size(); ++i)
        QVERIFY2(ui->runner()->reached(i), qPrintable(lesson.steps[i].title));
    const widgets::LessonStepView v = ui->panel()->view();
    QCOMPARE(v.index, int(lesson.steps.size()) - 1);
    QCOMPARE(v.count, int(lesson.steps.size()));
    for (const widgets::LessonReveal &r : v.reveals) {
        QVERIFY(r.revealed);
        QVERIFY2(!r.measured.isEmpty(), qPrintable(r.label));
        QVERIFY2(r.agrees, qPrintable(r.label + ": " + r.measured + " vs " + r.formulaValue));
    }
    // The panel's labels show what the view says (title and a measured value).
    bool titleShown = false, measuredShown = false;
    for (QLabel *l : ui->panel()->findChildren<QLabel *>()) {
        titleShown = titleShown || l->text().contains(v.title);
        if (!v.reveals.isEmpty())
            measuredShown = measuredShown || l->text().contains(v.reveals.last().measured);
    }
    QVERIFY(titleShown);
    QVERIFY(v.reveals.isEmpty() || measuredShown);
    // The ZeRO lesson ends with its two recorded runs side by side.
    const bool compares = !lesson.steps.last().compareA.isEmpty();
    if (compares) {
        QTRY_VERIFY_WITH_TIMEOUT(m_window->isReplaying(), 10000);
        QTRY_VERIFY(m_window->compare()->isOpen());
    }
    ui->close();
    QVERIFY(!ui->isOpen());
    QVERIFY(!ui->dock()->isVisible());
    QTRY_VERIFY_WITH_TIMEOUT(!m_engine->isRunning(), 10000);
}

void TestLessonWindow::presenterKeys()
{
    LessonUi *ui = m_window->lessons();
    QVERIFY(ui->open(QStringLiteral("ring-allreduce"), nullptr, true));
    LessonRunner *runner = ui->runner();
    QCOMPARE(runner->index(), 0);
    // The panel beside the cluster still fits a 1024x768 projector image.
    QTRY_VERIFY(ui->dock()->isVisible());
    QVERIFY2(m_window->width() <= 1024, qPrintable(QString::number(m_window->width())));
    QVERIFY(ui->dock()->geometry().right() < m_window->width());
    const auto press = [&](Qt::Key key) {
        QWidget *target = QApplication::focusWidget() ? QApplication::focusWidget() : m_window;
        QTest::keyClick(target, key);
    };
    // Step 1 has no run: Page Down goes to step 2, which runs syncps.
    QTRY_VERIFY(!runner->busy());
    press(Qt::Key_PageDown);
    QCOMPARE(runner->index(), 1);
    QTRY_VERIFY2_WITH_TIMEOUT(runner->reached(1), qPrintable(runner->view().status), 60000);
    // Its focus was the Node tab.
    auto *tabs = m_window->findChild<QTabWidget *>(QStringLiteral("sideTabs"));
    QVERIFY(tabs);
    const QString focused = tabs->tabText(tabs->currentIndex());
    QVERIFY2(focused.contains(QLatin1String("Node")), qPrintable(focused));
    // Right reveals (the measured value appears), Right again goes on.
    QVERIFY(!ui->panel()->view().reveals.first().revealed);
    press(Qt::Key_Right);
    QVERIFY(ui->panel()->view().reveals.first().revealed);
    QVERIFY(ui->panel()->view().reveals.first().agrees);
    press(Qt::Key_Right);
    QCOMPARE(runner->index(), 2);
    QTRY_VERIFY2_WITH_TIMEOUT(runner->reached(2), qPrintable(runner->view().status), 60000);
    // Page Up shows step 2 again without running it again.
    press(Qt::Key_PageUp);
    QCOMPARE(runner->index(), 1);
    QVERIFY(!runner->busy());
    QVERIFY(ui->panel()->view().reveals.first().revealed);
    press(Qt::Key_Left);
    QCOMPARE(runner->index(), 0);
    press(Qt::Key_PageDown);
    QCOMPARE(runner->index(), 1);
    QVERIFY(!runner->busy());
    // B blanks the window; B again brings it back.
    auto *blank = m_window->findChild<widgets::BlankOverlay *>();
    QVERIFY(blank);
    press(Qt::Key_B);
    QTRY_VERIFY(blank->isVisible());
    QCOMPARE(blank->geometry(), m_window->rect());
    QTest::keyClick(blank, Qt::Key_B);
    QTRY_VERIFY(!blank->isVisible());
    ui->close();
    QTRY_VERIFY_WITH_TIMEOUT(!m_engine->isRunning(), 10000);
}

void TestLessonWindow::badLessonFileIsRefused()
{
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("broken.lesson"));
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("lesson: Broken\nstep: one\nrun: strategy=ddp nodes=two\n");
    f.close();
    QString error;
    QVERIFY(!m_window->lessons()->open(path, &error, true));
    QVERIFY2(error.startsWith(QLatin1String("broken.lesson:3: run nodes:")), qPrintable(error));
    QVERIFY(!error.contains('\n'));
    QVERIFY(!m_window->lessons()->isOpen());
    QVERIFY(!m_window->lessons()->open(QStringLiteral("no-such-lesson"), &error, true));
    QVERIFY(error.contains(QLatin1String("no lesson 'no-such-lesson'")));
}

QTEST_MAIN(TestLessonWindow)
#include "tst_lesson_window.moc"
