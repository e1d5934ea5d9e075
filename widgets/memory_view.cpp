#include "memory_view.h"

#include "widgets/paint/nice_steps.h"
#include "widgets/paint/palette.h"
#include "widgets/paint/pixel_font.h"

#include <QFontMetricsF>
#include <QHelpEvent>
#include <QPainter>
#include <QToolTip>

#include <algorithm>
#include <cmath>

namespace smol::widgets {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

} // namespace

void MemoryView::setComparisonState(ClusterStatePtr b)
{
    m_compare = std::move(b);
    update();
}

QVector<double> MemoryView::axisTicks(double maxMiB, int approxTicks)
{
    if (!(maxMiB > 0))
        maxMiB = 1;
    const double step = niceStep(maxMiB / std::max(1, approxTicks));
    QVector<double> ticks;
    for (int i = 0;; ++i) {
        ticks << i * step;
        if (i * step >= maxMiB * (1 - 1e-9))
            break;
    }
    return ticks;
}

QVector<QString> MemoryView::legendLabels(bool withPredicted) const
{
    QVector<QString> labels;
    for (MemoryCategory c : kMemoryCategories)
        labels << categoryName(c);
    labels << tr("peak");
    if (withPredicted)
        labels << tr("ZeRO formula (params+grads+optimizer)");
    return labels;
}

double MemoryView::Geometry::y(double bytes) const
{
    return plot.bottom() - plot.height() * bytes / kMiB / ticks.last();
}

MemoryView::Geometry MemoryView::geometry() const
{
    Geometry g;
    if (!m_state)
        return g;
    // Larger on screens larger than 1024x768, up to half as big again.
    g.font = (m_projector ? 19 : 12) * std::clamp(std::min(width() / 1024.0, height() / 768.0), 1.0, 1.5);
    const double f = g.font;
    g.fonts = {pixelFont(font(), f), pixelFont(font(), f, true), pixelFont(font(), 0.85 * f)};
    const double margin = 0.9 * f;
    const QFontMetricsF fm(g.fonts.plain);
    const double h = fm.height();

    for (int i = 0; i < m_state->nodes.size(); ++i) {
        g.order << i;
        g.hasPredicted = g.hasPredicted || m_state->nodes[i].predictedBytes.has_value();
    }
    std::sort(g.order.begin(), g.order.end(),
              [&](int a, int b) { return m_state->nodes[a].id < m_state->nodes[b].id; });

    // Legend items flow left to right and wrap.
    QPointF at(margin, 0.6 * margin);
    for (const QString &label : legendLabels(g.hasPredicted)) {
        const double w = 0.9 * h + 0.35 * h + fm.horizontalAdvance(label);
        if (at.x() > margin && at.x() + w > width() - margin)
            at = QPointF(margin, at.y() + 1.2 * h);
        g.legendItems << QRectF(at, QSizeF(w, h));
        at.rx() += w + 1.1 * h;
    }
    const double legendBottom = g.legendItems.isEmpty() ? 0 : g.legendItems.last().bottom();

    double maxBytes = 0;
    for (const NodeState &n : m_state->nodes)
        maxBytes = std::max({maxBytes, double(n.memory.live), double(n.memory.peak),
                             double(n.memory.stacked()), double(n.predictedBytes.value_or(0))});
    if (m_compare)
        for (const NodeState &n : m_compare->nodes)
            maxBytes = std::max({maxBytes, double(n.memory.live), double(n.memory.stacked())});
    g.ticks = axisTicks(maxBytes / kMiB * 1.04, 5);
    g.decimals = stepDecimals(g.ticks.size() > 1 ? g.ticks[1] : 1);
    double labelWidth = fm.horizontalAdvance(QStringLiteral("MiB"));
    for (double t : g.ticks)
        labelWidth = std::max(labelWidth, fm.horizontalAdvance(QString::number(t, 'f', g.decimals)));

    // Two lines of node labels under the bars; "MiB" and the live figures above.
    const double top = legendBottom + 0.6 * h + 2.4 * h;
    g.plot = QRectF(QPointF(margin + labelWidth + 0.6 * f, top),
                    QPointF(width() - margin, height() - margin - 2.3 * h));
    g.slot = g.order.isEmpty() ? 0 : g.plot.width() / g.order.size();

    // The stack (with the compared run's and the hollow prediction beside it) centred in each slot.
    g.barWidth = std::min(g.slot * (g.hasPredicted ? 0.4 : 0.55), 5.5 * f);
    if (g.hasPredicted) {
        g.predictedWidth = 0.8 * g.barWidth;
        g.predictedGap = 0.12 * g.barWidth;
    }
    if (m_compare) {
        g.compareWidth = 0.8 * g.barWidth;
        g.compareGap = 0.12 * g.barWidth;
    }
    g.groupWidth = g.barWidth + (g.predictedGap + g.predictedWidth) + (g.compareGap + g.compareWidth);
    return g;
}

// The life of one paint: the legend, the axis, then slot by slot (nodes in
// id order) the stack with its peak and live figure, the compared run's
// stack, the hollow prediction, and the node's name and rank underneath.
void MemoryView::paintEvent(QPaintEvent *)
{
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    p.setRenderHint(QPainter::TextAntialiasing);
    const Palette &pal = Palette::forMode(m_projector);
    p.fillRect(rect(), pal.background);
    const Geometry g = geometry();
    if (!m_state || m_state->nodes.isEmpty()) {
        p.setPen(pal.mutedText);
        p.setFont(pixelFont(font(), m_projector ? 19 : 12));
        p.drawText(rect(), Qt::AlignCenter, tr("No memory figures yet."));
        return;
    }
    paintLegend(p, g, pal);
    paintAxis(p, g, pal);
    for (int slot = 0; slot < g.order.size(); ++slot) {
        paintStack(p, g, pal, slot);
        paintPrediction(p, g, pal, slot);
        paintComparison(p, g, pal, slot);
        paintNodeLabels(p, g, pal, slot);
    }
}

void MemoryView::paintLegend(QPainter &p, const Geometry &g, const Palette &pal) const
{
    const QFont font = g.fonts.plain;
    const QFontMetricsF fm(font);
    const double h = fm.height();
    const QVector<QString> labels = legendLabels(g.hasPredicted);
    p.setFont(font);
    for (int i = 0; i < g.legendItems.size(); ++i) {
        const QRectF item = g.legendItems[i];
        const QRectF swatch(item.left(), item.center().y() - 0.4 * h, 0.9 * h, 0.8 * h);
        if (i < kMemoryCategoryCount) {
            p.setPen(m_projector ? QPen(pal.text, 1) : Qt::NoPen);
            p.setBrush(pal.category(kMemoryCategories[std::size_t(i)]));
            p.drawRect(swatch);
        } else if (i == kMemoryCategoryCount) { // peak: the tick across a bar
            p.setPen(QPen(pal.peak, m_projector ? 4 : 2.5, Qt::SolidLine, Qt::FlatCap));
            p.drawLine(QPointF(swatch.left(), swatch.center().y()),
                       QPointF(swatch.right(), swatch.center().y()));
        } else { // the hollow predicted bar
            p.setPen(QPen(pal.predicted, m_projector ? 2.5 : 1.5, Qt::DashLine));
            p.setBrush(Qt::NoBrush);
            p.drawRect(swatch.adjusted(2, 0, -2, 0));
        }
        p.setPen(pal.text);
        p.drawText(QRectF(swatch.right() + 0.35 * h, item.top(), item.right() - swatch.right(), h),
                   Qt::AlignLeft | Qt::AlignVCenter, labels[i]);
    }
}

// Grid lines at the ticks, labels to the left, "MiB" above.
void MemoryView::paintAxis(QPainter &p, const Geometry &g, const Palette &pal) const
{
    const Fonts &fs = g.fonts;
    const double f = g.font, h = QFontMetricsF(fs.plain).height();
    const QRectF &plot = g.plot;
    p.setFont(fs.plain);
    for (double t : g.ticks) {
        const double y = plot.bottom() - plot.height() * t / g.ticks.last();
        p.setPen(QPen(t == 0 ? pal.text : pal.grid, t == 0 ? (m_projector ? 2 : 1.2) : 1));
        p.drawLine(QPointF(plot.left(), y), QPointF(plot.right(), y));
        p.setPen(pal.text);
        p.drawText(QRectF(0, y - h / 2, plot.left() - 0.5 * f, h), Qt::AlignRight | Qt::AlignVCenter,
                   QString::number(t, 'f', g.decimals));
    }
    p.setFont(fs.bold);
    p.drawText(QRectF(0, plot.top() - 1.9 * h, plot.left() - 0.5 * f, h), Qt::AlignRight | Qt::AlignVCenter,
               tr("MiB"));
}

// The node's stack by category (faded when the node is lost), its peak as a
// tick across it, and its live figure on top.
void MemoryView::paintStack(QPainter &p, const Geometry &g, const Palette &pal, int slot) const
{
    const NodeState &node = m_state->nodes[g.order[slot]];
    const double f = g.font;
    const Fonts &fs = g.fonts;
    const QFontMetricsF sfm(fs.small);
    const double left = g.plot.left() + slot * g.slot + (g.slot - g.groupWidth) / 2;
    const QRectF bar(left, g.plot.top(), g.barWidth, g.plot.height());
    double bytes = 0;
    for (MemoryCategory c : kMemoryCategories) {
        const double b = double(categoryBytes(node.memory, c));
        if (b <= 0)
            continue;
        const QRectF segment(QPointF(bar.left(), g.y(bytes + b)), QPointF(bar.right(), g.y(bytes)));
        QColor color = pal.category(c);
        if (node.state == NodeRunState::Lost) // a lost node's last figures, faded
            color.setAlphaF(0.45);
        p.fillRect(segment, color);
        bytes += b;
        if (segment.height() > 3) // a hairline keeps neighbouring segments apart
            p.fillRect(QRectF(segment.left(), segment.top(), segment.width(), 1), pal.background);
    }
    if (m_projector && bytes > 0) {
        p.setPen(QPen(pal.text, 1.5));
        p.setBrush(Qt::NoBrush);
        p.drawRect(QRectF(QPointF(bar.left(), g.y(bytes)), QPointF(bar.right(), g.y(0))));
    }
    // The live figure sits on the stack, or above the peak tick when the
    // tick leaves it no room.
    double labelBottom = g.y(std::max(bytes, double(node.memory.live))) - 0.15 * f;
    if (node.memory.peak > 0) {
        const double y = g.y(double(node.memory.peak));
        const double reach = 0.22 * g.barWidth;
        p.setPen(QPen(pal.peak, m_projector ? 4 : 2.5, Qt::SolidLine, Qt::FlatCap));
        p.drawLine(QPointF(bar.left() - reach, y), QPointF(bar.right() + reach, y));
        if (labelBottom - sfm.height() < y + 0.3 * f)
            labelBottom = std::min(labelBottom, y - 0.3 * f);
    }
    // The live figure on top, when it fits its slot.
    const QString live = QString::number(double(node.memory.live) / kMiB, 'f', std::max(1, g.decimals));
    if (sfm.horizontalAdvance(live) <= g.slot * 0.95) {
        p.setFont(fs.small);
        p.setPen(pal.text);
        p.drawText(QRectF(bar.center().x() - g.slot / 2, labelBottom - sfm.height(), g.slot, sfm.height()),
                   Qt::AlignHCenter | Qt::AlignBottom, live);
    }
}

// The hollow dashed bar at what the ZeRO formula predicts, "ZeRO formula"
// up its inside when that fits.
void MemoryView::paintPrediction(QPainter &p, const Geometry &g, const Palette &pal, int slot) const
{
    const NodeState &node = m_state->nodes[g.order[slot]];
    if (!node.predictedBytes)
        return;
    const double f = g.font;
    const Fonts &fs = g.fonts;
    const QFontMetricsF sfm(fs.small);
    const double left = g.plot.left() + slot * g.slot + (g.slot - g.groupWidth) / 2;
    const double hollowLeft = left + g.barWidth + (g.compareGap + g.compareWidth) + g.predictedGap;
    const QRectF hollow(QPointF(hollowLeft, g.y(double(*node.predictedBytes))),
                        QPointF(hollowLeft + g.predictedWidth, g.y(0)));
    p.setPen(QPen(pal.predicted, m_projector ? 3 : 1.5, Qt::DashLine, Qt::FlatCap));
    p.setBrush(Qt::NoBrush);
    p.drawRect(hollow.adjusted(0.5, 0.5, -0.5, 0));
    const QString text = tr("ZeRO formula");
    if (sfm.horizontalAdvance(text) + 0.6 * f <= hollow.height() && 1.5 * sfm.height() <= hollow.width()) {
        p.save();
        p.translate(hollow.center());
        p.rotate(-90);
        p.setFont(fs.small);
        p.setPen(pal.text);
        p.drawText(QRectF(-hollow.height() / 2, -hollow.width() / 2, hollow.height(), hollow.width()),
                   Qt::AlignCenter, text);
        p.restore();
    }
}

// The compared run's node of this rank, lighter, with a "B" on top (a
// dotted empty outline and "B —" when that run has no such node).
void MemoryView::paintComparison(QPainter &p, const Geometry &g, const Palette &pal, int slot) const
{
    if (!m_compare)
        return;
    const NodeState &node = m_state->nodes[g.order[slot]];
    const NodeState *other = nullptr;
    for (const NodeState &n : m_compare->nodes)
        if (n.rank == node.rank && n.rank >= 0)
            other = &n;
    const double f = g.font;
    const Fonts &fs = g.fonts;
    const QFontMetricsF sfm(fs.small);
    const double left = g.plot.left() + slot * g.slot + (g.slot - g.groupWidth) / 2;
    const double bLeft = left + g.barWidth + g.compareGap;
    double bBytes = 0;
    if (other)
        for (MemoryCategory c : kMemoryCategories) {
            const double b = double(categoryBytes(other->memory, c));
            if (b <= 0)
                continue;
            QColor color = pal.category(c);
            color.setAlphaF(0.5);
            p.fillRect(QRectF(QPointF(bLeft, g.y(bBytes + b)), QPointF(bLeft + g.compareWidth, g.y(bBytes))),
                       color);
            bBytes += b;
        }
    p.setPen(QPen(pal.text, 1, other ? Qt::SolidLine : Qt::DotLine));
    p.setBrush(Qt::NoBrush);
    p.drawRect(QRectF(QPointF(bLeft, g.y(bBytes)), QPointF(bLeft + g.compareWidth, g.y(0))));
    p.setFont(fs.small);
    p.drawText(QRectF(bLeft - g.compareWidth, g.y(bBytes) - sfm.height() - 0.1 * f, 3 * g.compareWidth,
                      sfm.height()),
               Qt::AlignHCenter | Qt::AlignBottom, other ? tr("B") : tr("B \u2014"));
}

// Under the slot: the node's name, then its rank and any state worth a word.
void MemoryView::paintNodeLabels(QPainter &p, const Geometry &g, const Palette &pal, int slot) const
{
    const NodeState &node = m_state->nodes[g.order[slot]];
    const double f = g.font;
    const Fonts &fs = g.fonts;
    const QFontMetricsF bfm(fs.bold), sfm(fs.small);
    const double h = QFontMetricsF(fs.plain).height();
    const QRectF nameRect(g.plot.left() + slot * g.slot, g.plot.bottom() + 0.25 * h, g.slot, h);
    const QString name = displayName(node);
    QFont nameFont = fs.bold;
    if (bfm.horizontalAdvance(name) > g.slot * 0.98) // many nodes: a smaller font before eliding
        nameFont = pixelFont(
            font(),
            std::max(std::floor(0.7 * f), std::floor(f * g.slot * 0.95 / bfm.horizontalAdvance(name))), true);
    p.setFont(nameFont);
    p.setPen(pal.text);
    p.drawText(nameRect, Qt::AlignHCenter | Qt::AlignVCenter,
               QFontMetricsF(nameFont).elidedText(name, Qt::ElideMiddle, g.slot * 0.98));
    QString second = node.rank >= 0 ? tr("rank %1").arg(node.rank) : tr("not in run");
    const bool flagged = node.state == NodeRunState::Lost || node.state == NodeRunState::Slow ||
                         node.state == NodeRunState::Paused || node.state == NodeRunState::Failed;
    const bool error = node.state == NodeRunState::Lost || node.state == NodeRunState::Failed;
    if (flagged)
        second += QStringLiteral(" · ") + runStateName(node.state);
    p.setFont(fs.small);
    p.setPen(error ? pal.state(node.state) : pal.mutedText);
    p.drawText(nameRect.translated(0, h), Qt::AlignHCenter | Qt::AlignVCenter,
               sfm.elidedText(second, Qt::ElideRight, g.slot * 0.98));
}

bool MemoryView::event(QEvent *event)
{
    if (event->type() == QEvent::ToolTip) {
        auto *help = static_cast<QHelpEvent *>(event);
        const Geometry g = geometry();
        const QPointF pos = help->pos();
        const int slot = g.slot > 0 ? int(std::floor((pos.x() - g.plot.left()) / g.slot)) : -1;
        if (m_state && slot >= 0 && slot < g.order.size() && pos.y() >= g.plot.top())
            QToolTip::showText(help->globalPos(), nodeSummary(m_state->nodes[g.order[slot]]), this);
        else
            QToolTip::hideText();
        return true;
    }
    return QWidget::event(event);
}

} // namespace smol::widgets
