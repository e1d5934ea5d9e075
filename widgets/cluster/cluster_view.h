// The cluster as a picture: one rounded box per node, placed by the run's
// topology (ring: around a circle stretched to the widget, in rank order,
// clockwise from the top; star: rank 0 in the centre, the others around it;
// chain: left to right in rank order, wrapping onto further rows, read like
// text, when one row would shrink the boxes below readable), nodes that are
// not in the run (rank -1) in a row of smaller boxes along the bottom.
// A box shows the node's name, "rank N · role", host, a state badge (colour
// and word), and its memory as a bar stacked by category with the peak as a
// tick and "2.9 MiB live, peak 3.4 MiB" under it; every bar shares one scale
// (the largest peak) so nodes compare at a glance. Links are lines under the
// boxes: thin grey at 0 bytes/s (the topology's edges show before any traffic),
// arrows when they carry traffic, thicker on a log scale of bytes/s (1 kB/s
// to 1 GB/s) and labelled with the rate; both directions of a pair are two
// parallel arrows. Boxes get the largest size that keeps every box inside the
// widget and clear of its neighbours, with room for the links unless that
// would cost the boxes a fifth of their size; text that no longer fits is
// dropped in order host, role, memory figures (the tooltip has it all). A
// failed or lost node's box says why, under its badge.
//
// Compact mode, when the boxes above would be too small to show a name, a
// badge and a bar (a class's 32 or 64 nodes): a grid of small boxes in rank
// order, read like text, nodes not in the run after them in id order. A
// compact box shows the rank (or "#id" out of the run), the name when it
// fits, a badge unless the node is simply running or idle, a strip in the
// state's colour and a thin memory bar; the header counts the nodes in each
// state and names the first failed or lost one with its reason.
// A run on a device mesh (ClusterState::mesh) is drawn as its grid: pp
// stages as columns split into their tp ranks, dp replicas as rows split
// into their cp ranks; each box gives the node's coordinates under its name
// ("dp1 · pp0 · tp1"), and links take the colour of the axis joining their
// ranks, named in a legend at the right of the header's first line.
// The view draws the snapshot it is given, nothing else: no timers, no
// numbers of its own; it repaints when setState() hands it a new one.
// This widget is the thin part: events, tooltips, clicks and selection;
// ClusterLayout says where everything goes, ClusterPainter draws it.
#pragma once

#include "widgets/cluster/cluster_layout.h"
#include "widgets/cluster_state.h"

#include <QRectF>
#include <QSize>
#include <QStringList>
#include "widgets/snapshot_view.h"

#include <QWidget>

namespace smol::widgets {

class ClusterView : public SnapshotView {
    Q_OBJECT

public:
    explicit ClusterView(QWidget *parent = nullptr)
        : SnapshotView(parent)
    {
    }

    // Node id, or -1. Setting it emits selectedNodeChanged when it changes;
    // so does a new state without the selected node (-1).
    int selectedNode() const { return m_selected; }
    void setSelectedNode(int id);

    // Hit testing and geometry, in widget coordinates, for the current size.
    int nodeAt(QPointF pos) const; // node id under pos, or -1
    QRectF nodeRect(int id) const; // empty when the node is not shown
    // The text the node's box shows at the current size, as drawn (elided
    // where it is), in drawing order; empty when the node is not shown.
    QStringList nodeText(int id) const;
    bool isCompact() const;
    // The strategy of the next run (the window's settings): the header names
    // it until a run has begun ("pipeline · not started"), not the last one.
    void setNextRun(const QString &strategy);
    // The header's first line as drawn: "ddp · step 6 / 400" is the step the
    // cluster is in, counted from 0 as the inspector, the timeline, the
    // replay bar and breakpoints count (the newest completed step is 5).
    QString headerText() const;

    QSize sizeHint() const override { return {800, 500}; }
    QSize minimumSizeHint() const override { return {320, 240}; }

Q_SIGNALS:
    void selectedNodeChanged(int id);

protected:
    void paintEvent(QPaintEvent *event) override;
    void mousePressEvent(QMouseEvent *event) override;
    bool event(QEvent *event) override; // tooltips
    void projectorModeChanged() override;
    void snapshotChanged() override; // a new state without the selected node: -1

private:
    // Recomputed only when what it depends on changes (not on every
    // snapshot: figures and rates move no box).
    const ClusterLayout &layout() const;

    QString m_nextStrategy;
    int m_selected = -1;
    mutable ClusterLayout m_layout;
};

} // namespace smol::widgets
