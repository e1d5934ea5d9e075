// The control panel a teacher drives: the cluster (topology, memory bars,
// traffic) in the middle; tabs for the selected node's details, memory by
// category beside the ZeRO formulas, shard ownership, pipeline placement,
// the tensor inspector and the log; the packets-in-flight timeline and the
// charts along the bottom; run controls in the tool bar. Wiring only: every
// figure comes from EngineController's snapshots, every action goes to it.
//
// File > Open session replays a recorded run in the same views: a
// ReplayController emits the controller's signals from the file, the
// timeline shows the whole recording with a playhead, and a replay tool bar
// has the scrubber, play/pause, speed and previous/next collective. While
// a session is open the live cluster's updates wait; closing the replay
// (Ctrl+W) shows the live cluster again.
#pragma once

#include "engine_controller.h"
#include "node_lanes.h"

#include <QMainWindow>

#include <map>

class QAction;
class QDockWidget;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QPushButton;
class QSlider;
class QSpinBox;
class QSplitter;
class QTabWidget;
class QTableView;
class QToolBar;

namespace smol::widgets {
class ChartsPanel;
class ClusterView;
class MemoryModel;
class MemoryView;
class PlacementEditor;
class ShardMapModel;
class ShardMapView;
class TensorInspector;
class TimelineView;
struct TimelineHit;
} // namespace smol::widgets

namespace smol::app {

class CompareController;
class LessonUi;
class ReplayController;
class RunControls;

class MainWindow : public QMainWindow {
    Q_OBJECT

public:
    explicit MainWindow(EngineController *engine, QWidget *parent = nullptr);

    RunSettings settings() const;
    void setSettings(const RunSettings &settings);
    void setProjectorMode(bool on);
    bool projectorMode() const { return m_projector; }

    // Replay a session file in the window; false (and a message box unless
    // `quiet`) when it cannot be opened or a run is in progress.
    bool openSession(const QString &path, QString *error = nullptr, bool quiet = false);
    void closeReplay();
    bool isReplaying() const { return m_replaying; }
    ReplayController *replay() const { return m_replayController; }
    // File > Compare with...: a second run B beside the replay (Ctrl+W closes B first).
    CompareController *compare() const { return m_compare; }
    widgets::TimelineView *timeline() const { return m_timeline; }
    // Exports (File menu); false with a one-line reason.
    bool exportTimelinePng(const QString &path, QString *error = nullptr);
    bool exportChromeTrace(const QString &path, QString *error = nullptr);

    // Lessons (app/lesson_ui.h): the Lessons menu, the lesson panel, and
    // what a step's focus asks of the window: a view by key ("node",
    // "memory", "shards", "placement", "inspector", "log", "charts",
    // "timeline"; false for an unknown key) and the node of a rank.
    LessonUi *lessons() const { return m_lessons; }
    bool showView(const QString &key);
    void selectRank(int rank);

Q_SIGNALS:
    void projectorModeChanged(bool on);
    // Start refused before the run began (the settings cannot run, or the
    // pending breakpoint is malformed): the one-line reason the status bar shows.
    void runRefused(const QString &reason);

public Q_SLOTS:
    void startRun();
    void togglePause();

private:
    void buildToolBar();
    void buildTabs();
    int addPage(QWidget *page, const QString &title);
    void buildMenus();
    QWidget *buildTimeline();
    void buildReplayBar();
    void showTimelineItem(const widgets::TimelineHit &hit);
    void showPause(const PauseView &pause);
    void addTimelineEvents(const QVector<widgets::TimelineFrameSide> &frames,
                           const QVector<widgets::TimelineSpan> &spans,
                           const QVector<widgets::TimelineMemorySample> &memory, qint64 nowNs);
    void showReplayPosition(qint64 ns);
    void clearRunViews();
    void queueStep(const widgets::StepPoint &point);
    void showState(const widgets::ClusterStatePtr &state);
    void showSelectedNode();
    void updateRunActions();
    void chooseSession();
    void chooseTimelinePng();
    void chooseChromeTrace();
    void showRemoteNodes();

    EngineController *m_engine;
    widgets::ClusterStatePtr m_state;
    widgets::ClusterStatePtr m_liveState; // the live cluster's newest snapshot (shown again after a replay)
    PauseView m_livePause;                // the live run's current pause (id 0: none)
    QVector<widgets::StepPoint> m_pendingSteps; // for the charts, plotted together (queueStep)
    qint64 m_lastNowNs = 0;               // the engine's clock at its newest snapshot
    int m_selected = -1;
    NodeLanes m_lanes; // the live timeline's lanes: nodes, whatever their rank
    bool m_projector = false;

    widgets::ClusterView *m_cluster = nullptr;
    widgets::MemoryView *m_memoryView = nullptr;
    widgets::MemoryModel *m_memoryModel = nullptr;
    widgets::ShardMapView *m_shardView = nullptr;
    widgets::PlacementEditor *m_placement = nullptr;
    widgets::TensorInspector *m_inspector = nullptr;
    widgets::ChartsPanel *m_charts = nullptr;
    QTabWidget *m_tabs = nullptr;
    int m_inspectorTab = -1;
    int m_placementTab = -1; // shown for a pipeline only
    QSplitter *m_split = nullptr;
    QPlainTextEdit *m_log = nullptr;
    QLabel *m_details = nullptr;
    QDoubleSpinBox *m_nodeSlowdown = nullptr;
    QDoubleSpinBox *m_nodeMbit = nullptr;
    QDoubleSpinBox *m_nodeLatency = nullptr;
    std::map<int, std::pair<double, double>> m_links; // node id -> what the user set (Mbit/s, ms)

    RunControls *m_runControls = nullptr;
    QString m_placementSpec;
    QString m_recordPath;

    QAction *m_start = nullptr;
    QAction *m_pause = nullptr;
    QAction *m_step = nullptr;
    QAction *m_stop = nullptr;
    QAction *m_record = nullptr;
    QAction *m_projectorAction = nullptr;
    QAction *m_exportTrace = nullptr;
    QString m_lastRecording; // the newest live run recorded from this window

    widgets::TimelineView *m_timeline = nullptr;
    QLabel *m_timelineDetails = nullptr;
    QPushButton *m_seekHere = nullptr;
    QSpinBox *m_jumpStep = nullptr;

    ReplayController *m_replayController = nullptr;
    CompareController *m_compare = nullptr;
    LessonUi *m_lessons = nullptr;
    QDockWidget *m_timelineDock = nullptr;
    QDockWidget *m_chartsDock = nullptr;
    bool m_replaying = false;
    QToolBar *m_replayBar = nullptr;
    QSlider *m_scrubber = nullptr;
    QComboBox *m_replaySpeed = nullptr;
    QLabel *m_replayPosition = nullptr;
    QAction *m_replayPlay = nullptr;
};

} // namespace smol::app
