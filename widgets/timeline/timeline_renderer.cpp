#include "timeline_renderer.h"

#include "hit_description.h"

#include "widgets/paint/nice_steps.h"
#include "widgets/paint/palette.h"

#include <QFontMetricsF>
#include <QPainter>
#include <QPainterPath>

#include <algorithm>
#include <array>
#include <cmath>

namespace smol::widgets {

namespace {

constexpr double kLabelWidth = 118;
constexpr double kMinLaneHeight = 1;
constexpr std::size_t kMaxMovingPackets = 4000;

QColor withAlpha(QColor c, int alpha)
{
    c.setAlpha(alpha);
    return c;
}

double distanceToSegment(const QPointF &p, const QLineF &l)
{
    const QPointF d = l.p2() - l.p1();
    const double len2 = d.x() * d.x() + d.y() * d.y();
    double t = len2 > 0 ? ((p.x() - l.x1()) * d.x() + (p.y() - l.y1()) * d.y()) / len2 : 0;
    t = std::clamp(t, 0.0, 1.0);
    const QPointF q = l.p1() + t * d;
    return std::hypot(p.x() - q.x(), p.y() - q.y());
}

} // namespace

TimelineRenderer::TimelineRenderer()
{
    setProjectorMode(false);
}

void TimelineRenderer::setProjectorMode(bool on)
{
    m_projector = on;
    m_font = QFont();
    m_font.setPixelSize(on ? 16 : 11);
    // Two rows of text: step numbers above, times below.
    m_rulerHeight = 2 * QFontMetricsF(m_font).height() + 6;
}

void TimelineRenderer::layout(const QRectF &rect, int lanes)
{
    m_rect = rect;
    m_lanes = std::max(lanes, 0);
    m_timeLeft = rect.left() + (m_projector ? kLabelWidth * 1.3 : kLabelWidth);
    const double avail = rect.height() - m_rulerHeight;
    // Every lane fits: 16 nodes in a short dock get thin lanes, whose rows
    // drop their labels; 64 get lanes of a few pixels, a strip of colour per
    // node with every few lanes named (kMinLaneHeight only when even that
    // does not fit). Tall windows stop at a readable maximum.
    m_laneHeight =
        m_lanes > 0 ? std::clamp(avail / m_lanes, kMinLaneHeight, m_projector ? 160.0 : 120.0) : 60;
}

QRectF TimelineRenderer::laneRect(int lane) const
{
    return QRectF(m_rect.left(), m_rect.top() + m_rulerHeight + lane * m_laneHeight, m_rect.width(),
                  m_laneHeight);
}

QRectF TimelineRenderer::rowRect(int lane, TimelineData::Row row) const
{
    const QRectF l = laneRect(lane);
    const double h = l.height();
    if (memoryThin() && !memoryUnderSpans()) { // the rows above the thin bar
        const double rest = h - thinMemoryHeight();
        if (row == TimelineData::Row::Compute)
            return QRectF(m_timeLeft, l.top() + 0.04 * rest, timeWidth(), 0.46 * rest);
        if (row == TimelineData::Row::Collective)
            return QRectF(m_timeLeft, l.top() + 0.52 * rest, timeWidth(), 0.44 * rest);
    }
    if (memoryShown() && !memoryThin()) { // the spans above the packet strip, the memory strip at the bottom
        if (row == TimelineData::Row::Compute)
            return QRectF(m_timeLeft, l.top() + 0.04 * h, timeWidth(), 0.22 * h);
        if (row == TimelineData::Row::Collective)
            return QRectF(m_timeLeft, l.top() + 0.29 * h, timeWidth(), 0.16 * h);
    }
    if (h < 10) { // a lane of a few pixels: compute on the top half, collectives below
        if (row == TimelineData::Row::Compute)
            return QRectF(m_timeLeft, l.top(), timeWidth(), 0.5 * h);
        if (row == TimelineData::Row::Collective)
            return QRectF(m_timeLeft, l.top() + 0.5 * h, timeWidth(), 0.45 * h);
    }
    switch (row) {
    case TimelineData::Row::Compute:
        return QRectF(m_timeLeft, l.top() + 0.08 * h, timeWidth(), 0.30 * h);
    case TimelineData::Row::Collective:
        return QRectF(m_timeLeft, l.top() + 0.42 * h, timeWidth(), 0.24 * h);
    case TimelineData::Row::Pause:
        break;
    }
    return QRectF(m_timeLeft, l.top(), timeWidth(), h);
}

double TimelineRenderer::packetY(int lane) const
{
    const QRectF l = laneRect(lane);
    if (memoryThin() && !memoryUnderSpans())
        return l.top() + 0.82 * (l.height() - thinMemoryHeight());
    return l.top() + (memoryShown() && !memoryThin() ? 0.53 : 0.82) * l.height();
}

QRectF TimelineRenderer::memoryRect(int lane) const
{
    if (!memoryShown() || lane < 0 || lane >= m_lanes)
        return {};
    const QRectF l = laneRect(lane);
    if (memoryThin())
        return QRectF(m_timeLeft, l.bottom() - thinMemoryHeight(), timeWidth(), thinMemoryHeight());
    return QRectF(m_timeLeft, l.top() + 0.63 * l.height(), timeWidth(), 0.34 * l.height());
}

int TimelineRenderer::laneLabelEvery() const
{
    const double line = QFontMetricsF(m_font).height();
    if (m_laneHeight >= line || m_laneHeight <= 0)
        return 1;
    // 1, 2, 4, 5, 8, 10, 16...: rank numbers a reader can count along.
    const int need = int(std::ceil(1.15 * line / m_laneHeight));
    for (int k : {1, 2, 4, 5, 8, 10, 16, 20, 32})
        if (k >= need)
            return k;
    return need;
}

int TimelineRenderer::laneAt(double y) const
{
    const double rel = y - m_rect.top() - m_rulerHeight;
    if (rel < 0 || m_laneHeight <= 0)
        return -1;
    const int lane = int(rel / m_laneHeight);
    return lane < m_lanes ? lane : -1;
}

QColor TimelineRenderer::collectiveColour(int kind) const
{
    // Okabe-Ito, by net::CollectiveKind value.
    switch (kind) {
    case 1: // send/recv
        return QColor(0xD5, 0x5E, 0x00);
    case 2: // broadcast
        return QColor(0xCC, 0x79, 0xA7);
    case 4: // reduce-scatter
        return QColor(0xE6, 0x9F, 0x00);
    case 5: // all-gather
        return QColor(0x00, 0x9E, 0x73);
    case 6: // all-reduce
        return QColor(0x00, 0x72, 0xB2);
    case 9: // push
        return QColor(0x56, 0xB4, 0xE9);
    case 10: // pull
        return QColor(0xB8, 0xA9, 0x00);
    default:
        return QColor(0x80, 0x80, 0x80);
    }
}

QColor TimelineRenderer::spanColour(TimelineSpanKind kind) const
{
    switch (kind) {
    case TimelineSpanKind::Forward:
        return QColor(0x9E, 0xCA, 0xE1);
    case TimelineSpanKind::Backward:
        return QColor(0x3F, 0x7F, 0xB5);
    case TimelineSpanKind::Optimizer:
        return QColor(0x8F, 0xC9, 0x6B);
    case TimelineSpanKind::Pause:
        return QColor(0xC0, 0x39, 0x2B);
    default:
        return QColor(0x99, 0x99, 0x99);
    }
}

QString TimelineRenderer::formatDuration(double ns)
{
    const double a = std::abs(ns);
    if (a >= 1e9)
        return QStringLiteral("%1 s").arg(ns / 1e9, 0, 'f', a >= 1e10 ? 2 : 3);
    if (a >= 1e6)
        return QStringLiteral("%1 ms").arg(ns / 1e6, 0, 'f', a >= 1e8 ? 0 : a >= 1e7 ? 1 : 2);
    if (a >= 1e3)
        return QStringLiteral("%1 µs").arg(ns / 1e3, 0, 'f', a >= 1e5 ? 0 : a >= 1e4 ? 1 : 2);
    return QStringLiteral("%1 ns").arg(ns, 0, 'f', a >= 10 ? 0 : 1);
}

TimelineFrameStats TimelineRenderer::paint(QPainter &p, const TimelineData &data, const TimeAxis &axis,
                                           const TimelineOverlay &overlay)
{
    TimelineFrameStats stats;
    m_hits.clear();
    m_memoryColumns.clear();
    m_memoryScales.clear();
    m_memory = data.hasMemory();
    m_historyMark = QRectF();
    const Palette &pal = Palette::forMode(m_projector);
    p.save();
    p.setFont(m_font);
    p.fillRect(m_rect, pal.background);
    p.setClipRect(m_rect);
    const QFontMetricsF fm(m_font);

    paintLaneNames(p, data, fm);

    p.save();
    p.setClipRect(QRectF(m_timeLeft, m_rect.top(), timeWidth(), m_rect.height()));
    paintRuler(p, data, axis);
    if (memoryUnderSpans())
        paintMemory(p, data, axis, stats);
    for (int lane = 0; lane < m_lanes && lane < data.laneCount(); ++lane) {
        paintSpans(p, data, axis, lane, TimelineData::Row::Pause, stats);
        paintSpans(p, data, axis, lane, TimelineData::Row::Compute, stats);
        paintSpans(p, data, axis, lane, TimelineData::Row::Collective, stats);
    }
    if (!memoryUnderSpans())
        paintMemory(p, data, axis, stats);
    paintLivePause(p, axis, overlay);
    p.setRenderHint(QPainter::Antialiasing, true);
    for (int lane = 0; lane < m_lanes && lane < data.laneCount(); ++lane)
        paintPackets(p, data, axis, lane, overlay, stats);
    paintInFlight(p, data, axis, overlay, stats);
    p.setRenderHint(QPainter::Antialiasing, false);
    paintHistoryMark(p, data, axis);

    paintMarks(p, data, axis, overlay);
    p.restore();

    p.setPen(pal.grid);
    p.drawLine(QPointF(m_timeLeft, m_rect.top()), QPointF(m_timeLeft, m_rect.bottom()));
    if (data.beginNs() > data.endNs()) {
        p.setPen(pal.mutedText);
        p.drawText(m_rect.adjusted(m_timeLeft - m_rect.left(), m_rulerHeight, 0, 0), Qt::AlignCenter,
                   QStringLiteral("No events yet: start a run or open a session."));
    }
    p.restore();
    return stats;
}

void TimelineRenderer::paintLivePause(QPainter &p, const TimeAxis &axis, const TimelineOverlay &overlay)
{
    if (overlay.livePauseNs == TimelineOverlay::kNone || overlay.nowNs == TimelineOverlay::kNone)
        return;
    const double x0 = std::max(axis.x(overlay.livePauseNs), m_timeLeft);
    if (x0 > m_rect.right())
        return;
    const double x1 = std::max(axis.x(overlay.nowNs), x0 + 2);
    const double top = m_rect.top() + m_rulerHeight;
    const QRectF r(x0, top, x1 - x0, m_rect.bottom() - top);
    const QColor c = spanColour(TimelineSpanKind::Pause);
    p.fillRect(r, withAlpha(c, 40));
    p.fillRect(r, QBrush(withAlpha(c, 110), Qt::BDiagPattern));
    p.fillRect(QRectF(x0, top, m_projector ? 3 : 2, r.height()), c);
    if (overlay.livePauseCaption.isEmpty())
        return;
    // The caption in the ruler's top row (the step numbers'), from the
    // hatch's start, shifted left to stay whole in view when the hatch is
    // narrow (a framed pause): over the ruler, not over the lanes' packets.
    const QFontMetricsF fm(m_font);
    const double right = m_rect.right() - 2;
    const QString text = fm.elidedText(overlay.livePauseCaption, Qt::ElideRight, right - m_timeLeft - 12);
    const double w = fm.horizontalAdvance(text) + 8;
    const QRectF label(std::max(m_timeLeft + 2, std::min(x0 + 4, right - w)), m_rect.top() + 1, w,
                       fm.height() + 2);
    const Palette &pal = Palette::forMode(m_projector);
    p.fillRect(label, withAlpha(pal.labelBackground, 235));
    p.setPen(c);
    p.drawRect(label);
    p.drawText(label.adjusted(4, 0, 0, 0), Qt::AlignLeft | Qt::AlignVCenter, text);
}

void TimelineRenderer::paintLaneNames(QPainter &p, const TimelineData &data, const QFontMetricsF &fm)
{
    const Palette &pal = Palette::forMode(m_projector);
    // Lanes: alternating bands and their names; lanes thinner than a line
    // of text are named every `every` lanes ("r8 local-8"), the name centred
    // on its lane with a tick pointing at it.
    const int every = laneLabelEvery();
    for (int lane = 0; lane < m_lanes && lane < data.laneCount(); ++lane) {
        const QRectF r = laneRect(lane);
        if (lane % 2 == 1)
            p.fillRect(QRectF(m_rect.left(), r.top(), m_rect.width(), r.height()), withAlpha(pal.grid, 40));
        if (lane % every != 0)
            continue;
        p.setPen(pal.text);
        const double h = std::max(r.height(), fm.height());
        QRectF label(m_rect.left() + 6, r.center().y() - h / 2, m_timeLeft - m_rect.left() - 14, h);
        if (memoryShown() && !memoryThin()) // by its spans, above the memory strip's scale
            label = QRectF(label.left(), r.top(), label.width(), 0.5 * r.height());
        const QString name = data.laneName(lane); // a node's displayName(): its rank first
        p.drawText(label, Qt::AlignLeft | Qt::AlignVCenter,
                   fm.elidedText(name, Qt::ElideRight, label.width()));
        if (every > 1)
            p.drawLine(QPointF(m_timeLeft - 7, r.center().y()), QPointF(m_timeLeft - 2, r.center().y()));
    }
}

void TimelineRenderer::paintMarks(QPainter &p, const TimelineData &data, const TimeAxis &axis,
                                  const TimelineOverlay &overlay)
{
    const Palette &pal = Palette::forMode(m_projector);
    if (overlay.playheadNs != TimelineOverlay::kNone) {
        const double x = axis.x(overlay.playheadNs);
        if (x < m_rect.right())
            p.fillRect(QRectF(std::max(x, m_timeLeft), m_rect.top() + m_rulerHeight,
                              m_rect.right() - std::max(x, m_timeLeft), m_rect.height() - m_rulerHeight),
                       withAlpha(pal.background, 150));
        p.setPen(QPen(QColor(0xC0, 0x39, 0x2B), m_projector ? 3 : 2));
        p.drawLine(QPointF(x, m_rect.top()), QPointF(x, m_rect.bottom()));
    }
    if (overlay.nowNs != TimelineOverlay::kNone) {
        const double x = axis.x(overlay.nowNs);
        p.setPen(QPen(withAlpha(pal.text, 120), 1, Qt::DashLine));
        p.drawLine(QPointF(x, m_rect.top() + m_rulerHeight), QPointF(x, m_rect.bottom()));
    }
    if (overlay.bandStartNs != TimelineOverlay::kNone && overlay.bandEndNs != TimelineOverlay::kNone) {
        const double x0 = axis.x(std::min(overlay.bandStartNs, overlay.bandEndNs));
        const double x1 = axis.x(std::max(overlay.bandStartNs, overlay.bandEndNs));
        p.fillRect(QRectF(x0, m_rect.top(), x1 - x0, m_rect.height()), withAlpha(pal.selection, 60));
        p.setPen(pal.selection);
        p.drawLine(QPointF(x0, m_rect.top()), QPointF(x0, m_rect.bottom()));
        p.drawLine(QPointF(x1, m_rect.top()), QPointF(x1, m_rect.bottom()));
    }
    if (overlay.hovered.kind != TimelineHit::Kind::None && overlay.hovered != overlay.selected)
        outline(p, data, axis, overlay.hovered, withAlpha(pal.text, 140));
    if (overlay.selected.kind != TimelineHit::Kind::None)
        outline(p, data, axis, overlay.selected, pal.selection);
}

void TimelineRenderer::paintRuler(QPainter &p, const TimelineData &data, const TimeAxis &axis)
{
    const Palette &pal = Palette::forMode(m_projector);
    const QFontMetricsF fm(m_font);
    const std::int64_t origin = data.beginNs() <= data.endNs() ? data.originNs() : axis.startNs;
    const double minGapPx = fm.horizontalAdvance(QStringLiteral("00.000000 s")) + 16;
    const double step = niceStep(std::max(minGapPx * axis.nsPerPixel, 1e-3)); // 1, 2, 5 x 10^k ns
    const double firstRel = std::ceil(double(axis.startNs - origin) / step) * step;
    const int decimals = std::clamp(int(std::ceil(-std::log10(step / 1e9) - 1e-9)), 0, 9);
    p.setPen(pal.grid);
    p.drawLine(QPointF(m_timeLeft, m_rect.top() + m_rulerHeight - 0.5),
               QPointF(m_rect.right(), m_rect.top() + m_rulerHeight - 0.5));
    for (double rel = firstRel;; rel += step) {
        const double x = axis.x(origin + std::int64_t(std::llround(rel)));
        if (x > m_rect.right())
            break;
        p.setPen(withAlpha(pal.grid, 90));
        p.drawLine(QPointF(x, m_rect.top() + m_rulerHeight), QPointF(x, m_rect.bottom()));
        p.setPen(pal.mutedText);
        p.drawLine(QPointF(x, m_rect.top() + m_rulerHeight - 5), QPointF(x, m_rect.top() + m_rulerHeight));
        p.drawText(QPointF(x + 3, m_rect.top() + m_rulerHeight - 4 - fm.descent()),
                   QStringLiteral("%1 s").arg(rel / 1e9, 0, 'f', decimals));
    }
    // Step boundaries, thinned to one label per ~70 px.
    const auto &steps = data.stepStarts();
    if (steps.empty())
        return;
    const double labelGap = fm.horizontalAdvance(QStringLiteral("step 00000")) + 10;
    double lastLine = -1e9, lastLabel = -1e9;
    const std::int64_t t0 = axis.startNs, t1 = axis.endNs();
    QPen line(withAlpha(pal.mutedText, 110), 1, Qt::DotLine);
    for (const auto &[step, start] : steps) {
        if (start < t0 || start > t1)
            continue;
        const double x = axis.x(start);
        if (x - lastLine < 6)
            continue;
        lastLine = x;
        p.setPen(line);
        p.drawLine(QPointF(x, m_rect.top()), QPointF(x, m_rect.bottom()));
        if (x - lastLabel >= labelGap) {
            lastLabel = x;
            p.setPen(pal.text);
            p.drawText(QPointF(x + 3, m_rect.top() + fm.ascent() + 2), QStringLiteral("step %1").arg(step));
        }
    }
}

QString TimelineRenderer::historyMarkText(const TimelineData &data)
{
    if (!data.historyDropped())
        return {};
    return QStringLiteral("history before %1 s dropped (budget %2)")
        .arg(double(data.historyStartNs() - data.originNs()) / 1e9, 0, 'f', 1)
        .arg(formatBytes(std::int64_t(data.droppedBudget())));
}

void TimelineRenderer::paintHistoryMark(QPainter &p, const TimelineData &data, const TimeAxis &axis)
{
    if (!data.historyDropped())
        return;
    const double x = axis.x(data.historyStartNs());
    if (x < m_timeLeft - 1 || x > m_rect.right())
        return; // scrolled past: the kept history fills the view
    const Palette &pal = Palette::forMode(m_projector);
    const QFontMetricsF fm(m_font);
    const double top = m_rect.top() + m_rulerHeight;
    const double lineX = std::max(x, m_timeLeft + 1);
    // Before it nothing is kept: hatched, so it does not read as idle time.
    if (lineX > m_timeLeft + 1) {
        const QRectF gone(m_timeLeft, top, lineX - m_timeLeft, m_rect.bottom() - top);
        p.fillRect(gone, withAlpha(pal.grid, 70));
        p.fillRect(gone, QBrush(withAlpha(pal.mutedText, 120), Qt::FDiagPattern));
    }
    const double w = m_projector ? 3 : 2;
    p.fillRect(QRectF(lineX - w / 2, top, w, m_rect.bottom() - top), pal.text);
    // The label right of the line, on a background so lanes do not cross it.
    const QString text = historyMarkText(data);
    const QRectF label(lineX + w + 2, top + 2, fm.horizontalAdvance(text) + 8, fm.height() + 2);
    p.fillRect(label, withAlpha(pal.labelBackground, 230));
    p.setPen(pal.text);
    p.drawText(label.adjusted(4, 0, 0, 0), Qt::AlignLeft | Qt::AlignVCenter, text);
    m_historyMark = QRectF(lineX - w / 2, top, label.right() - (lineX - w / 2), m_rect.bottom() - top);
}

void TimelineRenderer::paintSpans(QPainter &p, const TimelineData &data, const TimeAxis &axis, int lane,
                                  TimelineData::Row row, TimelineFrameStats &stats)
{
    const Palette &pal = Palette::forMode(m_projector);
    const QFontMetricsF fm(m_font);
    const std::int64_t t0 = axis.startNs, t1 = axis.endNs();
    const QRectF band = rowRect(lane, row);
    const auto &spans = data.spans(lane, row);
    const auto items = data.collapseSpans(lane, row, axis, t0, t1, kMinSpanPx, kMaxPacketRunPx);
    // Thin rows (many lanes in a short dock) carry no labels.
    const double textMin =
        band.height() >= 0.8 * fm.height() ? fm.horizontalAdvance(QStringLiteral("0000")) + 6 : 1e9;
    for (const LodItem &it : items) {
        const double x0 = std::max(axis.x(it.startNs), m_timeLeft - 2);
        const double x1 = std::min(axis.x(it.endNs), m_rect.right() + 2);
        const double w = std::max(x1 - x0, 1.0);
        const QRectF r(x0, band.top(), w, band.height());
        const StoredSpan &s = spans[it.first];
        TimelineHit hit = TimelineHit::of(lane, row, it);
        if (row == TimelineData::Row::Pause) {
            // A pause shades the whole lane, hatched, and says so.
            QColor c = spanColour(TimelineSpanKind::Pause);
            p.fillRect(r, withAlpha(c, 40));
            p.fillRect(r, QBrush(withAlpha(c, 110), Qt::BDiagPattern));
            p.setPen(c);
            if (w >= textMin * 2)
                p.drawText(
                    r.adjusted(3, 2, -2, 0), Qt::AlignLeft | Qt::AlignTop,
                    fm.elidedText(QStringLiteral("paused: ") + data.name(s.name), Qt::ElideRight, w - 6));
            hit.kind = it.count == 1 ? TimelineHit::Kind::Span : TimelineHit::Kind::SpanRun;
            m_hits.push_back(HitItem{hit, r, {}});
            ++stats.spans;
            continue;
        }
        if (it.count == 1) {
            const QColor c =
                row == TimelineData::Row::Collective ? collectiveColour(s.collective) : spanColour(s.kind);
            p.fillRect(r, c);
            if (w >= textMin) {
                const QString text =
                    row == TimelineData::Row::Collective
                        ? QStringLiteral("%1%2 #%3")
                              .arg(isGlooSpanName(data.name(s.name)) ? QStringLiteral("gloo ") : QString(),
                                   data.collectiveName(s.collective))
                              .arg(s.seq)
                        : data.name(s.name);
                p.setPen(c.lightness() > 150 ? QColor(Qt::black) : QColor(Qt::white));
                const QRectF visible = r.intersected(QRectF(m_timeLeft, r.top(), timeWidth(), r.height()));
                p.drawText(visible.adjusted(3, 0, -2, 0), Qt::AlignLeft | Qt::AlignVCenter,
                           fm.elidedText(text, Qt::ElideRight, visible.width() - 5));
            }
            hit.kind = TimelineHit::Kind::Span;
            ++stats.spans;
        } else {
            // A run too small to see apart: a grey block with its count.
            const QColor c =
                row == TimelineData::Row::Collective ? collectiveColour(s.collective) : pal.mutedText;
            p.fillRect(r, withAlpha(c, 150));
            if (w >= textMin) {
                p.setPen(pal.background);
                p.drawText(r, Qt::AlignCenter, QString::number(it.count));
            }
            hit.kind = TimelineHit::Kind::SpanRun;
            ++stats.spanRuns;
        }
        m_hits.push_back(HitItem{hit, r, {}});
    }
}

void TimelineRenderer::paintPackets(QPainter &p, const TimelineData &data, const TimeAxis &axis, int lane,
                                    const TimelineOverlay &overlay, TimelineFrameStats &stats)
{
    const Palette &pal = Palette::forMode(m_projector);
    const QFontMetricsF fm(m_font);
    // A packet's arrow may start left of the view and end inside it.
    const std::int64_t t0 = axis.startNs - data.longestFlightNs(lane), t1 = axis.endNs();
    const auto &packets = data.packets(lane);
    const auto items = data.collapsePackets(lane, axis, t0, t1, kMinPacketPx, kMaxPacketRunPx);
    const double y0 = packetY(lane);
    const double strip = memoryShown() && !memoryThin()
                             ? std::min(8.0, 0.12 * m_laneHeight)
                             : std::max(std::min(8.0, 0.4 * m_laneHeight), 0.14 * m_laneHeight);
    const double textMin =
        m_laneHeight >= 2.5 * fm.height() ? fm.horizontalAdvance(QStringLiteral("0000")) + 6 : 1e9;
    const double headLen = m_projector ? 9 : 6;
    for (const LodItem &it : items) {
        TimelineHit hit = TimelineHit::of(lane, TimelineData::Row::Compute, it);
        if (it.count == 1) {
            const TimelinePacket &pk = packets[it.first];
            if (!pk.received() && overlay.nowNs != TimelineOverlay::kNone)
                continue; // drawn moving by paintInFlight
            const std::int64_t end = pk.received() ? pk.recvEndNs : pk.sendEndNs;
            const QPointF a(axis.x(pk.sendStartNs), y0);
            const QPointF b(axis.x(end), packetY(pk.dst));
            if (std::max(a.x(), b.x()) < m_timeLeft)
                continue;
            const QColor c = collectiveColour(pk.collective);
            p.setPen(QPen(c, m_projector ? 2.2 : 1.3, pk.received() ? Qt::SolidLine : Qt::DashLine));
            p.drawLine(a, b);
            // Arrow head at the receiver.
            const QLineF l(b, a);
            if (l.length() > headLen) {
                QLineF h1 = l;
                h1.setLength(headLen);
                h1.setAngle(l.angle() + 25);
                QLineF h2 = l;
                h2.setLength(headLen);
                h2.setAngle(l.angle() - 25);
                p.drawLine(h1);
                p.drawLine(h2);
            }
            hit.kind = TimelineHit::Kind::Packet;
            hit.endNs = end;
            m_hits.push_back(HitItem{hit, {}, QLineF(a, b)});
            ++stats.arrows;
        } else {
            const double x0 = axis.x(it.startNs);
            const double x1 = std::max(axis.x(it.endNs), x0 + kMinPacketPx);
            const QRectF r(x0, y0 - strip / 2, x1 - x0, strip);
            const QColor c = collectiveColour(packets[it.first].collective);
            p.setPen(Qt::NoPen);
            p.fillRect(r, withAlpha(c, 170));
            if (r.width() >= textMin) {
                p.setPen(pal.background);
                p.drawText(r, Qt::AlignCenter, QString::number(it.count));
            }
            hit.kind = TimelineHit::Kind::PacketRun;
            m_hits.push_back(HitItem{hit, r, {}});
            ++stats.packetRuns;
            stats.packetsInRuns += it.count;
        }
    }
}

void TimelineRenderer::paintInFlight(QPainter &p, const TimelineData &data, const TimeAxis &axis,
                                     const TimelineOverlay &overlay, TimelineFrameStats &stats)
{
    const double dot = m_projector ? 5 : 3.5;
    if (overlay.nowNs != TimelineOverlay::kNone) {
        // Live: sent, not yet received; the head is at "now" on the receiver's lane.
        for (const auto &u : data.unreceived(kMaxMovingPackets)) {
            if (u.src >= m_lanes || u.dst >= m_lanes)
                continue;
            const QPointF a(axis.x(u.sendStartNs), packetY(u.src));
            const QPointF b(axis.x(std::max(overlay.nowNs, u.sendStartNs)), packetY(u.dst));
            const QColor c = collectiveColour(u.collective);
            p.setPen(QPen(c, m_projector ? 2.2 : 1.3, Qt::DashLine));
            p.drawLine(a, b);
            p.setPen(Qt::NoPen);
            p.setBrush(c);
            p.drawEllipse(b, dot, dot);
            ++stats.inFlight;
        }
        p.setBrush(Qt::NoBrush);
    }
    if (overlay.playheadNs == TimelineOverlay::kNone)
        return;
    // Replay: packets on their way at the playhead, a dot where they are.
    const std::int64_t t = overlay.playheadNs;
    std::size_t drawn = 0;
    for (int lane = 0; lane < m_lanes && lane < data.laneCount() && drawn < kMaxMovingPackets; ++lane) {
        const auto &v = data.packets(lane);
        auto it = std::lower_bound(v.begin(), v.end(), t - data.longestFlightNs(lane),
                                   [](const TimelinePacket &q, std::int64_t x) { return q.sendStartNs < x; });
        for (; it != v.end() && it->sendStartNs <= t && drawn < kMaxMovingPackets; ++it) {
            if (!it->received() || it->recvEndNs <= t)
                continue;
            const double f = double(t - it->sendStartNs) /
                             double(std::max<std::int64_t>(1, it->recvEndNs - it->sendStartNs));
            const QPointF a(axis.x(it->sendStartNs), packetY(lane));
            const QPointF b(axis.x(it->recvEndNs), packetY(it->dst));
            const QColor c = collectiveColour(it->collective);
            p.setPen(QPen(c, m_projector ? 2.6 : 1.6));
            p.drawLine(a, a + f * (b - a));
            p.setPen(Qt::NoPen);
            p.setBrush(c);
            p.drawEllipse(a + f * (b - a), dot, dot);
            ++drawn;
        }
    }
    p.setBrush(Qt::NoBrush);
    stats.inFlight += drawn;
}

void TimelineRenderer::outline(QPainter &p, const TimelineData &data, const TimeAxis &axis,
                               const TimelineHit &hit, const QColor &c)
{
    if (hit.kind == TimelineHit::Kind::Memory) {
        // One sample: where it holds; more: the pixel column that holds them.
        const QRectF strip = memoryRect(hit.lane);
        if (strip.isEmpty() || hit.lane >= data.laneCount() || hit.first >= data.memory(hit.lane).size())
            return;
        const auto &samples = data.memory(hit.lane);
        double x0 = axis.x(hit.startNs), x1 = axis.x(hit.endNs);
        if (hit.count == 1) {
            x0 = axis.x(samples[hit.first].tNs);
            x1 = hit.first + 1 < samples.size() ? axis.x(samples[hit.first + 1].tNs) : x0;
        }
        x0 = std::max(x0, m_timeLeft - 2);
        x1 = std::min(std::max(x1, x0 + 1), m_rect.right() + 2);
        p.setPen(QPen(c, 2));
        p.setBrush(Qt::NoBrush);
        p.drawRect(QRectF(x0 - 1, strip.top() - 1, x1 - x0 + 2, strip.height() + 2));
        return;
    }
    for (const HitItem &h : m_hits) {
        if (h.hit != hit)
            continue;
        if (!h.rect.isEmpty()) {
            p.setPen(QPen(c, 2));
            p.setBrush(Qt::NoBrush);
            p.drawRect(h.rect.adjusted(-1, -1, 1, 1));
        } else {
            p.setPen(QPen(c, m_projector ? 4 : 3));
            p.drawLine(h.line);
        }
        return;
    }
}

TimelineHit TimelineRenderer::hitTest(const QPointF &pos) const
{
    if (pos.x() < m_timeLeft)
        return {};
    // Arrows first (they cross spans), nearest within 4 px; then rectangles.
    const HitItem *best = nullptr;
    double bestDistance = m_projector ? 6 : 4;
    for (const HitItem &h : m_hits) {
        if (!h.rect.isEmpty())
            continue;
        const double d = distanceToSegment(pos, h.line);
        if (d <= bestDistance) {
            bestDistance = d;
            best = &h;
        }
    }
    if (best)
        return best->hit;
    // A memory strip: the pixel column under the pointer.
    const int lane = laneAt(pos.y());
    if (lane >= 0 && std::size_t(lane) < m_memoryColumns.size() && memoryRect(lane).contains(pos)) {
        const auto &cols = m_memoryColumns[std::size_t(lane)];
        const double c = std::floor(pos.x() - m_memoryX0);
        if (c >= 0 && c < double(cols.size()) && cols[std::size_t(c)].count > 0) {
            const MemoryColumn &col = cols[std::size_t(c)];
            TimelineHit hit;
            hit.kind = TimelineHit::Kind::Memory;
            hit.lane = lane;
            hit.first = col.maxAt;
            hit.count = col.count;
            hit.startNs = m_memoryAxis.time(m_memoryX0 + c);
            hit.endNs = m_memoryAxis.time(m_memoryX0 + c + 1);
            return hit;
        }
    }
    for (auto it = m_hits.rbegin(); it != m_hits.rend(); ++it)
        if (!it->rect.isEmpty() && it->rect.adjusted(-1, -1, 1, 1).contains(pos) &&
            it->hit.row != TimelineData::Row::Pause)
            return it->hit;
    for (auto it = m_hits.rbegin(); it != m_hits.rend(); ++it)
        if (!it->rect.isEmpty() && it->rect.contains(pos))
            return it->hit;
    return {};
}

QString TimelineRenderer::describe(const TimelineData &data, const TimelineHit &hit)
{
    return HitDescription::of(data, hit);
}

} // namespace smol::widgets
