// Runs a lesson (app/lesson.h) on the real cluster: each step's run, its
// condition, its edit and its focus go to the EngineController, and each
// revealed number is evaluated from what the engine measured (RunMeasurement
// at a run's end, the pause's tensors and the cluster's snapshot at a held
// collective) beside the formula the lesson gives. The window shows its
// view() in the lesson panel; `smolctl lesson NAME --check` drives the same
// runner without a window (app/lesson_check.h).
//
// A step is entered once: Next on a step not yet reached starts its work
// (stop the previous run if one is going, apply the settings, slowdowns,
// links and breakpoints, start or resume); Back and Next again only show
// steps already done. A step is reached when its condition is: the run's
// end (runMeasured), or a pause whose tensors are complete (pausedAt).
#pragma once

#include "app/bridge/engine_controller.h"
#include "class_answers.h"
#include "engine/session/figure_table.h"
#include "engine/strategies/strategy_description.h"
#include "lesson.h"
#include "widgets/lesson_panel.h"

#include <QObject>
#include <QPointer>
#include <QTemporaryDir>
#include <QTimer>

#include <memory>

#include <optional>

namespace smol::app {

class LessonRunner : public QObject {
    Q_OBJECT

public:
    explicit LessonRunner(EngineController *engine, QObject *parent = nullptr);
    ~LessonRunner() override;

    // Opens a lesson at its first step and starts that step's work.
    void open(const Lesson &lesson);
    // Closes the lesson; a run it started and that still goes is stopped.
    void close();
    bool isOpen() const { return m_open; }
    const Lesson &lesson() const { return m_lesson; }
    int index() const { return m_index; }
    bool busy() const;
    bool reached(int step) const;
    bool failed() const;
    widgets::LessonStepView view() const;

    struct Result {
        double measured = 0;
        std::optional<double> formula;
        bool agrees = true;
        QString error; // why the value could not be had
    };
    // The current step's revealed numbers (empty until it is reached).
    QVector<Result> results() const;
    // The session file a run with record=yes wrote ("" for none).
    QString recording(const QString &run) const { return m_recordings.value(run); }
    // Students' windows (issue 27): each step goes to them as this object
    // (toJson); a step with a reveal asks them its first reveal's question,
    // and their answers (the last per viewer) are summed up at the reveal.
    QJsonObject stepJson() const;
    const ClassAnswers &classAnswers() const { return m_class; }
    // The class's answers to step `step`'s question beside its measured
    // value (nullopt: the step asks none, or is not measured yet).
    std::optional<ClassSummary> classSummary(int step) const;

public Q_SLOTS:
    // Reveal the step's numbers if it has any left to reveal, else go on
    // (entering and starting the next step's work); on a failed step: retry.
    void next();
    void back();

Q_SIGNALS:
    void viewChanged();
    // The window: show the run settings a step applied, and its focus.
    void settingsApplied(const smol::app::RunSettings &settings);
    void focusRequested(const smol::app::LessonFocus &focus);
    void stepReached(int index);
    void stepFailed(int index, const QString &reason);
    // A step's `compare: A B`: the two runs' recordings, side by side.
    void compareRequested(const QString &fileA, const QString &fileB);
    void finished(); // Next past the last step

private:
    enum class Phase { NotStarted, Waiting, Reached, Revealed, Failed };
    struct StepState {
        Phase phase = Phase::NotStarted;
        QString status;
        QVector<Result> results;
    };

    void enter(int index);
    void startWork();
    void startRun();
    void abandonRun(); // stop the run the runner started, if it goes on; its end is not the next run's
    void continueRun();
    void reach();
    void fail(const QString &reason);
    void evaluate();
    std::optional<double> lookup(const QString &name) const;
    // A figure of the figure table (engine/session/figure_table.h), of a
    // finished run or at the pause.
    std::optional<double> runFigure(const QString &run, const QString &figure, int rank) const;
    std::optional<double> pauseFigure(const QString &figure, int rank) const;
    static std::optional<double> valued(const engine::Figure &figure, const QString &name, int rank,
                                        std::optional<double> value);
    static engine::RunFigures runFigures(const RunMeasurement &m);
    engine::PauseFigures pauseFigures() const;
    static std::optional<double> plannedFigure(const QString &strategy, const QString &figure,
                                               const engine::ClosedFormInput &in);
    std::optional<double> configFigure(const QString &run, const QString &figure) const;
    QVector<int> idleNodeIds() const;
    void publishStep(); // to the students' windows, when it changed

    void onState(const widgets::ClusterStatePtr &state);
    void onPaused(const PauseView &pause);
    void onMeasured(const RunMeasurement &m);
    void onRunEnded(const QString &failure, bool stopped);
    void onStepPoint(const widgets::StepPoint &point);

    QPointer<EngineController> m_engine;
    Lesson m_lesson;
    bool m_open = false;
    int m_index = -1;
    QVector<StepState> m_steps;

    // The cluster as the runner last saw it.
    widgets::ClusterStatePtr m_state;
    widgets::ClusterStatePtr m_pauseState; // the snapshot at the current pause
    PauseView m_pause;                     // id 0: not paused
    bool m_runActive = false;              // a run the runner started is going (its end not yet seen)
    int m_pendingEnds = 0;                 // runs it left behind whose end signals are still to come
    bool m_inStart = false;                // inside EngineController::start (its failures are this run's)
    bool m_startWhenStopped = false;       // start the step's run once the engine's run has ended
    QString m_runName;                     // the current run's name
    RunSettings m_runSettings;
    qint64 m_runStep = -1;                 // its newest step
    QMap<QString, RunMeasurement> m_runs;  // finished runs by name
    QMap<QString, engine::RunFigures> m_figures; // and what they measured, by name
    std::unique_ptr<QTemporaryDir> m_recordDir; // the lesson's recordings (record=yes), gone with it
    QMap<QString, QString> m_recordings;   // run name -> its session file
    QString m_lastRun;                     // the newest finished run's name
    ClassAnswers m_class;                  // the students' predictions
    QJsonObject m_published;               // the step the students' windows were sent last
    QTimer m_nodeWait;                     // waiting for local nodes to join
    int m_nodeWaitTicks = 0;
};

} // namespace smol::app
