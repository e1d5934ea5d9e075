// The links between the cluster view's boxes, as geometry: which ranks a
// line joins, its polyline, width and rate, and where its rate label goes.
// ClusterLayout::links() computes them (cluster_links.cpp) for a snapshot's
// traffic over a layout's boxes:
// 1. One pair per two ranks: the topology's edges (ring, star, chain), idle
//    until bytes move, and every pair the snapshot's links name, with the
//    bytes per second summed per direction.
// 2. An idle pair is a thin line without a head; a busy direction is an
//    arrow whose width grows on a log scale of its rate (1 kB/s to 1 GB/s);
//    both directions of a pair are two parallel arrows.
// 3. A line leaves its box and enters the other at a small clearance; a
//    chain wrapping onto the next row goes down, back along the gap, down.
//    In the compact grid, neighbours that are not side by side get stubs.
//    On a device mesh, the edges are each axis's groups (rings; pp a
//    chain), and a line that would cross a box arcs around it.
// 4. Each arrow's rate is labelled on the right-hand side of travel where
//    the label covers no box and no other label, else not at all.
#pragma once

#include "net/device_mesh.h"

#include <QPointF>
#include <QRectF>
#include <QString>
#include <QVector>

#include <optional>

namespace smol::widgets {

// One line on the picture. A link runs from rank src's box to rank dst's
// (Whole). In the compact grid, neighbours in rank order that are not side
// by side (a row's end and the next row's start, the ring's last and first)
// get a stub out of one box (Leaving) and one into the other (Arriving), as
// a line of text wraps: forward (rank r to r + 1) out to the right, back
// out to the left.
struct ClusterLink {
    enum class Part { Whole, Leaving, Arriving };
    int src = -1; // ranks; an idle link runs from the lower rank to the higher
    int dst = -1;
    Part part = Part::Whole;
    QVector<QPointF> points; // a polyline, in the direction of travel
    double width = 1;
    double bytesPerSecond = 0; // 0: idle, a thin grey line without a head
    // On a device mesh: the axis whose group the two ranks share (its colour).
    std::optional<net::MeshAxis> axis;
};

// A rate beside its line, on the right-hand side of travel.
struct ClusterLinkLabel {
    QString text; // "12.3 MB/s"
    QRectF rect;
};

struct ClusterLinks {
    QVector<ClusterLink> lines;
    QVector<ClusterLinkLabel> labels;
    double labelFontPx = 12;
};

} // namespace smol::widgets
