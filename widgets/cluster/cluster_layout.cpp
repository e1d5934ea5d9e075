#include "cluster_layout.h"

#include "widgets/paint/palette.h"
#include "widgets/paint/pixel_font.h"

#include <QFontMetricsF>
#include <QtMath>

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <tuple>

namespace smol::widgets {

ClusterMetrics ClusterMetrics::forMode(bool projector)
{
    if (projector)
        return {20, 14, 20, 16, 2.5, 7, 3, 14, 2};
    return {13, 10, 13, 12, 1.2, 4, 1.8, 10, 1.2};
}

double ClusterMetrics::headerPx(QSize widget) const
{
    return headerFont * std::clamp(std::min(widget.width() / 1024.0, widget.height() / 768.0), 1.0, 1.5);
}

namespace {

// Room for five lines of text and the memory bar at `font` pixels.
QSizeF naturalBox(const ClusterMetrics &m)
{
    return {16 * m.font, 8.2 * m.font};
}

bool fitsApart(const QVector<QRectF> &rects, const QRectF &bounds, QSizeF gap)
{
    const double dx = gap.width() / 2, dy = gap.height() / 2;
    for (int i = 0; i < rects.size(); ++i) {
        if (!bounds.contains(rects[i]))
            return false;
        const QRectF a = rects[i].adjusted(-dx, -dy, dx, dy);
        for (int j = i + 1; j < rects.size(); ++j)
            if (a.intersects(rects[j].adjusted(-dx, -dy, dx, dy)))
                return false;
    }
    return true;
}

// n centres around the largest rounded ring (a superellipse, |x/rx|^4 +
// |y/ry|^4 = 1: a circle stretched to the area with fuller corners) that keeps
// boxes inside area, clockwise (y grows downwards) from the top: rank 0 at the
// top for odd n; for even n the top pair sits level. Spacing is even in box
// units (Chebyshev distance over box+gap), not in pixels, so wide boxes get
// the same clearance at the top, the sides and the corners.
QVector<QPointF> ring(const QRectF &area, QSizeF box, QSizeF gap, int n)
{
    const double rx = (area.width() - box.width()) / 2 - 0.5; // 0.5: stay clear of float ties with the area
    const double ry = (area.height() - box.height()) / 2 - 0.5;
    constexpr int kSamples = 360;
    constexpr double kExponent = 4;
    QVector<QPointF> curve;
    QVector<double> along{0};
    for (int k = 0; k <= kSamples; ++k) {
        const double a = -M_PI / 2 + 2 * M_PI * k / kSamples;
        const double c = std::cos(a), s = std::sin(a);
        curve << area.center() + QPointF(rx * std::copysign(std::pow(std::abs(c), 2 / kExponent), c),
                                         ry * std::copysign(std::pow(std::abs(s), 2 / kExponent), s));
        if (k > 0) {
            const QPointF d = curve[k] - curve[k - 1];
            along << along.last() + std::max(std::abs(d.x()) / (box.width() + gap.width()),
                                             std::abs(d.y()) / (box.height() + gap.height()));
        }
    }
    const double total = along.last();
    const double step = total / n;
    QVector<QPointF> centres;
    for (int i = 0; i < n; ++i) {
        double t = (n % 2 == 0 ? -step / 2 : 0) + i * step;
        if (t < 0)
            t += total;
        const int k = int(std::upper_bound(along.cbegin(), along.cend(), t) - along.cbegin()) - 1;
        const int k0 = std::clamp(k, 0, kSamples - 1);
        const double span = along[k0 + 1] - along[k0];
        const double f = span > 0 ? (t - along[k0]) / span : 0;
        centres << curve[k0] + f * (curve[k0 + 1] - curve[k0]);
    }
    return centres;
}

// Centres of in-run boxes by rank; empty when they cannot fit.
QVector<QPointF> arrange(Topology topology, int n, const QRectF &area, QSizeF box, QSizeF gap, int chainRows,
                         double chainRowGap)
{
    if (n == 0)
        return {};
    if (n == 1)
        return {area.center()};
    switch (topology) {
    case Topology::Ring:
        return ring(area, box, gap, n);
    case Topology::Star:
        if (n == 2) // side by side uses a wide area better than one above the other
            return {area.center(), QPointF(area.left() + box.width() / 2 + 0.5, area.center().y())};
        return QVector<QPointF>{area.center()} + ring(area, box, gap, n - 1);
    case Topology::Chain: {
        const int cols = (n + chainRows - 1) / chainRows;
        double hgap = cols > 1 ? (area.width() - cols * box.width()) / (cols - 1) : 0;
        hgap = std::min(hgap, std::max(gap.width(), box.width())); // spread out, but keep neighbours close
        double vgap = chainRows > 1 ? (area.height() - chainRows * box.height()) / (chainRows - 1) : 0;
        vgap = std::min(vgap, box.height());
        if (chainRows > 1 && vgap < chainRowGap) // room for the route to the next row and its label
            return {};
        const double rowWidth = cols * box.width() + (cols - 1) * hgap;
        const double blockHeight = chainRows * box.height() + (chainRows - 1) * vgap;
        const QPointF origin(area.center().x() - rowWidth / 2, area.center().y() - blockHeight / 2);
        QVector<QPointF> centres;
        for (int i = 0; i < n; ++i)
            centres << origin + QPointF((i % cols) * (box.width() + hgap) + box.width() / 2,
                                        (i / cols) * (box.height() + vgap) + box.height() / 2);
        return centres;
    }
    }
    return {};
}

// Lays out the boxes: the steps in the header of cluster_layout.h.
class BoxPlanner {
public:
    BoxPlanner(const ClusterState *state, QSize size, bool projector, const QFont &font);
    ClusterLayout plan() const;

private:
    std::optional<ClusterLayout> attempt(double scale, int chainRows, double roominess, bool strict,
                                         double compact = 1) const;
    void placeOutOfRun(ClusterLayout &out, QSizeF box, double tight, QRectF &area,
                       QVector<QRectF> &placed) const;
    ClusterLayout largest(int chainRows, double roominess) const;
    ClusterLayout roomiest(int chainRows) const;
    ClusterLayout chainRows(const ClusterLayout &oneRow) const;
    ClusterLayout pulledIn(ClusterLayout layout) const;
    ClusterLayout compactGrid() const;
    ClusterLayout meshGrid() const;

    ClusterLayout m_key; // the inputs, header and rank map: what every attempt starts from
    ClusterMetrics m_metrics;
    double m_headerLine = 0;
    QRectF m_content;                               // below the header
    QVector<const NodeState *> m_inRun, m_outOfRun; // by rank; by id
    int m_n = 0;                                    // nodes in the run
};

BoxPlanner::BoxPlanner(const ClusterState *state, QSize size, bool projector, const QFont &font)
    : m_metrics(ClusterMetrics::forMode(projector))
{
    m_key.size = size;
    m_key.projector = projector;
    m_key.meshSpec = state ? state->mesh.toStdString() : std::string();
    m_key.font = font;
    if (state) {
        m_key.topology = state->topology;
        m_key.alert = firstAlert(*state) != nullptr;
        for (const NodeState &n : state->nodes) {
            m_key.idRanks << std::pair(n.id, n.rank);
            (n.rank >= 0 ? m_inRun : m_outOfRun) << &n;
        }
    }
    const ClusterMetrics &m = m_metrics;
    m_headerLine = QFontMetricsF(pixelFont(font, m.headerPx(size), true)).height();
    m_key.header = QRectF(m.margin, 0.6 * m.margin, size.width() - 2 * m.margin, 2.2 * m_headerLine);
    m_content = QRectF(m.margin, m_key.header.bottom() + 0.6 * m.margin, size.width() - 2 * m.margin,
                       size.height() - m_key.header.bottom() - 1.6 * m.margin);
    std::sort(m_inRun.begin(), m_inRun.end(), [](auto *a, auto *b) { return a->rank < b->rank; });
    std::sort(m_outOfRun.begin(), m_outOfRun.end(), [](auto *a, auto *b) { return a->id < b->id; });
    for (const NodeState *n : m_inRun)
        m_key.idOfRank.insert(n->rank, n->id);
    m_n = int(m_inRun.size());
    // A mesh is drawn only when it is the run's: its ranks are the ones in the run.
    if (state && !state->mesh.isEmpty()) {
        try {
            const net::DeviceMesh mesh = net::DeviceMesh::parse(state->mesh.toStdString());
            bool ranks = mesh.nodes() == m_n;
            for (int r = 0; ranks && r < m_n; ++r)
                ranks = m_key.idOfRank.contains(r);
            if (ranks)
                m_key.mesh = mesh;
        } catch (const std::invalid_argument &) {
        }
    }
}

ClusterLayout BoxPlanner::plan() const
{
    if (!m_key.mesh.trivial())
        return meshGrid();
    ClusterLayout out = roomiest(1);
    if (m_key.topology == Topology::Chain && m_n > 2)
        out = chainRows(out);
    else if (m_n > 1)
        out = pulledIn(out);
    if (!out.readable())
        out = compactGrid();
    return out;
}

// Everything laid out with boxes at `scale` of the natural size and gaps
// `roominess` of the way from tight (the font size) to roomy (room for
// an arrow and its rate label); empty when a box leaves its area or
// comes closer to another than the gap. Not strict: lay out anyway.
// `compact` < 1 shrinks the in-run area about its centre.
std::optional<ClusterLayout> BoxPlanner::attempt(double scale, int chainRows, double roominess, bool strict,
                                                 double compact) const
{
    const ClusterMetrics &m = m_metrics;
    ClusterLayout out = m_key;
    out.scale = scale;
    out.fontPx = std::clamp(m.font * scale, m.minFont, m.font * ClusterLayout::kMaxScale);
    const double tight = std::max(6.0, out.fontPx);
    const QSizeF gap(tight + roominess * (7 * out.fontPx - tight),
                     tight + roominess * (4.5 * out.fontPx - tight));
    const QSizeF box = naturalBox(m) * scale;
    QRectF area = m_content;
    QVector<QRectF> others;
    if (!m_outOfRun.isEmpty())
        placeOutOfRun(out, box, tight, area, others);
    if (compact < 1) {
        const QPointF centre = area.center();
        area.setSize(area.size() * compact);
        area.moveCenter(centre);
    }
    const QVector<QPointF> centres = arrange(m_key.topology, m_n, area, box, gap, chainRows,
                                             strict ? std::max(2.4 * out.fontPx, gap.height()) : -1e9);
    if (centres.size() != m_n && strict)
        return std::nullopt;
    const int cols = (m_n + chainRows - 1) / std::max(1, chainRows);
    QVector<QRectF> placed;
    for (int i = 0; i < m_n && i < centres.size(); ++i) {
        const QRectF r(centres[i] - QPointF(box.width() / 2, box.height() / 2), box);
        out.rects.insert(m_inRun[i]->id, r);
        placed << r;
        if (m_key.topology == Topology::Chain)
            out.rowOfRank.insert(m_inRun[i]->rank, i / cols);
    }
    if (strict && (!fitsApart(placed, area, gap) || !fitsApart(others, m_content, QSizeF(tight, tight)) ||
                   (!out.outOfRunCaption.isEmpty() && out.outOfRunCaption.top() < m_content.top())))
        return std::nullopt; // (the caption above the content would be drawn over the legend)
    return out;
}

// A row (or rows) of smaller boxes under a caption along the bottom of the
// content; `area` (for the nodes in the run) ends above them.
void BoxPlanner::placeOutOfRun(ClusterLayout &out, QSizeF box, double tight, QRectF &area,
                               QVector<QRectF> &placed) const
{
    const QSizeF small = box * ClusterLayout::kOutOfRunScale;
    const int cols = std::max(1, int((m_content.width() + tight) / (small.width() + tight)));
    const int rows = (int(m_outOfRun.size()) + cols - 1) / cols;
    const double caption = 1.4 * out.fontPx;
    const double stripHeight = caption + rows * small.height() + (rows - 1) * tight;
    out.outOfRunCaption =
        QRectF(m_content.left(), m_content.bottom() - stripHeight, m_content.width(), caption);
    for (int i = 0; i < m_outOfRun.size(); ++i) {
        const QPointF at(m_content.left() + (i % cols) * (small.width() + tight),
                         out.outOfRunCaption.bottom() + (i / cols) * (small.height() + tight));
        out.rects.insert(m_outOfRun[i]->id, QRectF(at, small));
        placed << QRectF(at, small);
    }
    area.setBottom(out.outOfRunCaption.top() - tight);
}

// The largest scale that fits, on a geometric grid (layouts are not
// quite monotonic in scale, so scan rather than bisect).
ClusterLayout BoxPlanner::largest(int chainRows, double roominess) const
{
    for (double s = ClusterLayout::kMaxScale; s > 0.08; s *= 0.97)
        if (auto l = attempt(s, chainRows, roominess, true))
            return *l;
    return *attempt(0.08, chainRows, 0, false); // an absurdly small widget: overlap
}

// Room around the boxes for the links, unless that costs the boxes more
// than a fifth of their size (below their natural size).
ClusterLayout BoxPlanner::roomiest(int chainRows) const
{
    const ClusterLayout tight = largest(chainRows, 0);
    for (double roominess : {1.0, 0.7, 0.45, 0.2}) {
        ClusterLayout l = largest(chainRows, roominess);
        if (l.scale >= std::min(1.0, 0.8 * tight.scale))
            return l;
    }
    return tight;
}

// One row while its boxes stay near their natural size (the text readable
// from the back of a room); otherwise as few rows, read left to right like
// text, as give boxes near the largest size.
ClusterLayout BoxPlanner::chainRows(const ClusterLayout &oneRow) const
{
    QVector<ClusterLayout> byRows{oneRow};
    double best = oneRow.scale;
    for (int rows = 2; rows <= std::min(6, m_n); ++rows) {
        byRows << roomiest(rows);
        best = std::max(best, byRows.last().scale);
    }
    for (const ClusterLayout &l : byRows)
        if (l.scale >= std::min(0.75, 0.95 * best))
            return l;
    return oneRow;
}

// A few nodes on a big screen: pull the ring in while every link keeps its
// roomy gap, rather than strand boxes at the edges.
ClusterLayout BoxPlanner::pulledIn(ClusterLayout layout) const
{
    for (double compact = 0.97; compact > 0.2; compact *= 0.97) {
        const auto l = attempt(layout.scale, 1, 1.0, true, compact);
        if (!l)
            break;
        layout = *l;
    }
    return layout;
}

// Too many boxes for the picture above: a grid of compact ones, in-run ids
// by rank, then the others by id, with a third header line for the first
// failure when there is one.
ClusterLayout BoxPlanner::compactGrid() const
{
    // Sizes in units of the box font: a box of kW x kH, gaps kGapX, kGapY
    // (room for a short arrow), the caption over the nodes not in the run.
    // The outer gaps take the arrows that wrap from one row to the next.
    constexpr double kW = 5.5, kMaxW = 12, kH = 2.5, kGapX = 1.3, kGapY = 0.9, kCaption = 1.4;
    const ClusterMetrics &m = m_metrics;
    ClusterLayout out = m_key;
    if (out.alert)
        out.header.setHeight(3.35 * m_headerLine);
    const QRectF content(m.margin, out.header.bottom() + 0.6 * m.margin, m_key.size.width() - 2 * m.margin,
                         m_key.size.height() - out.header.bottom() - 1.6 * m.margin);
    const int nIn = m_n, nOut = int(m_outOfRun.size());
    double f = 0;
    int cols = 1;
    for (int c = 1; c <= std::max({1, nIn, nOut}); ++c) {
        const int rows = (nIn + c - 1) / c + (nOut + c - 1) / c;
        const double extra = nOut > 0 ? kCaption + (nIn > 0 ? kGapY : 0) : 0;
        const double fw = content.width() / (c * kW + (c + 1) * kGapX);
        const double fh = content.height() / (rows * kH + (rows - 1) * kGapY + extra);
        const double fc = std::min({fw, fh, m.font * 1.25});
        if (fc > f + 1e-9 || (fc > f - 1e-9 && c > cols)) { // ties: fewer, longer rows
            f = fc;
            cols = c;
        }
    }
    out.compact = true;
    out.fontPx = f;
    out.scale = f / m.font;
    const double gx = kGapX * f;
    const double w = std::min(kMaxW * f, (content.width() - (cols + 1) * gx) / cols);
    const double h = kH * f;
    const int rowsIn = (nIn + cols - 1) / cols, rowsOut = (nOut + cols - 1) / cols;
    const int rows = rowsIn + rowsOut;
    const double caption = nOut > 0 ? kCaption * f : 0;
    // Rows spread out over a tall area, up to a box's height apart.
    double gy = kGapY * f;
    if (rows > 1)
        gy = std::clamp((content.height() - rows * h - caption) / (rows - 1 + (nOut > 0 && nIn > 0 ? 1 : 0)),
                        gy, std::max(gy, h));
    const double blockHeight =
        rows * h + std::max(0, rows - 1) * gy + (nOut > 0 ? caption + (nIn > 0 ? gy : 0) : 0);
    const int usedCols = std::min(cols, std::max(nIn, nOut));
    const double left = content.center().x() - (usedCols * w + (usedCols - 1) * gx) / 2;
    double y = content.center().y() - blockHeight / 2;
    for (int i = 0; i < nIn; ++i) {
        out.rects.insert(m_inRun[i]->id,
                         QRectF(left + (i % cols) * (w + gx), y + (i / cols) * (h + gy), w, h));
        out.rowOfRank.insert(m_inRun[i]->rank, i / cols);
    }
    if (nOut > 0) {
        if (nIn > 0)
            y += rowsIn * (h + gy);
        out.outOfRunCaption = QRectF(left, y, content.right() - left, kCaption * f);
        y += kCaption * f;
        for (int i = 0; i < nOut; ++i)
            out.rects.insert(m_outOfRun[i]->id,
                             QRectF(left + (i % cols) * (w + gx), y + (i / cols) * (h + gy), w, h));
    }
    return out;
}

// The mesh's grid (cluster_layout.h): sizes in units of the box font f,
// full boxes when f is at least the mode's smallest font, else compact
// ones. Column gaps: narrow inside a stage, wide between stages (a pp
// arrow and its label); row gaps likewise inside a replica and between
// replicas; arcs keep their room above every row and left of every column
// when some link skips a box.
ClusterLayout BoxPlanner::meshGrid() const
{
    using net::MeshAxis;
    const ClusterMetrics &m = m_metrics;
    const net::DeviceMesh &mesh = m_key.mesh;
    const int T = mesh.size(MeshAxis::Tp), P = mesh.size(MeshAxis::Pp), C = mesh.size(MeshAxis::Cp),
              D = mesh.size(MeshAxis::Dp);
    const int cols = P * T, rows = D * C;
    struct Units {
        double w, h, maxH, inner, outer, arc;
    };
    // Full: a name, the coordinates ("dp1 · pp0 · cp1 · tp1") and a badge.
    // Compact: the rank and name over the coordinates, and a thin bar.
    const Units full{C > 1 ? 10.5 : 9.0, 3.6, 6.8, 1.8, 4.0, 2.2};
    const Units small{C > 1 ? 10.0 : 8.0, 3.6, 3.8, 1.5, 2.6, 1.4};
    ClusterLayout out = m_key;
    QRectF area = m_content;
    QVector<QRectF> others;
    if (!m_outOfRun.isEmpty())
        placeOutOfRun(out, naturalBox(m) * 0.45, m.minFont, area, others);
    // Links that skip a box: pp past a stage's other tp ranks, a tp ring's
    // closing link; dp past a replica's other cp ranks, dp's and cp's closing links.
    const bool arcsOver = T > 2 || (T > 1 && P > 1);
    const bool arcsLeft = C > 2 || D > 2 || (C > 1 && D > 1);
    // Gaps in font units: left of column c (c = cols: none), above row r.
    const auto gapX = [&](const Units &u, int c) {
        const double g = c == 0 ? 0 : c % T == 0 ? u.outer : u.inner;
        return arcsLeft ? std::max(g, u.arc) : g;
    };
    const auto gapY = [&](const Units &u, int r) {
        const double g = r == 0 ? 0 : r % C == 0 ? u.outer : u.inner;
        return arcsOver ? std::max(g, u.arc) : g;
    };
    const auto fit = [&](const Units &u, double w, double h) {
        double gx = 0, gy = 0;
        for (int c = 0; c < cols; ++c)
            gx += gapX(u, c);
        for (int r = 0; r < rows; ++r)
            gy += gapY(u, r);
        return std::min(area.width() / (cols * w + gx), area.height() / (rows * h + gy));
    };
    double f = std::min(fit(full, full.w, full.h), m.font * ClusterLayout::kMaxScale);
    const Units &u = f >= m.minFont ? full : small;
    out.compact = f < m.minFont;
    if (out.compact)
        f = std::min(fit(small, small.w, small.h), m.font * 1.25);
    out.fontPx = f;
    out.scale = f / m.font;
    out.arcRoom = (arcsOver || arcsLeft) ? u.arc * f : 0;
    double gx = 0, gy = 0;
    for (int c = 0; c < cols; ++c)
        gx += gapX(u, c) * f;
    for (int r = 0; r < rows; ++r)
        gy += gapY(u, r) * f;
    // Spare room goes to the boxes, up to the natural width and maxH.
    const double w =
        std::clamp((area.width() - gx) / cols, u.w * f, std::max(u.w * f, naturalBox(m).width() * out.scale));
    const double h = std::clamp((area.height() - gy) / rows, u.h * f, u.maxH * f);
    double y = area.center().y() - (rows * h + gy) / 2;
    for (int r = 0; r < rows; ++r) {
        y += gapY(u, r) * f;
        double x = area.center().x() - (cols * w + gx) / 2;
        for (int c = 0; c < cols; ++c) {
            x += gapX(u, c) * f;
            net::MeshCoords at;
            at.dp = r / C;
            at.cp = r % C;
            at.pp = c / T;
            at.tp = c % T;
            out.rects.insert(m_key.idOfRank.value(mesh.rankOf(at)), QRectF(x, y, w, h));
            x += w;
        }
        y += h;
    }
    return out;
}

} // namespace

std::optional<net::MeshAxis> linkAxis(const net::DeviceMesh &mesh, int a, int b)
{
    if (mesh.trivial() || a < 0 || b < 0 || a >= mesh.nodes() || b >= mesh.nodes())
        return std::nullopt;
    const net::MeshCoords ca = mesh.coordsOf(a), cb = mesh.coordsOf(b);
    std::optional<net::MeshAxis> only;
    int differ = 0;
    for (net::MeshAxis axis : net::kMeshAxes)
        if (ca.of(axis) != cb.of(axis)) {
            ++differ;
            only = axis;
        }
    if (differ == 1)
        return only;
    if (differ == 2 && ca.tp == cb.tp && ca.pp == cb.pp) // dp and cp: the gradients' group
        return net::MeshAxis::Dp;
    return std::nullopt;
}

const NodeState *firstAlert(const ClusterState &state)
{
    const NodeState *best = nullptr;
    const auto key = [](const NodeState *n) {
        return std::tuple(n->state != NodeRunState::Failed, n->rank < 0, n->rank, n->id);
    };
    for (const NodeState &n : state.nodes)
        if ((n.state == NodeRunState::Failed || n.state == NodeRunState::Lost) && !n.reason.isEmpty() &&
            (!best || key(&n) < key(best)))
            best = &n;
    return best;
}

ClusterLayout ClusterLayout::compute(const ClusterState *state, QSize size, bool projector, const QFont &font)
{
    return BoxPlanner(state, size, projector, font).plan();
}

bool ClusterLayout::sameInputs(const ClusterState *state, QSize size, bool projector, const QFont &font) const
{
    if (scale <= 0 || this->size != size || this->projector != projector || !(this->font == font))
        return false;
    const Topology t = state ? state->topology : Topology::Ring;
    const bool a = state && firstAlert(*state) != nullptr;
    if (topology != t || alert != a || idRanks.size() != (state ? state->nodes.size() : 0))
        return false;
    if ((state ? state->mesh.toStdString() : std::string()) != meshSpec)
        return false;
    for (int i = 0; i < idRanks.size(); ++i)
        if (idRanks[i] != std::pair(state->nodes[i].id, state->nodes[i].rank))
            return false;
    return true;
}

int ClusterLayout::nodeAt(QPointF pos) const
{
    for (auto it = rects.cbegin(); it != rects.cend(); ++it)
        if (it.value().contains(pos))
            return it.key();
    return -1;
}

NodeBoxFonts ClusterLayout::boxFonts() const
{
    return {pixelFont(font, fontPx, true), pixelFont(font, 0.88 * fontPx),
            pixelFont(font, 0.82 * fontPx, true), 0.22 * fontPx};
}

bool ClusterLayout::readable() const
{
    if (rects.isEmpty())
        return true;
    const double f = fontPx;
    const NodeBoxFonts fonts = boxFonts();
    const QFontMetricsF tfm(fonts.title), bfm(fonts.badge);
    // A name and a badge side by side or one above the other, and padding
    // (the bar may give way: the memory tab has the figures).
    const double name = tfm.horizontalAdvance(QStringLiteral("local-00")) + 1.2 * f;
    const double badge =
        bfm.horizontalAdvance(runStateName(NodeRunState::Running)) + 0.8 * f + 2 * fonts.spacing;
    const double badgeRow = fonts.spacing + std::min(tfm.height(), bfm.height() + 0.2 * f);
    for (const QRectF &r : rects) {
        const double height = tfm.height() + (r.width() >= name + badge ? 0 : badgeRow) + 0.9 * f;
        if (r.height() + 0.5 < height || r.width() + 0.5 < name)
            return false;
    }
    return true;
}

} // namespace smol::widgets
