// The training figures of a run as a table: one row per completed step
// (StepPoint from the engine bridge), columns step, seconds since the start,
// loss, samples/s, then one "node N B/s" column per rank for the bytes each
// node sent per second. It keeps the newest kMaxRows steps at full
// resolution (the charts draw a decimated copy of the whole run) for a
// table view or a CSV export; past that budget the oldest rows go first, a
// chunk at a time (a recording keeps every step). It displays what it is
// given; it measures nothing.
#pragma once

#include "widgets/cluster_state.h"

#include <QAbstractTableModel>

#include <cstddef>
#include <deque>

namespace smol::widgets {

class MetricsModel : public QAbstractTableModel {
    Q_OBJECT

public:
    // Node columns follow NUM_COLUMNS: column NUM_COLUMNS + r is rank r's B/s.
    enum Columns { Step, Seconds, Loss, SamplesPerSecond, NUM_COLUMNS };
    // Unformatted values (qlonglong step, double figures; invalid for a NaN
    // loss or a node the step did not report) for sorting, tests and export.
    static constexpr int SortRole = Qt::UserRole;

    // The budget: the rows kept (about 120 B each with 4 nodes, 2.4 MB in
    // all; the last 2 to 4 minutes of a 4-node ddp mlp run, whose whole
    // shape the charts keep). Over it, the oldest kDropRows go at once, so
    // the rows stay in [kMaxRows - kDropRows + 1, kMaxRows] and a drop is rare.
    static constexpr std::size_t kMaxRows = 20'000;
    static constexpr std::size_t kDropRows = kMaxRows / 16;

    explicit MetricsModel(QObject *parent = nullptr);

    // Appends one row; a step reporting more nodes than seen so far adds
    // their columns first.
    void addStep(const StepPoint &point);
    void clear();

    const std::deque<StepPoint> &points() const { return m_points; }
    // Rows the budget dropped since clear().
    std::size_t droppedRows() const { return m_droppedRows; }
    int nodeColumnCount() const { return m_nodeColumns; }

    int rowCount(const QModelIndex &parent = {}) const override;
    int columnCount(const QModelIndex &parent = {}) const override;
    QVariant data(const QModelIndex &index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    QVariant value(const StepPoint &point, int column) const;

    std::deque<StepPoint> m_points;
    std::size_t m_droppedRows = 0;
    int m_nodeColumns = 0;
};

} // namespace smol::widgets
