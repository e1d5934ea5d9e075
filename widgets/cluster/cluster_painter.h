// Paints a ClusterLayout of a ClusterState with any QPainter: the cluster
// view's paintEvent, and its nodeText() (a box painted where nobody sees it,
// keeping what it writes). Qt Gui only; where things go is the layout's
// business, what they look like is this file's.
//
// One picture, back to front:
// 1. the background and the header (title, legend, compact mode's alert
//    line; on a mesh, the links' colours by axis at the title's right);
// 2. the caption over the nodes not in the run;
// 3. the links (ClusterLayout::links): lines, arrow heads, rate labels;
// 4. the boxes, full or compact (one frame for both: border and fill say
//    the node's state), each with its text, badge and memory bar (on a
//    mesh, the node's coordinates under its name; in a compact box for it);
// 5. the selection's outline.
#pragma once

#include "widgets/cluster/cluster_layout.h"
#include "widgets/cluster_state.h"

#include <QCoreApplication>
#include <QRectF>
#include <QString>
#include <QStringList>

class QPainter;

namespace smol::widgets {

struct Palette;

class ClusterPainter {
    Q_DECLARE_TR_FUNCTIONS(ClusterPainter)

public:
    // `layout` must be ClusterLayout::compute() of `state` (the painter keeps references).
    ClusterPainter(const ClusterLayout &layout, const ClusterState &state);

    // Steps 1 to 5; `selected` is a node id or -1.
    void paint(QPainter &p, const QString &nextStrategy, int selected) const;
    // One node's box, full or compact as the layout is; `shown` (if set)
    // collects the text drawn, as drawn (elided where it is), in drawing order.
    void paintNode(QPainter &p, const NodeState &node, QStringList *shown = nullptr) const;

    // A view with no nodes: a hint in the middle.
    static void paintEmpty(QPainter &p, QSize size, bool projector, const QFont &font);
    // The header's first line: "ddp · step 6 / 400", the step the cluster
    // is in, counted from 0; "pipeline · not started" names the next run.
    static QString headerTitle(const ClusterState &state, const QString &nextStrategy);

private:
    void paintHeader(QPainter &p, const QString &nextStrategy) const;
    void paintLegend(QPainter &p, const QRectF &line, double headerPx, double lineHeight) const;
    double paintMeshLegend(QPainter &p, const QRectF &line, double headerPx) const;
    // On a mesh, the node's coordinates ("dp1 · pp0 · tp1"); "" otherwise.
    QString coordsOf(const NodeState &node) const;
    void paintLinks(QPainter &p) const;
    void paintSelection(QPainter &p, int selected) const;
    void paintYou(QPainter &p) const; // a student's own node: framed, tagged "you: rank N"
    void paintFullNode(QPainter &p, const NodeState &node, QStringList *shown) const;
    void paintCompactNode(QPainter &p, const NodeState &node, QStringList *shown) const;
    // What the two kinds of box share: the rounded frame whose border and
    // fill tell lost, failed and not in the run.
    void paintFrame(QPainter &p, const NodeState &node, const QRectF &r, double radius,
                    double borderWidth) const;
    void paintBadge(QPainter &p, const QRectF &b, const QFont &font, const NodeState &node,
                    const QString &text, QStringList *shown) const;
    void paintMemoryBar(QPainter &p, const QRectF &track, const net::MemoryByCategory &memory) const;

    const ClusterLayout &m_layout;
    const ClusterState &m_state;
    const Palette &m_pal;
    ClusterMetrics m_metrics;
    bool m_projector = false;
    double m_memoryScale = 1; // one scale for every bar, so equal bytes are equal lengths
};

} // namespace smol::widgets
