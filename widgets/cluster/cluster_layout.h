// Where the cluster view puts everything, as plain geometry: the header,
// one box per node, the caption over the nodes not in the run, and the
// links between boxes (routes, widths, rate labels). Computed from a
// ClusterState, a widget size, the projector mode and the widget's font
// (text is measured to decide what fits); no QPainter, no QWidget, so it
// has a data-driven test (tests/tst_cluster_layout.cpp). ClusterPainter
// draws it; ClusterView caches it and hit-tests with it.
//
// Boxes, in the topology's order (ClusterView's header tells the picture):
// 1. The header takes the top: a title line and the legend line (2.2 lines).
// 2. Nodes not in the run (rank -1) go in a row, or rows, of smaller boxes
//    under a caption along the bottom; the rest is the in-run area.
// 3. In-run boxes are placed by the topology (ring, star, chain) at the
//    largest scale that keeps every box inside its area and a gap clear of
//    its neighbours; the gap grows towards room for an arrow and its label
//    unless that costs the boxes a fifth of their size. A chain may wrap
//    onto up to six rows; a few nodes on a big screen are pulled in.
// 4. When those boxes are too small to show a name and a badge, a compact
//    grid of small boxes in rank order replaces them (a class's 32 or 64).
// A run on a device mesh (ClusterState::mesh) is laid out as its grid
// instead: pp stages are columns, each split into its tp ranks side by side
// (tp neighbours adjacent, a wider gap between stages); dp replicas are
// rows, each split into its cp ranks one above the other (a wider gap
// between replicas). Links that would cross a box (a stage's tp rank to
// the next stage's, a replica's cp rank to the next replica's) arc over
// the row or left of the column, in the room kept there. Boxes too small
// for a name, its coordinates and a badge become compact ones in the same grid.
//
// Links depend on the traffic, not only on the boxes: links()
// (cluster_links.cpp) works them out per snapshot from a layout that stays
// put while the rates move.
#pragma once

#include "net/device_mesh.h"
#include "widgets/cluster/cluster_links.h"
#include "widgets/cluster_state.h"

#include <QFont>
#include <QHash>
#include <QPointF>
#include <QRectF>
#include <QSize>
#include <QString>
#include <QVector>

#include <optional>
#include <string>
#include <utility>

namespace smol::widgets {

// Pixel sizes per mode. Box text is `font` at the natural box size, grows
// with the box up to ClusterLayout::kMaxScale and never shrinks below `minFont`.
struct ClusterMetrics {
    double font;
    double minFont;
    double headerFont;
    double margin;
    double border;
    double selection;
    double linkMin; // stroke at 1 kB/s and below
    double linkMax; // stroke at 1 GB/s and above
    double idleLink;

    static ClusterMetrics forMode(bool projector);
    // The header's text: larger on screens larger than 1024x768, up to half as big again.
    double headerPx(QSize widget) const;
};

// The fonts a full (not compact) box's text is drawn in, at the layout's
// box font size; readable() measures with them.
struct NodeBoxFonts {
    QFont title;    // the name
    QFont small;    // reason, role, host, memory figures
    QFont badge;    // the state's word
    double spacing; // between rows
};

// The mesh axis two ranks' link runs along: the one coordinate they differ
// in; dp when they differ in dp and cp alone (the gradients' group); none
// otherwise (or without a mesh).
std::optional<net::MeshAxis> linkAxis(const net::DeviceMesh &mesh, int a, int b);

// The node the header names in compact mode: the first failed one (by
// rank, then id), else the first lost one; nullptr when none says why.
const NodeState *firstAlert(const ClusterState &state);

struct ClusterLayout {
    static constexpr double kMaxScale = 1.5;
    static constexpr double kOutOfRunScale = 0.8; // nodes not in the run are drawn smaller

    // What the layout was computed from: another snapshot with the same
    // inputs() reuses it (figures and rates move no box).
    QSize size;
    bool projector = false;
    QFont font;
    Topology topology = Topology::Ring;
    QVector<std::pair<int, int>> idRanks; // (id, rank) per node, in snapshot order
    bool alert = false;   // a node says why it failed or was lost (compact mode's third header line)
    std::string meshSpec; // the snapshot's mesh as given
    net::DeviceMesh mesh; // trivial: no mesh (or one that does not match the nodes in the run)

    QRectF header;            // title line, then the legend line (and compact mode's alert line)
    QRectF outOfRunCaption;   // empty when every node is in the run
    double scale = 0;         // box size over the natural size; 0: not laid out
    double fontPx = 12;       // box text
    QHash<int, QRectF> rects; // by node id
    QHash<int, int> idOfRank;
    QHash<int, int> rowOfRank; // chain (and compact grid) rows, for routing links between rows
    bool compact = false;
    // A mesh's layout: the room kept above each row and left of each column
    // for the links that arc around a box (0: none).
    double arcRoom = 0;

    // Lays out `state` (nullptr: no nodes) in a widget of `size` whose font is `font`.
    static ClusterLayout compute(const ClusterState *state, QSize size, bool projector, const QFont &font);
    // Whether compute() with these would give this layout again.
    bool sameInputs(const ClusterState *state, QSize size, bool projector, const QFont &font) const;

    int nodeAt(QPointF pos) const;                            // node id under pos, or -1
    QRectF nodeRect(int id) const { return rects.value(id); } // empty when the node is not shown
    ClusterMetrics metrics() const { return ClusterMetrics::forMode(projector); }
    NodeBoxFonts boxFonts() const;
    // Every box shows its name and badge.
    bool readable() const;

    // The topology's edges (idle until bytes move) and the snapshot's
    // traffic, as lines between these boxes, with rate labels placed where
    // they cover no box and no other label.
    ClusterLinks links(const ClusterState &state) const;
};

} // namespace smol::widgets
