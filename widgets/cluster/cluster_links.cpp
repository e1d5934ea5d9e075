#include "cluster_layout.h"

#include "widgets/paint/palette.h"
#include "widgets/paint/pixel_font.h"

#include <QFontMetricsF>
#include <QLineF>
#include <QMap>

#include <algorithm>
#include <cmath>
#include <optional>

namespace smol::widgets {

namespace {

double linkWidth(const ClusterMetrics &m, double bytesPerSecond)
{
    const double t = std::clamp(std::log10(std::max(bytesPerSecond, 1.0) / 1e3) / 6, 0.0, 1.0);
    return m.linkMin + (m.linkMax - m.linkMin) * t;
}

// The part of segment p0 -> p1 outside both rectangles: from where it leaves
// `from` to where it enters `to` (Liang-Barsky on the two slabs).
std::optional<QLineF> between(QPointF p0, QPointF p1, const QRectF &from, const QRectF &to)
{
    const QPointF d = p1 - p0;
    const auto leave = [&](double p, double v, double lo, double hi) {
        return v > 0 ? (hi - p) / v : v < 0 ? (lo - p) / v : 1e9;
    };
    const auto enter = [&](double p, double v, double lo, double hi) {
        return v > 0 ? (lo - p) / v : v < 0 ? (hi - p) / v : -1e9;
    };
    const double t0 = std::max(0.0, std::min(leave(p0.x(), d.x(), from.left(), from.right()),
                                             leave(p0.y(), d.y(), from.top(), from.bottom())));
    const double t1 = std::min(1.0, std::max(enter(p0.x(), d.x(), to.left(), to.right()),
                                             enter(p0.y(), d.y(), to.top(), to.bottom())));
    if (t1 - t0 < 1e-3)
        return std::nullopt;
    return QLineF(p0 + t0 * d, p0 + t1 * d);
}

// One entry per pair of ranks, lower rank first; rates per direction.
struct RankPair {
    std::optional<double> up;   // low -> high
    std::optional<double> down; // high -> low
};
using RankPairs = QMap<std::pair<int, int>, RankPair>;

// The topology's own edges (they show even before any byte has moved),
// then the snapshot's traffic summed per direction.
RankPairs rankPairs(const ClusterLayout &l, const ClusterState &state)
{
    RankPairs pairs;
    const int n = int(l.idOfRank.size());
    const auto implied = [&](int a, int b) {
        if (a != b && l.idOfRank.contains(a) && l.idOfRank.contains(b))
            pairs[{std::min(a, b), std::max(a, b)}];
    };
    for (int r = 0; r < n && !l.mesh.trivial(); ++r) // each axis's groups: rings, pp a chain
        for (net::MeshAxis axis : net::kMeshAxes) {
            const std::vector<int> g = l.mesh.group(r, axis);
            const int size = int(g.size());
            for (int i = 0; i + 1 < size; ++i)
                implied(g[std::size_t(i)], g[std::size_t(i) + 1]);
            if (size > 2 && axis != net::MeshAxis::Pp)
                implied(g.back(), g.front());
        }
    for (int r = 0; r < n && l.mesh.trivial(); ++r) {
        if (l.topology == Topology::Ring && n > 1)
            implied(r, (r + 1) % n);
        else if (l.topology == Topology::Chain && r + 1 < n)
            implied(r, r + 1);
        else if (l.topology == Topology::Star && r > 0)
            implied(0, r);
    }
    for (const LinkState &link : state.links) {
        if (link.src == link.dst || !l.idOfRank.contains(link.src) || !l.idOfRank.contains(link.dst))
            continue;
        RankPair &pair = pairs[{std::min(link.src, link.dst), std::max(link.src, link.dst)}];
        std::optional<double> &rate = link.src < link.dst ? pair.up : pair.down;
        rate = rate.value_or(0) + link.bytesPerSecond;
    }
    return pairs;
}

// Turns rank pairs into lines between a layout's boxes, and their rates
// into labels.
class LinkRouter {
public:
    explicit LinkRouter(const ClusterLayout &layout);
    ClusterLinks route(const ClusterState &state);

private:
    struct PendingLabel {
        QString text;
        QVector<QPointF> route;
        double side; // from the route's centre line to the label's near edge
    };
    void addPair(int low, int high, const RankPair &rates);
    QVector<QPointF> path(int low, int high, double offset) const;
    QVector<QPointF> arc(const QRectF &a, const QRectF &b, double offset) const;
    bool crossesABox(const QRectF &a, const QRectF &b) const;
    bool wraps(int low, int high) const;
    void addStubs(int src, int dst, bool forward, double offset, double width, double rate);
    void addLine(int src, int dst, ClusterLink::Part part, QVector<QPointF> points, double width,
                 double rate);
    void placeLabels();

    const ClusterLayout &m_l;
    ClusterMetrics m_metrics; // line widths scaled down for the compact grid
    double m_f = 12;          // the box font
    double m_clearance = 3;   // between a box and a line's end
    int m_n = 0;              // ranks in the run
    ClusterLinks m_out;
    QVector<PendingLabel> m_labels;
};

LinkRouter::LinkRouter(const ClusterLayout &layout)
    : m_l(layout)
    , m_metrics(layout.metrics())
    , m_f(layout.fontPx)
    , m_clearance(std::max(3.0, 0.3 * layout.fontPx))
    , m_n(int(layout.idOfRank.size()))
{
    if (m_l.compact) { // lines in proportion to the small boxes and their narrow gaps
        const double k = std::min(1.0, 0.7 * m_f / m_metrics.font);
        m_metrics.linkMin *= k;
        m_metrics.linkMax *= k;
        m_metrics.idleLink = std::max(1.0, m_metrics.idleLink * k);
    }
}

ClusterLinks LinkRouter::route(const ClusterState &state)
{
    const RankPairs pairs = rankPairs(m_l, state);
    for (auto it = pairs.cbegin(); it != pairs.cend(); ++it)
        addPair(it.key().first, it.key().second, it.value());
    placeLabels();
    return m_out;
}

void LinkRouter::addPair(int low, int high, const RankPair &rates)
{
    const ClusterMetrics &m = m_metrics;
    const double up = rates.up.value_or(0), down = rates.down.value_or(0);
    const bool wrap = wraps(low, high);
    const bool upIsForward = high == low + 1; // else the ring's closing pair: down (last -> first) is
    if (up <= 0 && down <= 0) {
        if (wrap)
            addStubs(low, high, upIsForward, 0, m.idleLink, 0);
        else
            addLine(low, high, ClusterLink::Part::Whole, path(low, high, 0), m.idleLink, 0);
        return;
    }
    const bool both = up > 0 && down > 0;
    const double offset = both ? std::max(linkWidth(m, up), linkWidth(m, down)) / 2 + 0.25 * m_f : 0;
    if (wrap) { // too short for a rate label: the tooltip and the line's width tell it
        if (up > 0)
            addStubs(low, high, upIsForward, -offset, linkWidth(m, up), up);
        if (down > 0)
            addStubs(high, low, !upIsForward, offset, linkWidth(m, down), down);
        return;
    }
    if (up > 0) {
        const QVector<QPointF> r = path(low, high, offset);
        addLine(low, high, ClusterLink::Part::Whole, r, linkWidth(m, up), up);
        m_labels << PendingLabel{formatRate(up), r, linkWidth(m, up) / 2 + 0.25 * m_f};
    }
    if (down > 0) {
        QVector<QPointF> r = path(low, high, -offset);
        std::reverse(r.begin(), r.end());
        addLine(high, low, ClusterLink::Part::Whole, r, linkWidth(m, down), down);
        m_labels << PendingLabel{formatRate(down), r, linkWidth(m, down) / 2 + 0.25 * m_f};
    }
}

void LinkRouter::addLine(int src, int dst, ClusterLink::Part part, QVector<QPointF> points, double width,
                         double rate)
{
    if (points.size() < 2)
        return;
    m_out.lines << ClusterLink{src, dst, part, std::move(points), width, rate, linkAxis(m_l.mesh, src, dst)};
}

// The canonical route low -> high, shifted sideways by `offset`.
QVector<QPointF> LinkRouter::path(int low, int high, double offset) const
{
    const double c = m_clearance;
    const QRectF a = m_l.rects.value(m_l.idOfRank.value(low));
    const QRectF b = m_l.rects.value(m_l.idOfRank.value(high));
    const int rowA = m_l.rowOfRank.value(low, 0), rowB = m_l.rowOfRank.value(high, 0);
    if (rowB == rowA + 1 && b.top() > a.bottom()) {
        // A chain wrapping onto the next row: down, back along the gap,
        // down. Shifted to the right-hand side of travel, as straight lines are.
        const double y = (a.bottom() + b.top()) / 2 - offset;
        const double xa = a.center().x() - offset, xb = b.center().x() - offset;
        return {QPointF(xa, a.bottom() + c), QPointF(xa, y), QPointF(xb, y), QPointF(xb, b.top() - c)};
    }
    if (!m_l.mesh.trivial() && crossesABox(a, b))
        return arc(a, b, offset);
    const QLineF centres(a.center(), b.center());
    const QPointF normal = QPointF(-centres.dy(), centres.dx()) / std::max(centres.length(), 1e-6);
    const auto line = between(a.center() + offset * normal, b.center() + offset * normal,
                              a.adjusted(-c, -c, c, c), b.adjusted(-c, -c, c, c));
    if (!line)
        return {};
    return {line->p1(), line->p2()};
}

// Whether the straight line between two boxes' centres passes through a third box.
bool LinkRouter::crossesABox(const QRectF &a, const QRectF &b) const
{
    const QLineF centres(a.center(), b.center());
    for (const QRectF &r : m_l.rects) {
        if (r == a || r == b)
            continue;
        const QRectF e = r.adjusted(1, 1, -1, -1);
        const QLineF edges[] = {{e.topLeft(), e.topRight()},
                                {e.topRight(), e.bottomRight()},
                                {e.bottomRight(), e.bottomLeft()},
                                {e.bottomLeft(), e.topLeft()}};
        for (const QLineF &edge : edges)
            if (centres.intersects(edge, nullptr) == QLineF::BoundedIntersection)
                return true;
    }
    return false;
}

// A mesh's line that would cross a box: an arc from the top of one box to
// the top of the other, over the row (boxes side by side), or from the
// left of one to the left of the other, left of the column; `offset` makes
// a pair's two directions two nested arcs. Its height is the room the
// layout kept (arcRoom), less a clearance, so the arc stays out of the row above.
QVector<QPointF> LinkRouter::arc(const QRectF &a, const QRectF &b, double offset) const
{
    const double c = m_clearance;
    const bool over = std::abs(a.center().y() - b.center().y()) < std::abs(a.center().x() - b.center().x());
    const double rise = std::max(2 * c, m_l.arcRoom - 2 * c) * (offset > 0 ? 0.7 : 1.0);
    QPointF p0, p2, up;
    if (over) {
        p0 = QPointF(a.center().x(), a.top() - c);
        p2 = QPointF(b.center().x(), b.top() - c);
        up = QPointF(0, -1);
    } else {
        p0 = QPointF(a.left() - c, a.center().y());
        p2 = QPointF(b.left() - c, b.center().y());
        up = QPointF(-1, 0);
    }
    // A quadratic Bezier whose middle reaches `rise` beyond the ends: its
    // control point is twice as far.
    const QPointF control = (p0 + p2) / 2 + 2 * (rise - c) * up;
    constexpr int kSegments = 16;
    QVector<QPointF> points;
    for (int i = 0; i <= kSegments; ++i) {
        const double t = double(i) / kSegments;
        points << (1 - t) * (1 - t) * p0 + 2 * (1 - t) * t * control + t * t * p2;
    }
    return points;
}

// Compact grid, ring or chain: neighbours in rank order that are not side
// by side get stubs (ClusterLink's Leaving and Arriving).
bool LinkRouter::wraps(int low, int high) const
{
    if (!m_l.compact || m_l.topology == Topology::Star || !m_l.mesh.trivial())
        return false;
    const bool neighbours =
        high == low + 1 || (m_l.topology == Topology::Ring && low == 0 && high == m_n - 1);
    return neighbours && !(high == low + 1 && m_l.rowOfRank.value(low) == m_l.rowOfRank.value(high));
}

void LinkRouter::addStubs(int src, int dst, bool forward, double offset, double width, double rate)
{
    const QRectF a = m_l.rects.value(m_l.idOfRank.value(src)), b = m_l.rects.value(m_l.idOfRank.value(dst));
    const double length = std::max(8.0, 1.1 * m_f), c = m_clearance;
    const double ya = a.center().y() + offset, yb = b.center().y() + offset;
    using Part = ClusterLink::Part;
    if (forward) {
        addLine(src, dst, Part::Leaving, {QPointF(a.right() + c, ya), QPointF(a.right() + length, ya)}, width,
                rate);
        addLine(src, dst, Part::Arriving, {QPointF(b.left() - length, yb), QPointF(b.left() - c, yb)}, width,
                rate);
    } else {
        addLine(src, dst, Part::Leaving, {QPointF(a.left() - c, ya), QPointF(a.left() - length, ya)}, width,
                rate);
        addLine(src, dst, Part::Arriving, {QPointF(b.right() + length, yb), QPointF(b.right() + c, yb)},
                width, rate);
    }
}

// Rates beside their lines, on the right-hand side of travel (so the two
// directions of a pair label opposite sides, and a clockwise ring labels
// its inside); a label that would cover a box or another label tries a
// few places along the line, then on it, then gives up (the width still
// tells the rate).
void LinkRouter::placeLabels()
{
    const double f = m_f;
    m_out.labelFontPx = std::max(m_metrics.minFont * 0.9, 0.9 * f);
    const QFontMetricsF fm(pixelFont(m_l.font, m_out.labelFontPx));
    const QRect bounds(QPoint(0, 0), m_l.size);
    QVector<QRectF> taken;
    for (const QRectF &r : m_l.rects)
        taken << r.adjusted(-2, -2, 2, 2);
    for (const PendingLabel &label : m_labels) {
        if (label.route.size() < 2)
            continue;
        int longest = 0;
        for (int i = 1; i + 1 < label.route.size(); ++i)
            if (QLineF(label.route[i], label.route[i + 1]).length() >
                QLineF(label.route[longest], label.route[longest + 1]).length())
                longest = i;
        const QLineF segment(label.route[longest], label.route[longest + 1]);
        const QPointF normal = QPointF(-segment.dy(), segment.dx()) / std::max(segment.length(), 1e-6);
        const QSizeF size(fm.horizontalAdvance(label.text) + 0.6 * f, fm.height() + 0.1 * f);
        const double extent =
            std::abs(normal.x()) * size.width() / 2 + std::abs(normal.y()) * size.height() / 2;
        for (const auto &[t, beside] : {std::pair(0.5, true), {0.35, true}, {0.65, true}, {0.5, false}}) {
            const QPointF centre = segment.pointAt(t) + (beside ? normal * (label.side + extent) : QPointF());
            const QRectF r(centre - QPointF(size.width() / 2, size.height() / 2), size);
            if (!bounds.contains(r.toAlignedRect()) ||
                std::any_of(taken.cbegin(), taken.cend(), [&](const QRectF &t) { return t.intersects(r); }))
                continue;
            taken << r;
            m_out.labels << ClusterLinkLabel{label.text, r};
            break;
        }
    }
}

} // namespace

ClusterLinks ClusterLayout::links(const ClusterState &state) const
{
    return LinkRouter(*this).route(state);
}

} // namespace smol::widgets
