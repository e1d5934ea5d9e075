#include "memory_model.h"

#include "widgets/column_title.h"
#include "widgets/paint/palette.h"

#include <QLocale>

#include <algorithm>
#include <optional>

namespace smol::widgets {

namespace {

#define CONTEXT "smol::widgets::MemoryModel"
// By MemoryModel::Columns.
const ColumnTitle kColumns[MemoryModel::NUM_COLUMNS] = {
    {QT_TRANSLATE_NOOP(CONTEXT, "Node")},
    {QT_TRANSLATE_NOOP(CONTEXT, "Params")},
    {QT_TRANSLATE_NOOP(CONTEXT, "Grads")},
    {QT_TRANSLATE_NOOP(CONTEXT, "Optimizer")},
    {QT_TRANSLATE_NOOP(CONTEXT, "Activations"),
     QT_TRANSLATE_NOOP(CONTEXT, "Everything else the node allocated: live minus the other categories")},
    {QT_TRANSLATE_NOOP(CONTEXT, "Comm"),
     QT_TRANSLATE_NOOP(CONTEXT, "Buffers the collectives send from and receive into")},
    {QT_TRANSLATE_NOOP(CONTEXT, "Live"),
     QT_TRANSLATE_NOOP(CONTEXT, "Bytes the node holds right now, as its allocator counted them")},
    {QT_TRANSLATE_NOOP(CONTEXT, "Peak"), QT_TRANSLATE_NOOP(CONTEXT, "The most the node has held at once")},
    {QT_TRANSLATE_NOOP(CONTEXT, "ZeRO formula"),
     QT_TRANSLATE_NOOP(CONTEXT,
                       "What the ZeRO formula predicts for params + grads + optimizer under this strategy")},
    {QT_TRANSLATE_NOOP(CONTEXT, "Step peak"),
     QT_TRANSLATE_NOOP(CONTEXT, "The most the node held during its newest step (its allocator's high-water mark)")},
};
#undef CONTEXT

// The category columns are the memory's categories in stacking order.
static_assert(MemoryModel::Comm - MemoryModel::Params + 1 == net::MemoryByCategory::kCategories);

std::optional<std::int64_t> bytesIn(const NodeState &node, int column)
{
    if (column >= MemoryModel::Params && column <= MemoryModel::Comm)
        return node.memory.category(column - MemoryModel::Params);
    if (column == MemoryModel::Live)
        return node.memory.live;
    if (column == MemoryModel::Peak)
        return node.memory.peak;
    if (column == MemoryModel::Predicted)
        return node.predictedBytes;
    if (column == MemoryModel::StepPeak && node.stepPeak.peak > 0)
        return node.stepPeak.peak;
    return std::nullopt;
}

} // namespace

MemoryModel::MemoryModel(QObject *parent)
    : QAbstractTableModel(parent)
{
}

void MemoryModel::setState(ClusterStatePtr state)
{
    QVector<NodeState> nodes = state ? state->nodes : QVector<NodeState>();
    std::stable_sort(nodes.begin(), nodes.end(),
                     [](const NodeState &a, const NodeState &b) { return a.id < b.id; });
    const bool sameRows = std::equal(nodes.cbegin(), nodes.cend(), m_nodes.cbegin(), m_nodes.cend(),
                                     [](const NodeState &a, const NodeState &b) { return a.id == b.id; });
    if (sameRows) {
        m_state = std::move(state);
        m_nodes = std::move(nodes);
        if (!m_nodes.isEmpty())
            Q_EMIT dataChanged(index(0, 0), index(rowCount() - 1, NUM_COLUMNS - 1));
        return;
    }
    beginResetModel();
    m_state = std::move(state);
    m_nodes = std::move(nodes);
    endResetModel();
}

int MemoryModel::nodeId(int row) const
{
    return row >= 0 && row < m_nodes.size() ? m_nodes[row].id : -1;
}

int MemoryModel::rowOfNode(int id) const
{
    for (int row = 0; row < m_nodes.size(); ++row)
        if (m_nodes[row].id == id)
            return row;
    return -1;
}

int MemoryModel::rowCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : int(m_nodes.size());
}

int MemoryModel::columnCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : NUM_COLUMNS;
}

QString MemoryModel::bytesText(std::int64_t bytes)
{
    const QLocale locale;
    if (bytes >= 1024 * 1024 || bytes <= -1024 * 1024)
        return tr("%1 MiB").arg(locale.toString(double(bytes) / (1024.0 * 1024.0), 'f', 2));
    return tr("%1 B").arg(locale.toString(qlonglong(bytes)));
}

QVariant MemoryModel::data(const QModelIndex &index, int role) const
{
    if (!index.isValid() || index.model() != this || index.row() >= m_nodes.size())
        return {};
    const NodeState &node = m_nodes[index.row()];
    const int column = index.column();
    const std::optional<std::int64_t> bytes = bytesIn(node, column);

    switch (role) {
    case Qt::DisplayRole:
        if (column == Node)
            return displayName(node);
        return bytes ? bytesText(*bytes) : QString();
    case SortRole:
        if (column == Node)
            return node.id;
        return bytes ? QVariant(qlonglong(*bytes)) : QVariant();
    case Qt::ToolTipRole:
        if (column == Node)
            return nodeSummary(node);
        if (!bytes)
            return {};
        if (column >= Params && column <= Comm && node.stepPeak.peak > 0)
            return tr("%1 bytes now; at most %2 during the newest step")
                .arg(QLocale().toString(qlonglong(*bytes)),
                     QLocale().toString(qlonglong(node.stepPeak.category(column - Params))));
        return tr("%1 bytes").arg(QLocale().toString(qlonglong(*bytes)));
    case Qt::TextAlignmentRole:
        if (column != Node)
            return int(Qt::AlignRight | Qt::AlignVCenter); // Qt 6.4 views read an int
        break;
    }
    return {};
}

QVariant MemoryModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    return columnHeader(kColumns, staticMetaObject.className(), section, orientation, role);
}

} // namespace smol::widgets
