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

QVector<QString> MemoryView::legendLabels(const Geometry &g) const
{
    QVector<QString> labels;
    for (MemoryCategory c : kMemoryCategories)
        labels << categoryName(c);
    labels << tr("peak");
    if (g.hasStepPeaks)
        labels << tr("activations at the step's peak");
    // A narrow view (a projector's side panel) shortens it to one line: the
    // step-peak entry's line then costs the plot nothing.
    if (g.hasPredicted)
        labels << (width() < 34 * g.font ? tr("ZeRO formula") : tr("ZeRO formula (params+grads+optimizer)"));
    return labels;
}

// The top of the step's activations box: params, grads and optimizer at
// their largest in the step, then its activations; 0 without step peaks.
std::int64_t MemoryView::stepPeakTop(const NodeState &node)
{
    const net::MemoryByCategory &s = node.stepPeak;
    if (s.activations <= node.memory.activations)
        return 0;
    return s.params + s.grads + s.optimizer + s.activations;
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
        const NodeState &n = m_state->nodes[i];
        g.hasPredicted = g.hasPredicted || n.predictedBytes.has_value();
        g.hasStepPeaks = g.hasStepPeaks || n.stepPeak.activations > n.memory.activations;
    }
    std::sort(g.order.begin(), g.order.end(),
              [&](int a, int b) { return m_state->nodes[a].id < m_state->nodes[b].id; });

    layoutLegend(g, margin);
    const double legendBottom = g.legendItems.isEmpty() ? 0 : g.legendBottom;

    double maxBytes = 0;
    for (const NodeState &n : m_state->nodes)
        maxBytes = std::max({maxBytes, double(n.memory.live), double(n.memory.peak),
                             double(n.memory.stacked()), double(n.predictedBytes.value_or(0)),
                             double(stepPeakTop(n))});
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
    const QFont smallestName = pixelFont(font(), std::floor(0.7 * f), true);
    for (const NodeState &n : m_state->nodes)
        g.ranksOnly = g.ranksOnly || QFontMetricsF(smallestName).horizontalAdvance(displayName(n)) > g.slot * 0.98;

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

// Legend items flow left to right and wrap between items; an item wider
// than the whole row ("ZeRO formula (params+grads+optimizer)" in a side
// panel) wraps its own text onto more lines. In a narrow view (a projector's
// side panel) the legend takes the smaller font, so the bars keep the height.
void MemoryView::layoutLegend(Geometry &g, double margin) const
{
    g.legendFont = width() < 34 * g.font ? g.fonts.small : g.fonts.plain;
    const QFontMetricsF fm(g.legendFont);
    const double h = fm.height();
    const double row = width() - 2 * margin;
    QPointF at(margin, 0.6 * margin);
    double rowBottom = at.y();
    for (const QString &label : legendLabels(g)) {
        const double swatch = 0.9 * h + 0.35 * h;
        double w = swatch + std::ceil(fm.horizontalAdvance(label)) + 1; // whole pixels: no wrap by rounding
        double itemHeight = h;
        if (w > row) {
            const QRectF text = fm.boundingRect(legendTextRect(QRectF(0, 0, row, 1e6), h),
                                                Qt::TextWordWrap | Qt::AlignLeft, label);
            w = row;
            itemHeight = std::max(h, text.height());
        }
        if (at.x() > margin && at.x() + w > width() - margin)
            at = QPointF(margin, rowBottom + 0.2 * h);
        g.legendItems << QRectF(at, QSizeF(w, itemHeight));
        rowBottom = std::max(rowBottom, at.y() + itemHeight);
        at.rx() += w + 0.8 * h;
    }
    g.legendBottom = rowBottom;
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
    if (g.ranksOnly) {
        const double h = QFontMetricsF(g.fonts.plain).height();
        p.setFont(g.fonts.small);
        p.setPen(pal.mutedText);
        p.drawText(QRectF(g.plot.left(), g.plot.bottom() + 1.25 * h, g.plot.width(), h), Qt::AlignCenter,
                   tr("nodes by rank"));
    }
}

void MemoryView::paintLegend(QPainter &p, const Geometry &g, const Palette &pal) const
{
    const QFont font = g.legendFont;
    const QFontMetricsF fm(font);
    const double h = fm.height();
    const QVector<QString> labels = legendLabels(g);
    p.setFont(font);
    for (int i = 0; i < g.legendItems.size(); ++i) {
        const QRectF item = g.legendItems[i];
        const QRectF swatch(item.left(), item.top() + 0.1 * h, 0.9 * h, 0.8 * h);
        if (i < kMemoryCategoryCount) {
            p.setPen(m_projector ? QPen(pal.text, 1) : Qt::NoPen);
            p.setBrush(pal.category(kMemoryCategories[std::size_t(i)]));
            p.drawRect(swatch);
        } else if (i == kMemoryCategoryCount) { // peak: the tick across a bar
            p.setPen(QPen(pal.peak, m_projector ? 4 : 2.5, Qt::SolidLine, Qt::FlatCap));
            p.drawLine(QPointF(swatch.left(), swatch.center().y()),
                       QPointF(swatch.right(), swatch.center().y()));
        } else if (i == kMemoryCategoryCount + 1 && g.hasStepPeaks) { // the hollow activations box
            p.setPen(QPen(pal.category(MemoryCategory::Activations), m_projector ? 2.5 : 1.5, Qt::DashLine));
            p.setBrush(Qt::NoBrush);
            p.drawRect(swatch.adjusted(1, 1, -1, -1));
        } else { // the hollow predicted bar
            p.setPen(QPen(pal.predicted, m_projector ? 2.5 : 1.5, Qt::DashLine));
            p.setBrush(Qt::NoBrush);
            p.drawRect(swatch.adjusted(2, 0, -2, 0));
        }
        p.setPen(pal.text);
        p.drawText(legendTextRect(item, h), Qt::AlignLeft | Qt::AlignTop | Qt::TextWordWrap, labels[i]);
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
    // The step's activations at their largest, a hollow box on what the node
    // held beside them (ddp's forward, freed before any collective).
    const double activationsTop = double(stepPeakTop(node));
    if (node.stepPeak.activations > node.memory.activations) {
        const double held = activationsTop - double(node.stepPeak.activations);
        p.setPen(QPen(pal.category(MemoryCategory::Activations), m_projector ? 2.5 : 1.5, Qt::DashLine, Qt::FlatCap));
        p.setBrush(Qt::NoBrush);
        p.drawRect(QRectF(QPointF(bar.left() + 1, g.y(activationsTop)), QPointF(bar.right() - 1, g.y(held))));
    }
    // The live figure sits on the stack (or the step's box), or above the
    // peak tick when the tick leaves it no room.
    double labelBottom = g.y(std::max({bytes, double(node.memory.live), activationsTop})) - 0.15 * f;
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

// What is written under a slot: the node's rank-first name (displayName),
// in a smaller font before anything is cut; when some name does not fit
// its slot even so (16 nodes in a side panel), every slot shows its rank
// alone (every k-th one when even those crowd) over one "nodes by rank".
QString MemoryView::slotLabel(const Geometry &g, int slot, QFont *font) const
{
    const NodeState &node = m_state->nodes[g.order[slot]];
    const double f = g.font;
    if (g.ranksOnly) {
        // The small font, down to 0.7 of the plain one, before skipping any.
        const double widestAtOne =
            QFontMetricsF(pixelFont(this->font(), 100, true)).horizontalAdvance(QString::number(std::max(1, int(g.order.size()) - 1))) / 100;
        const double px = std::clamp(std::floor((g.slot - 0.15 * f) / std::max(0.01, widestAtOne)), std::floor(0.7 * f),
                                     std::floor(0.85 * f));
        *font = pixelFont(this->font(), px, true);
        const double widest = QFontMetricsF(*font).horizontalAdvance(QString::number(std::max(1, int(g.order.size()) - 1)));
        const int every = std::max(1, int(std::ceil((widest + 0.15 * f) / std::max(1.0, g.slot))));
        if (slot % every != 0)
            return {};
        return node.rank >= 0 ? QString::number(node.rank) : QStringLiteral("\u2013");
    }
    const QString name = displayName(node);
    const QFontMetricsF bfm(g.fonts.bold);
    *font = g.fonts.bold;
    if (bfm.horizontalAdvance(name) > g.slot * 0.98) // many nodes: a smaller font first
        *font = pixelFont(this->font(), std::max(std::floor(0.7 * f), std::floor(f * g.slot * 0.95 / bfm.horizontalAdvance(name))),
                          true);
    return name;
}

QVector<MemoryView::LegendEntry> MemoryView::legendEntries() const
{
    const Geometry g = geometry();
    const QVector<QString> labels = legendLabels(g);
    QVector<LegendEntry> entries;
    for (int i = 0; i < g.legendItems.size(); ++i)
        entries.append({g.legendItems[i], legendTextRect(g.legendItems[i], QFontMetricsF(g.legendFont).height()),
                        labels[i]});
    return entries;
}

// An item is a swatch 0.9 lines wide, a gap of 0.35, then the text.
QRectF MemoryView::legendTextRect(const QRectF &item, double lineHeight)
{
    return item.adjusted(1.25 * lineHeight, 0, 0, 0);
}

QFont MemoryView::legendFont() const
{
    return geometry().legendFont;
}

QRectF MemoryView::plotArea() const
{
    return geometry().plot;
}

QStringList MemoryView::nodeLabels() const
{
    QStringList labels;
    const Geometry g = geometry();
    QFont font;
    for (int slot = 0; slot < g.order.size(); ++slot)
        labels << slotLabel(g, slot, &font);
    return labels;
}

// Under the slot: the node's name, then its rank and any state worth a word.
void MemoryView::paintNodeLabels(QPainter &p, const Geometry &g, const Palette &pal, int slot) const
{
    const NodeState &node = m_state->nodes[g.order[slot]];
    const Fonts &fs = g.fonts;
    const QFontMetricsF sfm(fs.small);
    const double h = QFontMetricsF(fs.plain).height();
    const QRectF nameRect(g.plot.left() + slot * g.slot, g.plot.bottom() + 0.25 * h, g.slot, h);
    QFont nameFont;
    const QString name = slotLabel(g, slot, &nameFont);
    const bool error = node.state == NodeRunState::Lost || node.state == NodeRunState::Failed;
    p.setFont(nameFont);
    p.setPen(g.ranksOnly && error ? pal.state(node.state) : pal.text);
    p.drawText(nameRect.adjusted(-g.slot, 0, g.slot, 0), Qt::AlignHCenter | Qt::AlignVCenter, name);
    if (g.ranksOnly)
        return; // one caption for the row, and the names in the tooltips
    QString second = node.rank >= 0 ? tr("rank %1").arg(node.rank) : tr("not in run");
    const bool flagged = node.state == NodeRunState::Lost || node.state == NodeRunState::Slow ||
                         node.state == NodeRunState::Paused || node.state == NodeRunState::Failed;
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
