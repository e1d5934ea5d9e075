// One row per node (in id order) with its memory by category as the engine's
// tracking allocator measured it: params, grads, optimizer state,
// activations, comm buffers, live, peak, and what the ZeRO formula predicts
// for params+grads+optimizer when one applies, and the most the node held
// in its newest step (the engine's step peak; a category cell's tooltip has
// that category's largest in the step: ddp's activations, freed before any
// collective, show there). The model behind the memory
// view's table and tooltips; it only displays the snapshot it is given.
#pragma once

#include "widgets/cluster_state.h"

#include <QAbstractTableModel>
#include <QString>
#include <QVector>

#include <cstdint>

namespace smol::widgets {

class MemoryModel : public QAbstractTableModel {
    Q_OBJECT

public:
    enum Columns { Node, Params, Grads, Optimizer, Activations, Comm, Live, Peak, Predicted, StepPeak, NUM_COLUMNS };
    // Unformatted values for sorting and tests: the node id (int) in the Node
    // column, bytes (qlonglong) elsewhere; invalid where there is no figure.
    static constexpr int SortRole = Qt::UserRole;

    explicit MemoryModel(QObject *parent = nullptr);

    // Same nodes (ids) in the same rows: one dataChanged; otherwise a model
    // reset. A null state empties the model.
    void setState(ClusterStatePtr state);
    ClusterStatePtr state() const { return m_state; }

    // The node id shown in `row`, or -1; the row showing node `id`, or -1.
    int nodeId(int row) const;
    int rowOfNode(int id) const;

    int rowCount(const QModelIndex &parent = {}) const override;
    int columnCount(const QModelIndex &parent = {}) const override;
    QVariant data(const QModelIndex &index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

    // "2.93 MiB" from 1 MiB up, "12,345 B" below.
    static QString bytesText(std::int64_t bytes);

private:
    ClusterStatePtr m_state;
    QVector<NodeState> m_nodes; // by id
};

} // namespace smol::widgets
