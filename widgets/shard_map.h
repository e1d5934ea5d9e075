// Which rank owns which part of which parameter, as a grid: rows are the
// model's parameters (grouped by layer, in the order the engine lists them),
// columns are ranks. ShardMapModel turns ClusterState::shards (contiguous
// element ranges with an owner, from Strategy::shards()) into one row per
// parameter: per rank the share of its elements that rank owns, whether it
// is replicated on every rank (ddp, syncps) and whether a rank holds it in
// full right now (zero3 gathers a layer's parameters just before using
// them). ShardMapView paints that grid for the projector: a cell is filled
// in its rank's colour in proportion to the owned share, replicated cells
// are striped and say "all", materialised cells get an outline and a dot.
// Both only show the ranges they are given; they measure nothing. A range
// held by several ranks (a device mesh's dp and cp replicas) comes as one
// cell per rank and fills each of their columns; only owner -1 is "all".
// A mesh's columns also say, under "rank N", the rank's coordinates, its
// block of the sequence (cp) and its optimizer shard (ClusterState::
// shardColumns, ColumnNotesRole).
#pragma once

#include "widgets/cluster_state.h"

#include <QAbstractTableModel>
#include <QColor>
#include "widgets/projector_widget.h"

#include <QWidget>

#include <vector>

namespace smol::widgets {

// One colour per rank, shared by every view, so rank 2 has the same colour
// on the charts, the shard map and the placement editor.
QColor rankColor(int rank);
// The rank's colour mixed with white (0 = the colour, 1 = white): backgrounds
// and "replicated" cells, equally pale for every rank.
QColor rankTint(int rank, double whiteness);

class ShardMapModel : public QAbstractTableModel {
    Q_OBJECT

public:
    enum Roles {
        // double in [0, 1]: the share of the parameter's elements this rank
        // owns; 1.0 on every rank for a replicated parameter.
        OwnedFractionRole = Qt::UserRole + 1,
        MaterialisedRole, // bool: the rank holds the whole parameter right now
        ReplicatedRole,   // bool: every rank holds all of it (DisplayRole "all")
        LayerRole,        // QString: the parameter's layer
        // headerData, horizontal: QStringList, the lines under "rank N" for
        // a mesh (coordinates, sequence block, optimizer shard); else empty.
        ColumnNotesRole,
    };

    // One parameter, merged from all its ShardCells.
    struct ParamRow {
        QString param;
        QString layer;
        std::int64_t elements = 0;   // the largest range end seen
        bool replicated = false;     // every cell is replicated
        QVector<std::int64_t> owned; // by rank: elements it owns
        QVector<bool> materialised;  // by rank
        bool operator==(const ParamRow &o) const
        {
            return param == o.param && layer == o.layer && elements == o.elements &&
                   replicated == o.replicated && owned == o.owned && materialised == o.materialised;
        }
    };

    explicit ShardMapModel(QObject *parent = nullptr);

    // Same parameters and ranks: one dataChanged (none when nothing
    // changed); otherwise a model reset. A null state empties the model.
    void setState(ClusterStatePtr state);
    const std::vector<ParamRow> &params() const { return m_rows; }
    // The rows merged by layer (param = the layer's name): each rank's
    // elements of the whole layer; replicated when every parameter is.
    std::vector<ParamRow> layerRows() const;
    int ranks() const { return m_ranks; }

    int rowCount(const QModelIndex &parent = {}) const override;
    int columnCount(const QModelIndex &parent = {}) const override;
    QVariant data(const QModelIndex &index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    std::vector<ParamRow> m_rows;
    int m_ranks = 0;
    QVector<ShardColumn> m_columns; // by rank; empty without a mesh
};

class ShardMapView : public ProjectorWidget {
    Q_OBJECT

public:
    explicit ShardMapView(QWidget *parent = nullptr);

    ShardMapModel *model() const { return m_model; }
    void setState(ClusterStatePtr state) { m_model->setState(std::move(state)); }


    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

protected:
    void paintEvent(QPaintEvent *event) override;

private:
    struct Geometry;
    Geometry geometry() const;
    QFont viewFont() const;
    void paintCell(QPainter &p, const QRectF &cell, const ShardMapModel::ParamRow &row, int rank,
                   const Geometry &g) const;
    void paintColumnNotes(QPainter &p, qreal gridLeft, const Geometry &g) const;
    qreal notesList(QPainter *p, const QRectF &area, const Geometry &g) const;
    // Lays the legend out in rows across `area` and returns its height;
    // paints only when `p` is not null (geometry() measures with it).
    qreal legend(QPainter *p, const QRectF &area, const Geometry &g) const;

    ShardMapModel *m_model = nullptr;
};

} // namespace smol::widgets
