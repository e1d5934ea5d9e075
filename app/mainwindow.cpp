#include "mainwindow.h"

#include "engine/session/session_reader.h"
#include "widgets/charts_panel.h"
#include "widgets/cluster_view.h"
#include "widgets/memory_model.h"
#include "widgets/memory_view.h"
#include "widgets/palette.h"
#include "widgets/placement_editor.h"
#include "widgets/shard_map.h"
#include "widgets/tensor_inspector.h"

#include <QAction>
#include <QApplication>
#include <QComboBox>
#include <QDialog>
#include <QDialogButtonBox>
#include <QDockWidget>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSlider>
#include <QSpinBox>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QScrollArea>
#include <QScreen>
#include <QTimer>
#include <QToolBar>
#include <QVBoxLayout>

namespace smol::app {

namespace {

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
    setCentralWidget(m_split);
    auto *chartsDock = new QDockWidget(tr("Charts"), this);
    chartsDock->setObjectName(QStringLiteral("charts"));
    chartsDock->setWidget(m_charts);
    addDockWidget(Qt::BottomDockWidgetArea, chartsDock);
    buildToolBar();
    buildMenus();

    connect(m_engine, &EngineController::stateChanged, this, &MainWindow::showState);
    connect(m_engine, &EngineController::stepAvailable, m_charts, &widgets::ChartsPanel::addStep);
    connect(m_engine, &EngineController::testLossAvailable, this,
            [this](qint64 step, double loss) { m_charts->addTestPoint(step, loss); });
    connect(m_engine, &EngineController::testAccuracyAvailable, this, [this](qint64, double accuracy) {
        m_log->appendPlainText(tr("test accuracy %1%").arg(100 * accuracy, 0, 'f', 1));
    });
    connect(m_engine, &EngineController::runStarted, this, [this](const QString &what) {
        m_charts->clear();
        m_inspector->clear();
        statusBar()->showMessage(tr("Training: %1").arg(what));
        updateRunActions();
    });
    connect(m_engine, &EngineController::runFinished, this, [this](const QString &summary) {
        statusBar()->showMessage(summary);
        m_log->appendPlainText(summary);
        updateRunActions();
    });
    connect(m_engine, &EngineController::runFailed, this, [this](const QString &reason) {
        statusBar()->showMessage(tr("The run failed: %1").arg(reason));
        m_log->appendPlainText(tr("failed: %1").arg(reason));
        updateRunActions();
    });
    connect(m_engine, &EngineController::errorOccurred, this,
            [this](const QString &reason) { statusBar()->showMessage(reason, 8000); });
    connect(m_engine, &EngineController::logLine, this, [this](const QString &line) {
        m_log->appendPlainText(line);
        showSelectedNode();
    });
    connect(m_engine, &EngineController::pausedAt, this, [this](const PauseView &pause) {
        m_inspector->setPause(pause);
        m_tabs->setCurrentIndex(m_inspectorTab);
        statusBar()->showMessage(tr("Paused (%1). Space resumes, N steps one collective.").arg(pause.reason));
        updateRunActions();
    });
    connect(m_inspector, &widgets::TensorInspector::editRequested, m_engine, &EngineController::editTensor);
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
    resizeDocks({chartsDock}, {size.height() / 3}, Qt::Vertical);
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
    auto *row = new QHBoxLayout;
    row->addWidget(kill);
    row->addWidget(removeNode);
    row->addStretch();
    row->addWidget(addNode);
    auto *links = new QHBoxLayout;
    links->addWidget(new QLabel(tr("Next run:"), details));
    links->addWidget(m_nodeSlowdown);
    links->addWidget(new QLabel(tr("links"), details));
    links->addWidget(m_nodeMbit);
    links->addWidget(m_nodeLatency);
    links->addStretch();
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
        [this](const QString &spec) { return m_engine->checkPlacement(m_model->currentText(), spec, m_nodes->value()); });
    connect(m_placement, &widgets::PlacementEditor::placementChanged, this,
            [this](const QString &spec) { m_placementSpec = spec; });
    connect(m_placement, &widgets::PlacementEditor::placementRejected, this,
            [this](const QString &reason) { statusBar()->showMessage(tr("Placement refused: %1").arg(reason), 8000); });
    addPage(m_placement, tr("Placement"));

    m_inspector = new widgets::TensorInspector(this);
    m_inspectorTab = addPage(m_inspector, tr("Inspector"));

    m_log = new QPlainTextEdit(this);
    m_log->setReadOnly(true);
    m_log->setMaximumBlockCount(5000);
    addPage(m_log, tr("Log"));
}

void MainWindow::buildToolBar()
{
    auto *bar = addToolBar(tr("Run"));
    bar->setObjectName(QStringLiteral("run"));
    m_strategy = new QComboBox(bar);
    m_strategy->addItems(m_engine->strategies());
    m_strategy->setCurrentText(QStringLiteral("ddp"));
    m_model = new QComboBox(bar);
    m_model->addItems({QStringLiteral("mlp"), QStringLiteral("gpt")});
    m_nodes = new QSpinBox(bar);
    m_nodes->setRange(1, 16);
    m_nodes->setValue(4);
    m_nodes->setPrefix(tr("nodes "));
    m_batch = new QSpinBox(bar);
    m_batch->setRange(1, 65536);
    m_batch->setValue(120);
    m_batch->setPrefix(tr("batch "));
    m_steps = new QSpinBox(bar);
    m_steps->setRange(1, 1000000);
    m_steps->setValue(300);
    m_steps->setPrefix(tr("steps "));
    m_lr = new QDoubleSpinBox(bar);
    m_lr->setDecimals(4);
    m_lr->setRange(0.0001, 10);
    m_lr->setValue(0.1);
    m_lr->setPrefix(tr("lr "));
    m_optimizer = new QComboBox(bar);
    m_optimizer->addItems({QStringLiteral("sgd"), QStringLiteral("adam")});
    m_seed = new QSpinBox(bar);
    m_seed->setRange(0, 1 << 30);
    m_seed->setPrefix(tr("seed "));
    for (QWidget *w : std::initializer_list<QWidget *>{m_strategy, m_model, m_nodes, m_batch, m_steps, m_optimizer, m_lr,
                                                       m_seed})
        bar->addWidget(w);
    // The placement editor starts from the engine's balanced placement; each
    // click then moves one layer, and the engine refuses what cannot run.
    auto resetPlacement = [this] {
        m_placement->setLayers(m_engine->layerNames(m_model->currentText()));
        m_placement->setNodes(m_nodes->value());
        m_placementSpec = m_engine->balancedPlacement(m_model->currentText(), m_nodes->value());
        m_placement->setSpec(m_placementSpec);
    };
    connect(m_nodes, &QSpinBox::valueChanged, this, resetPlacement);
    connect(m_model, &QComboBox::currentTextChanged, this, resetPlacement);
    resetPlacement();
    bar->addSeparator();

    m_start = bar->addAction(tr("Start"), this, &MainWindow::startRun);
    m_start->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_Return));
    m_pause = bar->addAction(tr("Pause"), this, &MainWindow::togglePause);
    m_pause->setShortcut(Qt::Key_Space);
    m_pause->setShortcutContext(Qt::ApplicationShortcut);
    m_step = bar->addAction(tr("Step"), m_engine, &EngineController::stepCollective);
    m_step->setShortcut(Qt::Key_N);
    m_step->setToolTip(tr("Run one collective, then pause again (N)"));
    m_stop = bar->addAction(tr("Stop"), m_engine, &EngineController::stop);
    m_stop->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_Period));
    bar->addSeparator();
    bar->addWidget(new QLabel(tr(" slow motion "), bar));
    m_slowMotion = new QSlider(Qt::Horizontal, bar);
    m_slowMotion->setRange(1, 50);
    m_slowMotion->setMaximumWidth(120);
    m_slowMotion->setToolTip(tr("Every node computes this many times slower (next run), to watch each step"));
    bar->addWidget(m_slowMotion);
    m_breakpoint = new QLineEdit(bar);
    m_breakpoint->setPlaceholderText(tr("breakpoint, e.g. allreduce@step=3"));
    m_breakpoint->setMaximumWidth(220);
    bar->addWidget(m_breakpoint);
    connect(m_breakpoint, &QLineEdit::returnPressed, this, [this] {
        if (!m_breakpoint->text().trimmed().isEmpty()) {
            m_engine->addBreakpoint(m_breakpoint->text().trimmed());
            statusBar()->showMessage(tr("Breakpoint set: %1").arg(m_breakpoint->text().trimmed()), 5000);
            m_breakpoint->clear();
        }
    });
}

void MainWindow::buildMenus()
{
    QMenu *file = menuBar()->addMenu(tr("&File"));
    file->addAction(tr("&Open session..."), QKeySequence::Open, this, &MainWindow::openSession);
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
    cluster->addAction(tr("&Clear breakpoints"), m_engine, &EngineController::clearBreakpoints);
}

RunSettings MainWindow::settings() const
{
    RunSettings s;
    s.strategy = m_strategy->currentText();
    s.model = m_model->currentText();
    s.nodes = m_nodes->value();
    s.globalBatch = m_batch->value();
    s.steps = m_steps->value();
    s.optimizer = m_optimizer->currentText();
    s.lr = m_lr->value();
    s.seed = quint64(m_seed->value());
    s.placement = s.strategy == QLatin1String("pipeline") ? m_placementSpec : QString();
    s.recordPath = m_recordPath;
    s.slowMotion = m_slowMotion->value();
    return s;
}

void MainWindow::setSettings(const RunSettings &s)
{
    m_strategy->setCurrentText(s.strategy);
    m_model->setCurrentText(s.model);
    m_nodes->setValue(s.nodes);
    m_batch->setValue(int(s.globalBatch));
    m_steps->setValue(int(s.steps));
    m_optimizer->setCurrentText(s.optimizer);
    m_lr->setValue(s.lr);
    m_seed->setValue(int(s.seed));
    m_slowMotion->setValue(int(s.slowMotion));
}

void MainWindow::startRun()
{
    m_engine->start(settings());
    if (m_record->isChecked()) // one recording per click of Record
        m_record->setChecked(false);
}

void MainWindow::togglePause()
{
    if (m_engine->isPaused())
        m_engine->resume();
    else
        m_engine->pause();
    updateRunActions();
}

void MainWindow::setProjectorMode(bool on)
{
    m_projector = on;
    if (m_projectorAction->isChecked() != on)
        m_projectorAction->setChecked(on);
    m_cluster->setProjectorMode(on);
    m_memoryView->setProjectorMode(on);
    m_shardView->setProjectorMode(on);
    m_charts->setProjectorMode(on);
    m_inspector->setProjectorMode(on);
    QFont f = QApplication::font();
    f.setPointSizeF(on ? 14 : 10);
    setFont(f);
    // On a projector the cluster is the lesson: give it most of the width
    // (once the window has its size).
    QTimer::singleShot(0, this, [this, on] {
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
        const widgets::MemoryBytes &m = n.memory;
        QString html = tr("<h2>%1</h2><p>node %2, %3 on %4, <b>%5</b>%6</p>")
                           .arg(n.name.toHtmlEscaped())
                           .arg(n.id)
                           .arg(n.rank >= 0 ? tr("rank %1 (%2)").arg(n.rank).arg(n.role) : tr("not in the run"))
                           .arg(n.host.toHtmlEscaped())
                           .arg(widgets::runStateName(n.state))
                           .arg(n.slowdown > 1 ? tr(", computes %1x slower").arg(n.slowdown) : QString());
        html += tr("<table><tr><td>parameters</td><td align=right>%1</td></tr>"
                   "<tr><td>gradients</td><td align=right>%2</td></tr>"
                   "<tr><td>optimizer state</td><td align=right>%3</td></tr>"
                   "<tr><td>activations</td><td align=right>%4</td></tr>"
                   "<tr><td>communication buffers</td><td align=right>%5</td></tr>"
                   "<tr><td><b>live</b></td><td align=right><b>%6</b></td></tr>"
                   "<tr><td>peak</td><td align=right>%7</td></tr></table>")
                    .arg(widgets::formatBytes(m.params), widgets::formatBytes(m.grads), widgets::formatBytes(m.optimizer), widgets::formatBytes(m.activations), widgets::formatBytes(m.comm), widgets::formatBytes(m.live),
                         widgets::formatBytes(m.peak));
        if (n.predictedBytes)
            html += tr("<p>ZeRO formula for params + grads + optimizer: %1</p>").arg(widgets::formatBytes(*n.predictedBytes));
        if (!n.lastLog.isEmpty())
            html += tr("<p>%1</p>").arg(n.lastLog.toHtmlEscaped());
        m_details->setText(html);
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
    const bool running = m_engine->isRunning();
    const bool paused = m_engine->isPaused();
    m_start->setEnabled(!running);
    m_pause->setEnabled(running);
    m_pause->setText(paused ? tr("Resume") : tr("Pause"));
    m_step->setEnabled(running && paused);
    m_stop->setEnabled(running);
}

void MainWindow::openSession()
{
    const QString path =
        QFileDialog::getOpenFileName(this, tr("Open session"), QString(), tr("Sessions (*.smolrec);;All files (*)"));
    if (path.isEmpty())
        return;
    try {
        const engine::SessionReader reader(path);
        const engine::SessionInfo info = reader.info();
        QMessageBox::information(
            this, tr("Session"),
            tr("%1\n\n%2 on %3 node(s), %4 of %5 steps recorded, %6 s, %7 events, final loss %8.\n\n"
               "Replay in the window is not written yet; `smolctl export %1 --chrome-trace OUT.json` opens it in "
               "Perfetto.")
                .arg(path, QString::fromStdString(info.strategy))
                .arg(info.nodes)
                .arg(info.stepsRecorded)
                .arg(info.stepsPlanned)
                .arg(double(info.durationNs) / 1e9, 0, 'f', 1)
                .arg(info.events())
                .arg(info.finalLoss ? QString::number(*info.finalLoss, 'f', 4) : tr("none")));
    } catch (const std::exception &e) {
        QMessageBox::warning(this, tr("Session"), QString::fromUtf8(e.what()));
    }
}

void MainWindow::showRemoteNodes()
{
    QDialog dialog(this);
    dialog.setWindowTitle(tr("Remote nodes"));
    auto *layout = new QVBoxLayout(&dialog);
    layout->addWidget(new QLabel(tr("On another machine with smolcluster installed, run:"), &dialog));
    auto *command = new QLineEdit(m_engine->joinCommand(), &dialog);
    command->setReadOnly(true);
    command->setMinimumWidth(640);
    layout->addWidget(command);
    auto *nodes = new QLabel(&dialog);
    auto refresh = [this, nodes] {
        QStringList lines;
        if (m_state)
            for (const widgets::NodeState &n : m_state->nodes)
                lines << tr("node %1 '%2' from %3: %4").arg(n.id).arg(n.name, n.host, widgets::runStateName(n.state));
        nodes->setText(lines.join('\n'));
    };
    refresh();
    connect(m_engine, &EngineController::stateChanged, &dialog, refresh);
    layout->addWidget(nodes);
    auto *buttons = new QDialogButtonBox(QDialogButtonBox::Close, &dialog);
    connect(buttons, &QDialogButtonBox::rejected, &dialog, &QDialog::reject);
    layout->addWidget(buttons);
    dialog.exec();
}

} // namespace smol::app
