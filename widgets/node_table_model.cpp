#include "node_table_model.h"

#include <QColor>
#include <QLocale>

namespace smol::widgets {

namespace {

QVariant bytesText(const std::optional<std::uint64_t> &bytes)
{
    if (!bytes)
        return QString();
    return QLocale().toString(qulonglong(*bytes));
}

QVariant bytesValue(const std::optional<std::uint64_t> &bytes)
{
    return bytes ? QVariant(qulonglong(*bytes)) : QVariant();
}

} // namespace

NodeTableModel::NodeTableModel(QObject *parent)
    : QAbstractTableModel(parent)
{
}

void NodeTableModel::setNodes(std::vector<NodeRow> nodes)
{
    if (nodes.size() == m_nodes.size()) {
        m_nodes = std::move(nodes);
        if (!m_nodes.empty())
            Q_EMIT dataChanged(index(0, 0), index(rowCount() - 1, NUM_COLUMNS - 1));
        return;
    }
    beginResetModel();
    m_nodes = std::move(nodes);
    endResetModel();
}

int NodeTableModel::rowCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : int(m_nodes.size());
}

int NodeTableModel::columnCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : NUM_COLUMNS;
}

QString NodeTableModel::stateText(const NodeRow &node)
{
    switch (node.state) {
    case NodeState::Connecting:
        return tr("connecting");
    case NodeState::Ready:
        return tr("ready");
    case NodeState::Failed:
        return node.error.isEmpty() ? tr("failed") : tr("failed: %1").arg(node.error);
    }
    return {};
}

QVariant NodeTableModel::data(const QModelIndex &index, int role) const
{
    if (!index.isValid() || index.model() != this || std::size_t(index.row()) >= m_nodes.size())
        return {};
    const NodeRow &node = m_nodes[std::size_t(index.row())];
    const int column = index.column();

    if (role == Qt::DisplayRole || role == Qt::ToolTipRole) {
        switch (column) {
        case Rank:
            return node.rank;
        case Name:
            return node.name;
        case Transport:
            return node.transport;
        case State:
            return stateText(node);
        case BytesSent:
            return bytesText(node.bytesSent);
        case BytesReceived:
            return bytesText(node.bytesReceived);
        }
    } else if (role == SortRole) {
        switch (column) {
        case Rank:
            return node.rank;
        case Name:
            return node.name;
        case Transport:
            return node.transport;
        case State:
            return int(node.state);
        case BytesSent:
            return bytesValue(node.bytesSent);
        case BytesReceived:
            return bytesValue(node.bytesReceived);
        }
    } else if (role == Qt::TextAlignmentRole) {
        if (column == Rank || column == BytesSent || column == BytesReceived)
            return int(Qt::AlignRight | Qt::AlignVCenter); // Qt 6.4 views read an int
    } else if (role == Qt::ForegroundRole) {
        if (column == State && node.state == NodeState::Failed)
            return QColor(Qt::red);
    }
    return {};
}

QVariant NodeTableModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal)
        return {};
    if (role == Qt::ToolTipRole && (section == BytesSent || section == BytesReceived))
        return tr("Payload bytes measured on the wire (frame headers not counted)");
    if (role != Qt::DisplayRole)
        return {};
    switch (section) {
    case Rank:
        return tr("Rank");
    case Name:
        return tr("Name");
    case Transport:
        return tr("Transport");
    case State:
        return tr("State");
    case BytesSent:
        return tr("Bytes sent");
    case BytesReceived:
        return tr("Bytes received");
    }
    return {};
}

} // namespace smol::widgets
