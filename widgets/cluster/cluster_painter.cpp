#include "cluster_painter.h"

#include "widgets/paint/palette.h"
#include "widgets/paint/pixel_font.h"
#include "widgets/step_number.h"

#include <QFontMetricsF>
#include <QPainter>
#include <QPainterPath>

#include <algorithm>
#include <cmath>

namespace smol::widgets {

namespace {

// "60 running, 2 paused, 1 failed, 1 lost": how many nodes are in each state.
QString stateCounts(const ClusterState &state)
{
    int count[kNodeRunStateCount] = {};
    for (const NodeState &n : state.nodes)
        ++count[int(n.state)];
    QStringList parts;
    for (NodeRunState s : {NodeRunState::Running, NodeRunState::Paused, NodeRunState::Slow,
                           NodeRunState::Failed, NodeRunState::Lost, NodeRunState::Idle})
        if (count[int(s)] > 0)
            parts << QStringLiteral("%1 %2").arg(count[int(s)]).arg(runStateName(s));
    const int n = int(state.nodes.size());
    return (n == 1 ? ClusterPainter::tr("1 node: ") : ClusterPainter::tr("%1 nodes: ").arg(n)) +
           parts.join(QStringLiteral(", "));
}

// The legend: five categories and the peak tick.
QStringList legendLabels()
{
    QStringList labels;
    for (MemoryCategory c : kMemoryCategories)
        labels << categoryName(c);
    labels << ClusterPainter::tr("peak");
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

void drawArrow(QPainter &p, const ClusterLink &link, const QColor &color)
{
    if (link.points.size() < 2)
        return;
    QVector<QPointF> points = link.points;
    const double width = link.width;
    const bool head = link.bytesPerSecond > 0;
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

double memoryScale(const ClusterState &state)
{
    double scale = 1;
    for (const NodeState &n : state.nodes)
        scale = std::max({scale, double(n.memory.peak), double(n.memory.live), double(n.memory.stacked())});
    return scale;
}

// The state's word, and a slow node's slowdown: "slow ×3".
QString badgeText(const NodeState &node)
{
    QString badge = runStateName(node.state);
    if (node.state == NodeRunState::Slow && node.slowdown > 1)
        badge += QStringLiteral(" ×%1").arg(node.slowdown, 0, 'g', 3);
    return badge;
}

// A mesh axis's link colour: tp, pp, dp, cp told apart by hue and, on a
// projector, darker for contrast on white.
QColor axisColor(net::MeshAxis axis, bool projector)
{
    QColor c;
    switch (axis) {
    case net::MeshAxis::Tp:
        c = QColor(0xd0, 0x3a, 0x2f); // red
        break;
    case net::MeshAxis::Pp:
        c = QColor(0x1f, 0x6f, 0xd1); // blue
        break;
    case net::MeshAxis::Dp:
        c = QColor(0x1e, 0x9a, 0x4c); // green
        break;
    case net::MeshAxis::Cp:
        c = QColor(0x8e, 0x3f, 0xb5); // purple
        break;
    }
    return projector ? c.darker(115) : c;
}

// The mesh's axes above 1, in the legend's order (the fastest first, as ranks count).
QVector<net::MeshAxis> legendAxes(const net::DeviceMesh &mesh)
{
    QVector<net::MeshAxis> axes;
    for (net::MeshAxis a : {net::MeshAxis::Tp, net::MeshAxis::Cp, net::MeshAxis::Pp, net::MeshAxis::Dp})
        if (mesh.size(a) > 1)
            axes << a;
    return axes;
}

// The width the links' legend takes: a short line and its axis per axis.
double meshLegendWidth(const net::DeviceMesh &mesh, const QFontMetricsF &fm)
{
    double w = 0;
    for (net::MeshAxis a : legendAxes(mesh))
        w += 1.6 * fm.height() + 0.3 * fm.height() +
             fm.horizontalAdvance(QLatin1String(net::meshAxisName(a))) + 0.8 * fm.height();
    return w > 0 ? w - 0.8 * fm.height() : 0;
}

void record(QStringList *shown, const QString &text)
{
    if (shown && !text.isEmpty())
        *shown << text;
}

} // namespace

// One step number everywhere (widgets/step_number.h): the step the cluster
// is in, the engine's step index; at a pause the held collective's.
QString ClusterPainter::headerTitle(const ClusterState &state, const QString &nextStrategy)
{
    QString strategy = state.strategy;
    QString step;
    const std::int64_t current = stepInProgress(state);
    if (current < 0 && state.step < 0) {
        step = tr("not started");
        if (!nextStrategy.isEmpty())
            strategy = nextStrategy;
    } else if (current < 0 && state.steps > 0 && state.step + 1 >= state.steps) {
        step = tr("done, %1 steps").arg(state.steps);
    } else if (current < 0) {
        step = tr("ended after %1").arg(stepText(state.step));
    } else if (state.steps > 0) {
        step = tr("%1 / %2").arg(stepText(current)).arg(state.steps);
    } else {
        step = stepText(current);
    }
    return strategy.isEmpty() ? step : strategy + QStringLiteral(" · ") + step;
}

ClusterPainter::ClusterPainter(const ClusterLayout &layout, const ClusterState &state)
    : m_layout(layout)
    , m_state(state)
    , m_pal(Palette::forMode(layout.projector))
    , m_metrics(layout.metrics())
    , m_projector(layout.projector)
    , m_memoryScale(memoryScale(state))
{
}

void ClusterPainter::paintEmpty(QPainter &p, QSize size, bool projector, const QFont &font)
{
    const Palette &pal = Palette::forMode(projector);
    p.setRenderHint(QPainter::TextAntialiasing);
    p.fillRect(QRect(QPoint(0, 0), size), pal.background);
    p.setPen(pal.mutedText);
    p.setFont(pixelFont(font, ClusterMetrics::forMode(projector).headerPx(size)));
    p.drawText(QRect(QPoint(0, 0), size), Qt::AlignCenter, tr("No nodes yet: start a run or add a node."));
}

void ClusterPainter::paint(QPainter &p, const QString &nextStrategy, int selected) const
{
    const ClusterLayout &l = m_layout;
    p.setRenderHint(QPainter::Antialiasing);
    p.setRenderHint(QPainter::TextAntialiasing);
    p.fillRect(QRect(QPoint(0, 0), l.size), m_pal.background);
    paintHeader(p, nextStrategy);
    if (!l.outOfRunCaption.isEmpty() &&
        !l.idOfRank.isEmpty()) { // (between runs no node is in one: no caption)
        p.setPen(m_pal.mutedText);
        p.setFont(pixelFont(l.font, l.fontPx * 0.9, true));
        p.drawText(l.outOfRunCaption, Qt::AlignLeft | Qt::AlignVCenter, tr("Not in this run"));
    }
    paintLinks(p);
    for (const NodeState &n : m_state.nodes)
        paintNode(p, n);
    paintSelection(p, selected);
    paintYou(p);
}

// A student's window (smolcluster --join): their own machine's box framed
// in the running colour, with a tag on its top edge, so it is found at a
// glance among thirty.
void ClusterPainter::paintYou(QPainter &p) const
{
    for (const NodeState &n : m_state.nodes) {
        if (!n.you || m_layout.nodeRect(n.id).isEmpty())
            continue;
        const QRectF r = m_layout.nodeRect(n.id);
        const double w = std::max(3.0, 1.5 * m_metrics.selection);
        const QColor colour = m_pal.state(NodeRunState::Running);
        p.setBrush(Qt::NoBrush);
        p.setPen(QPen(colour, w));
        const double radius = 0.55 * m_layout.fontPx + w;
        p.drawRoundedRect(r.adjusted(-w, -w, w, w), radius, radius);
        const QString text = n.rank >= 0 ? tr("you: rank %1").arg(n.rank) : tr("you (not in this run)");
        const QFont font = pixelFont(m_layout.font, std::max(9.0, m_layout.fontPx * 0.85), true);
        const QFontMetricsF fm(font);
        const QSizeF size(fm.horizontalAdvance(text) + 0.8 * m_layout.fontPx, fm.height() + 2);
        QRectF tag(QPointF(r.left() + 0.6 * m_layout.fontPx, r.top() - w - size.height() / 2), size);
        tag.moveTop(std::max(0.0, tag.top()));
        p.setPen(Qt::NoPen);
        p.setBrush(colour);
        p.drawRoundedRect(tag, size.height() / 2, size.height() / 2);
        p.setFont(font);
        p.setPen(m_pal.stateText(NodeRunState::Running));
        p.drawText(tag, Qt::AlignCenter, text);
    }
}

void ClusterPainter::paintHeader(QPainter &p, const QString &nextStrategy) const
{
    const ClusterLayout &l = m_layout;
    const double headerPx = m_metrics.headerPx(l.size);
    const QFont bold = pixelFont(l.font, headerPx, true);
    const double h = QFontMetricsF(bold).height();
    p.setFont(bold);
    p.setPen(m_pal.text);
    const QRectF title(l.header.left(), l.header.top(), l.header.width(), h);
    QString heading = headerTitle(m_state, nextStrategy);
    const double legend = paintMeshLegend(p, title, headerPx);
    // Compact boxes are too small for their badges' words: count them here;
    // beside a mesh's legend, only when they fit or say more than one state.
    if (l.compact) {
        const QString counted = heading + QStringLiteral(" · ") + stateCounts(m_state);
        const bool oneState =
            std::all_of(m_state.nodes.cbegin(), m_state.nodes.cend(),
                        [&](const NodeState &n) { return n.state == m_state.nodes.first().state; });
        const bool fits = QFontMetricsF(bold).horizontalAdvance(counted) <= title.width() - legend;
        if (legend <= 0 || fits || !oneState)
            heading = counted;
    }
    p.setFont(bold);
    p.setPen(m_pal.text);
    p.drawText(title, Qt::AlignLeft | Qt::AlignVCenter,
               QFontMetricsF(bold).elidedText(heading, Qt::ElideRight, title.width() - legend));
    paintLegend(p, title.translated(0, 1.15 * h), headerPx, h);

    // Compact mode: the first failure, with its reason, on a line of its own.
    if (const NodeState *failed = l.compact && l.alert ? firstAlert(m_state) : nullptr) {
        const QRectF alertLine = title.translated(0, 2.25 * h);
        const QString text =
            tr("%1 %2: %3").arg(displayName(*failed), runStateName(failed->state), failed->reason);
        const QFont alertFont = pixelFont(l.font, headerPx * 0.9, true);
        p.setFont(alertFont);
        p.setPen(m_pal.state(failed->state));
        p.drawText(alertLine, Qt::AlignLeft | Qt::AlignVCenter,
                   QFontMetricsF(alertFont).elidedText(text, Qt::ElideRight, alertLine.width()));
    }
}

// A mesh's links by axis, at the right of the title line: a line in each
// axis's colour and its name. Returns the width it took (with a gap before it).
double ClusterPainter::paintMeshLegend(QPainter &p, const QRectF &line, double headerPx) const
{
    if (m_layout.mesh.trivial())
        return 0;
    const QFont font = pixelFont(m_layout.font, headerPx * 0.85, true);
    const QFontMetricsF fm(font);
    const double h = fm.height();
    double x = line.right() - meshLegendWidth(m_layout.mesh, fm);
    const double start = x;
    p.setFont(font);
    for (net::MeshAxis a : legendAxes(m_layout.mesh)) {
        p.setPen(QPen(axisColor(a, m_projector), m_projector ? 4 : 3, Qt::SolidLine, Qt::RoundCap));
        p.drawLine(QPointF(x + 0.1 * h, line.center().y()), QPointF(x + 1.5 * h, line.center().y()));
        x += 1.9 * h;
        const QString name = QLatin1String(net::meshAxisName(a));
        const double w = fm.horizontalAdvance(name);
        p.setPen(m_pal.text);
        p.drawText(QRectF(x, line.top(), w + 2, line.height()), Qt::AlignLeft | Qt::AlignVCenter, name);
        x += w + 0.8 * h;
    }
    return line.right() - start + h;
}

// The legend on the header's second line, in a smaller font if the line is short.
void ClusterPainter::paintLegend(QPainter &p, const QRectF &line, double headerPx, double lineHeight) const
{
    QFont plain = pixelFont(m_layout.font, headerPx * 0.9);
    // (Text does not scale linearly with its pixel size: shrink until it fits.)
    for (double px = headerPx * 0.9; legendWidth(QFontMetricsF(plain)) > m_layout.header.width() && px > 6;
         px *= 0.95)
        plain = pixelFont(m_layout.font, px * 0.95);
    const QFontMetricsF fm(plain);
    const QStringList labels = legendLabels();
    const double swatch = 0.8 * fm.height();
    double x = line.left();
    p.setFont(plain);
    for (int i = 0; i < labels.size(); ++i) {
        const QRectF sw(x, line.center().y() - swatch / 2, swatch, swatch);
        if (i < kMemoryCategoryCount) {
            p.setPen(m_projector ? QPen(m_pal.text, 1) : Qt::NoPen);
            p.setBrush(m_pal.category(kMemoryCategories[std::size_t(i)]));
            p.drawRect(sw);
        } else { // the peak tick, as drawn on the bars
            p.setPen(QPen(m_pal.peak, m_projector ? 3 : 2));
            p.drawLine(QPointF(sw.center().x(), sw.top()), QPointF(sw.center().x(), sw.bottom()));
        }
        x = sw.right() + 0.35 * fm.height();
        const double w = fm.horizontalAdvance(labels[i]);
        p.setPen(m_pal.text);
        p.drawText(QRectF(x, line.top(), w + 2, lineHeight), Qt::AlignLeft | Qt::AlignVCenter, labels[i]);
        x += w + fm.height();
    }
}

void ClusterPainter::paintLinks(QPainter &p) const
{
    const ClusterLinks links = m_layout.links(m_state);
    for (const ClusterLink &line : links.lines) {
        QColor color = line.bytesPerSecond > 0 ? m_pal.link : m_pal.idleLink;
        if (line.axis) { // a mesh: the axis's colour, paler while idle
            color = axisColor(*line.axis, m_projector);
            if (line.bytesPerSecond <= 0)
                color.setAlphaF(0.45);
        }
        drawArrow(p, line, color);
    }
    const double f = m_layout.fontPx;
    p.setFont(pixelFont(m_layout.font, links.labelFontPx));
    for (const ClusterLinkLabel &label : links.labels) {
        p.setPen(Qt::NoPen);
        p.setBrush(m_pal.labelBackground);
        p.drawRoundedRect(label.rect, 0.3 * f, 0.3 * f);
        p.setPen(m_pal.text);
        p.drawText(label.rect, Qt::AlignCenter, label.text);
    }
}

void ClusterPainter::paintSelection(QPainter &p, int selected) const
{
    if (selected < 0 || !m_layout.rects.contains(selected))
        return;
    const double w = m_metrics.selection;
    const double radius = 0.55 * m_layout.fontPx + w / 2 + 1;
    p.setBrush(Qt::NoBrush);
    p.setPen(QPen(m_pal.selection, w));
    p.drawRoundedRect(m_layout.nodeRect(selected).adjusted(-w / 2 - 1, -w / 2 - 1, w / 2 + 1, w / 2 + 1),
                      radius, radius);
}

QString ClusterPainter::coordsOf(const NodeState &node) const
{
    if (m_layout.mesh.trivial() || node.rank < 0 || node.rank >= m_layout.mesh.nodes())
        return {};
    return QString::fromStdString(m_layout.mesh.coordsLabel(node.rank));
}

void ClusterPainter::paintNode(QPainter &p, const NodeState &node, QStringList *shown) const
{
    if (m_layout.nodeRect(node.id).isEmpty())
        return;
    if (m_layout.compact)
        paintCompactNode(p, node, shown);
    else
        paintFullNode(p, node, shown);
}

// Lost: a thick dashed border; failed: a thick solid one; both on a pale
// red. Not in the run: dashed, on its own fill.
void ClusterPainter::paintFrame(QPainter &p, const NodeState &node, const QRectF &r, double radius,
                                double borderWidth) const
{
    const bool lost = node.state == NodeRunState::Lost;
    const bool failed = node.state == NodeRunState::Failed;
    QPen border(lost || failed ? m_pal.state(node.state) : m_pal.nodeBorder, borderWidth);
    if (lost || (node.rank < 0 && !failed))
        border.setStyle(Qt::DashLine);
    p.setPen(border);
    p.setBrush(lost || failed ? m_pal.lostFill : node.rank < 0 ? m_pal.outOfRunFill : m_pal.nodeFill);
    p.drawRoundedRect(r, radius, radius);
}

// A pill in the state's colour with the state's word on it.
void ClusterPainter::paintBadge(QPainter &p, const QRectF &b, const QFont &font, const NodeState &node,
                                const QString &text, QStringList *shown) const
{
    p.setPen(Qt::NoPen);
    p.setBrush(m_pal.state(node.state));
    p.drawRoundedRect(b, b.height() / 2, b.height() / 2);
    p.setFont(font);
    p.setPen(m_pal.stateText(node.state));
    p.drawText(b, Qt::AlignCenter, text);
    record(shown, text);
}

namespace {

// A full box's rows below the title, most important first in kPriority;
// the ones that fit the box are drawn, in this (display) order.
enum Row { Coords, BadgeRow, Reason, Role, Host, Bar, Figures, NUM_ROWS };
constexpr Row kPriority[] = {Coords, BadgeRow, Reason, Bar, Figures, Role, Host};

// Where a full box's text goes, and which of its rows fit.
struct FullBox {
    QRectF inner; // inside the padding
    NodeBoxFonts fonts;
    double titleH = 0, smallH = 0, barH = 0, spacing = 0;
    double overhang = 0; // the peak tick reaches above and below the bar
    QString name, badge;
    QString coords; // on a mesh: "dp1 · pp0 · tp1"
    QSizeF badgeSize;
    bool shown[NUM_ROWS] = {};
    double used = 0; // the height of the title and the rows shown
};

FullBox planFullBox(const NodeState &node, const QRectF &r, const NodeBoxFonts &fonts, double f,
                    const QString &coords)
{
    FullBox b;
    b.inner = r.adjusted(0.6 * f, 0.45 * f, -0.6 * f, -0.45 * f);
    b.fonts = fonts;
    const QFontMetricsF tfm(fonts.title), sfm(fonts.small), bfm(fonts.badge);
    b.titleH = tfm.height();
    b.smallH = sfm.height();
    b.barH = std::max(5.0, 0.75 * f);
    b.overhang = 0.3 * b.barH;
    b.spacing = fonts.spacing;
    b.name = displayName(node);
    b.badge = badgeText(node);
    b.coords = coords;
    b.badgeSize =
        QSizeF(bfm.horizontalAdvance(b.badge) + 0.8 * f, std::min(b.titleH, bfm.height() + 0.2 * f));
    const bool badgeBesideName =
        tfm.horizontalAdvance(b.name) + b.spacing * 2 + b.badgeSize.width() <= b.inner.width();
    const double rowHeight[NUM_ROWS] = {b.smallH, b.badgeSize.height(),    b.smallH, b.smallH,
                                        b.smallH, b.barH + 2 * b.overhang, b.smallH};
    const bool saysWhy =
        (node.state == NodeRunState::Failed || node.state == NodeRunState::Lost) && !node.reason.isEmpty();
    b.used = b.titleH;
    for (Row row : kPriority) {
        if ((row == BadgeRow && badgeBesideName) || (row == Host && node.host.isEmpty()) ||
            (row == Reason && !saysWhy) || (row == Coords && coords.isEmpty()))
            continue;
        if (b.used + b.spacing + rowHeight[row] <= b.inner.height()) {
            b.shown[row] = true;
            b.used += b.spacing + rowHeight[row];
        }
    }
    return b;
}

// "rank 2 · worker", with the Gloo rate when there is one (--backend gloo:
// no links to draw traffic on); the rate goes before the role when both do not fit.
QString roleLine(const NodeState &node, const QFontMetricsF &fm, double width)
{
    const QString rank =
        node.rank >= 0 ? ClusterPainter::tr("rank %1").arg(node.rank) : ClusterPainter::tr("not in run");
    const QString role = node.role.isEmpty() ? QString() : QStringLiteral(" · ") + node.role;
    const QString gloo = node.collectiveBytesPerSecond
                             ? ClusterPainter::tr(" · gloo %1/s")
                                   .arg(formatBytes(std::int64_t(*node.collectiveBytesPerSecond)))
                             : QString();
    QString where = rank + role + gloo;
    if (!gloo.isEmpty() && fm.horizontalAdvance(where) > width)
        where = rank + gloo;
    return where;
}

// "2.9 MiB live, peak 3.4 MiB", shortened until it fits, every figure with its unit.
QString figuresLine(const net::MemoryByCategory &memory, const QFontMetricsF &fm, double width)
{
    const QString live = formatBytes(memory.live), peak = formatBytes(memory.peak);
    QString text = ClusterPainter::tr("%1 live, peak %2").arg(live, peak);
    if (fm.horizontalAdvance(text) > width)
        text = ClusterPainter::tr("%1 · peak %2").arg(live, peak);
    if (fm.horizontalAdvance(text) > width)
        text = ClusterPainter::tr("peak %1").arg(peak);
    if (fm.horizontalAdvance(text) > width)
        text = ClusterPainter::tr("%1 live").arg(live);
    return text;
}

} // namespace

// A full box: the name (with the badge beside it when it fits), then the
// rows planFullBox() chose, centred vertically.
void ClusterPainter::paintFullNode(QPainter &p, const NodeState &node, QStringList *shown) const
{
    const QRectF r = m_layout.nodeRect(node.id);
    const double f = m_layout.fontPx;
    const double radius = 0.55 * f;
    const bool alarm = node.state == NodeRunState::Lost || node.state == NodeRunState::Failed;
    if (!m_projector) { // a soft shadow lifts the boxes off the links
        p.setPen(Qt::NoPen);
        p.setBrush(QColor(0, 0, 0, 24));
        p.drawRoundedRect(r.translated(0, 2), radius, radius);
    }
    paintFrame(p, node, r, radius, (alarm ? 2 : 1) * m_metrics.border);

    const FullBox b = planFullBox(node, r, m_layout.boxFonts(), f, coordsOf(node));
    const QRectF &inner = b.inner;
    const QFontMetricsF tfm(b.fonts.title), sfm(b.fonts.small);
    p.save();
    p.setClipRect(r);
    double y = inner.top() + (inner.height() - b.used) / 2;
    // Title: the name, and the state badge when it fits beside it (or when
    // there is no room for a row of its own: then the name gives way).
    const bool badgeInTitle = !b.shown[BadgeRow];
    const double nameWidth =
        std::max(0.0, badgeInTitle ? inner.width() - b.badgeSize.width() - b.spacing : inner.width());
    p.setFont(b.fonts.title);
    p.setPen(m_pal.text);
    const QString shownName = tfm.elidedText(b.name, Qt::ElideRight, nameWidth);
    p.drawText(QRectF(inner.left(), y, nameWidth, b.titleH), Qt::AlignLeft | Qt::AlignVCenter, shownName);
    record(shown, shownName);
    if (badgeInTitle)
        paintBadge(
            p,
            QRectF(QPointF(inner.right() - b.badgeSize.width(), y + (b.titleH - b.badgeSize.height()) / 2),
                   b.badgeSize),
            b.fonts.badge, node, b.badge, shown);
    y += b.titleH;

    const auto textRow = [&](const QString &text, const QColor &color) {
        y += b.spacing;
        p.setFont(b.fonts.small);
        p.setPen(color);
        const QString elided = sfm.elidedText(text, Qt::ElideRight, inner.width());
        p.drawText(QRectF(inner.left(), y, inner.width(), b.smallH), Qt::AlignLeft | Qt::AlignVCenter,
                   elided);
        record(shown, elided);
        y += b.smallH;
    };
    if (b.shown[Coords])
        textRow(b.coords, m_pal.text);
    if (b.shown[BadgeRow]) {
        y += b.spacing;
        paintBadge(p, QRectF(QPointF(inner.left(), y), b.badgeSize), b.fonts.badge, node, b.badge, shown);
        y += b.badgeSize.height();
    }
    if (b.shown[Reason]) // the first line of why, in the state's colour; the tooltip has all of it
        textRow(node.reason.section(QLatin1Char('\n'), 0, 0), m_pal.state(node.state));
    if (b.shown[Role])
        textRow(roleLine(node, sfm, inner.width()), m_pal.text);
    if (b.shown[Host])
        textRow(node.host, m_pal.mutedText);
    if (b.shown[Bar]) {
        y += b.spacing + b.overhang;
        paintMemoryBar(p, QRectF(inner.left(), y, inner.width(), b.barH), node.memory);
        y += b.barH + b.overhang;
    }
    if (b.shown[Figures])
        textRow(figuresLine(node.memory, sfm, inner.width()), m_pal.text);
    p.restore();
}

// A bar stacked by category on one scale for every node, the peak as a tick
// reaching a third of the bar's height above and below it.
void ClusterPainter::paintMemoryBar(QPainter &p, const QRectF &track,
                                    const net::MemoryByCategory &memory) const
{
    const Palette &pal = m_pal;
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
        const double w = track.width() * double(categoryBytes(memory, c)) / m_memoryScale;
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
        const double px =
            std::min(track.right(), track.left() + track.width() * double(memory.peak) / m_memoryScale);
        p.setPen(QPen(pal.peak, m_projector ? 3 : 2, Qt::SolidLine, Qt::FlatCap));
        p.drawLine(QPointF(px, track.top() - overhang), QPointF(px, track.bottom() + overhang));
    }
}

// A compact box: a strip in the state's colour along the left edge, the
// rank ("#id" out of the run) in bold, the name when it fits, a badge unless
// the node is simply running or idle (a "!" when even that does not fit a
// failed node), and a thin memory bar along the bottom.
void ClusterPainter::paintCompactNode(QPainter &p, const NodeState &node, QStringList *shown) const
{
    const QRectF r = m_layout.nodeRect(node.id);
    const double f = m_layout.fontPx;
    const double radius = std::min(0.4 * f, r.height() / 4);
    const bool lost = node.state == NodeRunState::Lost;
    const bool failed = node.state == NodeRunState::Failed;
    const double borderWidth =
        (lost || failed ? 2 : 1) * std::max(1.0, m_metrics.border * std::min(1.0, f / m_metrics.font));
    paintFrame(p, node, r, radius, borderWidth);

    p.save();
    p.setClipRect(r);
    const double strip = std::max(3.0, 0.32 * f);
    QPainterPath edge;
    edge.addRoundedRect(r.adjusted(borderWidth / 2, borderWidth / 2, -borderWidth / 2, -borderWidth / 2),
                        radius, radius);
    p.save();
    p.setClipPath(edge, Qt::IntersectClip);
    p.fillRect(QRectF(r.left(), r.top(), strip + borderWidth / 2, r.height()), m_pal.state(node.state));
    p.restore();

    const double pad = std::max(2.0, 0.3 * f);
    const QRectF inner = r.adjusted(strip + pad, 0.2 * f, -pad, -0.25 * f);
    const double barH = std::max(3.0, 0.4 * f);
    const QRectF bar(inner.left(), inner.bottom() - barH, inner.width(), barH);
    // On a mesh, a box tall enough gives the coordinates a line of their own.
    const QString coords = coordsOf(node);
    const bool twoLines = !coords.isEmpty() && bar.top() - inner.top() >= 2.35 * f;
    const QRectF line(inner.left(), inner.top(), inner.width(),
                      twoLines ? 1.3 * f : bar.top() - inner.top() - 0.1 * f);
    const QFont bold = pixelFont(m_layout.font, f, true), plain = pixelFont(m_layout.font, 0.85 * f),
                badgeFont = pixelFont(m_layout.font, 0.78 * f, true);
    const QFontMetricsF bfm(bold), pfm(plain), badgeFm(badgeFont);

    // The number, then the badge from the right, then the name in what is left.
    const QString number = node.rank >= 0 ? QString::number(node.rank) : QStringLiteral("#%1").arg(node.id);
    p.setFont(bold);
    p.setPen(m_pal.text);
    const double numberWidth = bfm.horizontalAdvance(number);
    p.drawText(QRectF(line.left(), line.top(), numberWidth + 1, line.height()),
               Qt::AlignLeft | Qt::AlignVCenter, number);
    record(shown, number);
    double right = line.right();
    const bool plainState = node.state == NodeRunState::Running || node.state == NodeRunState::Idle;
    if (!plainState) {
        const QString badge = badgeText(node);
        const QSizeF size(badgeFm.horizontalAdvance(badge) + 0.6 * f,
                          std::min(line.height(), badgeFm.height() + 0.1 * f));
        if (numberWidth + 0.3 * f + size.width() <= line.width()) {
            const QRectF b(QPointF(line.right() - size.width(), line.center().y() - size.height() / 2), size);
            paintBadge(p, b, badgeFont, node, badge, shown);
            right = b.left() - 0.3 * f;
        } else if (failed || lost) { // too narrow for the word: a mark that is not colour alone
            const QString mark = failed ? QStringLiteral("!") : QStringLiteral("×");
            p.setFont(bold);
            p.setPen(m_pal.state(node.state));
            const double w = bfm.horizontalAdvance(mark);
            p.drawText(QRectF(line.left() + numberWidth + 0.15 * f, line.top(), w + 1, line.height()),
                       Qt::AlignLeft | Qt::AlignVCenter, mark);
            record(shown, mark);
            right = line.left(); // and no name
        }
    }
    const double nameLeft = line.left() + numberWidth + 0.4 * f;
    // On one line, the coordinates say more than the name (the tooltip has it).
    const QString label = coords.isEmpty() || twoLines ? node.name : coords;
    if (!label.isEmpty() && right - nameLeft >= pfm.horizontalAdvance(QStringLiteral("ab…"))) {
        const QString name = pfm.elidedText(label, Qt::ElideRight, right - nameLeft);
        p.setFont(plain);
        p.setPen(m_pal.mutedText);
        p.drawText(QRectF(nameLeft, line.top(), right - nameLeft, line.height()),
                   Qt::AlignLeft | Qt::AlignVCenter, name);
        record(shown, name);
    }
    if (twoLines) {
        const QRectF row(inner.left(), line.bottom(), inner.width(), bar.top() - line.bottom());
        const QString text = pfm.elidedText(coords, Qt::ElideRight, row.width());
        p.setFont(plain);
        p.setPen(m_pal.text);
        p.drawText(row, Qt::AlignLeft | Qt::AlignVCenter, text);
        record(shown, text);
    }
    paintMemoryBar(p, bar, node.memory);
    p.restore();
}

} // namespace smol::widgets
