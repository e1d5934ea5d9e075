// The window's compare table (File > Compare with...): the rows of
// `smolctl compare A B` as a table model, already formatted by the engine's
// comparison (app/compare_controller.cpp), so the window shows exactly the
// figures the command prints and computes none of its own.
//
// Columns: figure, A, B, B/A. A section row ("config differences", "node 2")
// spans the table in bold; a figure one run lacks reads "—" on that side.
#pragma once

#include <QAbstractTableModel>
#include <QString>
#include <QStringList>
#include <QVector>

namespace smol::widgets {

struct CompareTableRow {
    QString figure, a, b, ratio;
    bool section = false; // a heading row: only `figure` is shown
};

class CompareTableModel : public QAbstractTableModel {
    Q_OBJECT

public:
    enum Columns { Figure, A, B, Ratio, NUM_COLUMNS };

    explicit CompareTableModel(QObject *parent = nullptr);

    void setRows(const QVector<CompareTableRow> &rows);
    // Other titles for the columns A, B and B/A (the Plan page's predicted,
    // measured, measured/predicted); empty: compare's own.
    void setValueHeaders(const QStringList &headers);
    const QVector<CompareTableRow> &rows() const { return m_rows; }
    // The first row whose figure is `figure` (section rows skipped after
    // `fromSection`, when given), or -1: for tests.
    int find(const QString &figure, const QString &fromSection = QString()) const;

    int rowCount(const QModelIndex &parent = {}) const override;
    int columnCount(const QModelIndex &parent = {}) const override;
    QVariant data(const QModelIndex &index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    QVector<CompareTableRow> m_rows;
    QStringList m_valueHeaders;
};

} // namespace smol::widgets
