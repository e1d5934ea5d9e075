// TimelineRenderer's memory strips (timeline_renderer.h): per lane, the
// min/max envelope of its memory by category, one pixel column at a time
// (TimelineData::forEachMemoryColumn), written into an image and drawn in
// one call, with the lane's scale beside it. On lanes thinner than
// kMinMemoryLaneHeight the strip shrinks to a thin bar: the same stack on
// the lane's scale when the bar has 4 px or more, else each column's highest
// sample as shares of its total (a stacked area 1 to 3 px high would show
// only the peaks). Over each step, a line in the peak colour at the step's
// peak (its categories stacked, each at its largest: TimelineData's step
// peaks), so ddp's forward, whose activations are freed before any
// collective samples them, still shows how high the node went.
#include "timeline_renderer.h"

#include "widgets/paint/palette.h"

#include <QFontMetricsF>
#include <QPainter>

#include <algorithm>
#include <cmath>

namespace smol::widgets {

namespace {

// Bytes at the memory strips' top: `bytes` rounded up to a quarter of its
// power of two (2.9 MiB -> 3 MiB), so the scale moves in readable steps.
std::int64_t niceScale(std::int64_t bytes)
{
    if (bytes <= 4)
        return std::max<std::int64_t>(bytes, 1);
    int e = 0;
    while ((std::int64_t(1) << (e + 1)) <= bytes)
        ++e;
    const std::int64_t quarter = std::int64_t(1) << (e - 2);
    return (bytes + quarter - 1) / quarter * quarter;
}

} // namespace

// The memory strips, lane by lane: each lane's scale (its highest total in
// view, rounded up), then its stacks column by column as an image, then
// the scales beside the strips.
void TimelineRenderer::paintMemory(QPainter &p, const TimelineData &data, const TimeAxis &axis,
                                   TimelineFrameStats &stats)
{
    if (!memoryShown())
        return;
    const Palette &pal = Palette::forMode(m_projector);
    const int lanes = std::min(m_lanes, data.laneCount());
    m_memoryX0 = std::ceil(m_timeLeft);
    m_memoryAxis = axis;
    const int columns = std::max(0, int(std::ceil(m_rect.right())) - int(m_memoryX0));
    const std::int64_t t0 = axis.time(m_memoryX0), t1 = axis.time(m_memoryX0 + columns);
    m_memoryColumns.assign(std::size_t(lanes), {});
    m_memoryScales.assign(std::size_t(lanes), 0);
    const MemoryLayers layers = memoryLayers(pal);
    for (int lane = 0; lane < lanes; ++lane) {
        // The lane's scale: its highest total in view (O(log n)), rounded up.
        const TimelineData::MemoryRange inView = data.memoryIn(lane, t0, t1);
        if (inView.count == 0 || inView.maxTotal <= 0)
            continue;
        m_memoryScales[std::size_t(lane)] = niceScale(std::max(inView.maxTotal, data.stepPeakIn(lane, t0, t1)));
        paintMemoryStrip(p, data, axis, lane, columns, layers, stats);
        paintStepPeaks(p, pal, data, axis, lane, t0, t1);
    }
    paintMemoryScales(p, pal, lanes);
}

// Per category, solid (a column's lowest sample) then faded (its highest):
// mixed with the background, opaque, so grid lines under it do not show
// through.
TimelineRenderer::MemoryLayers TimelineRenderer::memoryLayers(const Palette &pal)
{
    MemoryLayers pixels;
    constexpr int kCategories = StoredMemory::kCategories;
    for (int k = 0; k < kCategories; ++k) {
        const QColor c = pal.category(kMemoryCategories[std::size_t(k)]);
        constexpr double a = 105 / 255.0;
        const QColor faded(int(c.red() * a + pal.background.red() * (1 - a)),
                           int(c.green() * a + pal.background.green() * (1 - a)),
                           int(c.blue() * a + pal.background.blue() * (1 - a)));
        pixels[std::size_t(k)] = c.rgba(); // opaque: premultiplied as is
        pixels[std::size_t(k + kCategories)] = faded.rgba();
    }
    return pixels;
}

// Envelope and painting of one lane, while its samples are in the cache.
// The strip is written as an image, pixel by pixel, and drawn in one call:
// at full zoom-out every column's stack differs from its neighbour's, and
// 15,000 columns' rectangles through the painter one by one cost more than
// a frame has.
void TimelineRenderer::paintMemoryStrip(QPainter &p, const TimelineData &data, const TimeAxis &axis, int lane,
                                        int columns, const MemoryLayers &layers, TimelineFrameStats &stats)
{
    auto &cols = m_memoryColumns[std::size_t(lane)];
    cols.assign(std::size_t(columns), {});
    const QRectF strip = memoryRect(lane);
    const int top = int(std::floor(strip.top()));
    // A thin bar keeps at least a pixel row, however thin its lane.
    const int base =
        memoryThin() ? std::max(int(std::floor(strip.bottom())), top + 1) : int(std::floor(strip.bottom()));
    if (base <= top || columns <= 0)
        return;
    // 1 to 3 px: each column's highest sample as shares of the bar.
    const bool shares = base - top < 4;
    if (m_memoryImage.width() != columns || m_memoryImage.height() != base - top)
        m_memoryImage = QImage(columns, base - top, QImage::Format_ARGB32_Premultiplied);
    m_memoryImage.fill(Qt::transparent);
    // The scale is at least the highest total.
    const double pxPerByte = strip.height() / double(m_memoryScales[std::size_t(lane)]);
    const auto yOf = [&](double bytes) { return std::max(top, int(double(base) + 0.5 - bytes * pxPerByte)); };
    // Rows [y0, y1) of column c in one colour.
    uchar *bits = m_memoryImage.bits();
    const qsizetype stride = m_memoryImage.bytesPerLine();
    const auto fill = [&](std::size_t c, int y0, int y1, QRgb colour) {
        uchar *at = bits + qsizetype(y0 - top) * stride + qsizetype(c) * 4;
        for (int y = y0; y < y1; ++y, at += stride)
            *reinterpret_cast<QRgb *>(at) = colour;
    };
    constexpr int kCategories = StoredMemory::kCategories;
    const auto paintColumn = [&](int column, const TimelineData::MemoryRange &col) {
        const std::size_t c = std::size_t(column);
        cols[c] = MemoryColumn{col.maxAt, col.count};
        ++stats.memoryColumns;
        if (shares) {
            if (col.maxTotal <= 0)
                return;
            int below = base;
            for (int k = 0; k < kCategories; ++k) {
                const double upTo = col.maxShares.bytesUpTo(k, col.maxTotal) / double(col.maxTotal);
                const int y = std::max(top, int(double(base) + 0.5 - upTo * double(base - top)));
                if (y < below)
                    fill(c, y, below, layers[std::size_t(k)]);
                below = std::min(below, y);
            }
            return;
        }
        // The lowest sample's stack, solid; then the highest's, faded, where
        // it rises above the lowest's.
        int below = base;
        for (int k = 0; k < kCategories; ++k) {
            const int y = yOf(col.minShares.bytesUpTo(k, col.minTotal));
            if (y < below)
                fill(c, y, below, layers[std::size_t(k)]);
            below = std::min(below, y);
        }
        if (col.maxAt == col.minAt)
            return;
        const int solidTop = below;
        below = base;
        for (int k = 0; k < kCategories; ++k) {
            const int y = yOf(col.maxShares.bytesUpTo(k, col.maxTotal));
            const int bottom = std::min(below, solidTop);
            if (y < bottom)
                fill(c, y, bottom, layers[std::size_t(kCategories + k)]);
            below = std::min(below, y);
        }
    };
    data.forEachMemoryColumn(lane, axis, m_memoryX0, columns, paintColumn);
    p.drawImage(QPointF(m_memoryX0, top), m_memoryImage);
}

// Each step's peak over the step, on the strip's scale (strips of 4 px and
// more: a thinner bar shows shares, not bytes).
void TimelineRenderer::paintStepPeaks(QPainter &p, const Palette &pal, const TimelineData &data,
                                      const TimeAxis &axis, int lane, std::int64_t t0, std::int64_t t1)
{
    const QRectF strip = memoryRect(lane);
    const std::int64_t scale = m_memoryScales[std::size_t(lane)];
    if (strip.height() < 4 || scale <= 0)
        return;
    const std::deque<TimelineData::StepPeak> &peaks = data.stepPeaks(lane);
    auto it = std::lower_bound(peaks.begin(), peaks.end(), t0,
                               [](const TimelineData::StepPeak &s, std::int64_t t) { return s.endNs <= t; });
    p.save();
    p.setClipRect(QRectF(m_memoryX0, strip.top() - 1, m_rect.right() - m_memoryX0, strip.height() + 2));
    p.setPen(QPen(pal.peak, m_projector ? 2 : 1));
    for (; it != peaks.end() && it->startNs < t1; ++it) {
        const double y = strip.bottom() - double(it->total) / double(scale) * strip.height();
        const double x0 = axis.x(it->startNs), x1 = axis.x(it->endNs);
        if (x1 - x0 >= 1)
            p.drawLine(QPointF(x0, y), QPointF(x1, y));
    }
    p.restore();
}

// The scale beside each strip tall enough for a line of text.
void TimelineRenderer::paintMemoryScales(QPainter &p, const Palette &pal, int lanes)
{
    const QFontMetricsF fm(m_font);
    if (memoryRect(0).height() < 0.8 * fm.height() || m_laneHeight < 2.2 * fm.height())
        return;
    p.save();
    p.setClipRect(m_rect);
    p.setPen(pal.mutedText);
    for (int lane = 0; lane < lanes; ++lane) {
        if (m_memoryScales[std::size_t(lane)] == 0)
            continue;
        const QString text = QStringLiteral("≤ %1").arg(formatBytes(m_memoryScales[std::size_t(lane)]));
        const QRectF strip = memoryRect(lane);
        const QRectF label(m_rect.left() + 6, strip.center().y() - fm.height() / 2,
                           m_timeLeft - m_rect.left() - 14, fm.height());
        p.drawText(label, Qt::AlignRight | Qt::AlignVCenter, text);
    }
    p.restore();
}

} // namespace smol::widgets
