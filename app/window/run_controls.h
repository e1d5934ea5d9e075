// The run controls along the top of the window: Start, Pause, Step, Stop;
// the next run's settings (strategy, model, nodes, batch, steps, optimizer,
// lr, seed; micro-batches and schedule for a pipeline; the device mesh,
// "dp=2,tp=2,pp=2", whose product sets the node count; ddp's gradient
// compression and our all-reduce's algorithm); slow motion; the
// breakpoint field with the active breakpoints beside it as chips (click
// one to remove it); and, under them, a warning line when the settings
// cannot run, with buttons that fix them. Everything sits in a flow layout
// that wraps to another row rather than hide a control in an overflow menu
// (a 1024x768 projector gets every control).
//
// While a recording plays, the window hides the run controls (the replay
// bar is the replay's) and the settings hold the recording's configuration
// (disabled); closing the replay brings back the user's.
#pragma once

#include "app/bridge/engine_controller.h"
#include "app/bridge/run_check.h"

#include <QList>
#include <QStringList>
#include <QWidget>

#include <optional>

class QAction;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QSlider;
class QSpinBox;

namespace smol::widgets {
class FlowLayout;
}

namespace smol::app {

class RunControls : public QWidget {
    Q_OBJECT

public:
    explicit RunControls(EngineController *engine, QWidget *parent = nullptr);

    QAction *startAction() const { return m_start; }
    QAction *pauseAction() const { return m_pause; }
    QAction *stepAction() const { return m_step; }
    QAction *stopAction() const { return m_stop; }

    // strategy … slowMotion, microBatches, schedule, mesh, compression,
    // allReduce (not placement or recordPath).
    RunSettings settings() const;
    void setSettings(const RunSettings &settings);
    // A replay's configuration, shown disabled; nullopt: the user's settings again.
    void showRecording(const std::optional<RunSettings> &recorded);
    // Live runs may change the settings (not during a replay or a run).
    void setSettingsEnabled(bool on);
    // Why the settings cannot run (nullopt: they can).
    std::optional<RunProblem> problem() const { return m_problem; }

    // The breakpoint typed in the field and not yet added (Return adds it):
    // added now (true, also when the field is empty), or refused (false,
    // with a one-line reason).
    bool applyPendingBreakpoint(QString *why);
    QStringList breakpoints() const { return m_breakpoints; }
    void clearBreakpoints();
    // Adds a breakpoint (the field's syntax); false with a one-line reason
    // when it is malformed.
    bool addBreakpoint(const QString &spec, QString *why);

Q_SIGNALS:
    void shapeChanged();   // the model or the node count changed (the pipeline placement starts again)
    void problemChanged(); // problem() is different
    void settingsChanged(); // a setting changed (settings() is the new one)
    void message(const QString &text, int timeoutMs);

protected:
    void changeEvent(QEvent *event) override;

private:
    // The constructor's phases, in the order the controls flow.
    void buildButtons();
    void buildSettings();
    void buildCompression();
    void buildSlowMotion();
    void buildBreakpointField();
    QWidget *buildWarning();
    void connectSettings();
    QList<QWidget *> settingWidgets() const;
    void fitToFont();
    void updateProblem();
    void showBreakpoints();
    void followMesh();
    void followCompression(); // what the strategy, backend and compression allow
    int meshStages() const;

    EngineController *m_engine;
    QAction *m_start = nullptr;
    QAction *m_pause = nullptr;
    QAction *m_step = nullptr;
    QAction *m_stop = nullptr;
    QComboBox *m_strategy = nullptr;
    QComboBox *m_model = nullptr;
    QSpinBox *m_nodes = nullptr;
    QSpinBox *m_batch = nullptr;
    QSpinBox *m_steps = nullptr;
    QComboBox *m_optimizer = nullptr;
    QDoubleSpinBox *m_lr = nullptr;
    QSpinBox *m_seed = nullptr;
    QSpinBox *m_microBatches = nullptr;
    QComboBox *m_schedule = nullptr;
    QComboBox *m_backend = nullptr; // ours | gloo
    QLineEdit *m_mesh = nullptr;    // "" or "dp=2,tp=2,pp=2"
    QLabel *m_meshLabel = nullptr;
    QWidget *m_meshBox = nullptr; // the label and the field, kept together
    QComboBox *m_compress = nullptr;     // data: "none", "fp16", "bf16", "powersgd:R"
    QSpinBox *m_compressStart = nullptr; // PowerSGD's plain steps first
    QComboBox *m_allReduce = nullptr;    // data: "" (the engine's default), "ring", "doubling", "auto"
    QWidget *m_compressBox = nullptr;    // label, choice and start, kept together
    QWidget *m_allReduceBox = nullptr;   // label and choice, kept together
    QLabel *m_slowLabel = nullptr;
    QSlider *m_slowMotion = nullptr;
    QLineEdit *m_breakpoint = nullptr;
    QPushButton *m_addBreakpoint = nullptr;
    QLabel *m_breaksLabel = nullptr;
    QList<QPushButton *> m_chips; // one per active breakpoint, at the end of the flow
    widgets::FlowLayout *m_flow = nullptr;
    QPushButton *m_clearBreakpoints = nullptr;
    QWidget *m_warning = nullptr;
    QLabel *m_warningText = nullptr;
    QWidget *m_fixes = nullptr;

    QStringList m_breakpoints;
    std::optional<RunProblem> m_problem;
    std::optional<RunSettings> m_userSettings; // kept while a recording's are shown
    bool m_settingsEnabled = true;
};

} // namespace smol::app
