// One row per node of the cluster: who it is, how it is connected, what state
// it is in and how many payload bytes it has moved. The model only displays
// NodeRow snapshots handed to it on the GUI thread; it measures nothing.
#pragma once

#include <QAbstractTableModel>
#include <QString>

#include <cstdint>
#include <optional>
#include <vector>

namespace smol::widgets {

enum class NodeState { Connecting, Ready, Failed };

// A plain snapshot of one node, published by whoever runs the cluster.
struct NodeRow {
    int rank = -1;
    QString name;
    QString transport; // e.g. "tcp 127.0.0.1"
    NodeState state = NodeState::Connecting;
    QString error; // why, when state == Failed
    // Payload bytes measured on the wire; empty until measured.
    std::optional<std::uint64_t> bytesSent;
    std::optional<std::uint64_t> bytesReceived;
};

class NodeTableModel : public QAbstractTableModel {
    Q_OBJECT

public:
    enum Columns { Rank, Name, Transport, State, BytesSent, BytesReceived, NUM_COLUMNS };
    // Unformatted values (int, QString, qulonglong) for sorting and tests.
    static constexpr int SortRole = Qt::UserRole;

    explicit NodeTableModel(QObject *parent = nullptr);

    // Same number of rows: one dataChanged; otherwise a model reset.
    void setNodes(std::vector<NodeRow> nodes);
    const std::vector<NodeRow> &nodes() const { return m_nodes; }

    int rowCount(const QModelIndex &parent = {}) const override;
    int columnCount(const QModelIndex &parent = {}) const override;
    QVariant data(const QModelIndex &index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

    static QString stateText(const NodeRow &node);

private:
    std::vector<NodeRow> m_nodes;
};

} // namespace smol::widgets
