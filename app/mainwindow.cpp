#include "mainwindow.h"

#include "compare_controller.h"
#include "gui_options.h"
#include "lesson_ui.h"
#include "engine/session/session_reader.h"
#include "node_details.h"
#include "node_lanes.h"
#include "remote_nodes_dialog.h"
#include "replay_controller.h"
#include "run_controls.h"
#include "timeline_feed.h"
#include "widgets/charts_panel.h"
#include "widgets/flow_layout.h"
#include "widgets/cluster_view.h"
#include "widgets/memory_model.h"
#include "widgets/memory_view.h"
#include "widgets/palette.h"
#include "widgets/placement_editor.h"
#include "widgets/shard_map.h"
#include "widgets/tensor_inspector.h"
#include "widgets/timeline_view.h"

#include <QAction>
#include <QApplication>
#include <QComboBox>
#include <QDialog>
#include <QDockWidget>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QProgressDialog>
#include <QPushButton>
#include <QSlider>
#include <QSpinBox>
#include <QSplitter>
#include <QStatusBar>
#include <QTabBar>
#include <QTabWidget>
#include <QTableView>
#include <QScrollArea>
#include <QScreen>
#include <QTimer>
#include <QToolBar>
#include <QVBoxLayout>

#include <optional>

namespace smol::app {

namespace {

// What the timeline's rows are, until an item is clicked (wraps: never clipped on a projector).
QString timelineHint(bool gloo = false)
{
    return gloo ? MainWindow::tr("Rows: compute, collectives (on Gloo: one span per collective with the bytes handed to "
                                 "Gloo; its packets are not visible). Click one for its details.")
                : MainWindow::tr("Rows: compute, collectives, packets sent (arrows to the receiver; numbered blocks "
                                 "hold what is too close to tell apart). Click one for its details.");
}

// The replay scrubber's resolution.
constexpr int kScrubberSteps = 10000;

} // namespace

MainWindow::MainWindow(EngineController *engine, QWidget *parent) : QMainWindow(parent), m_engine(engine)
{
    setWindowTitle(tr("smolcluster"));
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
    auto *chartsDock = new QDockWidget(tr("Charts"), this);
    chartsDock->setObjectName(QStringLiteral("charts"));
    chartsDock->setWidget(m_charts);
    auto *timelineDock = new QDockWidget(tr("Timeline"), this);
    timelineDock->setObjectName(QStringLiteral("timeline"));
    timelineDock->setWidget(buildTimeline());
    addDockWidget(Qt::BottomDockWidgetArea, timelineDock);
    addDockWidget(Qt::BottomDockWidgetArea, chartsDock);
    tabifyDockWidget(timelineDock, chartsDock);
    timelineDock->raise();
    m_timelineDock = timelineDock;
    m_chartsDock = chartsDock;
    m_replayController = new ReplayController(this);
    buildReplayBar();
    m_compare = new CompareController(this, m_replayController, m_timeline, m_charts, m_memoryView);
    connect(this, &MainWindow::projectorModeChanged, m_compare, &CompareController::setProjectorMode);
    buildMenus();

    // The live cluster. While a session is open its updates wait (the
    // newest snapshot is kept and shown again when the replay closes).
    connect(m_engine, &EngineController::stateChanged, this, [this](const widgets::ClusterStatePtr &state) {
        m_liveState = state;
        if (!m_replaying)
            showState(state);
    });
    connect(m_engine, &EngineController::stepAvailable, this, [this](const widgets::StepPoint &point) {
        if (!m_replaying)
            queueStep(point);
    });
    connect(m_engine, &EngineController::testLossAvailable, this, [this](qint64 step, double loss) {
        if (!m_replaying)
            m_charts->addTestPoint(step, loss);
    });
    connect(m_engine, &EngineController::testAccuracyAvailable, this, [this](qint64, double accuracy) {
        m_log->appendPlainText(tr("test accuracy %1%").arg(100 * accuracy, 0, 'f', 1));
    });
    connect(m_engine, &EngineController::timelineEvents, this, &MainWindow::addTimelineEvents);
    connect(m_engine, &EngineController::runStarted, this, [this](const QString &what) {
        clearRunViews();
        m_timelineDetails->setText(timelineHint(m_runControls->settings().backend == QLatin1String("gloo")));
        m_livePause = PauseView();
        m_lastNowNs = 0;
        m_timeline->setLive(true);
        m_timeline->data().setCollectiveNames(collectiveNames());
        statusBar()->showMessage(tr("Training: %1").arg(what));
        updateRunActions();
    });
    auto ended = [this] {
        m_timeline->setLive(false);
        m_livePause = PauseView();
        if (!m_lastRecording.isEmpty())
            m_exportTrace->setEnabled(true);
        updateRunActions();
    };
    connect(m_engine, &EngineController::runFinished, this, [this, ended](const QString &summary) {
        statusBar()->showMessage(summary);
        m_log->appendPlainText(summary);
        ended();
    });
    connect(m_engine, &EngineController::runFailed, this, [this, ended](const QString &reason) {
        // The status bar has one line: the first of the reason (the log has all of it).
        statusBar()->showMessage(tr("The run failed: %1").arg(reason.section(QLatin1Char('\n'), 0, 0)));
        m_log->appendPlainText(tr("failed: %1").arg(reason));
        ended();
    });
    connect(m_engine, &EngineController::runStopped, this, [this, ended](const QString &summary) {
        statusBar()->showMessage(summary);
        m_log->appendPlainText(summary);
        ended();
    });
    connect(m_engine, &EngineController::runReforming, this, [this](const QString &what) {
        statusBar()->showMessage(what.section(QLatin1Char('\n'), 0, 0));
        m_log->appendPlainText(what);
    });
    connect(m_engine, &EngineController::runWaitingForNodes, this, [this](const QString &what) {
        statusBar()->showMessage(what);
        m_log->appendPlainText(what);
        QTimer::singleShot(0, this, &MainWindow::showRemoteNodes); // the command to give the returning nodes
    });
    connect(m_engine, &EngineController::errorOccurred, this,
            [this](const QString &reason) { statusBar()->showMessage(reason, 8000); });
    connect(m_engine, &EngineController::logLine, this, [this](const QString &line) {
        m_log->appendPlainText(line);
        showSelectedNode();
    });
    connect(m_engine, &EngineController::pausedAt, this, [this](const PauseView &pause) {
        m_livePause = pause;
        if (m_replaying)
            return;
        if (m_lastNowNs > 0) // from the newest snapshot (within 34 ms); the exact Pause spans arrive on resume
            m_timeline->setLivePause(m_lastNowNs, pause.reason);
        showPause(pause);
        statusBar()->showMessage(tr("Paused (%1). Space resumes, N steps one collective.").arg(pause.reason));
    });
    connect(m_inspector, &widgets::TensorInspector::editRequested, this, [this](int rank, const QString &op, double f) {
        if (m_replaying)
            statusBar()->showMessage(tr("A recording cannot be edited: close the replay (Ctrl+W) to edit a live pause."), 6000);
        else
            m_engine->editTensor(rank, op, f);
    });

    // A recorded run, through the same views.
    ReplayController *r = m_replayController;
    connect(r, &ReplayController::stateChanged, this, &MainWindow::showState);
    connect(r, &ReplayController::stepAvailable, this, &MainWindow::queueStep);
    connect(r, &ReplayController::testLossAvailable, this,
            [this](qint64 step, double loss) { m_charts->addTestPoint(step, loss); });
    connect(r, &ReplayController::testAccuracyAvailable, this, [this](qint64, double accuracy) {
        m_log->appendPlainText(tr("test accuracy %1%").arg(100 * accuracy, 0, 'f', 1));
    });
    connect(r, &ReplayController::logLine, m_log, &QPlainTextEdit::appendPlainText);
    connect(r, &ReplayController::errorOccurred, this, [this](const QString &reason) {
        statusBar()->showMessage(reason, 8000);
        m_log->appendPlainText(reason);
    });
    connect(r, &ReplayController::cleared, this, [this] {
        m_pendingSteps.clear();
        m_charts->clear();
        m_inspector->clear();
        m_log->clear();
    });
    connect(r, &ReplayController::pausedAt, this, [this](const PauseView &pause) {
        showPause(pause);
        statusBar()->showMessage(tr("Recorded pause (%1): the inspector shows the tensors it took.").arg(pause.reason), 8000);
    });
    connect(r, &ReplayController::pauseEnded, m_inspector, &widgets::TensorInspector::clear);
    connect(r, &ReplayController::positionChanged, this, &MainWindow::showReplayPosition);
    connect(r, &ReplayController::playingChanged, this, [this](bool) { updateRunActions(); });
    connect(m_cluster, &widgets::ClusterView::selectedNodeChanged, this, [this](int id) {
        m_selected = id;
        showSelectedNode();
        if (id >= 0)
            m_tabs->setCurrentIndex(0);
    });
    updateRunActions();
    // As large as 1280x880, never larger than the screen (a projector may be 1024x768).
    QSize size(1280, 880);
    if (const QScreen *screen = QGuiApplication::primaryScreen())
        size = size.boundedTo(screen->availableGeometry().size());
    resize(size);
    resizeDocks({timelineDock}, {size.height() * 2 / 5}, Qt::Vertical);
    m_lessons = new LessonUi(this, m_engine);
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
    // Details of the selected node.
    auto *details = new QWidget(this);
    m_details = new QLabel(tr("Click a node to see its configuration, memory and log."), details);
    m_details->setWordWrap(true);
    m_details->setTextFormat(Qt::RichText);
    m_details->setAlignment(Qt::AlignTop | Qt::AlignLeft);
    m_nodeSlowdown = new QDoubleSpinBox(details);
    m_nodeSlowdown->setRange(1, 100);
    m_nodeSlowdown->setSuffix(tr(" x slower"));
    m_nodeSlowdown->setToolTip(tr("Emulated compute slowdown of this node in the next run"));
    m_nodeMbit = new QDoubleSpinBox(details);
    m_nodeMbit->setRange(0, 100000);
    m_nodeMbit->setSpecialValueText(tr("unlimited"));
    m_nodeMbit->setSuffix(tr(" Mbit/s"));
    m_nodeLatency = new QDoubleSpinBox(details);
    m_nodeLatency->setRange(0, 1000);
    m_nodeLatency->setSuffix(tr(" ms"));
    auto *kill = new QPushButton(tr("Kill node"), details);
    auto *addNode = new QPushButton(tr("Add local node"), details);
    auto *removeNode = new QPushButton(tr("Remove node"), details);
    // Rows that wrap (a third of a 1024 px projector is narrow): no control
    // off the page's right edge.
    auto *links = new widgets::FlowLayout;
    links->addWidget(new QLabel(tr("Next run:"), details));
    links->addWidget(m_nodeSlowdown);
    links->addWidget(new QLabel(tr("links"), details));
    links->addWidget(m_nodeMbit);
    links->addWidget(m_nodeLatency);
    auto *row = new widgets::FlowLayout;
    row->addWidget(kill);
    row->addWidget(removeNode);
    row->addWidget(addNode);
    auto *dl = new QVBoxLayout(details);
    dl->addWidget(m_details, 1);
    dl->addLayout(links);
    dl->addLayout(row);
    auto applyLinks = [this] {
        if (m_selected < 0)
            return;
        m_links[m_selected] = {m_nodeMbit->value(), m_nodeLatency->value()};
        m_engine->setNodeLink(m_selected, m_nodeMbit->value(), m_nodeLatency->value());
    };
    connect(m_nodeMbit, &QDoubleSpinBox::valueChanged, this, applyLinks);
    connect(m_nodeLatency, &QDoubleSpinBox::valueChanged, this, applyLinks);
    connect(m_nodeSlowdown, &QDoubleSpinBox::valueChanged, this, [this](double f) {
        if (m_selected >= 0)
            m_engine->setNodeSlowdown(m_selected, f);
    });
    connect(kill, &QPushButton::clicked, this, [this] {
        if (m_selected >= 0)
            m_engine->killNode(m_selected);
    });
    connect(addNode, &QPushButton::clicked, m_engine, &EngineController::addLocalNode);
    connect(removeNode, &QPushButton::clicked, this, [this] {
        if (m_selected >= 0)
            m_engine->removeNode(m_selected);
    });
    addPage(details, tr("Node"));

    // Memory: bars beside the ZeRO formulas, and the exact figures.
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
    addPage(memory, tr("Memory"));

    m_shardView = new widgets::ShardMapView(this);
    addPage(m_shardView, tr("Shards"));

    m_placement = new widgets::PlacementEditor(this);
    m_placement->setValidator(
        [this](const QString &spec) {
            const RunSettings s = m_runControls->settings();
            return m_engine->checkPlacement(s.model, spec, s.nodes);
        });
    connect(m_placement, &widgets::PlacementEditor::placementChanged, this,
            [this](const QString &spec) { m_placementSpec = spec; });
    connect(m_placement, &widgets::PlacementEditor::placementRejected, this,
            [this](const QString &reason) { statusBar()->showMessage(tr("Placement refused: %1").arg(reason), 8000); });
    m_placementTab = addPage(m_placement, tr("Placement"));

    m_inspector = new widgets::TensorInspector(this);
    // Not in a scroll area: its table and plot give way to a short panel
    // (a scroll area would grow it to its preferred height, the edit buttons
    // below the fold).
    m_inspectorTab = m_tabs->addTab(m_inspector, tr("Inspector"));

    m_log = new QPlainTextEdit(this);
    m_log->setReadOnly(true);
    m_log->setMaximumBlockCount(5000);
    addPage(m_log, tr("Log"));
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
    connect(m_step, &QAction::triggered, this, [this] {
        if (m_replaying)
            m_replayController->nextCollective();
        else
            m_engine->stepCollective();
    });
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
    file->addAction(tr("&Open session..."), QKeySequence::Open, this, &MainWindow::chooseSession);
    file->addAction(tr("Co&mpare with..."), m_compare, &CompareController::choose);
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
    QMenu *cluster = menuBar()->addMenu(tr("&Cluster"));
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
    if (m_replaying) {
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
    if (m_replaying) {
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
        if (m_replaying) {
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
    }
    showSelectedNode();
    updateRunActions();
}

void MainWindow::showSelectedNode()
{
    if (!m_state || m_selected < 0) {
        m_details->setText(tr("Click a node to see its configuration, memory and log."));
        return;
    }
    for (const widgets::NodeState &n : m_state->nodes) {
        if (n.id != m_selected)
            continue;
        m_details->setText(nodeDetailsHtml(n));
        m_nodeSlowdown->blockSignals(true);
        m_nodeSlowdown->setValue(n.slowdown);
        m_nodeSlowdown->blockSignals(false);
        const auto link = m_links.find(n.id);
        m_nodeMbit->blockSignals(true);
        m_nodeLatency->blockSignals(true);
        m_nodeMbit->setValue(link == m_links.end() ? 0 : link->second.first);
        m_nodeLatency->setValue(link == m_links.end() ? 0 : link->second.second);
        m_nodeMbit->blockSignals(false);
        m_nodeLatency->blockSignals(false);
        return;
    }
}

void MainWindow::updateRunActions()
{
    // The run settings are for the next live run: not while a recording plays.
    m_runControls->setSettingsEnabled(!m_replaying && !m_engine->isRunning());
    if (m_replaying) {
        // Space plays and pauses the replay; N goes to the next collective.
        const bool playing = m_replayController->isPlaying();
        m_start->setEnabled(false);
        m_pause->setEnabled(true);
        m_pause->setText(playing ? tr("Pause") : tr("Play"));
        m_step->setEnabled(true);
        m_stop->setEnabled(false);
        m_replayPlay->setText(playing ? tr("Pause") : tr("Play"));
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
    auto *panel = new QWidget(this);
    m_timeline = new widgets::TimelineView(panel);
    m_timeline->setLive(true);
    m_timeline->data().setCollectiveNames(collectiveNames());
    m_timeline->setToolTip(QString());
    m_timeline->setWhatsThis(
        tr("Wheel: zoom at the pointer. Drag: pan. Shift+drag: zoom to the range. Click: details and tensors. "
           "Double click: zoom to it. Keys: + - zoom, Left Right pan, Home fit, End follow, Z zoom to the selection."));
    m_jumpStep = new QSpinBox(panel);
    m_jumpStep->setRange(0, 100000000);
    m_jumpStep->setPrefix(tr("step "));
    m_jumpStep->setToolTip(tr("Show this step on the timeline; in a replay, move the replay there (Ctrl+G)"));
    auto *jump = new QPushButton(tr("Go"), panel);
    auto *fit = new QPushButton(tr("Fit"), panel);
    fit->setToolTip(tr("Show the whole run (Home)"));
    auto *follow = new QPushButton(tr("Follow"), panel);
    follow->setToolTip(tr("Keep the newest events (or the replay position) in view (End)"));
    auto *png = new QPushButton(tr("PNG..."), panel);
    png->setToolTip(tr("Save the visible timeline as an image (Ctrl+Shift+P)"));
    m_timelineDetails = new QLabel(timelineHint(), panel);
    m_timelineDetails->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_timelineDetails->setWordWrap(true);
    auto *row = new QHBoxLayout;
    row->addWidget(m_jumpStep);
    row->addWidget(jump);
    row->addWidget(fit);
    row->addWidget(follow);
    row->addWidget(png);
    row->addStretch(1);
    // In a replay, the selected item's moment can become the replay's.
    m_seekHere = new QPushButton(tr("Replay from here"), panel);
    m_seekHere->setToolTip(tr("Move the replay to where the selected item starts"));
    m_seekHere->hide();
    connect(m_seekHere, &QPushButton::clicked, this, [this] {
        const widgets::TimelineHit hit = m_timeline->selected();
        if (m_replaying && hit.kind != widgets::TimelineHit::Kind::None)
            m_replayController->seek(hit.startNs - 1);
    });
    auto *details = new QHBoxLayout;
    details->addWidget(m_timelineDetails, 1);
    details->addWidget(m_seekHere);
    auto *layout = new QVBoxLayout(panel);
    layout->setContentsMargins(4, 2, 4, 2);
    layout->addLayout(row);
    layout->addWidget(m_timeline, 1);
    layout->addLayout(details);
    auto goToStep = [this] {
        const int step = m_jumpStep->value();
        // In a replay the whole window goes there; the timeline shows the step.
        if (m_replaying)
            m_replayController->seekToStep(step);
        if (!m_timeline->jumpToStep(step))
            statusBar()->showMessage(tr("The timeline has no step %1 (yet).").arg(step), 5000);
        m_timeline->setFocus();
    };
    connect(jump, &QPushButton::clicked, this, goToStep);
    connect(m_jumpStep, &QSpinBox::editingFinished, this, [this, goToStep] {
        if (m_jumpStep->hasFocus())
            goToStep();
    });
    auto *focusJump = new QAction(tr("Go to step"), this);
    focusJump->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_G));
    connect(focusJump, &QAction::triggered, this, [this] {
        m_jumpStep->setFocus();
        m_jumpStep->selectAll();
    });
    addAction(focusJump);
    connect(fit, &QPushButton::clicked, m_timeline, &widgets::TimelineView::fitAll);
    connect(follow, &QPushButton::clicked, this, [this] { m_timeline->setFollowing(true); });
    connect(png, &QPushButton::clicked, this, &MainWindow::chooseTimelinePng);
    connect(m_timeline, &widgets::TimelineView::activated, this, &MainWindow::showTimelineItem);
    return panel;
}

void MainWindow::buildReplayBar()
{
    m_replayBar = new QToolBar(tr("Replay"), this);
    m_replayBar->setObjectName(QStringLiteral("replay"));
    addToolBarBreak();
    addToolBar(m_replayBar);
    QAction *previous = m_replayBar->addAction(tr("◀ Collective"), this, [this] {
        if (!m_replayController->previousCollective())
            statusBar()->showMessage(tr("No earlier collective."), 3000);
    });
    previous->setShortcut(Qt::Key_BracketLeft);
    previous->setToolTip(tr("Go to the previous collective ([)"));
    m_replayPlay = m_replayBar->addAction(tr("Play"), m_replayController, &ReplayController::togglePlay);
    m_replayPlay->setToolTip(tr("Play or pause the replay (Space)"));
    QAction *next = m_replayBar->addAction(tr("Collective ▶"), this, [this] {
        if (!m_replayController->nextCollective())
            statusBar()->showMessage(tr("No later collective."), 3000);
    });
    next->setShortcut(Qt::Key_BracketRight);
    next->setToolTip(tr("Go to the next collective (] or N)"));
    m_replaySpeed = new QComboBox(m_replayBar);
    for (double speed : {0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 50.0})
        m_replaySpeed->addItem(tr("%1x").arg(speed), speed);
    m_replaySpeed->setCurrentIndex(3);
    m_replaySpeed->setToolTip(tr("Replay speed (1x: as recorded)"));
    connect(m_replaySpeed, &QComboBox::currentIndexChanged, this,
            [this](int i) { m_replayController->setSpeed(m_replaySpeed->itemData(i).toDouble()); });
    m_replayBar->addWidget(m_replaySpeed);
    m_scrubber = new QSlider(Qt::Horizontal, m_replayBar);
    m_scrubber->setRange(0, kScrubberSteps);
    m_scrubber->setMinimumWidth(160);
    m_scrubber->setToolTip(tr("Drag to move through the recording"));
    auto seekToSlider = [this] {
        const qint64 b = m_replayController->beginNs(), e = m_replayController->endNs();
        m_replayController->seek(b + qint64(double(e - b) * m_scrubber->sliderPosition() / kScrubberSteps));
    };
    connect(m_scrubber, &QSlider::sliderMoved, this, seekToSlider);
    connect(m_scrubber, &QSlider::actionTriggered, this, [this, seekToSlider](int action) {
        if (action != QAbstractSlider::SliderMove)
            QTimer::singleShot(0, this, seekToSlider); // after the slider has moved
    });
    m_replayBar->addWidget(m_scrubber);
    m_replayPosition = new QLabel(m_replayBar);
    m_replayPosition->setMinimumWidth(200);
    m_replayBar->addWidget(m_replayPosition);
    m_replayBar->addAction(tr("Close replay"), this, &MainWindow::closeReplay);
    m_replayBar->hide();
}

void MainWindow::queueStep(const widgets::StepPoint &point)
{
    // Steps come in bursts (a snapshot's worth live, every step up to the
    // position after a replay's seek) and Qt Charts redraws a whole line per
    // update (~2 ms per line of 2000 points): plotted together, at most 10
    // times a second live, at once when a replay rebuilds.
    m_pendingSteps.append(point);
    if (m_pendingSteps.size() == 1)
        QTimer::singleShot(m_replaying ? 0 : 100, this, [this] {
            const QVector<widgets::StepPoint> steps = std::exchange(m_pendingSteps, {});
            m_charts->addSteps(steps);
        });
}

void MainWindow::clearRunViews()
{
    m_lanes = NodeLanes(); // the timeline's names go with it
    m_seekHere->hide();
    m_pendingSteps.clear();
    m_charts->clear();
    m_inspector->clear();
    m_timeline->clear();
    m_timelineDetails->setText(timelineHint());
}

void MainWindow::addTimelineEvents(const QVector<widgets::TimelineFrameSide> &frames,
                                   const QVector<widgets::TimelineSpan> &spans,
                                   const QVector<widgets::TimelineMemorySample> &memory, qint64 nowNs)
{
    if (m_replaying)
        return; // a session is open; the live run's picture would mix into it
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
    if (m_engine->isRunning()) {
        m_lastNowNs = nowNs;
        if (!m_engine->isPaused())
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
        PauseView snapshot;
        if (m_replaying) {
            snapshot = m_replayController->pauseAt(step, kind, seq);
        } else if (m_livePause.id != 0) {
            const QString name = data.collectiveName(kind);
            for (const auto &t : m_livePause.inputs)
                if (t.step == step && t.collective == name)
                    snapshot = m_livePause;
        }
        if (snapshot.id != 0) {
            showPause(snapshot);
            text += tr("\nIts tensors are in the inspector (taken at a pause).");
        } else {
            text += tr("\nNo tensor snapshot of this collective: set a breakpoint on it to take one.");
        }
    }
    m_timelineDetails->setText(text.replace('\n', QStringLiteral(" · ")));
    m_seekHere->setVisible(m_replaying);
}

void MainWindow::showReplayPosition(qint64 ns)
{
    m_timeline->setPlayhead(ns);
    const qint64 b = m_replayController->beginNs(), e = m_replayController->endNs();
    if (!m_scrubber->isSliderDown()) {
        const QSignalBlocker block(m_scrubber);
        m_scrubber->setValue(e > b ? int(double(ns - b) / double(e - b) * kScrubberSteps) : 0);
    }
    const std::int64_t step = m_timeline->data().stepAt(-1, ns);
    m_replayPosition->setText(tr("%1 / %2 s%3")
                                  .arg(double(std::max<qint64>(0, ns - b)) / 1e9, 0, 'f', 3)
                                  .arg(double(e - b) / 1e9, 0, 'f', 3)
                                  .arg(step >= 0 ? tr(", step %1").arg(step) : QString()));
}

bool MainWindow::openSession(const QString &path, QString *error, bool quiet)
{
    struct BusyCursor {
        BusyCursor() { QApplication::setOverrideCursor(Qt::WaitCursor); }
        ~BusyCursor() { QApplication::restoreOverrideCursor(); }
    };
    std::optional<BusyCursor> busy;
    auto refuse = [&](const QString &reason) {
        busy.reset();
        if (error)
            *error = reason;
        if (!quiet)
            QMessageBox::warning(this, tr("Open session"), reason);
        statusBar()->showMessage(reason, 8000);
        return false;
    };
    if (m_engine->isRunning())
        return refuse(tr("A run is in progress: stop it (Ctrl+.) before opening a session."));
    m_compare->close();
    if (m_replaying)
        closeReplay();
    QString why;
    statusBar()->showMessage(tr("Opening %1...").arg(path));
    // Reading a long recording takes seconds (its traffic index, then the
    // timeline, which has a progress dialog).
    busy.emplace();
    m_replaying = true; // the controller's first signals belong to the replay
    if (!m_replayController->open(path, &why)) {
        m_replaying = false;
        if (m_liveState)
            showState(m_liveState);
        return refuse(why);
    }
    // The whole recording on the timeline, with the playhead at the start.
    m_timeline->clear();
    m_timeline->setLive(false);
    try {
        const engine::SessionReader &reader = *m_replayController->reader();
        std::unique_ptr<QProgressDialog> progress;
        loadTimeline(reader, m_timeline->data(), [&](std::uint64_t done, std::uint64_t total) {
            if (!progress && isVisible()) { // called only after 64k frames: a file worth a progress bar
                progress = std::make_unique<QProgressDialog>(tr("Loading the timeline..."), QString(), 0, 1000, this);
                progress->setWindowModality(Qt::WindowModal);
                progress->setMinimumDuration(300);
            }
            if (progress) {
                progress->setValue(total ? int(1000.0 * double(done) / double(total)) : 1000);
                QCoreApplication::processEvents(QEventLoop::ExcludeUserInputEvents);
            }
        });
    } catch (const std::exception &e) {
        m_replayController->close();
        m_replaying = false;
        m_timeline->clear();
        m_timeline->setLive(true);
        return refuse(QString::fromUtf8(e.what()));
    }
    m_timeline->data().setOriginNs(m_replayController->beginNs() + 1);
    m_timeline->dataChanged();
    m_timeline->fitAll();
    m_timeline->setFollowing(true);
    showReplayPosition(m_replayController->positionNs());
    m_replayBar->show();
    // The run settings say what was recorded (disabled), not the next live run.
    const std::optional<RunSettings> recorded = m_replayController->recordedSettings();
    m_runControls->showRecording(recorded);
    m_timelineDetails->setText(timelineHint(recorded && recorded->backend == QLatin1String("gloo")));
    m_exportTrace->setEnabled(true);
    setWindowTitle(tr("smolcluster: replay of %1").arg(QFileInfo(path).fileName()));
    statusBar()->showMessage(tr("Replaying %1. Space plays, Ctrl+W closes.") // [ and ]: the bar's tooltips
                                 .arg(m_replayController->describe()));
    updateRunActions();
    return true;
}

void MainWindow::closeReplay()
{
    if (!m_replaying || m_compare->close()) // a compared run B goes first
        return;
    m_replayController->close();
    m_replaying = false;
    m_replayBar->hide();
    m_runControls->showRecording(std::nullopt);
    clearRunViews();
    m_log->clear();
    m_timeline->setLive(true);
    m_exportTrace->setEnabled(!m_lastRecording.isEmpty());
    setWindowTitle(tr("smolcluster"));
    if (m_liveState)
        showState(m_liveState);
    statusBar()->showMessage(tr("Replay closed: the live cluster again."), 5000);
    updateRunActions();
}

void MainWindow::chooseSession()
{
    const QString path =
        QFileDialog::getOpenFileName(this, tr("Open session"), QString(), tr("Sessions (*.smolrec);;All files (*)"));
    if (!path.isEmpty())
        openSession(path);
}

void MainWindow::chooseTimelinePng()
{
    const QString path =
        QFileDialog::getSaveFileName(this, tr("Export timeline"), QStringLiteral("timeline.png"), tr("PNG images (*.png)"));
    if (path.isEmpty())
        return;
    QString error;
    if (exportTimelinePng(path, &error))
        statusBar()->showMessage(tr("Timeline saved to %1").arg(path), 5000);
    else
        QMessageBox::warning(this, tr("Export timeline"), error);
}

void MainWindow::chooseChromeTrace()
{
    const QString path = QFileDialog::getSaveFileName(this, tr("Export Chrome trace"), QStringLiteral("session.trace.json"),
                                                      tr("Chrome trace JSON (*.json)"));
    if (path.isEmpty())
        return;
    QString error;
    QApplication::setOverrideCursor(Qt::WaitCursor);
    const bool ok = exportChromeTrace(path, &error);
    QApplication::restoreOverrideCursor();
    if (ok)
        statusBar()->showMessage(tr("Chrome trace saved to %1 (open it in Perfetto)").arg(path), 8000);
    else
        QMessageBox::warning(this, tr("Export Chrome trace"), error);
}

void MainWindow::showRemoteNodes()
{
    showRemoteNodesDialog(this, m_engine, m_state);
}

} // namespace smol::app
