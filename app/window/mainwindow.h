// The control panel a teacher drives: the cluster (topology, memory bars,
// traffic) in the middle; tabs for the selected node's details, memory by
// category beside the ZeRO formulas, shard ownership, pipeline placement,
// the tensor inspector and the log; the packets-in-flight timeline and the
// charts along the bottom; run controls in the tool bar. Wiring only: every
// figure comes from a RunFeed (app/feed/run_feed.h), every action goes to
// EngineController.
//
// The views are connected once to the feeds; only the current feed's
// signals reach them. Live, that is the EngineController. File > Open
// session makes a ReplayController the current feed: the same views show
// the recording, the timeline holds the whole of it with a playhead, and a
// replay tool bar (ReplayBar) has the scrubber, play/pause, speed and
// previous/next collective: the replay's one set of controls, the live run
// controls hidden meanwhile. While a session is open the live cluster's
// updates wait; closing the replay (Ctrl+W) makes the live cluster the feed
// again, brings the run controls back and shows its newest snapshot.
#pragma once

#include "app/bridge/engine_controller.h"
#include "app/feed/run_feed.h"
#include "node_lanes.h"

#include <QMainWindow>

#include <map>

class QAction;
class QDockWidget;
class QMenu;
class QPlainTextEdit;
class QSplitter;
class QTabWidget;

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
class NodePage;
class PlanPage;
class ReplayBar;
class ReplayController;
class RunControls;
class TimelinePanel;
class ViewerFeed;

class MainWindow : public QMainWindow {
    Q_OBJECT

public:
    // The log's budget: the lines the Log tab keeps, the oldest dropped
    // first (a run logs a few lines a minute; a recording keeps them all).
    static constexpr int kMaxLogLines = 5000;

    explicit MainWindow(EngineController *engine, QWidget *parent = nullptr);
    // The Log tab (for tests and `smolctl bench soak`).
    const QPlainTextEdit *logView() const { return m_log; }

    RunSettings settings() const;
    void setSettings(const RunSettings &settings);
    void setProjectorMode(bool on);
    bool projectorMode() const { return m_projector; }

    // Replay a session file in the window; false (and a message box unless
    // `quiet`) when it cannot be opened or a run is in progress.
    bool openSession(const QString &path, QString *error = nullptr, bool quiet = false);
    void closeReplay();
    bool isReplaying() const; // the current feed is the replay
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
    // A student's window (smolcluster --watch / --join): the views fed by a
    // teacher's run, read-only (viewer_mode.cpp). Not owned.
    void watch(ViewerFeed *viewer);
    ViewerFeed *viewer() const { return m_viewer; }
    RunControls *runControls() const { return m_runControls; }
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
    // The constructor's phases, in order.
    void buildCentre();
    void buildTabs();
    void buildToolBar();
    void buildDocks();
    QWidget *buildTimeline();
    void buildReplay();
    void buildMenus();
    void connectFeeds();
    void connectSelection();
    void fitToScreen();
    int addPage(QWidget *page, const QString &title);
    QWidget *buildMemoryPage();
    void buildPlacementPage();

    // The views fed: `slot` gets `signal` of every feed, while that feed is
    // the current one (setFeed).
    template <typename Signal, typename Slot> void onFeed(Signal signal, Slot slot);
    void connectViews(const QVector<RunFeed *> &feeds); // the views' slots, to these feeds' signals
    void hideLiveControls(); // viewer_mode.cpp
    void setFeed(RunFeed *feed);
    void showState(const widgets::ClusterStatePtr &state);
    void queueStep(const widgets::StepPoint &point);
    void addTimelineEvents(const QVector<widgets::TimelineFrameSide> &frames,
                           const QVector<widgets::TimelineSpan> &spans,
                           const QVector<widgets::TimelineMemorySample> &memory, qint64 nowNs);
    void showFeedPause(const PauseView &pause);
    void showPause(const PauseView &pause);
    void showRunStarted(const QString &what);
    void showRunEnded(const QString &status, const QString &logText);
    void clearRunViews();
    void showTimelineItem(const widgets::TimelineHit &hit);
    void showReplayPosition(qint64 ns);
    void updateRunActions();
    void chooseSession();
    void chooseTimelinePng();
    void chooseChromeTrace();
    void showRemoteNodes();

    EngineController *m_engine;
    RunFeed *m_feed; // the current feed: m_engine, or m_replayController while a session is open
    widgets::ClusterStatePtr m_state;
    QVector<widgets::StepPoint> m_pendingSteps; // for the charts, plotted together (queueStep)
    qint64 m_lastNowNs = 0;               // the feed's clock at its newest timeline events (0: none)
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
    NodePage *m_nodePage = nullptr;
    PlanPage *m_planPage = nullptr; // predicted and measured, per node
    int m_planTab = -1;

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

    TimelinePanel *m_timelinePanel = nullptr;
    widgets::TimelineView *m_timeline = nullptr; // the panel's

    ReplayController *m_replayController = nullptr;
    ViewerFeed *m_viewer = nullptr;   // a student's window: the teacher's run
    QVector<RunFeed *> m_connecting;  // connectViews' feeds, for onFeed
    QMenu *m_clusterMenu = nullptr;
    QAction *m_openSession = nullptr;
    QAction *m_compareWith = nullptr;
    CompareController *m_compare = nullptr;
    LessonUi *m_lessons = nullptr;
    QDockWidget *m_timelineDock = nullptr;
    QDockWidget *m_chartsDock = nullptr;
    ReplayBar *m_replayBar = nullptr;
};

} // namespace smol::app
