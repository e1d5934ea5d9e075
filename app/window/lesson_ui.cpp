#include "lesson_ui.h"

#include "app/lessons/lesson.h"
#include "app/replay/compare_controller.h"
#include "app/lessons/lesson_runner.h"
#include "app/replay/replay_controller.h"
#include "mainwindow.h"
#include "widgets/cluster/cluster_view.h"
#include "widgets/lesson_panel.h"
#include "widgets/timeline/timeline_view.h"

#include <QDockWidget>
#include <QFileDialog>
#include <QMenuBar>
#include <QMessageBox>
#include <QStatusBar>
#include <QTabBar>
#include <QTabWidget>
#include <QTimer>

#include <memory>

namespace smol::app {

LessonUi::LessonUi(MainWindow *window, EngineController *engine)
    : QObject(window), m_window(window), m_engine(engine)
{
    m_runner = new LessonRunner(engine, this);
    m_panel = new widgets::LessonPanel;
    m_dock = new QDockWidget(tr("Lesson"), window);
    m_dock->setObjectName(QStringLiteral("lessonDock"));
    m_dock->setWidget(m_panel);
    m_dock->setFeatures(QDockWidget::DockWidgetMovable | QDockWidget::DockWidgetClosable);
    window->addDockWidget(Qt::RightDockWidgetArea, m_dock);
    m_dock->hide();
    m_blank = new widgets::BlankOverlay(window);
    m_panel->installPresenterKeys(window);

    connect(m_runner, &LessonRunner::viewChanged, this, &LessonUi::showView);
    connect(m_runner, &LessonRunner::settingsApplied, this, [this](const RunSettings &settings) {
        closeComparison(); // a step's run: the live cluster again
        m_window->setSettings(settings);
    });
    connect(m_runner, &LessonRunner::compareRequested, this, &LessonUi::showComparison);
    connect(m_runner, &LessonRunner::focusRequested, this, &LessonUi::applyFocus);
    connect(m_runner, &LessonRunner::finished, this, &LessonUi::close);
    connect(m_panel, &widgets::LessonPanel::nextRequested, m_runner, &LessonRunner::next);
    connect(m_panel, &widgets::LessonPanel::backRequested, m_runner, &LessonRunner::back);
    connect(m_panel, &widgets::LessonPanel::closeRequested, this, &LessonUi::close);
    connect(m_panel, &widgets::LessonPanel::blankRequested, m_blank, &widgets::BlankOverlay::toggle);
    connect(m_dock, &QDockWidget::visibilityChanged, this, [this](bool visible) {
        // Closing the dock (its title bar's button) ends the lesson.
        if (!visible && !m_dock->isVisible() && m_runner->isOpen() && !m_window->isMinimized() && m_window->isVisible())
            QTimer::singleShot(0, this, [this] {
                if (!m_dock->isVisible())
                    close();
            });
    });
    connect(window, &MainWindow::projectorModeChanged, this, &LessonUi::setProjectorMode);
    setProjectorMode(window->projectorMode());
    buildMenu();
}

LessonUi::~LessonUi() = default;

void LessonUi::buildMenu()
{
    m_menu = m_window->menuBar()->addMenu(tr("&Lessons"));
    const auto shipped = shippedLessons();
    for (auto it = shipped.cbegin(); it != shipped.cend(); ++it) {
        QString title = it.key();
        try {
            title = loadLesson(it.value()).title;
        } catch (const LessonError &) {
        }
        const QString name = it.key();
        m_menu->addAction(title, this, [this, name] { open(name); });
    }
    m_menu->addSeparator();
    m_menu->addAction(tr("&Open lesson file..."), QKeySequence(Qt::CTRL | Qt::Key_L), this, &LessonUi::chooseFile);
    m_close = m_menu->addAction(tr("&Close lesson"), this, &LessonUi::close);
    m_close->setEnabled(false);
    // File > Open lesson... as well: where a teacher looks for files.
    for (QAction *a : m_window->menuBar()->actions())
        if (QMenu *file = a->menu(); file && file->objectName() == QLatin1String("fileMenu")) {
            QAction *before = file->actions().size() > 1 ? file->actions().at(1) : nullptr;
            auto *open = new QAction(tr("Open &lesson..."), file);
            connect(open, &QAction::triggered, this, &LessonUi::chooseFile);
            file->insertAction(before, open);
        }
}

void LessonUi::chooseFile()
{
    const QString path = QFileDialog::getOpenFileName(m_window, tr("Open lesson"), QString(),
                                                      tr("Lessons (*.lesson);;All files (*)"));
    if (!path.isEmpty())
        open(path);
}

bool LessonUi::open(const QString &nameOrPath, QString *error, bool quiet)
{
    Lesson lesson;
    try {
        lesson = findLesson(nameOrPath);
    } catch (const LessonError &e) {
        const QString why = QString::fromUtf8(e.what());
        if (error)
            *error = why;
        if (!quiet)
            QMessageBox::warning(m_window, tr("Open lesson"), why);
        return false;
    }
    for (int i = 0; i < 2 && m_window->isReplaying(); ++i)
        m_window->closeReplay(); // a lesson drives the live cluster (a compared B closes first, then A)
    m_comparing = false;
    m_dock->setWindowTitle(tr("Lesson: %1").arg(lesson.title));
    // The panel takes the right edge from top to bottom (the timeline and
    // charts give up that corner), as wide as it needs and no wider: the
    // cluster and its tabs keep the rest of a 1024 px projector image.
    m_window->setCorner(Qt::BottomRightCorner, Qt::RightDockWidgetArea);
    m_dock->show();
    m_dock->raise();
    m_window->resizeDocks({m_dock}, {m_dock->minimumWidth()}, Qt::Horizontal);
    m_close->setEnabled(true);
    m_runner->open(lesson);
    placeTabs();
    return true;
}

void LessonUi::close()
{
    m_runTo = -1;
    if (m_runToDone) {
        auto done = std::move(m_runToDone);
        m_runToDone = nullptr;
        done(false, tr("the lesson was closed"));
    }
    m_runner->close();
    m_dock->hide();
    m_window->setCorner(Qt::BottomRightCorner, Qt::BottomDockWidgetArea);
    showBottomDocks(true); // as the window was before the lesson
    placeTabs();
    if (m_close)
        m_close->setEnabled(false);
}

bool LessonUi::isOpen() const { return m_runner->isOpen(); }

void LessonUi::runTo(int step, std::function<void(bool, const QString &)> done)
{
    m_runTo = std::max(0, step - 1);
    m_runToDone = std::move(done);
    showView();
}

void LessonUi::setProjectorMode(bool on)
{
    m_panel->setProjectorMode(on);
    // Beside the cluster and its tabs (715 px at least in projector mode)
    // within a 1024 px projector image.
    m_dock->setMinimumWidth(on ? 290 : 300);
    placeTabs();
}

void LessonUi::placeTabs()
{
    // On a projector the side tabs' whole titles (six with pipeline's
    // Placement) and the cluster leave no 290 px for the panel: while a
    // lesson is open the tab titles are a size smaller and the cluster may
    // be narrower, so all three fit a 1024 px image side by side.
    auto *tabs = m_window->findChild<QTabWidget *>(QStringLiteral("sideTabs"));
    auto *cluster = m_window->findChild<widgets::ClusterView *>();
    if (!tabs || !cluster)
        return;
    const bool beside = m_runner->isOpen() && m_window->projectorMode();
    QFont f = tabs->tabBar()->font();
    f.setPointSizeF(beside ? 10 : (m_window->projectorMode() ? 12 : 10));
    tabs->tabBar()->setFont(f);
    cluster->setMinimumWidth(beside ? 250 : 0);
}

void LessonUi::showView()
{
    const widgets::LessonStepView v = m_runner->view();
    m_panel->setView(v);
    if (m_runTo < 0 || !m_runToDone || !m_runner->isOpen())
        return;
    if (v.failed) {
        auto done = std::move(m_runToDone);
        m_runToDone = nullptr;
        m_runTo = -1;
        done(false, v.status);
        return;
    }
    if (v.busy)
        return;
    const bool unrevealed = m_runner->reached(v.index) && v.nextLabel == tr("Reveal");
    if (v.index >= m_runTo && !unrevealed) {
        auto done = std::move(m_runToDone);
        m_runToDone = nullptr;
        m_runTo = -1;
        done(true, QString());
        return;
    }
    if (v.index + 1 >= v.count && !unrevealed) {
        auto done = std::move(m_runToDone);
        m_runToDone = nullptr;
        m_runTo = -1;
        done(false, tr("the lesson has %1 steps").arg(v.count));
        return;
    }
    QTimer::singleShot(0, m_runner, &LessonRunner::next);
}

void LessonUi::showComparison(const QString &fileA, const QString &fileB)
{
    // The run the step before held is being stopped (the runner left it):
    // a replay opens once the live cluster has no run going.
    auto *wait = new QTimer(this);
    auto tries = std::make_shared<int>(0);
    connect(wait, &QTimer::timeout, this, [this, wait, tries, fileA, fileB] {
        if (m_engine->isRunning() && ++*tries < 100)
            return;
        wait->deleteLater();
        QString error;
        if (!m_window->openSession(fileA, &error, /*quiet=*/true) ||
            !m_window->compare()->open(fileB, &error, /*quiet=*/true)) {
            m_window->statusBar()->showMessage(tr("Lesson: cannot compare the runs: %1").arg(error), 10000);
            return;
        }
        m_comparing = true;
        m_window->replay()->seek(m_window->replay()->endNs()); // both runs as they ended
        showBottomDocks(true);
        m_window->compare()->dock()->show();
        m_window->compare()->dock()->raise(); // the compare table (a tab beside the timeline on a projector)
    });
    wait->start(50);
}

void LessonUi::closeComparison()
{
    if (!m_comparing)
        return;
    m_comparing = false;
    for (int i = 0; i < 2 && m_window->isReplaying(); ++i)
        m_window->closeReplay(); // B, then A
}

void LessonUi::showBottomDocks(bool on)
{
    for (const char *name : {"timeline", "charts"})
        if (auto *dock = m_window->findChild<QDockWidget *>(QLatin1String(name)))
            dock->setVisible(on);
    if (on)
        m_window->showView(QStringLiteral("timeline"));
}

void LessonUi::applyFocus(const LessonFocus &focus)
{
    // What the step points at gets the room: on a projector a side page
    // (the inspector's rows, the memory bars) takes the height of the
    // timeline and charts, which come back for a step that points at them.
    const bool bottom = focus.tab == QLatin1String("timeline") || focus.tab == QLatin1String("charts") ||
                        focus.memoryLane || focus.fromStep >= 0;
    if (m_window->projectorMode() && (bottom || !focus.tab.isEmpty()))
        showBottomDocks(bottom);
    if (!focus.tab.isEmpty())
        m_window->showView(focus.tab);
    if (focus.rank >= 0)
        m_window->selectRank(focus.rank);
    if (focus.fromStep >= 0)
        m_window->timeline()->showSteps(focus.fromStep, focus.toStep);
    if (focus.memoryLane)
        m_window->showView(QStringLiteral("timeline"));
}

} // namespace smol::app
