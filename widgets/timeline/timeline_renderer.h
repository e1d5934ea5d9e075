// Paints a TimelineData through a TimeAxis with any QPainter: the timeline
// widget's paintEvent, `smolctl bench timeline` (a 1920x1080 QImage) and the
// PNG export use this one code. Qt Gui only, no widgets.
//
// Picture, top to bottom: a time ruler (seconds since the data began, with
// step boundaries), then one lane per node. A lane has three rows: compute
// spans (forward, backward, optimizer), collective spans, and the packet
// strip where the node's sends leave from; each packet is an arrow from its
// sender's strip at its send start to its receiver's strip at its receive
// end. Pauses shade the lanes of the paused nodes. Whatever is too small to
// see collapses into a counted block (TimelineData::collapse*).
//
// Memory: once the data has memory samples, each lane at least
// kMinMemoryLaneHeight tall gets a strip at its bottom (a thinner lane, a
// thin bar: see memoryThin()), a stacked area of
// the five categories in the Memory tab's colours (params at the bottom,
// then grads, optimizer, activations, comm), each sample held until the
// next. Each lane has its own scale, labelled beside it ("≤ 3.0 MiB"): 0
// at the strip's foot, the node's highest total in view (rounded up) at its
// top, so every node's shape reads at a glance, however small its share
// (a pipeline's last stage next to the stage holding the embedding). Per pixel
// column the min/max envelope (TimelineData::memoryEnvelope): the stack of
// the column's lowest sample solid, the part of its highest sample's stack
// above that faded, so a sawtooth too fine to draw still shows its peaks.
//
// Live: a packet whose receive has not arrived is drawn to "now" on its
// receiver's lane, dashed, with a dot at its head. Replay: past the
// playhead the picture is dimmed, and a packet in flight at the playhead
// carries a dot where it is along its arrow.
//
// When a memory budget dropped the oldest events (TimelineData), a line at
// the left edge of what is kept says so ("history before 754.2 s dropped
// (budget 256 MiB)"), and the time before it is hatched: nothing there is
// drawn or hit.
#pragma once

#include "timeline_axis.h"
#include "timeline_data.h"

#include <QColor>
#include <QFont>
#include <QFontMetricsF>
#include <QImage>
#include <QLineF>
#include <QPointF>
#include <QRectF>
#include <QString>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <vector>

namespace smol::widgets {
struct Palette;
}

class QPainter;

namespace smol::widgets {

// What a click or hover lands on.
struct TimelineHit {
    // Memory: a pixel column of a lane's memory strip; first is its highest
    // sample, count how many were in effect over it, [startNs, endNs) its time.
    enum class Kind { None, Packet, PacketRun, Span, SpanRun, Memory };
    Kind kind = Kind::None;
    int lane = -1;
    TimelineData::Row row = TimelineData::Row::Compute;
    std::size_t first = 0;
    std::size_t count = 0;
    std::int64_t startNs = 0;
    std::int64_t endNs = 0;
    // What a drawn item of a lane's row stands for (its kind set by the caller).
    static TimelineHit of(int lane, TimelineData::Row row, const LodItem &item)
    {
        return {Kind::None, lane, row, item.first, item.count, item.startNs, item.endNs};
    }
    bool operator==(const TimelineHit &o) const
    {
        return kind == o.kind && lane == o.lane && row == o.row && first == o.first && count == o.count;
    }
    bool operator!=(const TimelineHit &o) const { return !(*this == o); }
};

struct TimelineOverlay {
    static constexpr std::int64_t kNone = std::numeric_limits<std::int64_t>::min();
    std::int64_t nowNs = kNone;                          // live: unreceived packets reach to here
    std::int64_t playheadNs = kNone;                     // replay: the position
    std::int64_t bandStartNs = kNone, bandEndNs = kNone; // a zoom-to selection being dragged
    // Live: the cluster has been paused since then (its Pause spans arrive
    // when it resumes); drawn up to nowNs across every lane, captioned
    // ("paused (pause) at all-gather 'params.fc2', step 71": holdCaption()).
    std::int64_t livePauseNs = kNone;
    QString livePauseCaption;
    TimelineHit selected;
    TimelineHit hovered;
};

struct TimelineFrameStats {
    std::size_t arrows = 0;     // packets drawn one by one
    std::size_t packetRuns = 0; // collapsed blocks of packets
    std::size_t packetsInRuns = 0;
    std::size_t spans = 0;
    std::size_t spanRuns = 0;
    std::size_t inFlight = 0;      // packets drawn moving
    std::size_t memoryColumns = 0; // pixel columns of memory strips with samples in effect
};

class TimelineRenderer {
public:
    // Below this many pixels apart, packets collapse; spans narrower than
    // kMinSpanPx collapse with their narrow neighbours.
    static constexpr double kMinPacketPx = 5;
    static constexpr double kMinSpanPx = 3;
    // A block of packets spans at most this much; busy stretches become a
    // row of counted blocks.
    static constexpr double kMaxPacketRunPx = 64;
    // Lanes thinner than this (4 nodes on a 1024x768 projector, 32 or 64 in
    // a dock) get the memory strip shrunk to a thin bar at their bottom:
    // kThinMemoryShare of the lane, 1 to kMaxThinMemoryPx pixels, without a
    // scale label; the spans and packets share the rest of the lane, or
    // (under kMinThinRowsPx left, 64 nodes in a short dock) lie over it.
    static constexpr double kMinMemoryLaneHeight = 30;
    static constexpr double kThinMemoryShare = 0.28;
    static constexpr double kMaxThinMemoryPx = 8;
    static constexpr double kMinThinRowsPx = 2;

    TimelineRenderer();

    void setProjectorMode(bool on);
    bool projectorMode() const { return m_projector; }

    // The geometry for a widget or image of `size`: lane label column, ruler,
    // lanes. The axis's left and width must come from here.
    void layout(const QRectF &rect, int lanes);
    double timeLeft() const { return m_timeLeft; }
    double timeWidth() const { return m_rect.right() - m_timeLeft; }
    int laneAt(double y) const; // -1 outside the lanes
    // Lanes thinner than a line of text are named every this many (1: all).
    int laneLabelEvery() const;
    QRectF laneRect(int lane) const;
    QRectF rowRect(int lane, TimelineData::Row row) const;
    double packetY(int lane) const;
    // Whether the lanes carry memory strips (the last paint's data had
    // memory samples), whether they are thin bars, and where; empty if none.
    bool memoryShown() const { return m_memory; }
    bool memoryThin() const { return m_memory && m_laneHeight < kMinMemoryLaneHeight; }
    // A thin bar so thin that the spans lie over it (drawn first).
    bool memoryUnderSpans() const
    {
        return memoryThin() && m_laneHeight - thinMemoryHeight() < kMinThinRowsPx;
    }
    QRectF memoryRect(int lane) const;
    // The last paint's memory scale of a lane: bytes at its strip's top (0: none drawn).
    std::int64_t memoryScale(int lane) const
    {
        return lane >= 0 && std::size_t(lane) < m_memoryScales.size() ? m_memoryScales[std::size_t(lane)] : 0;
    }

    TimelineFrameStats paint(QPainter &painter, const TimelineData &data, const TimeAxis &axis,
                             const TimelineOverlay &overlay);

    // Against the last paint(): what is under `pos` (arrows within 4 px).
    TimelineHit hitTest(const QPointF &pos) const;
    // Forget the last paint's items (their indexes are stale once the data
    // dropped events); hitTest finds nothing until the next paint.
    void forgetHits()
    {
        m_hits.clear();
        m_memoryColumns.clear();
    }
    // The last paint's history-start mark (its line and label); empty when
    // nothing was dropped or the mark was out of view.
    QRectF historyMarkRect() const { return m_historyMark; }
    static QString historyMarkText(const TimelineData &data);

    static QString describe(const TimelineData &data, const TimelineHit &hit);
    // "1.250 s", "350 µs", "12 ns": a duration in the unit that suits it.
    static QString formatDuration(double ns);

private:
    struct HitItem {
        TimelineHit hit;
        QRectF rect; // spans and blocks
        QLineF line; // arrows (rect empty)
    };
    QColor collectiveColour(int kind) const;
    QColor spanColour(TimelineSpanKind kind) const;
    void paintRuler(QPainter &p, const TimelineData &data, const TimeAxis &axis);
    void paintSpans(QPainter &p, const TimelineData &data, const TimeAxis &axis, int lane,
                    TimelineData::Row row, TimelineFrameStats &stats);
    void paintPackets(QPainter &p, const TimelineData &data, const TimeAxis &axis, int lane,
                      const TimelineOverlay &overlay, TimelineFrameStats &stats);
    void paintInFlight(QPainter &p, const TimelineData &data, const TimeAxis &axis,
                       const TimelineOverlay &overlay, TimelineFrameStats &stats);
    void outline(QPainter &p, const TimelineData &data, const TimeAxis &axis, const TimelineHit &hit,
                 const QColor &c);
    void paintHistoryMark(QPainter &p, const TimelineData &data, const TimeAxis &axis);
    // The lanes' bands and names, left of the time area.
    void paintLaneNames(QPainter &p, const TimelineData &data, const QFontMetricsF &fm);
    // Over everything: the playhead, "now", a selected band, hover and selection outlines.
    void paintMarks(QPainter &p, const TimelineData &data, const TimeAxis &axis,
                    const TimelineOverlay &overlay);
    void paintMemory(QPainter &p, const TimelineData &data, const TimeAxis &axis, TimelineFrameStats &stats);
    double thinMemoryHeight() const
    {
        return std::clamp(kThinMemoryShare * m_laneHeight, std::min(1.0, m_laneHeight), kMaxThinMemoryPx);
    }
    // A live pause's hatch from its hold to now, and its caption.
    void paintLivePause(QPainter &p, const TimeAxis &axis, const TimelineOverlay &overlay);
    // Each memory category's pixel, solid then faded (StoredMemory::kCategories each).
    using MemoryLayers = std::array<QRgb, 2 * StoredMemory::kCategories>;
    static MemoryLayers memoryLayers(const Palette &pal);
    void paintMemoryStrip(QPainter &p, const TimelineData &data, const TimeAxis &axis, int lane, int columns,
                          const MemoryLayers &layers, TimelineFrameStats &stats);
    void paintMemoryScales(QPainter &p, const Palette &pal, int lanes);
    void paintStepPeaks(QPainter &p, const Palette &pal, const TimelineData &data, const TimeAxis &axis, int lane,
                        std::int64_t t0, std::int64_t t1);

    bool m_projector = false;
    QRectF m_rect;
    double m_timeLeft = 0;
    double m_rulerHeight = 22;
    double m_laneHeight = 60;
    int m_lanes = 0;
    QFont m_font;
    std::vector<HitItem> m_hits;
    QRectF m_historyMark;
    bool m_memory = false; // the data has memory samples
    // The last paint's memory envelopes by lane, column c at pixel
    // m_memoryX0 + c, for hits.
    struct MemoryColumn {
        std::size_t maxAt = 0, count = 0; // count 0: nothing in effect
    };
    std::vector<std::vector<MemoryColumn>> m_memoryColumns;
    double m_memoryX0 = 0;
    TimeAxis m_memoryAxis;
    std::vector<std::int64_t> m_memoryScales; // by lane
    QImage m_memoryImage;                     // a lane's strip, written pixel by pixel
};

} // namespace smol::widgets
