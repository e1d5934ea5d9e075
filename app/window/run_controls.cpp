#include "run_controls.h"

#include "engine/breakpoints/breakpoint_spec.h"
#include "gui_options.h"
#include "net/device_mesh.h"
#include "number_field.h"
#include "widgets/flow_layout.h"

#include <QAction>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QEvent>
#include <QFrame>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSlider>
#include <QSpinBox>
#include <QToolButton>
#include <QVBoxLayout>

#include <algorithm>

namespace smol::app {

namespace {

QFrame *separator(QWidget *parent)
{
    auto *line = new QFrame(parent);
    line->setFrameShape(QFrame::VLine);
    line->setFrameShadow(QFrame::Sunken);
    return line;
}

// A label and its field as one item of the flow, kept together when the row wraps.
QWidget *labelled(QWidget *parent, const QString &label, std::initializer_list<QWidget *> fields)
{
    auto *box = new QWidget(parent);
    auto *l = new QHBoxLayout(box);
    l->setContentsMargins(0, 0, 0, 0);
    l->addWidget(new QLabel(label, box));
    for (QWidget *w : fields)
        l->addWidget(w);
    return box;
}

} // namespace

RunControls::RunControls(EngineController *engine, QWidget *parent)
    : QWidget(parent)
    , m_engine(engine)
{
    setObjectName(QStringLiteral("runControls"));
    m_flow = new widgets::FlowLayout;
    m_flow->setContentsMargins(4, 3, 4, 3);
    buildButtons();
    m_flow->addWidget(separator(this));
    buildSettings();
    m_flow->addWidget(separator(this));
    buildSlowMotion();
    buildBreakpointField();
    auto *layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->setSpacing(0);
    layout->addLayout(m_flow);
    layout->addWidget(buildWarning());
    connectSettings();
    fitToFont();
}

void RunControls::buildButtons()
{
    m_start = new QAction(tr("Start"), this);
    m_start->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_Return));
    m_pause = new QAction(tr("Pause"), this);
    m_pause->setShortcut(Qt::Key_Space);
    m_pause->setShortcutContext(Qt::ApplicationShortcut);
    m_step = new QAction(tr("Step"), this);
    m_step->setShortcut(Qt::Key_N);
    m_step->setToolTip(tr("Run one collective, then pause again (N)"));
    m_stop = new QAction(tr("Stop"), this);
    m_stop->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_Period));
    for (QAction *a : {m_start, m_pause, m_step, m_stop}) {
        auto *b = new QToolButton(this);
        b->setDefaultAction(a);
        b->setToolButtonStyle(Qt::ToolButtonTextOnly);
        m_flow->addWidget(b);
        addAction(a);
    }
}

// The next run's settings; micro-batches and schedule show for a pipeline only.
void RunControls::buildSettings()
{
    m_strategy = new QComboBox(this);
    m_strategy->addItems(m_engine->strategies());
    m_strategy->setCurrentText(QStringLiteral("ddp"));
    m_strategy->setToolTip(tr("Strategy of the next run"));
    m_model = new QComboBox(this);
    m_model->addItems({QStringLiteral("mlp"), QStringLiteral("gpt")});
    m_nodes = numberField<QSpinBox>(this, 1, kMaxGuiNodes, 4, tr("nodes "));
    m_batch = numberField<QSpinBox>(this, 1, 65536, 120, tr("batch "));
    m_steps = numberField<QSpinBox>(this, 1, 1000000, 300, tr("steps "));
    m_optimizer = new QComboBox(this);
    m_optimizer->addItems({QStringLiteral("sgd"), QStringLiteral("adam")});
    m_lr = new QDoubleSpinBox(this);
    m_lr->setDecimals(4);
    m_lr->setRange(0.0001, 10);
    m_lr->setValue(0.1);
    m_lr->setPrefix(tr("lr "));
    m_seed = numberField<QSpinBox>(this, 0, 999999, 0, tr("seed "));
    m_microBatches = numberField<QSpinBox>(this, 1, 4096, 1, tr("micro-batches "));
    m_microBatches->setToolTip(tr("Pipeline: micro-batches per step (they must divide the batch)"));
    m_schedule = new QComboBox(this);
    m_schedule->addItems({QStringLiteral("1f1b"), QStringLiteral("gpipe")});
    m_schedule->setToolTip(tr("Pipeline schedule: 1F1B interleaves forwards and backwards; GPipe runs every "
                              "forward, then every backward"));
    m_backend = new QComboBox(this);
    m_backend->setObjectName(QStringLiteral("backendChoice"));
    m_backend->addItem(tr("on ours"), QStringLiteral("ours"));
    m_backend->addItem(tr("on gloo"), QStringLiteral("gloo"));
    m_backend->setToolTip(
        tr("Who runs the collectives: our transport (every packet on the timeline) or c10d's "
           "Gloo (each collective one span, its packets not visible; Gloo's links between the "
           "nodes are not authenticated)"));
    m_mesh = new QLineEdit(this);
    m_mesh->setObjectName(QStringLiteral("meshField"));
    m_mesh->setPlaceholderText(tr("e.g. dp=2,tp=2,pp=2"));
    m_mesh->setToolTip(
        tr("Mesh: the nodes as a grid, one axis per parallelism, any of dp (data-parallel replicas, "
           "running the strategy: ddp, zero1 or zero2), pp (pipeline stages), cp (context parallel: "
           "blocks of the sequence) and tp (tensor parallel slices of each layer); tp and cp need the gpt. "
           "The product is the node count. Rank order: tp fastest, then cp, pp, dp "
           "(rank = ((dp\u00b7PP + pp)\u00b7CP + cp)\u00b7TP + tp). Empty: the strategy alone."));
    m_meshLabel = new QLabel(tr("mesh"), this);
    // Label and field stay together when the row wraps.
    m_meshBox = new QWidget(this);
    auto *ml = new QHBoxLayout(m_meshBox);
    ml->setContentsMargins(0, 0, 0, 0);
    ml->addWidget(m_meshLabel);
    ml->addWidget(m_mesh);
    for (QWidget *w : settingWidgets())
        m_flow->addWidget(w);
    m_flow->addWidget(m_meshBox);
    buildCompression();
}

// ddp's gradient compression (PowerSGD's start beside it, for PowerSGD only)
// and the all-reduce's algorithm, as smolctl train's --compress,
// --compress-start and --allreduce take them.
void RunControls::buildCompression()
{
    m_compress = new QComboBox(this);
    m_compress->setObjectName(QStringLiteral("compressChoice"));
    m_compress->addItem(tr("none"), QStringLiteral("none"));
    m_compress->addItem(tr("fp16"), QStringLiteral("fp16"));
    m_compress->addItem(tr("bf16"), QStringLiteral("bf16"));
    for (int rank : {1, 2, 4})
        m_compress->addItem(tr("PowerSGD r%1").arg(rank), QStringLiteral("powersgd:%1").arg(rank));
    m_compressStart = numberField<QSpinBox>(this, 0, 99999, 10, tr("from step "));
    m_compressStart->setObjectName(QStringLiteral("compressStart"));
    m_compressStart->setToolTip(tr("PowerSGD sends plain all-reduces for this many steps first, as PyTorch's "
                                   "hook does: early gradients change fast and converge badly compressed"));
    m_allReduce = new QComboBox(this);
    m_allReduce->setObjectName(QStringLiteral("allReduceChoice"));
    m_allReduce->addItem(QString(), QString()); // its text follows the compression (followCompression)
    m_allReduce->addItem(tr("ring"), QStringLiteral("ring"));
    m_allReduce->addItem(tr("doubling"), QStringLiteral("doubling"));
    m_allReduce->addItem(tr("auto"), QStringLiteral("auto"));
    m_allReduce->setSizeAdjustPolicy(QComboBox::AdjustToContents); // "default (auto)" whole
    m_compressBox = labelled(this, tr("compress"), {m_compress, m_compressStart});
    m_allReduceBox = labelled(this, tr("all-reduce"), {m_allReduce});
    m_flow->addWidget(m_compressBox);
    m_flow->addWidget(m_allReduceBox);
}

// Compression is ddp's (alone or a mesh's dp axis): the others reduce-scatter
// or push their gradients. The all-reduce's algorithm is our transport's.
void RunControls::followCompression()
{
    const QString strategy = m_strategy->currentText();
    const bool ddp = strategy == QLatin1String("ddp");
    const bool ours = m_backend->currentData().toString() != QLatin1String("gloo");
    const QString kind = m_compress->currentData().toString();
    const bool compressing = ddp && kind != QLatin1String("none");
    m_compress->setEnabled(m_settingsEnabled && ddp);
    m_compressStart->setEnabled(m_settingsEnabled && ddp);
    m_compressStart->setVisible(kind.startsWith(QLatin1String("powersgd")));
    m_compress->setToolTip(
        ddp ? tr("Compress ddp's gradient all-reduce: fp16 or bf16 send half the bytes (16 bits a value); "
                 "PowerSGD of rank r sends two thin factors, (n+m)\u00b7r values for an n\u00d7m matrix, with "
                 "error feedback")
            : tr("Compression works on ddp's all-reduce of the gradients (alone or as a mesh's dp axis); "
                 "%1 does not all-reduce its gradients that way. Choose ddp to compress.")
                  .arg(strategy));
    m_allReduce->setItemText(0, compressing ? tr("default (auto)") : tr("default (ring)"));
    m_allReduce->setEnabled(m_settingsEnabled && ours);
    m_allReduce->setToolTip(
        ours ? tr("Our all-reduce: the ring (2(N-1) steps, 2(N-1)/N\u00b7S bytes: best for large messages), "
                  "recursive doubling (log2 N steps: best for small ones) or auto (by size). Default: the "
                  "ring, or auto when compressing")
             : tr("Gloo runs its own all-reduce: the algorithm is chosen on our transport only"));
}

void RunControls::buildSlowMotion()
{
    m_slowLabel = new QLabel(this);
    m_slowMotion = new QSlider(Qt::Horizontal, this);
    m_slowMotion->setRange(1, 50);
    m_slowMotion->setFixedWidth(110);
    m_slowMotion->setToolTip(tr("Every node computes this many times slower (next run), to watch each step"));
    auto showSlow = [this] { m_slowLabel->setText(tr("slow motion %1x").arg(m_slowMotion->value())); };
    connect(m_slowMotion, &QSlider::valueChanged, this, showSlow);
    showSlow();
    // Label and slider stay together when the row wraps.
    auto *slow = new QWidget(this);
    auto *sl = new QHBoxLayout(slow);
    sl->setContentsMargins(0, 0, 0, 0);
    sl->addWidget(m_slowLabel);
    sl->addWidget(m_slowMotion);
    m_flow->addWidget(slow);
}

void RunControls::buildBreakpointField()
{
    m_breakpoint = new QLineEdit(this);
    m_breakpoint->setObjectName(QStringLiteral("breakpointField"));
    m_breakpoint->setPlaceholderText(tr("break at allreduce@step=3"));
    m_breakpoint->setToolTip(tr("KIND[@step=N][,rank=R][,name=SUBSTR] or next; Return (or Start) adds it"));
    m_addBreakpoint = new QPushButton(tr("Add"), this);
    m_addBreakpoint->setToolTip(tr("Add the breakpoint (Return)"));
    m_breaksLabel = new QLabel(tr("stops at:"), this);
    m_clearBreakpoints = new QPushButton(tr("Clear"), this);
    m_clearBreakpoints->setToolTip(tr("Remove every breakpoint"));
    for (QWidget *w :
         std::initializer_list<QWidget *>{m_breakpoint, m_addBreakpoint, m_breaksLabel, m_clearBreakpoints})
        m_flow->addWidget(w);
    auto add = [this] {
        QString why;
        if (!applyPendingBreakpoint(&why))
            Q_EMIT message(tr("Breakpoint refused: %1").arg(why), 8000);
    };
    connect(m_breakpoint, &QLineEdit::returnPressed, this, add);
    connect(m_addBreakpoint, &QPushButton::clicked, this, add);
    connect(m_clearBreakpoints, &QPushButton::clicked, this, &RunControls::clearBreakpoints);
    showBreakpoints();
}

// A change of shape starts the pipeline's placement again; any change may
// make the settings runnable or not.
void RunControls::connectSettings()
{
    auto pipelineShown = [this] {
        const bool pipeline = m_strategy->currentText() == QLatin1String("pipeline") || meshStages() > 1;
        m_microBatches->setVisible(pipeline);
        m_schedule->setVisible(pipeline);
    };
    connect(m_strategy, &QComboBox::currentTextChanged, this, pipelineShown);
    connect(m_mesh, &QLineEdit::textChanged, this, pipelineShown);
    connect(m_mesh, &QLineEdit::textChanged, this, &RunControls::followMesh);
    pipelineShown();
    connect(m_nodes, &QSpinBox::valueChanged, this, &RunControls::shapeChanged);
    connect(m_model, &QComboBox::currentTextChanged, this, &RunControls::shapeChanged);
    connect(m_strategy, &QComboBox::currentTextChanged, this, &RunControls::updateProblem);
    connect(m_model, &QComboBox::currentTextChanged, this, &RunControls::updateProblem);
    connect(m_optimizer, &QComboBox::currentTextChanged, this, &RunControls::updateProblem);
    connect(m_nodes, &QSpinBox::valueChanged, this, &RunControls::updateProblem);
    connect(m_batch, &QSpinBox::valueChanged, this, &RunControls::updateProblem);
    connect(m_microBatches, &QSpinBox::valueChanged, this, &RunControls::updateProblem);
    connect(m_mesh, &QLineEdit::textChanged, this, &RunControls::updateProblem);
    connect(m_strategy, &QComboBox::currentTextChanged, this, &RunControls::followCompression);
    connect(m_backend, &QComboBox::currentIndexChanged, this, &RunControls::followCompression);
    connect(m_compress, &QComboBox::currentIndexChanged, this, &RunControls::followCompression);
    followCompression();
    updateProblem();
}

// A mesh that parses sets the node count to its product (a bad one leaves
// it, and the warning line says what is wrong).
void RunControls::followMesh()
{
    try {
        const net::DeviceMesh mesh = net::DeviceMesh::parse(m_mesh->text().trimmed().toStdString());
        if (!m_mesh->text().trimmed().isEmpty() && mesh.nodes() <= m_nodes->maximum())
            m_nodes->setValue(mesh.nodes());
    } catch (const std::invalid_argument &) {
    }
}

// The mesh's pipeline stages (1 without a mesh or with a bad one).
int RunControls::meshStages() const
{
    try {
        return net::DeviceMesh::parse(m_mesh->text().trimmed().toStdString()).size(net::MeshAxis::Pp);
    } catch (const std::invalid_argument &) {
        return 1;
    }
}

// The next run's settings in the order the flow shows them (slow motion,
// with its label, apart).
QList<QWidget *> RunControls::settingWidgets() const
{
    return {m_strategy, m_model, m_nodes,        m_batch,    m_steps,  m_optimizer,
            m_lr,       m_seed,  m_microBatches, m_schedule, m_backend};
}

void RunControls::changeEvent(QEvent *event)
{
    QWidget::changeEvent(event);
    if (event->type() == QEvent::FontChange)
        fitToFont();
}

void RunControls::fitToFont()
{
    // Room for the longest text each shows, in the current (projector) font.
    m_slowLabel->setMinimumWidth(m_slowLabel->fontMetrics().horizontalAdvance(tr("slow motion 50x")));
    for (QLineEdit *field : {m_breakpoint, m_mesh})
        field->setMinimumWidth(field->fontMetrics().horizontalAdvance(field->placeholderText()) +
                               field->fontMetrics().averageCharWidth() * 3);
}

QWidget *RunControls::buildWarning()
{
    m_warning = new QWidget(this);
    m_warning->setObjectName(QStringLiteral("runWarning"));
    m_warning->setAutoFillBackground(true);
    QPalette pal = m_warning->palette();
    pal.setColor(QPalette::Window, QColor(0xff, 0xf0, 0xc8));
    pal.setColor(QPalette::WindowText, QColor(0x3a, 0x2a, 0x00));
    m_warning->setPalette(pal);
    m_warningText = new QLabel(m_warning);
    m_warningText->setWordWrap(true);
    m_fixes = new QWidget(m_warning);
    auto *fixes = new QHBoxLayout(m_fixes);
    fixes->setContentsMargins(0, 0, 0, 0);
    auto *l = new QHBoxLayout(m_warning);
    l->setContentsMargins(8, 3, 8, 3);
    l->addWidget(m_warningText, 1);
    l->addWidget(m_fixes);
    m_warning->hide();
    return m_warning;
}

void RunControls::updateProblem()
{
    const auto layers = [this](const QString &model) { return int(m_engine->layerNames(model).size()); };
    m_problem = checkRun(settings(), layers);
    // Rebuild the fix buttons: each sets what it says.
    for (QPushButton *b : m_fixes->findChildren<QPushButton *>(Qt::FindDirectChildrenOnly))
        b->deleteLater();
    if (m_problem && m_settingsEnabled) {
        m_warningText->setText(tr("\u26a0 %1 Start waits for a fix:").arg(m_problem->text));
        for (const RunFix &fix : m_problem->fixes) {
            auto *b = new QPushButton(fix.label, m_fixes);
            const RunSettings s = fix.settings;
            connect(b, &QPushButton::clicked, this, [this, s] { setSettings(s); });
            m_fixes->layout()->addWidget(b);
        }
        m_warning->show();
    } else {
        m_warning->hide();
    }
    Q_EMIT problemChanged();
    Q_EMIT settingsChanged();
}

RunSettings RunControls::settings() const
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
    s.slowMotion = m_slowMotion->value();
    s.microBatches = m_microBatches->value();
    s.schedule = m_schedule->currentText();
    s.backend = m_backend->currentData().toString();
    s.mesh = m_mesh->text().trimmed();
    // Compression only where it applies (the engine refuses it elsewhere).
    s.compression =
        s.strategy == QLatin1String("ddp") ? m_compress->currentData().toString() : QStringLiteral("none");
    s.compressStart = m_compressStart->value();
    s.allReduce = m_allReduce->currentData().toString();
    return s;
}

void RunControls::setSettings(const RunSettings &s)
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
    m_microBatches->setValue(int(s.microBatches));
    m_schedule->setCurrentText(s.schedule);
    m_backend->setCurrentIndex(std::max(0, m_backend->findData(s.backend)));
    m_mesh->setText(s.mesh);
    // A rank the list lacks (a lesson's, a recording's) joins it.
    if (m_compress->findData(s.compression) < 0 && s.compression.startsWith(QLatin1String("powersgd:")))
        m_compress->addItem(tr("PowerSGD r%1").arg(s.compression.mid(9)), s.compression);
    m_compress->setCurrentIndex(std::max(0, m_compress->findData(s.compression)));
    m_compressStart->setValue(int(std::min<qint64>(s.compressStart, m_compressStart->maximum())));
    m_allReduce->setCurrentIndex(std::max(0, m_allReduce->findData(s.allReduce)));
    // The settings' count, even where the mesh's product differs (the warning says so).
    m_nodes->setValue(s.nodes);
    updateProblem();
}

void RunControls::showRecording(const std::optional<RunSettings> &recorded)
{
    if (recorded) {
        if (!m_userSettings)
            m_userSettings = settings();
        setSettings(*recorded);
    } else if (m_userSettings) {
        setSettings(*std::exchange(m_userSettings, std::nullopt));
    }
}

void RunControls::setSettingsEnabled(bool on)
{
    for (QWidget *w : settingWidgets())
        w->setEnabled(on);
    m_mesh->setEnabled(on);
    m_slowMotion->setEnabled(on);
    if (on != m_settingsEnabled) {
        m_settingsEnabled = on;
        updateProblem(); // no warning about a recording's settings
    }
    followCompression();
}

bool RunControls::addBreakpoint(const QString &spec, QString *why)
{
    try {
        engine::parseBreakpoint(spec.toStdString());
    } catch (const std::exception &e) {
        if (why)
            *why = QStringLiteral("%1: %2").arg(spec, QString::fromUtf8(e.what()));
        return false;
    }
    m_engine->addBreakpoint(spec);
    // "next" is one-shot (the engine drops it once it pauses): no chip for it.
    if (spec != QLatin1String("next") && !m_breakpoints.contains(spec))
        m_breakpoints << spec;
    return true;
}

bool RunControls::applyPendingBreakpoint(QString *why)
{
    const QString spec = m_breakpoint->text().trimmed();
    if (spec.isEmpty())
        return true;
    if (!addBreakpoint(spec, why))
        return false;
    m_breakpoint->clear();
    showBreakpoints();
    Q_EMIT message(tr("Breakpoint set: %1").arg(spec), 5000);
    return true;
}

void RunControls::clearBreakpoints()
{
    m_engine->clearBreakpoints();
    m_breakpoints.clear();
    showBreakpoints();
}

void RunControls::showBreakpoints()
{
    for (QPushButton *chip : std::exchange(m_chips, {})) {
        m_flow->removeWidget(chip);
        chip->deleteLater();
    }
    // Chips go before Clear, after "stops at:".
    const int at = m_flow->indexOf(m_clearBreakpoints);
    for (const QString &spec : m_breakpoints) {
        auto *chip = new QPushButton(spec + QStringLiteral(" \u2715"), this);
        chip->setToolTip(tr("Remove this breakpoint"));
        chip->setFlat(true);
        connect(chip, &QPushButton::clicked, this, [this, spec] {
            // The engine removes all or nothing: clear, then add the others again.
            QStringList keep = m_breakpoints;
            keep.removeAll(spec);
            m_engine->clearBreakpoints();
            m_breakpoints.clear();
            for (const QString &s : keep)
                addBreakpoint(s, nullptr);
            showBreakpoints();
        });
        m_chips << chip;
    }
    // QLayout has no insertWidget: take Clear out and put it back after the chips.
    if (at >= 0)
        delete m_flow->takeAt(at);
    for (QPushButton *chip : m_chips)
        m_flow->addWidget(chip);
    m_flow->addWidget(m_clearBreakpoints);
    m_breaksLabel->setVisible(!m_breakpoints.isEmpty());
    m_clearBreakpoints->setVisible(!m_breakpoints.isEmpty());
}

} // namespace smol::app
