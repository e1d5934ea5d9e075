#include "cluster_view.h"

#include "palette.h"

#include <QFontMetricsF>
#include <QHelpEvent>
#include <QMap>
#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>
#include <QToolTip>
#include <QtMath>

#include <algorithm>
#include <cmath>
#include <optional>
#include <tuple>

namespace smol::widgets {

namespace {

// Pixel sizes per mode. Box text is `font` at the natural box size, grows
// with the box up to kMaxScale and never shrinks below `minFont`.
struct Metrics {
    double font;
    double minFont;
    double headerFont;
    double margin;
    double border;
    double selection;
    double linkMin; // stroke at 1 kB/s and below
    double linkMax; // stroke at 1 GB/s and above
    double idleLink;
};

Metrics metrics(bool projector)
{
    if (projector)
        return {20, 14, 20, 16, 2.5, 7, 3, 14, 2};
    return {13, 10, 13, 12, 1.2, 4, 1.8, 10, 1.2};
}

constexpr double kMaxScale = 1.5;
constexpr double kOutOfRunScale = 0.8; // nodes not in the run are drawn smaller

// The header grows on screens larger than 1024x768, up to half as big again.
double headerFont(const Metrics &m, QSize size)
{
    return m.headerFont * std::clamp(std::min(size.width() / 1024.0, size.height() / 768.0), 1.0, 1.5);
}

// Room for five lines of text and the memory bar at `font` pixels.
QSizeF naturalBox(const Metrics &m)
{
    return {16 * m.font, 8.2 * m.font};
}

QFont pixelFont(const QFont &base, double px, bool bold = false)
{
    QFont f(base);
    f.setPixelSize(std::max(1, int(std::lround(px))));
    f.setBold(bold);
    return f;
}

double linkWidth(const Metrics &m, double bytesPerSecond)
{
    const double t = std::clamp(std::log10(std::max(bytesPerSecond, 1.0) / 1e3) / 6, 0.0, 1.0);
    return m.linkMin + (m.linkMax - m.linkMin) * t;
}

const NodeState *findNode(const ClusterState &state, int id)
{
    for (const NodeState &n : state.nodes)
        if (n.id == id)
            return &n;
    return nullptr;
}

// The node whose failure the header names in compact mode: the first failed
// one (by rank, then id), else the first lost one; nullptr when none says why.
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

// "60 running, 2 paused, 1 failed, 1 lost": how many nodes are in each state.
QString stateCounts(const ClusterState &state)
{
    int count[kNodeRunStateCount] = {};
    for (const NodeState &n : state.nodes)
        ++count[int(n.state)];
    QStringList parts;
    for (NodeRunState s : {NodeRunState::Running, NodeRunState::Paused, NodeRunState::Slow, NodeRunState::Failed,
                           NodeRunState::Lost, NodeRunState::Idle})
        if (count[int(s)] > 0)
            parts << QStringLiteral("%1 %2").arg(count[int(s)]).arg(runStateName(s));
    const int n = int(state.nodes.size());
    return (n == 1 ? ClusterView::tr("1 node: ") : ClusterView::tr("%1 nodes: ").arg(n)) +
           parts.join(QStringLiteral(", "));
}

// One step number everywhere: the step the cluster is in, counted from 0
// (the engine's step index, as breakpoints, the inspector, the timeline and
// the replay bar show it). The state carries the newest completed step.
QString headerTitle(const ClusterState &state, const QString &nextStrategy)
{
    bool active = false;
    for (const NodeState &n : state.nodes)
        active = active || n.state == NodeRunState::Running || n.state == NodeRunState::Paused ||
                 n.state == NodeRunState::Slow;
    QString strategy = state.strategy;
    QString step;
    const std::int64_t current = state.step + 1;
    if (state.step < 0 && !active) {
        step = ClusterView::tr("not started");
        if (!nextStrategy.isEmpty())
            strategy = nextStrategy;
    } else if (!active && state.steps > 0 && current >= state.steps) {
        step = ClusterView::tr("done, %1 steps").arg(state.steps);
    } else if (!active) {
        step = ClusterView::tr("ended after step %1").arg(state.step);
    } else if (state.steps > 0) {
        step = ClusterView::tr("step %1 / %2").arg(current).arg(state.steps);
    } else {
        step = ClusterView::tr("step %1").arg(current);
    }
    return strategy.isEmpty() ? step : strategy + QStringLiteral(" · ") + step;
}

// The legend: five categories and the peak tick.
QStringList legendLabels()
{
    QStringList labels;
    for (MemoryCategory c : kMemoryCategories)
        labels << categoryName(c);
    labels << ClusterView::tr("peak");
    return labels;
}

double legendWidth(const QFontMetricsF &fm)
{
    const double h = fm.height();
    double w = 0;
    for (const QString &label : legendLabels())
        w += 0.8 * h + 0.35 * h + fm.horizontalAdvance(label) + h;
    return w - h;
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

void drawArrow(QPainter &p, QVector<QPointF> points, double width, const QColor &color, bool head)
{
    if (points.size() < 2)
        return;
    QPolygonF tip;
    if (head) {
        const QLineF last(points[points.size() - 2], points.last());
        const double natural = 2.2 * width + 6;
        const double length = std::min(natural, last.length() * 0.6);
        const double half = (1.1 * width + 3.5) * length / natural;
        const QPointF u = (last.p2() - last.p1()) / std::max(last.length(), 1e-6);
        const QPointF n(-u.y(), u.x());
        const QPointF base = last.p2() - length * u;
        tip << last.p2() << base + half * n << base - half * n;
        points.last() = base + 0.5 * u;
    }
    p.setBrush(Qt::NoBrush);
    p.setPen(QPen(color, width, Qt::SolidLine, head ? Qt::FlatCap : Qt::RoundCap, Qt::RoundJoin));
    p.drawPolyline(points.constData(), int(points.size()));
    if (head) {
        p.setPen(Qt::NoPen);
        p.setBrush(color);
        p.drawPolygon(tip);
    }
}

} // namespace

ClusterView::ClusterView(QWidget *parent)
    : QWidget(parent)
{
    setAttribute(Qt::WA_OpaquePaintEvent);
}

void ClusterView::setState(ClusterStatePtr state)
{
    m_state = std::move(state);
    if (m_selected >= 0 && (!m_state || !findNode(*m_state, m_selected)))
        setSelectedNode(-1);
    update();
}

void ClusterView::setProjectorMode(bool on)
{
    if (m_projector == on)
        return;
    m_projector = on;
    update();
}

void ClusterView::setSelectedNode(int id)
{
    if (id < 0)
        id = -1;
    if (id == m_selected)
        return;
    m_selected = id;
    update();
    Q_EMIT selectedNodeChanged(id);
}

int ClusterView::nodeAt(QPointF pos) const
{
    const Layout &l = layout();
    for (auto it = l.rects.cbegin(); it != l.rects.cend(); ++it)
        if (it.value().contains(pos))
            return it.key();
    return -1;
}

QRectF ClusterView::nodeRect(int id) const
{
    return layout().rects.value(id);
}

const ClusterView::Layout &ClusterView::layout() const
{
    QVector<std::pair<int, int>> idRanks;
    if (m_state)
        for (const NodeState &n : m_state->nodes)
            idRanks << std::pair(n.id, n.rank);
    const Topology topology = m_state ? m_state->topology : Topology::Ring;
    const bool alert = m_state && firstAlert(*m_state) != nullptr;
    if (m_layout.scale > 0 && m_layout.size == size() && m_layout.projector == m_projector &&
        m_layout.topology == topology && m_layout.idRanks == idRanks && m_layout.alert == alert)
        return m_layout;

    Layout key;
    key.size = size();
    key.projector = m_projector;
    key.topology = topology;
    key.idRanks = idRanks;
    key.alert = alert;
    const Metrics m = metrics(m_projector);
    const double headerLine = QFontMetricsF(pixelFont(font(), headerFont(m, size()), true)).height();
    key.header = QRectF(m.margin, 0.6 * m.margin, width() - 2 * m.margin, 2.2 * headerLine);
    const QRectF content(m.margin, key.header.bottom() + 0.6 * m.margin, width() - 2 * m.margin,
                         height() - key.header.bottom() - 1.6 * m.margin);

    QVector<const NodeState *> inRun, outOfRun;
    if (m_state)
        for (const NodeState &n : m_state->nodes)
            (n.rank >= 0 ? inRun : outOfRun) << &n;
    std::sort(inRun.begin(), inRun.end(), [](auto *a, auto *b) { return a->rank < b->rank; });
    std::sort(outOfRun.begin(), outOfRun.end(), [](auto *a, auto *b) { return a->id < b->id; });
    for (const NodeState *n : inRun)
        key.idOfRank.insert(n->rank, n->id);
    const int n = int(inRun.size());

    // Everything laid out with boxes at `scale` of the natural size and gaps
    // `roominess` of the way from tight (the font size) to roomy (room for
    // an arrow and its rate label); empty when a box leaves its area or
    // comes closer to another than the gap. Not strict: lay out anyway.
    // `compact` < 1 shrinks the in-run area about its centre.
    const auto attempt = [&](double scale, int chainRows, double roominess, bool strict,
                             double compact = 1) -> std::optional<Layout> {
        Layout out = key;
        out.scale = scale;
        out.fontPx = std::clamp(m.font * scale, m.minFont, m.font * kMaxScale);
        const double tight = std::max(6.0, out.fontPx);
        const QSizeF gap(tight + roominess * (7 * out.fontPx - tight),
                         tight + roominess * (4.5 * out.fontPx - tight));
        const QSizeF box = naturalBox(m) * scale;
        QRectF area = content;
        QVector<QRectF> others;
        if (!outOfRun.isEmpty()) { // a row (or rows) of smaller boxes under a caption
            const QSizeF small = box * kOutOfRunScale;
            const int cols = std::max(1, int((content.width() + tight) / (small.width() + tight)));
            const int rows = (int(outOfRun.size()) + cols - 1) / cols;
            const double caption = 1.4 * out.fontPx;
            const double stripHeight = caption + rows * small.height() + (rows - 1) * tight;
            out.outOfRunCaption =
                QRectF(content.left(), content.bottom() - stripHeight, content.width(), caption);
            for (int i = 0; i < outOfRun.size(); ++i) {
                const QPointF at(content.left() + (i % cols) * (small.width() + tight),
                                 out.outOfRunCaption.bottom() + (i / cols) * (small.height() + tight));
                out.rects.insert(outOfRun[i]->id, QRectF(at, small));
                others << QRectF(at, small);
            }
            area.setBottom(out.outOfRunCaption.top() - tight);
        }
        if (compact < 1) {
            const QPointF centre = area.center();
            area.setSize(area.size() * compact);
            area.moveCenter(centre);
        }
        const QVector<QPointF> centres = arrange(key.topology, n, area, box, gap, chainRows,
                                                 strict ? std::max(2.4 * out.fontPx, gap.height()) : -1e9);
        if (centres.size() != n && strict)
            return std::nullopt;
        const int cols = (n + chainRows - 1) / std::max(1, chainRows);
        QVector<QRectF> placed;
        for (int i = 0; i < n && i < centres.size(); ++i) {
            const QRectF r(centres[i] - QPointF(box.width() / 2, box.height() / 2), box);
            out.rects.insert(inRun[i]->id, r);
            placed << r;
            if (key.topology == Topology::Chain)
                out.rowOfRank.insert(inRun[i]->rank, i / cols);
        }
        if (strict && (!fitsApart(placed, area, gap) || !fitsApart(others, content, QSizeF(tight, tight)) ||
                       (!out.outOfRunCaption.isEmpty() && out.outOfRunCaption.top() < content.top())))
            return std::nullopt; // (the caption above the content would be drawn over the legend)
        return out;
    };
    // The largest scale that fits, on a geometric grid (layouts are not
    // quite monotonic in scale, so scan rather than bisect).
    const auto largest = [&](int chainRows, double roominess) {
        for (double s = kMaxScale; s > 0.08; s *= 0.97)
            if (auto l = attempt(s, chainRows, roominess, true))
                return *l;
        return *attempt(0.08, chainRows, 0, false); // an absurdly small widget: overlap
    };
    // Room around the boxes for the links, unless that costs the boxes more
    // than a fifth of their size (below their natural size).
    const auto roomiest = [&](int chainRows) {
        const Layout tight = largest(chainRows, 0);
        for (double roominess : {1.0, 0.7, 0.45, 0.2}) {
            Layout l = largest(chainRows, roominess);
            if (l.scale >= std::min(1.0, 0.8 * tight.scale))
                return l;
        }
        return tight;
    };

    m_layout = roomiest(1);
    if (key.topology == Topology::Chain && n > 2) {
        // One row while its boxes stay near their natural size (the text
        // readable from the back of a room); otherwise as few rows, read
        // left to right like text, as give boxes near the largest size.
        QVector<Layout> byRows{m_layout};
        double best = m_layout.scale;
        for (int rows = 2; rows <= std::min(6, n); ++rows) {
            byRows << roomiest(rows);
            best = std::max(best, byRows.last().scale);
        }
        for (const Layout &l : byRows) {
            if (l.scale >= std::min(0.75, 0.95 * best)) {
                m_layout = l;
                break;
            }
        }
    } else if (n > 1) {
        // A few nodes on a big screen: pull the ring in while every link
        // keeps its roomy gap, rather than strand boxes at the edges.
        for (double compact = 0.97; compact > 0.2; compact *= 0.97) {
            const auto l = attempt(m_layout.scale, 1, 1.0, true, compact);
            if (!l)
                break;
            m_layout = *l;
        }
    }
    if (!readable(m_layout)) {
        // Too many boxes for the picture above: a grid of compact ones, with
        // a third header line for the first failure when there is one.
        Layout grid = key;
        if (alert)
            grid.header.setHeight(3.35 * headerLine);
        const QRectF gridContent(m.margin, grid.header.bottom() + 0.6 * m.margin, width() - 2 * m.margin,
                                 height() - grid.header.bottom() - 1.6 * m.margin);
        QVector<int> inRunIds, outOfRunIds;
        for (const NodeState *node : inRun)
            inRunIds << node->id;
        for (const NodeState *node : outOfRun)
            outOfRunIds << node->id;
        m_layout = compactLayout(grid, gridContent, inRunIds, outOfRunIds);
    }
    return m_layout;
}

bool ClusterView::readable(const Layout &l) const
{
    if (l.rects.isEmpty())
        return true;
    const double f = l.fontPx;
    const QFontMetricsF tfm(pixelFont(font(), f, true)), bfm(pixelFont(font(), 0.82 * f, true));
    const double spacing = 0.22 * f;
    // A name and a badge side by side or one above the other, and padding
    // (the bar may give way: the memory tab has the figures).
    const double name = tfm.horizontalAdvance(QStringLiteral("local-00")) + 1.2 * f;
    const double badge = bfm.horizontalAdvance(runStateName(NodeRunState::Running)) + 0.8 * f + 2 * spacing;
    const double badgeRow = spacing + std::min(tfm.height(), bfm.height() + 0.2 * f);
    for (const QRectF &r : l.rects) {
        const double height = tfm.height() + (r.width() >= name + badge ? 0 : badgeRow) + 0.9 * f;
        if (r.height() + 0.5 < height || r.width() + 0.5 < name)
            return false;
    }
    return true;
}

ClusterView::Layout ClusterView::compactLayout(const Layout &key, const QRectF &content, const QVector<int> &inRun,
                                               const QVector<int> &outOfRun) const
{
    // Sizes in units of the box font: a box of kW x kH, gaps kGapX, kGapY
    // (room for a short arrow), the caption over the nodes not in the run.
    // The outer gaps take the arrows that wrap from one row to the next.
    constexpr double kW = 5.5, kMaxW = 12, kH = 2.5, kGapX = 1.3, kGapY = 0.9, kCaption = 1.4;
    const Metrics m = metrics(m_projector);
    const int nIn = int(inRun.size()), nOut = int(outOfRun.size());
    const int widest = std::max({1, nIn, nOut});
    double bestF = 0;
    int bestCols = 1;
    for (int cols = 1; cols <= widest; ++cols) {
        const int rows = (nIn + cols - 1) / cols + (nOut + cols - 1) / cols;
        const double extra = nOut > 0 ? kCaption + (nIn > 0 ? kGapY : 0) : 0;
        const double fw = content.width() / (cols * kW + (cols + 1) * kGapX);
        const double fh = content.height() / (rows * kH + (rows - 1) * kGapY + extra);
        const double f = std::min({fw, fh, m.font * 1.25});
        if (f > bestF + 1e-9 || (f > bestF - 1e-9 && cols > bestCols)) { // ties: fewer, longer rows
            bestF = f;
            bestCols = cols;
        }
    }
    Layout out = key;
    out.compact = true;
    out.fontPx = bestF;
    out.scale = bestF / m.font;
    const int cols = bestCols;
    const double gx = kGapX * bestF;
    const double w = std::min(kMaxW * bestF, (content.width() - (cols + 1) * gx) / cols);
    const double h = kH * bestF;
    const int rowsIn = (nIn + cols - 1) / cols, rowsOut = (nOut + cols - 1) / cols;
    const int rows = rowsIn + rowsOut;
    const double caption = nOut > 0 ? kCaption * bestF : 0;
    // Rows spread out over a tall area, up to a box's height apart.
    double gy = kGapY * bestF;
    if (rows > 1)
        gy = std::clamp((content.height() - rows * h - caption) / (rows - 1 + (nOut > 0 && nIn > 0 ? 1 : 0)), gy,
                        std::max(gy, h));
    const double blockHeight = rows * h + std::max(0, rows - 1) * gy + (nOut > 0 ? caption + (nIn > 0 ? gy : 0) : 0);
    const int usedCols = std::min(cols, std::max(nIn, nOut));
    const double left = content.center().x() - (usedCols * w + (usedCols - 1) * gx) / 2;
    double y = content.center().y() - blockHeight / 2;
    QHash<int, int> rankOfId;
    for (auto it = key.idOfRank.cbegin(); it != key.idOfRank.cend(); ++it)
        rankOfId.insert(it.value(), it.key());
    for (int i = 0; i < nIn; ++i) {
        out.rects.insert(inRun[i], QRectF(left + (i % cols) * (w + gx), y + (i / cols) * (h + gy), w, h));
        out.rowOfRank.insert(rankOfId.value(inRun[i]), i / cols);
    }
    if (nOut > 0) {
        if (nIn > 0)
            y += rowsIn * (h + gy);
        out.outOfRunCaption = QRectF(left, y, content.right() - left, kCaption * bestF);
        y += kCaption * bestF;
        for (int i = 0; i < nOut; ++i)
            out.rects.insert(outOfRun[i], QRectF(left + (i % cols) * (w + gx), y + (i / cols) * (h + gy), w, h));
    }
    return out;
}

void ClusterView::paintEvent(QPaintEvent *)
{
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    p.setRenderHint(QPainter::TextAntialiasing);
    const Palette &pal = Palette::forMode(m_projector);
    const Metrics m = metrics(m_projector);
    p.fillRect(rect(), pal.background);
    if (!m_state || m_state->nodes.isEmpty()) {
        p.setPen(pal.mutedText);
        p.setFont(pixelFont(font(), headerFont(m, size())));
        p.drawText(rect(), Qt::AlignCenter, tr("No nodes yet: start a run or add a node."));
        return;
    }
    const Layout &l = layout();
    paintHeader(p, l, pal);
    if (!l.outOfRunCaption.isEmpty() && !l.idOfRank.isEmpty()) { // (between runs no node is in one: no caption)
        p.setPen(pal.mutedText);
        p.setFont(pixelFont(font(), l.fontPx * 0.9, true));
        p.drawText(l.outOfRunCaption, Qt::AlignLeft | Qt::AlignVCenter, tr("Not in this run"));
    }
    paintLinks(p, l, pal);

    const double scale = memoryScale();
    for (const NodeState &n : m_state->nodes) {
        if (l.compact)
            paintCompactNode(p, l, pal, n, scale, nullptr);
        else
            paintNode(p, l, pal, n, scale);
    }

    if (m_selected >= 0 && l.rects.contains(m_selected)) {
        const double w = m.selection;
        const double radius = 0.55 * l.fontPx + w / 2 + 1;
        p.setBrush(Qt::NoBrush);
        p.setPen(QPen(pal.selection, w));
        p.drawRoundedRect(l.rects.value(m_selected).adjusted(-w / 2 - 1, -w / 2 - 1, w / 2 + 1, w / 2 + 1),
                          radius, radius);
    }
}

// One scale for every bar, so equal bytes are equal lengths.
double ClusterView::memoryScale() const
{
    double scale = 1;
    if (m_state)
        for (const NodeState &n : m_state->nodes) {
            std::int64_t sum = 0;
            for (MemoryCategory c : kMemoryCategories)
                sum += categoryBytes(n.memory, c);
            scale = std::max({scale, double(n.memory.peak), double(n.memory.live), double(sum)});
        }
    return scale;
}

void ClusterView::setNextRun(const QString &strategy)
{
    if (strategy == m_nextStrategy)
        return;
    m_nextStrategy = strategy;
    update();
}

QString ClusterView::headerText() const
{
    return m_state ? headerTitle(*m_state, m_nextStrategy) : QString();
}

QStringList ClusterView::nodeText(int id) const
{
    const NodeState *node = m_state ? findNode(*m_state, id) : nullptr;
    const Layout &l = layout();
    if (!node || !l.rects.contains(id))
        return {};
    // Paint the box where nobody sees it, keeping what it writes.
    QImage scratch(size().expandedTo(QSize(1, 1)), QImage::Format_ARGB32_Premultiplied);
    QPainter p(&scratch);
    QStringList shown;
    const Palette &pal = Palette::forMode(m_projector);
    if (l.compact)
        paintCompactNode(p, l, pal, *node, memoryScale(), &shown);
    else
        paintNode(p, l, pal, *node, memoryScale(), &shown);
    return shown;
}

void ClusterView::paintHeader(QPainter &p, const Layout &l, const Palette &pal) const
{
    const Metrics m = metrics(m_projector);
    const double headerPx = headerFont(m, size());
    const QFont bold = pixelFont(font(), headerPx, true);
    const double h = QFontMetricsF(bold).height();
    p.setFont(bold);
    p.setPen(pal.text);
    const QRectF title(l.header.left(), l.header.top(), l.header.width(), h);
    QString heading = headerTitle(*m_state, m_nextStrategy);
    if (l.compact) // the boxes are too small for their badges' words: count them here
        heading += QStringLiteral(" · ") + stateCounts(*m_state);
    p.drawText(title, Qt::AlignLeft | Qt::AlignVCenter,
               QFontMetricsF(bold).elidedText(heading, Qt::ElideRight, title.width()));

    // The legend on the second line, in a smaller font if the line is short.
    QFont plain = pixelFont(font(), headerPx * 0.9);
    // (Text does not scale linearly with its pixel size: shrink until it fits.)
    for (double px = headerPx * 0.9; legendWidth(QFontMetricsF(plain)) > l.header.width() && px > 6; px *= 0.95)
        plain = pixelFont(font(), px * 0.95);
    const QFontMetricsF fm(plain);
    const QRectF line = title.translated(0, 1.15 * h);
    const QStringList labels = legendLabels();
    const double swatch = 0.8 * fm.height();
    double x = line.left();
    p.setFont(plain);
    for (int i = 0; i < labels.size(); ++i) {
        const QRectF sw(x, line.center().y() - swatch / 2, swatch, swatch);
        if (i < kMemoryCategoryCount) {
            p.setPen(m_projector ? QPen(pal.text, 1) : Qt::NoPen);
            p.setBrush(pal.category(kMemoryCategories[std::size_t(i)]));
            p.drawRect(sw);
        } else { // the peak tick, as drawn on the bars
            p.setPen(QPen(pal.peak, m_projector ? 3 : 2));
            p.drawLine(QPointF(sw.center().x(), sw.top()), QPointF(sw.center().x(), sw.bottom()));
        }
        x = sw.right() + 0.35 * fm.height();
        const double w = fm.horizontalAdvance(labels[i]);
        p.setPen(pal.text);
        p.drawText(QRectF(x, line.top(), w + 2, h), Qt::AlignLeft | Qt::AlignVCenter, labels[i]);
        x += w + fm.height();
    }
    // Compact mode: the first failure, with its reason, on a line of its own.
    if (const NodeState *failed = l.compact && l.alert ? firstAlert(*m_state) : nullptr) {
        const QRectF alertLine = title.translated(0, 2.25 * h);
        const QString who = displayName(*failed);
        const QString text = tr("%1 %2: %3").arg(who, runStateName(failed->state), failed->reason);
        const QFont alertFont = pixelFont(font(), headerPx * 0.9, true);
        p.setFont(alertFont);
        p.setPen(pal.state(failed->state));
        p.drawText(alertLine, Qt::AlignLeft | Qt::AlignVCenter,
                   QFontMetricsF(alertFont).elidedText(text, Qt::ElideRight, alertLine.width()));
    }
}

void ClusterView::paintLinks(QPainter &p, const Layout &l, const Palette &pal) const
{
    Metrics m = metrics(m_projector);
    const double f = l.fontPx;
    if (l.compact) { // lines in proportion to the small boxes and their narrow gaps
        const double k = std::min(1.0, 0.7 * f / m.font);
        m.linkMin *= k;
        m.linkMax *= k;
        m.idleLink = std::max(1.0, m.idleLink * k);
    }

    // One entry per pair of ranks, lower rank first; rates per direction.
    struct Pair {
        std::optional<double> up;   // low -> high
        std::optional<double> down; // high -> low
    };
    QMap<std::pair<int, int>, Pair> pairs;
    const int n = int(l.idOfRank.size());
    const auto implied = [&](int a, int b) {
        if (a != b && l.idOfRank.contains(a) && l.idOfRank.contains(b))
            pairs[{std::min(a, b), std::max(a, b)}];
    };
    // The topology's own edges show even before any byte has moved.
    for (int r = 0; r < n; ++r) {
        if (m_state->topology == Topology::Ring && n > 1)
            implied(r, (r + 1) % n);
        else if (m_state->topology == Topology::Chain && r + 1 < n)
            implied(r, r + 1);
        else if (m_state->topology == Topology::Star && r > 0)
            implied(0, r);
    }
    for (const LinkState &link : m_state->links) {
        if (link.src == link.dst || !l.idOfRank.contains(link.src) || !l.idOfRank.contains(link.dst))
            continue;
        Pair &pair = pairs[{std::min(link.src, link.dst), std::max(link.src, link.dst)}];
        std::optional<double> &rate = link.src < link.dst ? pair.up : pair.down;
        rate = rate.value_or(0) + link.bytesPerSecond;
    }

    const double clearance = std::max(3.0, 0.3 * f);
    // The canonical route low -> high, shifted sideways by `offset`.
    const auto route = [&](int low, int high, double offset) -> QVector<QPointF> {
        const QRectF a = l.rects.value(l.idOfRank.value(low));
        const QRectF b = l.rects.value(l.idOfRank.value(high));
        const int rowA = l.rowOfRank.value(low, 0), rowB = l.rowOfRank.value(high, 0);
        if (rowB == rowA + 1 && b.top() > a.bottom()) {
            // A chain wrapping onto the next row: down, back along the gap,
            // down. Shifted to the right-hand side of travel, as straight lines are.
            const double y = (a.bottom() + b.top()) / 2 - offset;
            const double xa = a.center().x() - offset, xb = b.center().x() - offset;
            return {QPointF(xa, a.bottom() + clearance), QPointF(xa, y), QPointF(xb, y),
                    QPointF(xb, b.top() - clearance)};
        }
        const QLineF centres(a.center(), b.center());
        const QPointF normal = QPointF(-centres.dy(), centres.dx()) / std::max(centres.length(), 1e-6);
        const auto line = between(a.center() + offset * normal, b.center() + offset * normal,
                                  a.adjusted(-clearance, -clearance, clearance, clearance),
                                  b.adjusted(-clearance, -clearance, clearance, clearance));
        if (!line)
            return {};
        return {line->p1(), line->p2()};
    };

    struct Label {
        QString text;
        QVector<QPointF> route;
        double side; // from the route's centre line to the label's near edge
    };
    QVector<Label> labels;
    // Compact grid, ring or chain: neighbours in rank order that are not
    // side by side (a row's end and the next row's start, the ring's last and
    // first) get a stub out of one box and into the other, as a line of text
    // wraps: forward (rank r to r + 1) out to the right, back out to the left.
    const auto wraps = [&](int low, int high) {
        if (!l.compact || m_state->topology == Topology::Star)
            return false;
        const bool neighbours = high == low + 1 || (m_state->topology == Topology::Ring && low == 0 && high == n - 1);
        return neighbours && !(high == low + 1 && l.rowOfRank.value(low) == l.rowOfRank.value(high));
    };
    const auto drawStubs = [&](int src, int dst, bool forward, double offset, double width, const QColor &colour,
                               bool head) {
        const QRectF a = l.rects.value(l.idOfRank.value(src)), b = l.rects.value(l.idOfRank.value(dst));
        const double length = std::max(8.0, 1.1 * f);
        const double ya = a.center().y() + offset, yb = b.center().y() + offset;
        if (forward) {
            drawArrow(p, {QPointF(a.right() + clearance, ya), QPointF(a.right() + length, ya)}, width, colour, head);
            drawArrow(p, {QPointF(b.left() - length, yb), QPointF(b.left() - clearance, yb)}, width, colour, head);
        } else {
            drawArrow(p, {QPointF(a.left() - clearance, ya), QPointF(a.left() - length, ya)}, width, colour, head);
            drawArrow(p, {QPointF(b.right() + length, yb), QPointF(b.right() + clearance, yb)}, width, colour, head);
        }
    };
    for (auto it = pairs.cbegin(); it != pairs.cend(); ++it) {
        const auto [low, high] = it.key();
        const double up = it.value().up.value_or(0), down = it.value().down.value_or(0);
        const bool wrap = wraps(low, high);
        const bool upIsForward = high == low + 1; // else the ring's closing pair: down (last -> first) is
        if (up <= 0 && down <= 0) {
            if (wrap)
                drawStubs(low, high, upIsForward, 0, m.idleLink, pal.idleLink, false);
            else
                drawArrow(p, route(low, high, 0), m.idleLink, pal.idleLink, false);
            continue;
        }
        const bool both = up > 0 && down > 0;
        const double offset = both ? std::max(linkWidth(m, up), linkWidth(m, down)) / 2 + 0.25 * f : 0;
        if (wrap) { // too short for a rate label: the tooltip and the line's width tell it
            if (up > 0)
                drawStubs(low, high, upIsForward, -offset, linkWidth(m, up), pal.link, true);
            if (down > 0)
                drawStubs(high, low, !upIsForward, offset, linkWidth(m, down), pal.link, true);
            continue;
        }
        if (up > 0) {
            const QVector<QPointF> r = route(low, high, offset);
            drawArrow(p, r, linkWidth(m, up), pal.link, true);
            labels << Label{formatRate(up), r, linkWidth(m, up) / 2 + 0.25 * f};
        }
        if (down > 0) {
            QVector<QPointF> r = route(low, high, -offset);
            std::reverse(r.begin(), r.end());
            drawArrow(p, r, linkWidth(m, down), pal.link, true);
            labels << Label{formatRate(down), r, linkWidth(m, down) / 2 + 0.25 * f};
        }
    }

    // Rates beside their lines, on the right-hand side of travel (so the two
    // directions of a pair label opposite sides, and a clockwise ring labels
    // its inside); a label that would cover a box or another label tries a
    // few places along the line, then on it, then gives up (the width still
    // tells the rate).
    const QFont font = pixelFont(this->font(), std::max(m.minFont * 0.9, 0.9 * f));
    const QFontMetricsF fm(font);
    p.setFont(font);
    QVector<QRectF> taken;
    for (const QRectF &r : l.rects)
        taken << r.adjusted(-2, -2, 2, 2);
    for (const Label &label : labels) {
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
            if (!rect().contains(r.toAlignedRect()) ||
                std::any_of(taken.cbegin(), taken.cend(), [&](const QRectF &t) { return t.intersects(r); }))
                continue;
            taken << r;
            p.setPen(Qt::NoPen);
            p.setBrush(pal.labelBackground);
            p.drawRoundedRect(r, 0.3 * f, 0.3 * f);
            p.setPen(pal.text);
            p.drawText(r, Qt::AlignCenter, label.text);
            break;
        }
    }
}

void ClusterView::paintNode(QPainter &p, const Layout &l, const Palette &pal, const NodeState &node,
                            double memoryScale, QStringList *shownText) const
{
    const Metrics m = metrics(m_projector);
    const QRectF r = l.rects.value(node.id);
    if (r.isEmpty())
        return;
    const double f = l.fontPx;
    const double radius = 0.55 * f;
    const bool lost = node.state == NodeRunState::Lost;
    const bool failed = node.state == NodeRunState::Failed;

    if (!m_projector) { // a soft shadow lifts the boxes off the links
        p.setPen(Qt::NoPen);
        p.setBrush(QColor(0, 0, 0, 24));
        p.drawRoundedRect(r.translated(0, 2), radius, radius);
    }
    // Lost: a thick dashed border; failed: a thick solid one; both on a pale red.
    QPen border(lost || failed ? pal.state(node.state) : pal.nodeBorder, lost || failed ? 2 * m.border : m.border);
    if (lost || (node.rank < 0 && !failed))
        border.setStyle(Qt::DashLine);
    p.setPen(border);
    p.setBrush(lost || failed ? pal.lostFill : node.rank < 0 ? pal.outOfRunFill : pal.nodeFill);
    p.drawRoundedRect(r, radius, radius);

    const double pad = 0.6 * f;
    const QRectF inner = r.adjusted(pad, 0.45 * f, -pad, -0.45 * f);
    const QFont titleFont = pixelFont(font(), f, true);
    const QFont smallFont = pixelFont(font(), 0.88 * f);
    const QFont badgeFont = pixelFont(font(), 0.82 * f, true);
    const QFontMetricsF tfm(titleFont), sfm(smallFont), bfm(badgeFont);
    const double titleH = tfm.height();
    const double smallH = sfm.height();
    const double barH = std::max(5.0, 0.75 * f);
    const double overhang = 0.3 * barH; // the peak tick reaches above and below the bar
    const double spacing = 0.22 * f;

    QString badge = runStateName(node.state);
    if (node.state == NodeRunState::Slow && node.slowdown > 1)
        badge += QStringLiteral(" ×%1").arg(node.slowdown, 0, 'g', 3);
    const QSizeF badgeSize(bfm.horizontalAdvance(badge) + 0.8 * f, std::min(titleH, bfm.height() + 0.2 * f));
    const QString name = displayName(node);
    const bool badgeBesideName =
        tfm.horizontalAdvance(name) + spacing * 2 + badgeSize.width() <= inner.width();

    // Rows, most important first; the ones that fit the box are drawn, in display order.
    enum Row { BadgeRow, Reason, Role, Host, Bar, Figures, NUM_ROWS };
    const double rowHeight[NUM_ROWS] = {badgeSize.height(), smallH, smallH, smallH, barH + 2 * overhang, smallH};
    const Row priority[] = {BadgeRow, Reason, Bar, Figures, Role, Host};
    const bool saysWhy = (failed || lost) && !node.reason.isEmpty();
    bool shown[NUM_ROWS] = {};
    double used = titleH;
    for (Row row : priority) {
        if (row == BadgeRow && badgeBesideName)
            continue;
        if (row == Host && node.host.isEmpty())
            continue;
        if (row == Reason && !saysWhy)
            continue;
        if (used + spacing + rowHeight[row] <= inner.height()) {
            shown[row] = true;
            used += spacing + rowHeight[row];
        }
    }
    p.save();
    p.setClipRect(r);
    double y = inner.top() + (inner.height() - used) / 2;

    const auto drawBadge = [&](QPointF topLeft) {
        const QRectF b(topLeft, badgeSize);
        p.setPen(Qt::NoPen);
        p.setBrush(pal.state(node.state));
        p.drawRoundedRect(b, b.height() / 2, b.height() / 2);
        p.setFont(badgeFont);
        p.setPen(pal.stateText(node.state));
        p.drawText(b, Qt::AlignCenter, badge);
        if (shownText)
            *shownText << badge;
    };
    // Title: the name, and the state badge when it fits beside it (or when
    // there is no room for a row of its own: then the name gives way).
    const bool badgeInTitle = !shown[BadgeRow];
    const double nameWidth = badgeInTitle ? inner.width() - badgeSize.width() - spacing : inner.width();
    p.setFont(titleFont);
    p.setPen(pal.text);
    const QString shownName = tfm.elidedText(name, Qt::ElideRight, std::max(0.0, nameWidth));
    p.drawText(QRectF(inner.left(), y, std::max(0.0, nameWidth), titleH), Qt::AlignLeft | Qt::AlignVCenter,
               shownName);
    if (shownText && !shownName.isEmpty())
        *shownText << shownName;
    if (badgeInTitle)
        drawBadge(QPointF(inner.right() - badgeSize.width(), y + (titleH - badgeSize.height()) / 2));
    y += titleH;

    const auto textRow = [&](const QString &text, const QColor &color) {
        y += spacing;
        p.setFont(smallFont);
        p.setPen(color);
        const QString elided = sfm.elidedText(text, Qt::ElideRight, inner.width());
        p.drawText(QRectF(inner.left(), y, inner.width(), smallH), Qt::AlignLeft | Qt::AlignVCenter, elided);
        if (shownText && !elided.isEmpty())
            *shownText << elided;
        y += smallH;
    };
    if (shown[BadgeRow]) {
        y += spacing;
        drawBadge(QPointF(inner.left(), y));
        y += badgeSize.height();
    }
    if (shown[Reason]) // the first line of why, in the state's colour; the tooltip has all of it
        textRow(node.reason.section(QLatin1Char('\n'), 0, 0), pal.state(node.state));
    if (shown[Role]) {
        const QString rank = node.rank >= 0 ? tr("rank %1").arg(node.rank) : tr("not in run");
        const QString role = node.role.isEmpty() ? QString() : QStringLiteral(" · ") + node.role;
        // --backend gloo: no links to draw traffic on; the rate goes before the role when both do not fit
        const QString gloo = node.collectiveBytesPerSecond
                                 ? tr(" · gloo %1/s").arg(formatBytes(std::int64_t(*node.collectiveBytesPerSecond)))
                                 : QString();
        QString where = rank + role + gloo;
        if (!gloo.isEmpty() && sfm.horizontalAdvance(where) > inner.width())
            where = rank + gloo;
        textRow(where, pal.text);
    }
    if (shown[Host])
        textRow(node.host, pal.mutedText);
    if (shown[Bar]) {
        y += spacing + overhang;
        paintMemoryBar(p, pal, QRectF(inner.left(), y, inner.width(), barH), node.memory, memoryScale);
        y += barH + overhang;
    }
    if (shown[Figures]) {
        const QString live = formatBytes(node.memory.live), peak = formatBytes(node.memory.peak);
        QString text = tr("%1 live, peak %2").arg(live, peak);
        if (sfm.horizontalAdvance(text) > inner.width())
            text = tr("%1 · peak %2").arg(live, peak); // every figure with its unit
        if (sfm.horizontalAdvance(text) > inner.width())
            text = tr("peak %1").arg(peak);
        if (sfm.horizontalAdvance(text) > inner.width())
            text = tr("%1 live").arg(live);
        textRow(text, pal.text);
    }
    p.restore();
}

// A bar stacked by category on one scale for every node, the peak as a tick
// reaching a third of the bar's height above and below it.
void ClusterView::paintMemoryBar(QPainter &p, const Palette &pal, const QRectF &track, const MemoryBytes &memory,
                                 double memoryScale) const
{
    const double barH = track.height();
    const double overhang = 0.3 * barH;
    QPainterPath clip;
    clip.addRoundedRect(track, barH / 4, barH / 4);
    p.setPen(Qt::NoPen);
    p.setBrush(m_projector ? pal.background : pal.grid.lighter(112));
    p.drawPath(clip);
    p.save();
    p.setClipPath(clip, Qt::IntersectClip);
    double x = track.left();
    for (MemoryCategory c : kMemoryCategories) {
        const double w = track.width() * double(categoryBytes(memory, c)) / memoryScale;
        if (w <= 0)
            continue;
        p.fillRect(QRectF(x, track.top(), w, barH), pal.category(c));
        x += w;
        if (w > 3) // a hairline between segments keeps neighbours apart on a projector
            p.fillRect(QRectF(x - 1, track.top(), 1, barH), pal.background);
    }
    p.restore();
    p.setBrush(Qt::NoBrush);
    p.setPen(QPen(pal.grid.darker(m_projector ? 200 : 120), m_projector ? 1.5 : 1));
    p.drawPath(clip);
    if (memory.peak > 0) {
        const double px = std::min(track.right(),
                                   track.left() + track.width() * double(memory.peak) / memoryScale);
        p.setPen(QPen(pal.peak, m_projector ? 3 : 2, Qt::SolidLine, Qt::FlatCap));
        p.drawLine(QPointF(px, track.top() - overhang), QPointF(px, track.bottom() + overhang));
    }
}

// A compact box: a strip in the state's colour along the left edge, the
// rank ("#id" out of the run) in bold, the name when it fits, a badge unless
// the node is simply running or idle (a "!" when even that does not fit a
// failed node), and a thin memory bar along the bottom.
void ClusterView::paintCompactNode(QPainter &p, const Layout &l, const Palette &pal, const NodeState &node,
                                   double memoryScale, QStringList *shownText) const
{
    const Metrics m = metrics(m_projector);
    const QRectF r = l.rects.value(node.id);
    if (r.isEmpty())
        return;
    const double f = l.fontPx;
    const double radius = std::min(0.4 * f, r.height() / 4);
    const bool lost = node.state == NodeRunState::Lost;
    const bool failed = node.state == NodeRunState::Failed;
    const double borderWidth = (lost || failed ? 2 : 1) * std::max(1.0, m.border * std::min(1.0, f / m.font));
    QPen border(lost || failed ? pal.state(node.state) : pal.nodeBorder, borderWidth);
    if (lost || (node.rank < 0 && !failed))
        border.setStyle(Qt::DashLine);
    p.setPen(border);
    p.setBrush(lost || failed ? pal.lostFill : node.rank < 0 ? pal.outOfRunFill : pal.nodeFill);
    p.drawRoundedRect(r, radius, radius);

    p.save();
    p.setClipRect(r);
    const double strip = std::max(3.0, 0.32 * f);
    QPainterPath edge;
    edge.addRoundedRect(r.adjusted(borderWidth / 2, borderWidth / 2, -borderWidth / 2, -borderWidth / 2), radius,
                        radius);
    p.save();
    p.setClipPath(edge, Qt::IntersectClip);
    p.fillRect(QRectF(r.left(), r.top(), strip + borderWidth / 2, r.height()), pal.state(node.state));
    p.restore();

    const double pad = std::max(2.0, 0.3 * f);
    const QRectF inner = r.adjusted(strip + pad, 0.2 * f, -pad, -0.25 * f);
    const double barH = std::max(3.0, 0.4 * f);
    const QRectF bar(inner.left(), inner.bottom() - barH, inner.width(), barH);
    const QRectF line(inner.left(), inner.top(), inner.width(), bar.top() - inner.top() - 0.1 * f);
    const QFont bold = pixelFont(font(), f, true), plain = pixelFont(font(), 0.85 * f),
                badgeFont = pixelFont(font(), 0.78 * f, true);
    const QFontMetricsF bfm(bold), pfm(plain), badgeFm(badgeFont);
    const auto record = [&](const QString &text) {
        if (shownText && !text.isEmpty())
            *shownText << text;
    };

    // The number, then the badge from the right, then the name in what is left.
    QString number = node.rank >= 0 ? QString::number(node.rank) : QStringLiteral("#%1").arg(node.id);
    p.setFont(bold);
    p.setPen(pal.text);
    const double numberWidth = bfm.horizontalAdvance(number);
    p.drawText(QRectF(line.left(), line.top(), numberWidth + 1, line.height()), Qt::AlignLeft | Qt::AlignVCenter,
               number);
    record(number);
    double right = line.right();
    const bool plainState = node.state == NodeRunState::Running || node.state == NodeRunState::Idle;
    if (!plainState) {
        QString badge = runStateName(node.state);
        if (node.state == NodeRunState::Slow && node.slowdown > 1)
            badge += QStringLiteral(" ×%1").arg(node.slowdown, 0, 'g', 3);
        const QSizeF size(badgeFm.horizontalAdvance(badge) + 0.6 * f, std::min(line.height(), badgeFm.height() + 0.1 * f));
        if (numberWidth + 0.3 * f + size.width() <= line.width()) {
            const QRectF b(QPointF(line.right() - size.width(), line.center().y() - size.height() / 2), size);
            p.setPen(Qt::NoPen);
            p.setBrush(pal.state(node.state));
            p.drawRoundedRect(b, b.height() / 2, b.height() / 2);
            p.setFont(badgeFont);
            p.setPen(pal.stateText(node.state));
            p.drawText(b, Qt::AlignCenter, badge);
            record(badge);
            right = b.left() - 0.3 * f;
        } else if (failed || lost) { // too narrow for the word: a mark that is not colour alone
            const QString mark = failed ? QStringLiteral("!") : QStringLiteral("×");
            p.setFont(bold);
            p.setPen(pal.state(node.state));
            const double w = bfm.horizontalAdvance(mark);
            p.drawText(QRectF(line.left() + numberWidth + 0.15 * f, line.top(), w + 1, line.height()),
                       Qt::AlignLeft | Qt::AlignVCenter, mark);
            record(mark);
            right = line.left(); // and no name
        }
    }
    const double nameLeft = line.left() + numberWidth + 0.4 * f;
    if (!node.name.isEmpty() && right - nameLeft >= pfm.horizontalAdvance(QStringLiteral("ab…"))) {
        const QString name = pfm.elidedText(node.name, Qt::ElideRight, right - nameLeft);
        p.setFont(plain);
        p.setPen(pal.mutedText);
        p.drawText(QRectF(nameLeft, line.top(), right - nameLeft, line.height()), Qt::AlignLeft | Qt::AlignVCenter,
                   name);
        record(name);
    }
    paintMemoryBar(p, pal, bar, node.memory, memoryScale);
    p.restore();
}

bool ClusterView::event(QEvent *event)
{
    if (event->type() == QEvent::ToolTip) {
        auto *help = static_cast<QHelpEvent *>(event);
        const int id = nodeAt(help->pos());
        const NodeState *node = id >= 0 && m_state ? findNode(*m_state, id) : nullptr;
        if (node)
            QToolTip::showText(help->globalPos(), nodeSummary(*node), this, nodeRect(id).toAlignedRect());
        else
            QToolTip::hideText();
        return true;
    }
    return QWidget::event(event);
}

void ClusterView::mousePressEvent(QMouseEvent *event)
{
    if (event->button() != Qt::LeftButton) {
        QWidget::mousePressEvent(event);
        return;
    }
    setSelectedNode(nodeAt(event->position()));
}

} // namespace smol::widgets
