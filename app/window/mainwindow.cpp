// MainWindow: the window is built in phases (buildCentre, buildDocks,
// buildReplay, buildMenus), then its views are connected once to the feeds
// (connectFeeds): the live cluster (EngineController) and a recording
// (ReplayController). setFeed chooses which one reaches the views; the
// code that draws is the same for both.
#include "mainwindow.h"

#include "app/feed/timeline_feed.h"
#include "app/replay/compare_controller.h"
#include "app/replay/replay_controller.h"
#include "lesson_ui.h"
#include "node_page.h"
#include "plan_page.h"
#include "remote_nodes_dialog.h"
#include "replay_bar.h"
#include "run_controls.h"
#include "timeline_panel.h"
#include "widgets/charts_panel.h"
#include "widgets/cluster/cluster_view.h"
#include "widgets/memory_model.h"
#include "widgets/memory_view.h"
#include "widgets/placement_editor.h"
#include "widgets/shard_map.h"
#include "widgets/step_number.h"
#include "widgets/tensor_inspector.h"
#include "widgets/timeline/timeline_view.h"

#include <QAction>
#include <QApplication>
#include <QDockWidget>
#include <QFileDialog>
#include <QFileInfo>
#include <QHeaderView>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QScreen>
#include <QScrollArea>
#include <QSplitter>
#include <QStatusBar>
#include <QTabBar>
#include <QTabWidget>
#include <QTableView>
#include <QTimer>
#include <QVBoxLayout>

#include <optional>

namespace smol::app {

MainWindow::MainWindow(EngineController *engine, QWidget *parent)
    : QMainWindow(parent), m_engine(engine), m_feed(engine)
{
    setWindowTitle(tr("smolcluster"));
    buildCentre();  // the cluster, the side tabs, the run controls
    buildDocks();   // the timeline and the charts along the bottom
    buildReplay();  // the replay, its tool bar, the compared run B
    buildMenus();
    connectFeeds(); // the views, fed by the live cluster until a session opens
    connectSelection();
    updateRunActions();
    fitToScreen();
    m_lessons = new LessonUi(this, m_engine);
}

bool MainWindow::isReplaying() const
{
    return m_feed == m_replayController;
}

void MainWindow::buildCentre()
{
    m_cluster = new widgets::ClusterView(this);
    m_charts = new widgets::ChartsPanel(this);
    buildTabs();
    m_split = new QSplitter(Qt::Horizontal, this);
    m_split->addWidget(m_cluster);
    m_split->addWidget(m_tabs);
    m_split->setStretchFactor(0, 3);
    m_split->setStretchFactor(1, 2);
    buildToolBar();
    auto *central = new QWidget(this);
    auto *cl = new QVBoxLayout(central);
    cl->setContentsMargins(0, 0, 0, 0);
    cl->setSpacing(0);
    cl->addWidget(m_runControls);
    cl->addWidget(m_split, 1);
    setCentralWidget(central);
}

void MainWindow::buildDocks()
{
    m_chartsDock = new QDockWidget(tr("Charts"), this);
    m_chartsDock->setObjectName(QStringLiteral("charts"));
    m_chartsDock->setWidget(m_charts);
    m_timelineDock = new QDockWidget(tr("Timeline"), this);
    m_timelineDock->setObjectName(QStringLiteral("timeline"));
    m_timelineDock->setWidget(buildTimeline());
    addDockWidget(Qt::BottomDockWidgetArea, m_timelineDock);
    addDockWidget(Qt::BottomDockWidgetArea, m_chartsDock);
    tabifyDockWidget(m_timelineDock, m_chartsDock);
    m_timelineDock->raise();
}

void MainWindow::buildReplay()
{
    m_replayController = new ReplayController(this);
    m_replayBar = new ReplayBar(m_replayController, this);
    addToolBarBreak();
    addToolBar(m_replayBar);
    m_replayBar->hide();
    connect(m_replayBar, &ReplayBar::closeRequested, this, &MainWindow::closeReplay);
    connect(m_replayBar, &ReplayBar::message, statusBar(), &QStatusBar::showMessage);
    m_compare = new CompareController(this, m_replayController, m_timeline, m_charts, m_memoryView);
    connect(this, &MainWindow::projectorModeChanged, m_compare, &CompareController::setProjectorMode);
}

// As large as 1280x880, never larger than the screen (a projector may be 1024x768).
void MainWindow::fitToScreen()
{
    QSize size(1280, 880);
    if (const QScreen *screen = QGuiApplication::primaryScreen())
        size = size.boundedTo(screen->availableGeometry().size());
    resize(size);
    resizeDocks({m_timelineDock}, {size.height() * 2 / 5}, Qt::Vertical);
}

template <typename Signal, typename Slot> void MainWindow::onFeed(Signal signal, Slot slot)
{
    for (RunFeed *feed : std::as_const(m_connecting))
        connect(feed, signal, this, [this, feed, slot](const auto &...args) {
            if (feed == m_feed)
                slot(args...);
        });
}

void MainWindow::connectFeeds()
{
    connectViews({m_engine, m_replayController});
    // The replay's own: a damaged file's reason stays in the log; its position and play state.
    connect(m_replayController, &RunFeed::errorOccurred, m_log, &QPlainTextEdit::appendPlainText);
    connect(m_replayController, &ReplayController::positionChanged, this, &MainWindow::showReplayPosition);
    connect(m_replayController, &ReplayController::playingChanged, this, [this](bool) { updateRunActions(); });
}

void MainWindow::connectViews(const QVector<RunFeed *> &feeds)
{
    m_connecting = feeds;
    // What the views show of a run.
    onFeed(&RunFeed::stateChanged, [this](const widgets::ClusterStatePtr &state) { showState(state); });
    onFeed(&RunFeed::stepAvailable, [this](const widgets::StepPoint &point) { queueStep(point); });
    onFeed(&RunFeed::testLossAvailable, [this](qint64 step, double loss) { m_charts->addTestPoint(step, loss); });
    onFeed(&RunFeed::testAccuracyAvailable, [this](qint64, double accuracy) {
        m_log->appendPlainText(tr("test accuracy %1%").arg(100 * accuracy, 0, 'f', 1));
    });
    onFeed(&RunFeed::timelineEvents,
           [this](const QVector<widgets::TimelineFrameSide> &frames, const QVector<widgets::TimelineSpan> &spans,
                  const QVector<widgets::TimelineMemorySample> &memory,
                  qint64 nowNs) { addTimelineEvents(frames, spans, memory, nowNs); });
    onFeed(&RunFeed::pausedAt, [this](const PauseView &pause) { showFeedPause(pause); });
    onFeed(&RunFeed::pauseEnded, [this] {
        m_inspector->clear();
        m_timelinePanel->endPause(); // a replay left its recorded pause: follow the playhead again
    });
    onFeed(&RunFeed::cleared, [this] {
        m_pendingSteps.clear();
        m_charts->clear();
        m_inspector->clear();
        m_log->clear();
    });
    onFeed(&RunFeed::logLine, [this](const QString &line) {
        m_log->appendPlainText(line);
        m_nodePage->refresh();
    });
    onFeed(&RunFeed::errorOccurred, [this](const QString &reason) { statusBar()->showMessage(reason, 8000); });
    // A run's life.
    onFeed(&RunFeed::runStarted, [this](const QString &what) { showRunStarted(what); });
    onFeed(&RunFeed::runFinished, [this](const QString &summary) { showRunEnded(summary, summary); });
    onFeed(&RunFeed::runStopped, [this](const QString &summary) { showRunEnded(summary, summary); });
    onFeed(&RunFeed::runFailed, [this](const QString &reason) {
        // The status bar has one line: the first of the reason (the log has all of it).
        showRunEnded(tr("The run failed: %1").arg(reason.section(QLatin1Char('\n'), 0, 0)),
                     tr("failed: %1").arg(reason));
    });
    onFeed(&RunFeed::runReforming, [this](const QString &what) {
        statusBar()->showMessage(what.section(QLatin1Char('\n'), 0, 0));
        m_log->appendPlainText(what);
    });
    onFeed(&RunFeed::runWaitingForNodes, [this](const QString &what) {
        statusBar()->showMessage(what);
        m_log->appendPlainText(what);
        if (!m_viewer)
            QTimer::singleShot(0, this, &MainWindow::showRemoteNodes); // the command to give the returning nodes
    });
}

// Which feed reaches the views. The caller shows its state when the views
// should show it at once.
void MainWindow::setFeed(RunFeed *feed)
{
    m_feed = feed;
    m_lastNowNs = 0; // a clock belongs to its feed
}

void MainWindow::connectSelection()
{
    connect(m_inspector, &widgets::TensorInspector::editRequested, this, [this](int rank, const QString &op, double f) {
        if (isReplaying())
            statusBar()->showMessage(tr("A recording cannot be edited: close the replay (Ctrl+W) to edit a live pause."), 6000);
        else if (m_viewer)
            statusBar()->showMessage(tr("Only the teacher can edit a held tensor."), 6000);
        else
            m_engine->editTensor(rank, op, f);
    });
    connect(m_cluster, &widgets::ClusterView::selectedNodeChanged, this, [this](int id) {
        m_nodePage->setSelected(id);
        if (id >= 0)
            m_tabs->setCurrentIndex(0);
    });
}

void MainWindow::showRunStarted(const QString &what)
{
    clearRunViews();
    m_timelinePanel->showHint(m_runControls->settings().backend == QLatin1String("gloo"));
    m_lastNowNs = 0;
    m_timeline->setLive(true);
    m_timeline->data().setCollectiveNames(collectiveNames());
    statusBar()->showMessage(tr("Training: %1").arg(what));
    updateRunActions();
}

// Finished, stopped or failed: the status bar's line, the log's.
void MainWindow::showRunEnded(const QString &status, const QString &logText)
{
    statusBar()->showMessage(status);
    m_log->appendPlainText(logText);
    m_timeline->setLive(false);
    if (!m_lastRecording.isEmpty())
        m_exportTrace->setEnabled(true);
    updateRunActions();
}

void MainWindow::showFeedPause(const PauseView &pause)
{
    // The timeline frames the held collective (live: hatched from the newest
    // snapshot's clock; the exact Pause spans arrive on resume).
    if (isReplaying())
        m_timelinePanel->showPause(pause, m_replayController->positionNs());
    else if (m_lastNowNs > 0)
        m_timelinePanel->showPause(pause, m_lastNowNs);
    showPause(pause);
    // What the keys do about it.
    if (isReplaying())
        statusBar()->showMessage(tr("Recorded pause (%1): the inspector shows the tensors it took.").arg(pause.reason), 8000);
    else
        statusBar()->showMessage(tr("Paused (%1). Space resumes, N steps one collective.").arg(pause.reason));
}

bool MainWindow::showView(const QString &key)
{
    if (key == QLatin1String("timeline") || key == QLatin1String("charts")) {
        QDockWidget *dock = key == QLatin1String("timeline") ? m_timelineDock : m_chartsDock;
        dock->show();
        dock->raise();
        return true;
    }
    static const QMap<QString, const char *> titles = {{QStringLiteral("node"), "Node"},
                                                       {QStringLiteral("memory"), "Memory"},
                                                       {QStringLiteral("shards"), "Shards"},
                                                       {QStringLiteral("placement"), "Placement"},
                                                       {QStringLiteral("inspector"), "Inspector"},
                                                       {QStringLiteral("log"), "Log"}};
    const auto it = titles.constFind(key);
    if (it == titles.cend())
        return false;
    for (int i = 0; i < m_tabs->count(); ++i)
        if (m_tabs->tabText(i) == tr(*it)) {
            m_tabs->setTabVisible(i, true);
            m_tabs->setCurrentIndex(i);
            return true;
        }
    return false;
}

void MainWindow::selectRank(int rank)
{
    if (!m_state)
        return;
    for (const widgets::NodeState &n : m_state->nodes)
        if (n.rank == rank && n.state != widgets::NodeRunState::Lost) {
            m_cluster->setSelectedNode(n.id);
            return;
        }
}

int MainWindow::addPage(QWidget *page, const QString &title)
{
    // Pages scroll rather than force a minimum width on the splitter: with
    // projector fonts the cluster view must still get most of a 1024 px screen.
    auto *scroll = new QScrollArea(m_tabs);
    scroll->setWidget(page);
    scroll->setWidgetResizable(true);
    scroll->setFrameShape(QFrame::NoFrame);
    return m_tabs->addTab(scroll, title);
}

void MainWindow::buildTabs()
{
    m_tabs = new QTabWidget(this);
    m_tabs->setObjectName(QStringLiteral("sideTabs"));
    // Every tab's whole title, never "Pla..." behind scroll arrows: the side
    // panel is at least as wide as its tabs.
    m_tabs->setUsesScrollButtons(false);
    m_tabs->setElideMode(Qt::ElideNone);
    m_nodePage = new NodePage(m_engine, this);
    addPage(m_nodePage, tr("Node"));
    addPage(buildMemoryPage(), tr("Memory"));
    m_planPage = new PlanPage(this);
    m_planTab = m_tabs->addTab(m_planPage, tr("Plan")); // not a scroll area: its table and formulas scroll themselves
    m_shardView = new widgets::ShardMapView(this);
    addPage(m_shardView, tr("Shards"));
    buildPlacementPage();
    m_inspector = new widgets::TensorInspector(this);
    // Not in a scroll area: its table and plot give way to a short panel
    // (a scroll area would grow it to its preferred height, the edit buttons
    // below the fold).
    m_inspectorTab = m_tabs->addTab(m_inspector, tr("Inspector"));
    m_log = new QPlainTextEdit(this);
    m_log->setReadOnly(true);
    m_log->setMaximumBlockCount(kMaxLogLines);
    addPage(m_log, tr("Log"));
}

// Memory: bars beside the ZeRO formulas, and the exact figures.
QWidget *MainWindow::buildMemoryPage()
{
    auto *memory = new QWidget(this);
    m_memoryView = new widgets::MemoryView(memory);
    m_memoryModel = new widgets::MemoryModel(memory);
    auto *memoryTable = new QTableView(memory);
    memoryTable->setModel(m_memoryModel);
    memoryTable->verticalHeader()->hide();
    memoryTable->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    auto *ml = new QVBoxLayout(memory);
    ml->addWidget(m_memoryView, 3);
    ml->addWidget(memoryTable, 2);
    return memory;
}

void MainWindow::buildPlacementPage()
{
    m_placement = new widgets::PlacementEditor(this);
    m_placement->setValidator([this](const QString &spec) {
        const RunSettings s = m_runControls->settings();
        return m_engine->checkPlacement(s.model, spec, s.nodes);
    });
    connect(m_placement, &widgets::PlacementEditor::placementChanged, this,
            [this](const QString &spec) { m_placementSpec = spec; });
    connect(m_placement, &widgets::PlacementEditor::placementRejected, this,
            [this](const QString &reason) { statusBar()->showMessage(tr("Placement refused: %1").arg(reason), 8000); });
    m_placementTab = addPage(m_placement, tr("Placement"));
}

void MainWindow::buildToolBar()
{
    // Run controls and settings wrap onto more rows rather than hide in a
    // tool bar's overflow menu: on a 1024 px projector every one shows.
    m_runControls = new RunControls(m_engine, this);
    m_start = m_runControls->startAction();
    m_pause = m_runControls->pauseAction();
    m_step = m_runControls->stepAction();
    m_stop = m_runControls->stopAction();
    connect(m_start, &QAction::triggered, this, &MainWindow::startRun);
    connect(m_pause, &QAction::triggered, this, &MainWindow::togglePause);
    connect(m_step, &QAction::triggered, m_engine, &EngineController::stepCollective);
    connect(m_stop, &QAction::triggered, this, [this] {
        if (!m_engine->isRunning())
            return;
        m_engine->stop();
        statusBar()->showMessage(tr("Stopping..."));
    });
    connect(m_runControls, &RunControls::message, statusBar(), &QStatusBar::showMessage);
    connect(m_runControls, &RunControls::problemChanged, this, &MainWindow::updateRunActions);
    // The placement editor starts from the engine's balanced placement; each
    // click then moves one layer, and the engine refuses what cannot run.
    auto resetPlacement = [this] {
        const RunSettings s = m_runControls->settings();
        m_placement->setLayers(m_engine->layerNames(s.model));
        m_placement->setNodes(s.nodes);
        m_placementSpec = m_engine->balancedPlacement(s.model, s.nodes);
        m_placement->setSpec(m_placementSpec);
    };
    connect(m_runControls, &RunControls::shapeChanged, this, resetPlacement);
    // The Plan page: the next run's predictions; a finished run's beside them.
    connect(m_runControls, &RunControls::settingsChanged, this,
            [this] { m_planPage->showSettings(m_runControls->settings()); });
    connect(m_engine, &EngineController::runMeasured, m_planPage, &PlanPage::showMeasured);
    m_planPage->showSettings(m_runControls->settings());
    resetPlacement();
    connect(m_runControls, &RunControls::problemChanged, this, [this] {
        m_cluster->setNextRun(m_runControls->settings().strategy);
        m_tabs->setTabVisible(m_placementTab, m_runControls->settings().strategy == QLatin1String("pipeline"));
    });
    m_tabs->setTabVisible(m_placementTab, m_runControls->settings().strategy == QLatin1String("pipeline"));
}

void MainWindow::buildMenus()
{
    QMenu *file = menuBar()->addMenu(tr("&File"));
    file->setObjectName(QStringLiteral("fileMenu"));
    m_openSession = file->addAction(tr("&Open session..."), QKeySequence::Open, this, &MainWindow::chooseSession);
    m_compareWith = file->addAction(tr("Co&mpare with..."), m_compare, &CompareController::choose);
    QAction *closeReplayAction = file->addAction(tr("&Close replay"), QKeySequence::Close, this, &MainWindow::closeReplay);
    connect(m_replayController, &ReplayController::opened, closeReplayAction, [closeReplayAction] { closeReplayAction->setEnabled(true); });
    connect(m_replayController, &ReplayController::closed, closeReplayAction, [closeReplayAction] { closeReplayAction->setEnabled(false); });
    closeReplayAction->setEnabled(false);
    file->addSeparator();
    file->addAction(tr("Export timeline as &PNG..."), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_P), this,
                    &MainWindow::chooseTimelinePng);
    m_exportTrace = file->addAction(tr("Export session as Chrome &trace..."), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_T),
                                    this, &MainWindow::chooseChromeTrace);
    m_exportTrace->setToolTip(tr("The open session, or the last run recorded from this window, as Chrome trace JSON "
                                 "(Perfetto); the same exporter as `smolctl export`"));
    m_exportTrace->setEnabled(false);
    file->addSeparator();
    m_record = file->addAction(tr("&Record the next run..."));
    m_record->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_R));
    m_record->setCheckable(true);
    connect(m_record, &QAction::toggled, this, [this](bool on) {
        if (!on) {
            m_recordPath.clear();
            return;
        }
        const QString path = QFileDialog::getSaveFileName(this, tr("Record to"), QStringLiteral("run.smolrec"),
                                                          tr("Sessions (*.smolrec)"));
        if (path.isEmpty())
            m_record->setChecked(false);
        m_recordPath = path;
    });
    file->addSeparator();
    file->addAction(tr("&Quit"), QKeySequence::Quit, qApp, &QApplication::quit);
    QMenu *view = menuBar()->addMenu(tr("&View"));
    m_projectorAction = view->addAction(tr("&Projector mode"));
    m_projectorAction->setCheckable(true);
    m_projectorAction->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_P));
    connect(m_projectorAction, &QAction::toggled, this, &MainWindow::setProjectorMode);
    QAction *full = view->addAction(tr("&Full screen"));
    full->setShortcut(Qt::Key_F11);
    connect(full, &QAction::triggered, this, [this] { isFullScreen() ? showNormal() : showFullScreen(); });
    QMenu *cluster = m_clusterMenu = menuBar()->addMenu(tr("&Cluster"));
    cluster->addAction(tr("&Remote nodes..."), this, &MainWindow::showRemoteNodes);
    cluster->addAction(tr("&Add local node"), m_engine, &EngineController::addLocalNode);
    cluster->addAction(tr("&Clear breakpoints"), m_runControls, &RunControls::clearBreakpoints);
}

RunSettings MainWindow::settings() const
{
    RunSettings s = m_runControls->settings();
    s.placement = s.strategy == QLatin1String("pipeline") ? m_placementSpec : QString();
    s.recordPath = m_recordPath;
    return s;
}

void MainWindow::setSettings(const RunSettings &s)
{
    m_runControls->setSettings(s);
}

void MainWindow::startRun()
{
    if (isReplaying()) {
        statusBar()->showMessage(tr("Close the replay (Ctrl+W) to train."), 6000);
        return;
    }
    // What is typed in the breakpoint field counts, as if Return had been pressed.
    QString why;
    if (!m_runControls->applyPendingBreakpoint(&why)) {
        const QString reason = tr("Not started: the breakpoint %1").arg(why);
        statusBar()->showMessage(reason, 10000);
        Q_EMIT runRefused(reason);
        return;
    }
    if (const auto problem = m_runControls->problem()) {
        const QString reason = tr("Not started: %1").arg(problem->text);
        statusBar()->showMessage(reason, 10000);
        Q_EMIT runRefused(reason);
        return;
    }
    const RunSettings s = settings();
    if (!s.recordPath.isEmpty())
        m_lastRecording = s.recordPath;
    m_engine->start(s);
    if (m_record->isChecked()) // one recording per click of Record
        m_record->setChecked(false);
}

void MainWindow::togglePause()
{
    if (isReplaying()) {
        m_replayController->togglePlay();
        return;
    }
    if (m_engine->isPaused())
        m_engine->resume();
    else
        m_engine->pause();
    updateRunActions();
}

void MainWindow::setProjectorMode(bool on)
{
    const bool changed = m_projector != on;
    m_projector = on;
    if (changed)
        Q_EMIT projectorModeChanged(on);
    if (m_projectorAction->isChecked() != on)
        m_projectorAction->setChecked(on);
    m_cluster->setProjectorMode(on);
    m_memoryView->setProjectorMode(on);
    m_shardView->setProjectorMode(on);
    m_charts->setProjectorMode(on);
    m_inspector->setProjectorMode(on);
    m_timeline->setProjectorMode(on);
    // One tab more would push the side panel past a 1024 px projector: the
    // Plan page is the desk's (smolctl plan prints the same figures).
    m_tabs->setTabVisible(m_planTab, !on);
    QFont f = QApplication::font();
    f.setPointSizeF(on ? 14 : 10);
    setFont(f);
    // The tabs are navigation, not the lesson: a little smaller, so that
    // every title fits beside a cluster that keeps most of a 1024 px screen.
    QFont tabs = f;
    tabs.setPointSizeF(on ? 12 : 10);
    m_tabs->tabBar()->setFont(tabs);
    // On a projector the cluster is the lesson: give it most of the width
    // (once the window has its size).
    QTimer::singleShot(0, this, [this, on] {
        if (auto *timeline = findChild<QDockWidget *>(QStringLiteral("timeline")))
            resizeDocks({timeline}, {height() * (on ? 1 : 2) / (on ? 3 : 5)}, Qt::Vertical);
        const int w = m_split->width();
        m_split->setSizes(on ? QList<int>{w * 2 / 3, w / 3} : QList<int>{w * 3 / 5, w * 2 / 5});
    });
}

void MainWindow::showState(const widgets::ClusterStatePtr &state)
{
    m_state = state;
    m_cluster->setState(state);
    m_memoryView->setState(state);
    m_memoryModel->setState(state);
    m_shardView->setState(state);
    if (state) {
        // One name per node everywhere (widgets::displayName): the live
        // timeline's lanes are nodes (ids); a replay's are its ranks.
        widgets::TimelineData &data = m_timeline->data();
        QStringList rankNames;
        for (const widgets::NodeState &n : state->nodes) {
            while (n.rank >= 0 && rankNames.size() <= n.rank)
                rankNames.append(QString());
            if (n.rank >= 0)
                rankNames[n.rank] = widgets::displayName(n);
        }
        if (isReplaying()) { // the recording's timeline has a lane per rank
            if (!rankNames.isEmpty() && rankNames.size() >= data.laneCount()) {
                data.setNodes(rankNames);
                m_timeline->dataChanged();
            }
        } else if (m_lanes.setState(*state)) {
            data.setNodes(m_lanes.names());
            m_timeline->dataChanged();
        }
        if (!rankNames.isEmpty()) {
            m_charts->setRankNames(rankNames);
            m_inspector->setRankNames(rankNames);
        }
        m_inspector->setMesh(state->mesh); // a group pause's members' coordinates
    }
    m_nodePage->setState(state);
    updateRunActions();
}

void MainWindow::updateRunActions()
{
    // One set of controls: a replay has the replay bar (Space: play/pause, N or ]: next collective); the
    // run controls and the Node tab's live buttons hide, their actions off (Ctrl+Return, Ctrl+. do nothing).
    if (m_viewer) {
        hideLiveControls();
        return;
    }
    const bool replaying = isReplaying();
    m_runControls->setVisible(!replaying);
    m_nodePage->setLiveControlsVisible(!replaying);
    m_runControls->setSettingsEnabled(!replaying && !m_engine->isRunning());
    if (!replaying && !m_engine->isPaused() && statusBar()->currentMessage().startsWith(tr("Paused (")))
        statusBar()->clearMessage(); // the live pause is over
    if (replaying) {
        for (QAction *a : {m_start, m_pause, m_step, m_stop})
            a->setEnabled(false);
        m_replayBar->setPlaying(m_replayController->isPlaying());
        return;
    }
    const bool running = m_engine->isRunning();
    const bool paused = m_engine->isPaused();
    // A choice that cannot run says why under the controls (with its fixes); Start waits.
    const std::optional<RunProblem> problem = m_runControls->problem();
    m_start->setEnabled(!running && !problem);
    m_start->setToolTip(problem ? problem->text : tr("Start the run (Ctrl+Return)"));
    m_pause->setEnabled(running);
    m_pause->setText(paused ? tr("Resume") : tr("Pause"));
    m_step->setEnabled(running && paused);
    m_stop->setEnabled(running);
}

QWidget *MainWindow::buildTimeline()
{
    m_timelinePanel = new TimelinePanel(this);
    m_timeline = m_timelinePanel->view();
    connect(m_timelinePanel, &TimelinePanel::stepRequested, this, [this](int step) {
        // In a replay the whole window goes there; the timeline shows the step.
        if (isReplaying())
            m_replayController->seekToStep(step);
        if (!m_timeline->jumpToStep(step))
            statusBar()->showMessage(tr("The timeline has no step %1 (yet).").arg(step), 5000);
        m_timeline->setFocus();
    });
    connect(m_timelinePanel, &TimelinePanel::seekRequested, this, [this](qint64 ns) {
        if (isReplaying())
            m_replayController->seek(ns);
    });
    connect(m_timelinePanel, &TimelinePanel::pngRequested, this, &MainWindow::chooseTimelinePng);
    connect(m_timeline, &widgets::TimelineView::activated, this, &MainWindow::showTimelineItem);
    auto *focusJump = new QAction(tr("Go to step"), this);
    focusJump->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_G));
    connect(focusJump, &QAction::triggered, m_timelinePanel, &TimelinePanel::focusStepField);
    addAction(focusJump);
    return m_timelinePanel;
}

void MainWindow::queueStep(const widgets::StepPoint &point)
{
    // Steps come in bursts (a snapshot's worth live, every step up to the
    // position after a replay's seek) and Qt Charts redraws a whole line per
    // update (~2 ms per line of 2000 points): plotted together, at most 10
    // times a second live, at once when a replay rebuilds.
    m_pendingSteps.append(point);
    if (m_pendingSteps.size() == 1)
        QTimer::singleShot(isReplaying() ? 0 : 100, this, [this] {
            const QVector<widgets::StepPoint> steps = std::exchange(m_pendingSteps, {});
            m_charts->addSteps(steps);
        });
}

void MainWindow::clearRunViews()
{
    m_lanes = NodeLanes(); // the timeline's names go with it
    m_timelinePanel->hideSeek();
    m_pendingSteps.clear();
    m_charts->clear();
    m_inspector->clear();
    m_timeline->clear();
    m_timelinePanel->showHint();
}

void MainWindow::addTimelineEvents(const QVector<widgets::TimelineFrameSide> &frames,
                                   const QVector<widgets::TimelineSpan> &spans,
                                   const QVector<widgets::TimelineMemorySample> &memory, qint64 nowNs)
{
    widgets::TimelineData &data = m_timeline->data();
    auto byNode = std::make_tuple(frames, spans, memory); // ranks -> the nodes' lanes
    m_lanes.toLanes(std::get<0>(byNode), std::get<1>(byNode), std::get<2>(byNode));
    for (const auto &f : std::get<0>(byNode))
        data.addFrame(f);
    for (const auto &sp : std::get<1>(byNode))
        data.addSpan(sp);
    for (const auto &m : std::get<2>(byNode))
        data.addMemory(m);
    if (!frames.isEmpty() || !spans.isEmpty() || !memory.isEmpty())
        m_timeline->dataChanged();
    if (m_feed->isRunning()) {
        m_lastNowNs = nowNs;
        if (!m_feed->isPaused())
            m_timeline->setLivePause(widgets::TimelineOverlay::kNone);
        m_timeline->setNow(nowNs);
    }
}

void MainWindow::showPause(const PauseView &pause)
{
    m_inspector->setPause(pause);
    m_tabs->setCurrentIndex(m_inspectorTab);
    updateRunActions();
}

void MainWindow::showTimelineItem(const widgets::TimelineHit &hit)
{
    using widgets::TimelineHit;
    const widgets::TimelineData &data = m_timeline->data();
    QString text = m_timeline->describe(hit);
    // Which collective the item belongs to, for its tensor snapshot.
    std::int64_t step = -1;
    int kind = -1;
    quint64 seq = 0;
    if (hit.kind == TimelineHit::Kind::Packet) {
        const widgets::TimelinePacket &p = data.packets(hit.lane)[hit.first];
        kind = p.collective;
        seq = p.seq;
        step = data.stepAt(hit.lane, p.sendStartNs, p.collective, p.seq);
    } else if (hit.kind == TimelineHit::Kind::Span && hit.row == widgets::TimelineData::Row::Collective) {
        const widgets::StoredSpan &sp = data.spans(hit.lane, hit.row)[hit.first];
        kind = sp.collective;
        seq = sp.seq;
        step = sp.step;
    }
    if (kind > 0 && step >= 0) {
        const PauseView snapshot = m_feed->pauseAt(step, kind, seq);
        if (snapshot.id != 0) {
            showPause(snapshot);
            text += tr("\nIts tensors are in the inspector (taken at a pause).");
        } else {
            text += tr("\nNo tensor snapshot of this collective: set a breakpoint on it to take one.");
        }
    }
    m_timelinePanel->showDetails(text.replace('\n', QStringLiteral(" · ")), isReplaying());
}

void MainWindow::showReplayPosition(qint64 ns)
{
    m_timeline->setPlayhead(ns);
    // The header's step (the replay's state at ns is built before its position goes out).
    const widgets::ClusterStatePtr state = m_replayController->state();
    m_replayBar->showPosition(ns, state ? widgets::stepInProgress(*state) : -1);
}

void MainWindow::showRemoteNodes()
{
    showRemoteNodesDialog(this, m_engine, m_state);
}

} // namespace smol::app
