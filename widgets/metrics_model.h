// The training figures of a run as a table: one row per completed step
// (StepPoint from the engine bridge), columns step, seconds since the start,
// loss, samples/s, then one "node N B/s" column per rank for the bytes each
// node sent per second. It keeps every step at full resolution (the charts
// draw a decimated copy) so a table view or a CSV export sees all of them.
// It displays what it is given; it measures nothing.
#pragma once

#include "widgets/cluster_state.h"

#include <QAbstractTableModel>

#include <vector>

namespace smol::widgets {

class MetricsModel : public QAbstractTableModel {
    Q_OBJECT

public:
    // Node columns follow NUM_COLUMNS: column NUM_COLUMNS + r is rank r's B/s.
    enum Columns { Step, Seconds, Loss, SamplesPerSecond, NUM_COLUMNS };
    // Unformatted values (qlonglong step, double figures; invalid for a NaN
    // loss or a node the step did not report) for sorting, tests and export.
    static constexpr int SortRole = Qt::UserRole;

    explicit MetricsModel(QObject *parent = nullptr);

    // Appends one row; a step reporting more nodes than seen so far adds
    // their columns first.
    void addStep(const StepPoint &point);
    void clear();

    const std::vector<StepPoint> &points() const { return m_points; }
    int nodeColumnCount() const { return m_nodeColumns; }

    int rowCount(const QModelIndex &parent = {}) const override;
    int columnCount(const QModelIndex &parent = {}) const override;
    QVariant data(const QModelIndex &index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    QVariant value(const StepPoint &point, int column) const;

    std::vector<StepPoint> m_points;
    int m_nodeColumns = 0;
};

} // namespace smol::widgets
