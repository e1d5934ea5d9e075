// Two recorded runs side by side in the window (File > Compare with...,
// `smolcluster --replay A --compare B`): B opens in a second
// ReplayController beside the window's replay of A, and
//
//   timeline  B's lanes under A's ("B · local-0"), drawn from B's file with
//             each event moved so that B's step k starts where A's step k
//             starts (a step only B has keeps the shift of the step before)
//   scrubber  the window's one scrubber moves A; B follows to the same
//             step, as far through it (just before A's step k+1 is just
//             before B's; B's last step: as much time into it)
//   charts    B's loss and samples/s as dashed lines beside A's
//   memory    B's bars beside A's, per node
//   summary   a "Compare" dock with the table `smolctl compare A B` prints
//             (engine::measureRun / compareRuns, formatted by the engine)
//
// What has no counterpart stays: a node only B has gets its lane and its
// rows with "—" on A's side. The summary is a dock at the right, on a
// projector a tab beside the timeline. Ctrl+W closes B first (MainWindow::closeReplay
// asks close()); A closing or another session opening closes B too.
#pragma once

#include "widgets/cluster_state.h"

#include <QObject>
#include <QString>

#include <cstdint>
#include <map>
#include <utility>

class QDockWidget;
class QLabel;
class QMainWindow;
class QTableView;

namespace smol::widgets {
class ChartsPanel;
class CompareTableModel;
class MemoryView;
class TimelineView;
} // namespace smol::widgets

namespace smol::app {

class ReplayController;

class CompareController : public QObject {
    Q_OBJECT

public:
    CompareController(QMainWindow *window, ReplayController *a, widgets::TimelineView *timeline,
                      widgets::ChartsPanel *charts, widgets::MemoryView *memory);

    // Opens B beside the open replay A; false with one line (and a message
    // box unless `quiet`) when no replay is open or B cannot be read.
    bool open(const QString &path, QString *error = nullptr, bool quiet = false);
    // Closes B; true when one was open. The timeline shows A alone again.
    bool close();
    bool isOpen() const;
    void choose(); // File > Compare with...: a file dialog, then open()
    // On a projector the summary is a tab beside the timeline and charts
    // (the window's width), else a dock at the right.
    void setProjectorMode(bool on);

    ReplayController *replay() const { return m_b; } // B's
    widgets::CompareTableModel *table() const { return m_table; }
    QDockWidget *dock() const { return m_dock; }
    int firstLaneOfB() const { return m_laneOffset; } // -1 when closed
    widgets::ClusterStatePtr stateOfB() const { return m_bState; }
    // Where B's clock goes on A's (its events on the timeline) and where B
    // follows A's position to; public for tests.
    std::int64_t toA(std::int64_t bNs) const;
    std::int64_t toB(std::int64_t aNs) const;

private:
    using Steps =
        std::map<std::int64_t, std::pair<std::int64_t, std::int64_t>>; // step -> earliest start, latest end
    void follow(qint64 aNs);
    void addLanesOfB();
    void restoreTimeline();
    void fillTable(const QString &pathA, const QString &pathB);
    void flushSteps();
    void placeDock();
    bool refuse(const QString &reason, QString *error, bool quiet);

    QMainWindow *m_window;
    ReplayController *m_a;
    ReplayController *m_b;
    widgets::TimelineView *m_timeline;
    widgets::ChartsPanel *m_charts;
    widgets::MemoryView *m_memory;
    widgets::CompareTableModel *m_table;
    QDockWidget *m_dock = nullptr;
    QLabel *m_runs = nullptr;
    QTableView *m_view = nullptr;
    Steps m_stepsA, m_stepsB;
    std::map<std::int64_t, std::int64_t> m_shift; // B's step -> ns added to its events
    int m_laneOffset = -1;
    bool m_projector = false;
    bool m_resync = true; // A was cleared (a seek): B seeks rather than advances
    QVector<widgets::StepPoint> m_pendingSteps;
    widgets::ClusterStatePtr m_bState;
};

} // namespace smol::app
