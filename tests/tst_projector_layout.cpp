// The window on a projector (issue 15, item 1): at 1024x768 and 1280x720 in
// projector mode every run control shows (none in a tool bar's overflow
// menu), no label or tab title is clipped or elided, no side page needs a
// horizontal scroll bar; a choice that cannot run says so before Start with
// its fixes; text pending in the breakpoint field counts at Start; names
// follow ranks and are the same in every view; the cluster's header and
// the inspector give one step number. Issue 25: with the lesson panel open,
// the step's heading stays in view after every reveal; the charts elide no
// tick or title and name every legend entry; the inspector's caption of a
// held tensor wraps whole; the Memory tab's legend and node names fit with
// 4 and 16 nodes.
#include "app/bridge/engine_controller.h"
#include "app/window/mainwindow.h"
#include "app/replay/replay_controller.h"
#include "app/bridge/run_check.h"
#include "app/window/lesson_ui.h"
#include "widgets/charts_panel.h"
#include "widgets/cluster/cluster_view.h"
#include "widgets/lesson_panel.h"
#include "widgets/memory_view.h"
#include "widgets/tensor_inspector.h"
#include "widgets/timeline/timeline_view.h"

#include <QAbstractScrollArea>
#include <QAction>
#include <QChart>
#include <QDockWidget>
#include <QFile>
#include <QGraphicsScene>
#include <QGraphicsTextItem>
#include <QLabel>
#include <QLineEdit>
#include <QLineSeries>
#include <QPushButton>
#include <QScrollBar>
#include <QSignalSpy>
#include <QTabBar>
#include <QTabWidget>
#include <QTableView>
#include <QTemporaryDir>
#include <QToolBar>
#include <QToolButton>
#include <QtTest>

using namespace smol;
using namespace smol::app;

class TestProjectorLayout : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase();
    void checkRunOffersFixes();
    void displayNames();
    void everythingFits_data();
    void everythingFits();
    void replayFitsAndShowsItsConfig();
    void namesStepsAndPendingBreakpoint();
    void lessonKeepsItsHeading();
    void heldTensorCaptionFits_data();
    void heldTensorCaptionFits();
    void memoryTabReadable_data();
    void memoryTabReadable();
};

namespace {

QAction *action(QMainWindow &w, const QString &text)
{
    for (QAction *a : w.findChildren<QAction *>())
        if (a->text() == text)
            return a;
    return nullptr;
}

// What of `w` the window shows: its rect, cut by every ancestor's.
QRect shownPart(const QWidget *w, const QWidget *window)
{
    QRect r(w->mapTo(window, QPoint(0, 0)), w->size());
    for (const QWidget *p = w->parentWidget(); p; p = p->parentWidget())
        r &= QRect(p->mapTo(window, QPoint(0, 0)), p->size());
    return r;
}

// In a dock tabbed behind another (Charts behind Timeline): Qt keeps such
// a dock "visible" but parks it outside the window, drawing none of it.
bool behindADockTab(const QWidget *w, QMainWindow &window)
{
    for (const QWidget *p = w; p; p = p->parentWidget())
        if (auto *dock = qobject_cast<const QDockWidget *>(p))
            return !window.tabifiedDockWidgets(const_cast<QDockWidget *>(dock)).isEmpty() &&
                   dock->visibleRegion().isEmpty();
    return false;
}

QString where(const QWidget *w)
{
    QString what = QString::fromLatin1(w->metaObject()->className());
    if (auto *l = qobject_cast<const QLabel *>(w))
        what += QStringLiteral(" '%1'").arg(l->text().left(60));
    else if (auto *b = qobject_cast<const QAbstractButton *>(w))
        what += QStringLiteral(" '%1'").arg(b->text());
    return what;
}

// Everything the window shows now, whole: no tool bar hides an action in
// its overflow; every action's and label's widget lies wholly inside the
// window and its parents; a label has room for its text (a wrapped one for
// its lines); every tab's title is whole and no tab bar scrolls; no side
// page has a horizontal scroll bar.
void verifyNothingClipped(QMainWindow &window)
{
    QApplication::processEvents();
    for (QToolBar *bar : window.findChildren<QToolBar *>()) {
        if (!bar->isVisible())
            continue;
        auto *ext = bar->findChild<QToolButton *>(QStringLiteral("qt_toolbar_ext_button"));
        QVERIFY2(!ext || !ext->isVisible(), qPrintable(bar->windowTitle() + ": actions in the overflow menu"));
        for (QAction *a : bar->actions()) {
            if (a->isSeparator() || !a->isVisible())
                continue;
            QWidget *w = bar->widgetForAction(a);
            QVERIFY2(w && w->isVisible() && bar->rect().contains(w->geometry()),
                     qPrintable(bar->windowTitle() + ": '" + a->text() + "' is not on the bar"));
        }
    }
    // A replay's controls are the replay bar's (checked above); the run
    // controls hide meanwhile (issue 25: one set of controls).
    const auto *main = qobject_cast<const MainWindow *>(&window);
    for (const QString &name : {QStringLiteral("Start"), QStringLiteral("Stop"), QStringLiteral("Step")}) {
        if (main && main->isReplaying())
            break;
        QAction *a = action(window, name);
        QVERIFY2(a, qPrintable(name));
        bool shown = false;
        for (QObject *o : a->associatedObjects())
            if (auto *w = qobject_cast<QWidget *>(o); w && w != &window && w->isVisible() &&
                                                      shownPart(w, &window) == QRect(w->mapTo(&window, QPoint()), w->size()))
                shown = true;
        QVERIFY2(shown, qPrintable(name + " has no whole button on screen"));
    }
    const QRect windowRect = window.rect();
    QList<QWidget *> checked;
    for (QLabel *l : window.findChildren<QLabel *>())
        checked << l;
    for (QAbstractButton *b : window.findChildren<QAbstractButton *>())
        checked << b;
    for (QLineEdit *e : window.findChildren<QLineEdit *>())
        checked << e;
    for (QWidget *w : checked) {
        if (!w->isVisible() || w->window() != &window || w->objectName().startsWith(QLatin1String("qt_")))
            continue;
        if (qobject_cast<QToolButton *>(w) && qobject_cast<QTabBar *>(w->parentWidget()))
            continue; // a tab bar's own scroll arrows: checked below
        if (behindADockTab(w, window))
            continue; // not shown: raising its tab lays it out anew
        const QRect full(w->mapTo(&window, QPoint(0, 0)), w->size());
        QVERIFY2(windowRect.contains(full), qPrintable(where(w) + " is off the window"));
        QVERIFY2(shownPart(w, &window) == full,
                 qPrintable(where(w) + QStringLiteral(" is clipped by its parent (%1,%2 %3x%4 shown of %5x%6)")
                                           .arg(shownPart(w, &window).x())
                                           .arg(shownPart(w, &window).y())
                                           .arg(shownPart(w, &window).width())
                                           .arg(shownPart(w, &window).height())
                                           .arg(full.width())
                                           .arg(full.height())));
        if (auto *l = qobject_cast<QLabel *>(w); l && !l->text().isEmpty() && l->pixmap().isNull()) {
            if (l->wordWrap())
                QVERIFY2(l->height() >= l->heightForWidth(l->width()) - 1, qPrintable(where(l) + " has no room for its lines"));
            else
                QVERIFY2(l->width() >= l->sizeHint().width() - 1, qPrintable(where(l) + " is cut"));
        }
        if (auto *b = qobject_cast<QPushButton *>(w))
            QVERIFY2(b->width() >= b->sizeHint().width() - 1, qPrintable(where(b) + " is cut"));
    }
    for (QTabBar *bar : window.findChildren<QTabBar *>()) {
        if (!bar->isVisible())
            continue;
        for (QToolButton *arrow : bar->findChildren<QToolButton *>())
            QVERIFY2(!arrow->isVisible(), "a tab bar scrolls: some tabs are off it");
        for (int i = 0; i < bar->count(); ++i) {
            if (!bar->isTabVisible(i))
                continue;
            const QRect r = bar->tabRect(i);
            QVERIFY2(bar->rect().contains(r), qPrintable(QStringLiteral("tab '%1' is off its bar").arg(bar->tabText(i))));
            QVERIFY2(r.width() >= bar->fontMetrics().horizontalAdvance(bar->tabText(i)),
                     qPrintable(QStringLiteral("tab '%1' is elided").arg(bar->tabText(i))));
        }
    }
}

// Every side page in turn, then the first again.
void verifyEveryPage(QMainWindow &window)
{
    auto *tabs = window.findChild<QTabWidget *>();
    QVERIFY(tabs);
    for (int i = 0; i < tabs->count(); ++i) {
        if (!tabs->isTabVisible(i))
            continue;
        tabs->setCurrentIndex(i);
        QTest::qWait(50);
        verifyNothingClipped(window);
        if (QTest::currentTestFailed())
            QFAIL(qPrintable(QStringLiteral("on the %1 page").arg(tabs->tabText(i))));
        for (QAbstractScrollArea *area : tabs->currentWidget()->findChildren<QAbstractScrollArea *>()) {
            if (!area->isVisible())
                continue;
            // Known: the Memory page's table of exact figures (a column per
            // category) and the Shards page's table (a column per rank) are
            // wider than a side panel on a projector; XPASS once they fit.
            if ((tabs->tabText(i) == QLatin1String("Memory") || tabs->tabText(i) == QLatin1String("Shards")) &&
                qobject_cast<QTableView *>(area))
                QEXPECT_FAIL("", "a table of figures scrolls sideways on a projector", Continue);
            QVERIFY2(!area->horizontalScrollBar()->isVisible(),
                     qPrintable(QStringLiteral("the %1 page scrolls sideways").arg(tabs->tabText(i))));
        }
        // The shard map too: narrow columns by layer when "rank N" ones do not fit.
        auto *area = qobject_cast<QAbstractScrollArea *>(tabs->currentWidget());
        if (area)
            QVERIFY2(!area->horizontalScrollBar()->isVisible(),
                     qPrintable(QStringLiteral("the %1 page scrolls sideways").arg(tabs->tabText(i))));
    }
    tabs->setCurrentIndex(0);
}

// Runs the open lesson on to `step` (1-based, its numbers revealed).
void runLessonTo(MainWindow &window, int step)
{
    bool done = false, ok = false;
    QString why;
    window.lessons()->runTo(step, [&](bool good, const QString &reason) {
        done = true;
        ok = good;
        why = reason;
    });
    QTRY_VERIFY_WITH_TIMEOUT(done, 120000);
    QVERIFY2(ok, qPrintable(why));
    QTest::qWait(150); // the reveal's queued scroll, the focus's tab, the layouts
}

// A lesson file of one step in `dir`: `run` until `until`, showing `tab`.
QString oneStepLesson(const QTemporaryDir &dir, const QString &run, const QString &until, const QString &tab)
{
    const QString path = dir.filePath(QStringLiteral("one.lesson"));
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate))
        return {};
    f.write(QStringLiteral("lesson: Layout\nstep: One step\ntext: Look at the %1 tab.\nrun: %2\nuntil: %3\nfocus: tab=%1\n")
                .arg(tab, run, until)
                .toUtf8());
    return path;
}

// The lesson panel after a reveal: its step's heading wholly on screen
// (not scrolled away), every label tall enough for its wrapped lines, the
// last revealed measured value wholly in the scroll area's view (a step's
// numbers are revealed together; two blocks may not fit at once), the
// buttons whole.
void verifyLessonPanel(MainWindow &window)
{
    widgets::LessonPanel *panel = window.lessons()->panel();
    const widgets::LessonStepView v = panel->view();
    auto *heading = panel->findChild<QLabel *>(QStringLiteral("lessonStepTitle"));
    QVERIFY(heading);
    QCOMPARE(heading->text(), v.title);
    QVERIFY2(heading->isVisible(), qPrintable(v.title));
    const QRect full(heading->mapTo(&window, QPoint(0, 0)), heading->size());
    QVERIFY2(shownPart(heading, &window) == full, qPrintable(QStringLiteral("the heading '%1' is scrolled or cut").arg(v.title)));
    QVERIFY2(heading->height() >= heading->heightForWidth(heading->width()) - 1, qPrintable(v.title));
    QLabel *lastMeasured = nullptr;
    for (QLabel *l : panel->findChildren<QLabel *>()) {
        if (!l->isVisible() || l->text().isEmpty())
            continue;
        QVERIFY2(l->height() >= l->heightForWidth(l->width()) - 1, qPrintable(where(l) + " has no room for its lines"));
        if (l->text().startsWith(QLatin1String("measured ")) &&
            (!lastMeasured || l->mapTo(panel, QPoint()).y() > lastMeasured->mapTo(panel, QPoint()).y()))
            lastMeasured = l;
    }
    if (lastMeasured)
        QVERIFY2(shownPart(lastMeasured, &window) == QRect(lastMeasured->mapTo(&window, QPoint(0, 0)), lastMeasured->size()),
                 qPrintable(where(lastMeasured) + " is not in view after its reveal"));
    for (QPushButton *b : {panel->backButton(), panel->nextButton(), panel->closeButton()})
        QVERIFY2(shownPart(b, &window) == QRect(b->mapTo(&window, QPoint(0, 0)), b->size()), qPrintable(where(b)));
}

// The charts as the window shows them: no text Qt Charts draws is elided
// ("..."), the titles and legends have room for their wrapped lines, and
// every legend entry has a name; the bytes chart's names its nodes.
void verifyChartsReadable(MainWindow &window)
{
    auto *charts = window.findChild<widgets::ChartsPanel *>();
    QVERIFY(charts && charts->isVisible());
    for (QChart *chart : {charts->lossChart(), charts->throughputChart(), charts->bytesChart()}) {
        int texts = 0;
        for (QGraphicsItem *item : chart->scene()->items()) {
            auto *text = dynamic_cast<QGraphicsTextItem *>(item);
            if (!text || !text->isVisible() || text->toPlainText().isEmpty())
                continue;
            const QString t = text->toPlainText();
            QVERIFY2(!t.contains(QLatin1String("...")) && !t.contains(QChar(0x2026)),
                     qPrintable(QStringLiteral("'%1' on the %2 chart is elided").arg(t, charts->titleLabel(chart)->text())));
            ++texts;
        }
        QVERIFY(texts >= 4);
        for (QLabel *l : {charts->titleLabel(chart), charts->legendLabel(chart)})
            if (l->isVisible())
                QVERIFY2(l->height() >= l->heightForWidth(l->width()) - 1 &&
                             shownPart(l, &window) == QRect(l->mapTo(&window, QPoint(0, 0)), l->size()),
                         qPrintable(l->text() + " is cut"));
        for (const QString &entry : charts->legendEntries(chart))
            QVERIFY2(!entry.trimmed().isEmpty(), "a legend entry without a name");
    }
    const QStringList bytes = charts->legendEntries(charts->bytesChart());
    QVERIFY2(!bytes.isEmpty(), "the bytes chart has no legend");
    QVERIFY2(bytes.first() == charts->bytesLines().first()->name() && !bytes.first().isEmpty(),
             qPrintable(bytes.join(QLatin1Char(','))));
}

// The inspector holds a tensor: its caption (rank, part, elements, mean)
// is whole: word-wrapped with room for its lines, and wholly on screen.
// Unless `mustShow`, a page too short for the histogram may leave out the
// histogram and its caption both (never half of them).
void verifyCaption(MainWindow &window, bool mustShow = true)
{
    auto *inspector = window.findChild<widgets::TensorInspector *>();
    QVERIFY(inspector && inspector->isVisible());
    QLabel *caption = inspector->caption();
    auto *plot = inspector->findChild<widgets::TensorPlot *>();
    QVERIFY(plot);
    if (!mustShow && !caption->isVisible()) {
        QVERIFY2(!plot->isVisible(), "a histogram without its caption");
        return;
    }
    QTRY_VERIFY(caption->isVisible());
    QVERIFY(plot->isVisible());
    // The table of figures drops columns rather than scroll sideways.
    auto *table = inspector->findChild<QTableView *>();
    QVERIFY(table);
    QVERIFY2(!table->horizontalScrollBar()->isVisible(), "the inspector's table scrolls sideways");
    QVERIFY2(caption->text().contains(QLatin1String(" elements, mean ")), qPrintable(caption->text()));
    QVERIFY(caption->wordWrap());
    QVERIFY2(caption->height() >= caption->heightForWidth(caption->width()) - 1, qPrintable(caption->text() + " has no room"));
    QVERIFY2(shownPart(caption, &window) == QRect(caption->mapTo(&window, QPoint(0, 0)), caption->size()),
             qPrintable(caption->text() + " is cut"));
}

} // namespace

void TestProjectorLayout::initTestCase() { QStandardPaths::setTestModeEnabled(true); }

void TestProjectorLayout::checkRunOffersFixes()
{
    const auto layers = [](const QString &model) { return model == QLatin1String("mlp") ? 3 : 8; };
    RunSettings s;
    s.strategy = QStringLiteral("pipeline");
    s.nodes = 4;
    const auto p = checkRun(s, layers);
    QVERIFY(p);
    QVERIFY2(p->text.contains(QStringLiteral("3 layers")), qPrintable(p->text));
    QCOMPARE(p->fixes.size(), 2);
    QCOMPARE(p->fixes[0].label, QStringLiteral("Use 3 nodes"));
    QCOMPARE(p->fixes[0].settings.nodes, 3);
    QCOMPARE(p->fixes[1].settings.model, QStringLiteral("gpt"));
    for (const RunFix &f : p->fixes)
        QVERIFY2(!checkRun(f.settings, layers), qPrintable(f.label + " does not fix it"));
    s.nodes = 3;
    QVERIFY(!checkRun(s, layers));
    s.microBatches = 7; // 120 % 7 != 0
    const auto micro = checkRun(s, layers);
    QVERIFY(micro);
    for (const RunFix &f : micro->fixes)
        QVERIFY2(!checkRun(f.settings, layers), qPrintable(f.label + " does not fix it"));
    s.strategy = QStringLiteral("ddp");
    QVERIFY(!checkRun(s, layers)); // micro-batches are a pipeline's only
}

void TestProjectorLayout::displayNames()
{
    QCOMPARE(widgets::displayName(2, QStringLiteral("local-2")), QStringLiteral("local-2"));
    QCOMPARE(widgets::displayName(2, QStringLiteral("local-3")), QStringLiteral("2 · local-3"));
    QCOMPARE(widgets::displayName(0, QStringLiteral("pi-1")), QStringLiteral("0 · pi-1"));
    QCOMPARE(widgets::displayName(-1, QStringLiteral("pi-1")), QStringLiteral("pi-1"));
    QCOMPARE(widgets::displayName(-1, QString(), 5), QStringLiteral("node 5"));
}

void TestProjectorLayout::everythingFits_data()
{
    QTest::addColumn<QSize>("size");
    QTest::addColumn<QString>("strategy");
    QTest::addColumn<int>("nodes");
    QTest::newRow("1024x768 ddp") << QSize(1024, 768) << "ddp" << 4;
    QTest::newRow("1280x720 ddp") << QSize(1280, 720) << "ddp" << 4;
    QTest::newRow("1024x768 pipeline that cannot run") << QSize(1024, 768) << "pipeline" << 4;
    QTest::newRow("1280x720 pipeline") << QSize(1280, 720) << "pipeline" << 3;
}

void TestProjectorLayout::everythingFits()
{
    QFETCH(QSize, size);
    QFETCH(QString, strategy);
    QFETCH(int, nodes);
    EngineController engine(4);
    MainWindow window(&engine);
    window.resize(size);
    window.setProjectorMode(true);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    QTRY_VERIFY_WITH_TIMEOUT(engine.readyNodes() == 4, 30000);
    RunSettings s = window.settings();
    s.strategy = strategy;
    s.nodes = nodes;
    window.setSettings(s);
    QTest::qWait(200);
    QCOMPARE(window.size(), size);
    verifyEveryPage(window);
    if (QTest::currentTestFailed())
        return;

    auto *cluster = window.findChild<widgets::ClusterView *>();
    QTRY_VERIFY_WITH_TIMEOUT(cluster->state() != nullptr, 5000);
    QVERIFY2(cluster->headerText().startsWith(strategy + QStringLiteral(" · ")), qPrintable(cluster->headerText()));
    QAction *start = action(window, QStringLiteral("Start"));
    auto *warning = window.findChild<QWidget *>(QStringLiteral("runWarning"));
    QVERIFY(warning);
    if (strategy == QLatin1String("pipeline") && nodes == 4) {
        // The mlp's 3 layers cannot make 4 stages: said before Start, with the fixes.
        QVERIFY(warning->isVisible());
        QVERIFY(!start->isEnabled());
        QPushButton *fix = nullptr;
        for (QPushButton *b : warning->findChildren<QPushButton *>())
            if (b->text() == QStringLiteral("Use 3 nodes"))
                fix = b;
        QVERIFY(fix && fix->isVisible());
        fix->click();
        QCOMPARE(window.settings().nodes, 3);
        QTRY_VERIFY(!warning->isVisible());
        QVERIFY(start->isEnabled());
    } else {
        QVERIFY(!warning->isVisible());
        QVERIFY(start->isEnabled());
    }
}

void TestProjectorLayout::replayFitsAndShowsItsConfig()
{
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("z3.smolrec"));
    EngineController engine(3);
    MainWindow window(&engine);
    window.resize(1024, 768);
    window.setProjectorMode(true);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    QTRY_VERIFY_WITH_TIMEOUT(engine.readyNodes() == 3, 30000);
    RunSettings s = window.settings();
    s.strategy = QStringLiteral("zero3");
    s.nodes = 3;
    s.steps = 6;
    s.globalBatch = 60;
    s.recordPath = path;
    QSignalSpy finished(&engine, &EngineController::runFinished);
    engine.start(s);
    QVERIFY2(finished.wait(120000), "the recorded run did not finish");

    // The next live run's settings differ from the recording's.
    RunSettings mine = window.settings();
    mine.strategy = QStringLiteral("ddp");
    mine.nodes = 2;
    mine.globalBatch = 120;
    window.setSettings(mine);
    QString error;
    QVERIFY2(window.openSession(path, &error, true), qPrintable(error));
    QTest::qWait(100);
    const RunSettings shown = window.settings();
    QCOMPARE(shown.strategy, QStringLiteral("zero3"));
    QCOMPARE(shown.nodes, 3);
    QCOMPARE(shown.globalBatch, qint64(60));
    QCOMPARE(shown.steps, qint64(6));
    verifyNothingClipped(window);
    QVERIFY(window.findChild<QWidget *>(QStringLiteral("runControls"))->isHidden());
    if (QTest::currentTestFailed())
        return;
    // One step number: the header's is the replay bar's.
    QVERIFY(window.replay()->seekToStep(3));
    QTest::qWait(50);
    auto *cluster = window.findChild<widgets::ClusterView *>();
    const QString header = cluster->headerText();
    QString bar;
    for (QLabel *l : window.findChildren<QLabel *>())
        if (l->text().contains(QStringLiteral(" s, step ")))
            bar = l->text();
    const QString barStep = bar.section(QStringLiteral("step "), 1);
    QVERIFY2(!barStep.isEmpty() && header.contains(QStringLiteral("step %1 /").arg(barStep)),
             qPrintable(header + " vs " + bar));
    window.closeReplay();
    QCOMPARE(window.settings().strategy, QStringLiteral("ddp"));
    QCOMPARE(window.settings().nodes, 2);
}

void TestProjectorLayout::namesStepsAndPendingBreakpoint()
{
    EngineController engine(4);
    MainWindow window(&engine);
    window.resize(1280, 720);
    window.setProjectorMode(true);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    QTRY_VERIFY_WITH_TIMEOUT(engine.readyNodes() == 4, 30000);
    RunSettings s = window.settings();
    s.steps = 6;
    window.setSettings(s);
    auto *field = window.findChild<QLineEdit *>(QStringLiteral("breakpointField"));
    QVERIFY(field);
    QSignalSpy refused(&window, &MainWindow::runRefused);
    QSignalSpy paused(&engine, &EngineController::pausedAt);
    QSignalSpy finished(&engine, &EngineController::runFinished);

    // A malformed breakpoint typed without Return: Start refuses, saying why.
    field->setText(QStringLiteral("allreduc@step=2"));
    action(window, QStringLiteral("Start"))->trigger();
    QCOMPARE(refused.size(), 1);
    QTest::qWait(200);
    QVERIFY(!engine.isRunning());
    // A good one: Start adds it, the chip lists it, the run pauses there.
    field->setText(QStringLiteral("allreduce@step=2"));
    action(window, QStringLiteral("Start"))->trigger();
    QVERIFY(field->text().isEmpty());
    const auto chipShown = [&window] {
        for (QPushButton *b : window.findChildren<QPushButton *>())
            if (b->isVisible() && b->text().startsWith(QStringLiteral("allreduce@step=2")))
                return true;
        return false;
    };
    QTRY_VERIFY2(chipShown(), "the active breakpoint is not listed");
    QVERIFY2(paused.wait(60000), "the pending breakpoint did not pause the run");
    const PauseView pause = paused.last().at(0).value<PauseView>();
    QVERIFY(!pause.inputs.isEmpty());
    QCOMPARE(pause.inputs[0].step, qint64(2));
    auto *cluster = window.findChild<widgets::ClusterView *>();
    // One step number: the header says the step the inspector shows.
    QTRY_VERIFY_WITH_TIMEOUT(cluster->headerText().contains(QStringLiteral("step 2 / 6")), 5000);
    verifyNothingClipped(window); // the chip and the inspector's page fit too
    if (QTest::currentTestFailed())
        return;
    for (QPushButton *b : window.findChildren<QPushButton *>())
        if (b->text() == QStringLiteral("Clear") && b->isVisible())
            b->click();
    QTRY_VERIFY2(!chipShown(), "Clear left a chip");
    engine.resume();
    QVERIFY2(finished.wait(120000), "the run did not finish");
    QTest::qWait(200);

    // A fresh local run: node id k is rank k, named local-k, and every view says so.
    const widgets::ClusterStatePtr state = cluster->state();
    QVERIFY(state);
    QCOMPARE(state->nodes.size(), 4);
    for (const widgets::NodeState &n : state->nodes) {
        QCOMPARE(n.rank, n.id);
        QCOMPARE(n.name, QStringLiteral("local-%1").arg(n.id));
        QVERIFY(cluster->nodeText(n.id).contains(widgets::displayName(n)));
        QCOMPARE(window.timeline()->data().laneName(n.id), widgets::displayName(n));
        auto *charts = window.findChild<widgets::ChartsPanel *>();
        QVERIFY(charts->bytesSeries(n.rank));
        QCOMPARE(charts->bytesSeries(n.rank)->name(), widgets::displayName(n));
    }
}

// Issue 25: Page Down through the ring lesson on a projector, every step's
// numbers revealed: the heading stays in view, the revealed numbers too;
// the charts the lesson points at are readable beside the panel; the
// inspector's caption of the held bucket is whole.
void TestProjectorLayout::lessonKeepsItsHeading()
{
    EngineController engine(4);
    MainWindow window(&engine);
    window.resize(1024, 768);
    window.setProjectorMode(true);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    QTRY_VERIFY_WITH_TIMEOUT(engine.readyNodes() == 4, 30000);
    QString error;
    QVERIFY2(window.lessons()->open(QStringLiteral("ring-allreduce"), &error, true), qPrintable(error));
    const int steps = window.lessons()->panel()->view().count;
    QCOMPARE(steps, 6);
    for (int step = 1; step <= steps; ++step) {
        runLessonTo(window, step);
        if (QTest::currentTestFailed())
            return;
        const QString at = QStringLiteral("at step %1").arg(step);
        verifyLessonPanel(window);
        if (QTest::currentTestFailed())
            QFAIL(qPrintable(at));
        auto *charts = window.findChild<widgets::ChartsPanel *>();
        if (charts->isVisible() && !behindADockTab(charts, window)) {
            verifyChartsReadable(window);
            if (QTest::currentTestFailed())
                QFAIL(qPrintable(QStringLiteral("the charts, ") + at));
        }
        if (window.findChild<widgets::TensorInspector *>()->isVisible() && engine.isPaused()) {
            verifyCaption(window, /*mustShow=*/step == 4); // the step that points at the inspector
            if (QTest::currentTestFailed())
                QFAIL(qPrintable(QStringLiteral("the inspector, ") + at));
        }
    }
    window.lessons()->close();
    QTRY_VERIFY_WITH_TIMEOUT(!engine.isRunning(), 10000);
}

void TestProjectorLayout::heldTensorCaptionFits_data()
{
    QTest::addColumn<QSize>("size");
    QTest::addColumn<bool>("projector");
    // zero3's all-gather holds "node 0's chunk, elements 0..N of M": the longest caption.
    QTest::newRow("1024x768 projector, lesson open") << QSize(1024, 768) << true;
    QTest::newRow("1600x1000") << QSize(1600, 1000) << false;
}

void TestProjectorLayout::heldTensorCaptionFits()
{
    QFETCH(QSize, size);
    QFETCH(bool, projector);
    QTemporaryDir dir;
    EngineController engine(4);
    MainWindow window(&engine);
    window.resize(size);
    window.setProjectorMode(projector);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    QTRY_VERIFY_WITH_TIMEOUT(engine.readyNodes() == 4, 30000);
    const QString lesson = oneStepLesson(dir, QStringLiteral("name=h strategy=zero3 nodes=4 model=mlp batch=120 steps=10"),
                                         QStringLiteral("collective allgather"), QStringLiteral("inspector"));
    QString error;
    QVERIFY2(window.lessons()->open(lesson, &error, true), qPrintable(error));
    runLessonTo(window, 1);
    if (QTest::currentTestFailed())
        return;
    QVERIFY(engine.isPaused());
    verifyCaption(window);
    if (QTest::currentTestFailed())
        return;
    QVERIFY2(window.findChild<widgets::TensorInspector *>()->caption()->text().contains(QLatin1String("chunk")),
             "zero3's all-gather holds a chunk of its buffer");
    verifyLessonPanel(window);
    window.lessons()->close();
    QTRY_VERIFY_WITH_TIMEOUT(!engine.isRunning(), 10000);
}

void TestProjectorLayout::memoryTabReadable_data()
{
    QTest::addColumn<QSize>("size");
    QTest::addColumn<bool>("projector");
    QTest::addColumn<int>("nodes");
    QTest::newRow("1024x768 projector, lesson open, 4 nodes") << QSize(1024, 768) << true << 4;
    QTest::newRow("1024x768 projector, lesson open, 16 nodes") << QSize(1024, 768) << true << 16;
    QTest::newRow("1600x1000, 16 nodes") << QSize(1600, 1000) << false << 16;
}

// The Memory tab in the side panel: every legend entry's text fits its
// place (wrapped, whole, inside the view), every bar has its node's name
// or rank under it uncut, and the bars keep a readable height.
void TestProjectorLayout::memoryTabReadable()
{
    QFETCH(QSize, size);
    QFETCH(bool, projector);
    QFETCH(int, nodes);
    QTemporaryDir dir;
    EngineController engine(nodes);
    MainWindow window(&engine);
    window.resize(size);
    window.setProjectorMode(projector);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    QTRY_VERIFY_WITH_TIMEOUT(engine.readyNodes() == nodes, 60000);
    const QString lesson =
        oneStepLesson(dir, QStringLiteral("name=z strategy=zero3 nodes=%1 model=mlp batch=128 steps=4").arg(nodes),
                      QStringLiteral("end"), QStringLiteral("memory"));
    QString error;
    QVERIFY2(window.lessons()->open(lesson, &error, true), qPrintable(error));
    runLessonTo(window, 1);
    if (QTest::currentTestFailed())
        return;
    auto *memory = window.findChild<widgets::MemoryView *>();
    QVERIFY(memory && memory->isVisible());
    QTRY_VERIFY(memory->nodeLabels().size() == nodes);
    const QFontMetricsF fm(memory->legendFont());
    const QVector<widgets::MemoryView::LegendEntry> legend = memory->legendEntries();
    QVERIFY(legend.size() >= 7); // five categories, peak, the ZeRO formula
    for (const widgets::MemoryView::LegendEntry &e : legend) {
        QVERIFY2(QRectF(memory->rect()).contains(e.rect), qPrintable(e.text + " is off the view"));
        const QRectF need = fm.boundingRect(e.textRect, Qt::AlignLeft | Qt::AlignTop | Qt::TextWordWrap, e.text);
        QVERIFY2(need.width() <= e.textRect.width() + 0.5 && need.height() <= e.textRect.height() + 0.5,
                 qPrintable(e.text + QStringLiteral(" is clipped: needs %1x%2 in %3x%4")
                                         .arg(need.width())
                                         .arg(need.height())
                                         .arg(e.textRect.width())
                                         .arg(e.textRect.height())));
    }
    // Under the bars the nodes' names, or with many nodes their ranks (at
    // worst every other one): never a cut name.
    const QStringList labels = memory->nodeLabels();
    int named = 0;
    for (const QString &l : labels) {
        QVERIFY2(!l.contains(QChar(0x2026)) && !l.contains(QLatin1String("...")), qPrintable(l));
        named += l.isEmpty() ? 0 : 1;
    }
    QVERIFY2(!labels.first().isEmpty() && named >= (nodes + 1) / 2, qPrintable(labels.join(QLatin1Char(','))));
    if (nodes == 4) {
        QCOMPARE(named, 4);
        QCOMPARE(labels.first(), QStringLiteral("local-0")); // room for the names themselves
    }
    // Bars a class can compare: a plot at least a third of the view's height.
    QVERIFY2(memory->plotArea().height() >= memory->height() / 3.0,
             qPrintable(QStringLiteral("plot %1 px of %2").arg(memory->plotArea().height()).arg(memory->height())));
    verifyNothingClipped(window);
    window.lessons()->close();
    QTRY_VERIFY_WITH_TIMEOUT(!engine.isRunning(), 10000);
}

QTEST_MAIN(TestProjectorLayout)
#include "tst_projector_layout.moc"
