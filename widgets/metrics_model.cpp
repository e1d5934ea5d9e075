#include "metrics_model.h"

#include "widgets/column_title.h"

#include <QLocale>

#include <cmath>

namespace smol::widgets {

namespace {

#define CONTEXT "smol::widgets::MetricsModel"
// By MetricsModel::Columns; the node columns after them are numbered.
const ColumnTitle kColumns[MetricsModel::NUM_COLUMNS] = {
    {QT_TRANSLATE_NOOP(CONTEXT, "Step")},
    {QT_TRANSLATE_NOOP(CONTEXT, "Seconds"), QT_TRANSLATE_NOOP(CONTEXT, "Seconds since the run started")},
    {QT_TRANSLATE_NOOP(CONTEXT, "Loss")},
    {QT_TRANSLATE_NOOP(CONTEXT, "Samples/s")},
};
#undef CONTEXT

} // namespace

MetricsModel::MetricsModel(QObject *parent)
    : QAbstractTableModel(parent)
{
}

void MetricsModel::addStep(const StepPoint &point)
{
    const int nodes = int(point.bytesPerSecondPerNode.size());
    if (nodes > m_nodeColumns) {
        beginInsertColumns({}, NUM_COLUMNS + m_nodeColumns, NUM_COLUMNS + nodes - 1);
        m_nodeColumns = nodes;
        endInsertColumns();
    }
    if (m_points.size() >= kMaxRows) { // the budget: the oldest chunk goes first
        const std::size_t drop = m_points.size() - kMaxRows + kDropRows;
        beginRemoveRows({}, 0, int(drop) - 1);
        m_points.erase(m_points.begin(), m_points.begin() + std::ptrdiff_t(drop));
        m_droppedRows += drop;
        endRemoveRows();
    }
    const int row = int(m_points.size());
    beginInsertRows({}, row, row);
    m_points.push_back(point);
    endInsertRows();
}

void MetricsModel::clear()
{
    beginResetModel();
    m_points.clear();
    m_droppedRows = 0;
    m_nodeColumns = 0;
    endResetModel();
}

int MetricsModel::rowCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : int(m_points.size());
}

int MetricsModel::columnCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : NUM_COLUMNS + m_nodeColumns;
}

QVariant MetricsModel::value(const StepPoint &point, int column) const
{
    switch (column) {
    case Step:
        return qlonglong(point.step);
    case Seconds:
        return point.seconds;
    case Loss:
        return std::isnan(point.loss) ? QVariant() : QVariant(point.loss);
    case SamplesPerSecond:
        return point.samplesPerSecond;
    }
    const int rank = column - NUM_COLUMNS;
    if (rank >= 0 && rank < point.bytesPerSecondPerNode.size())
        return point.bytesPerSecondPerNode[rank];
    return {};
}

QVariant MetricsModel::data(const QModelIndex &index, int role) const
{
    if (!index.isValid() || index.model() != this || std::size_t(index.row()) >= m_points.size() ||
        index.column() >= columnCount())
        return {};
    const StepPoint &point = m_points[std::size_t(index.row())];
    const int column = index.column();

    if (role == SortRole)
        return value(point, column);
    if (role == Qt::DisplayRole) {
        const QVariant v = value(point, column);
        if (!v.isValid())
            return QString();
        const QLocale locale;
        switch (column) {
        case Step:
            return locale.toString(v.toLongLong());
        case Seconds:
            return locale.toString(v.toDouble(), 'f', 2);
        case Loss:
            return locale.toString(v.toDouble(), 'g', 5);
        case SamplesPerSecond:
            return locale.toString(v.toDouble(), 'f', 1);
        }
        return locale.toString(v.toDouble(), 'f', 0); // B/s
    }
    if (role == Qt::TextAlignmentRole)
        return int(Qt::AlignRight | Qt::AlignVCenter); // every column is a number
    return {};
}

QVariant MetricsModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (section < NUM_COLUMNS)
        return columnHeader(kColumns, staticMetaObject.className(), section, orientation, role);
    if (orientation != Qt::Horizontal || section >= columnCount())
        return {};
    const int rank = section - NUM_COLUMNS;
    if (role == Qt::ToolTipRole)
        return tr("Bytes rank %1 sent per second, from its trace events").arg(rank);
    if (role == Qt::DisplayRole)
        return tr("node %1 B/s").arg(rank);
    return {};
}

} // namespace smol::widgets
