#include "memory_model.h"

#include "palette.h"

#include <QLocale>

#include <algorithm>
#include <optional>

namespace smol::widgets {

namespace {

std::optional<std::int64_t> bytesIn(const NodeState &node, int column)
{
    switch (column) {
    case MemoryModel::Params:
        return node.memory.params;
    case MemoryModel::Grads:
        return node.memory.grads;
    case MemoryModel::Optimizer:
        return node.memory.optimizer;
    case MemoryModel::Activations:
        return node.memory.activations;
    case MemoryModel::Comm:
        return node.memory.comm;
    case MemoryModel::Live:
        return node.memory.live;
    case MemoryModel::Peak:
        return node.memory.peak;
    case MemoryModel::Predicted:
        return node.predictedBytes;
    }
    return std::nullopt;
}

QString nodeName(const NodeState &node)
{
    return displayName(node);
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
            return nodeName(node);
        return bytes ? bytesText(*bytes) : QString();
    case SortRole:
        if (column == Node)
            return node.id;
        return bytes ? QVariant(qlonglong(*bytes)) : QVariant();
    case Qt::ToolTipRole:
        if (column == Node)
            return nodeSummary(node);
        return bytes ? tr("%1 bytes").arg(QLocale().toString(qlonglong(*bytes))) : QVariant();
    case Qt::TextAlignmentRole:
        if (column != Node)
            return int(Qt::AlignRight | Qt::AlignVCenter); // Qt 6.4 views read an int
        break;
    }
    return {};
}

QVariant MemoryModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal)
        return {};
    if (role == Qt::ToolTipRole) {
        switch (section) {
        case Activations:
            return tr("Everything else the node allocated: live minus the other categories");
        case Comm:
            return tr("Buffers the collectives send from and receive into");
        case Live:
            return tr("Bytes the node holds right now, as its allocator counted them");
        case Peak:
            return tr("The most the node has held at once");
        case Predicted:
            return tr("What the ZeRO formula predicts for params + grads + optimizer under this strategy");
        }
        return {};
    }
    if (role != Qt::DisplayRole)
        return {};
    switch (section) {
    case Node:
        return tr("Node");
    case Params:
        return tr("Params");
    case Grads:
        return tr("Grads");
    case Optimizer:
        return tr("Optimizer");
    case Activations:
        return tr("Activations");
    case Comm:
        return tr("Comm");
    case Live:
        return tr("Live");
    case Peak:
        return tr("Peak");
    case Predicted:
        return tr("ZeRO formula");
    }
    return {};
}

} // namespace smol::widgets
