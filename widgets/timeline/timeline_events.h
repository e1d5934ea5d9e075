// What a feed hands the timeline: one side of a frame, a span, a memory
// sample, in the timeline's own plain words. The bridge (app/feed) translates
// the engine's events (net/trace.h, engine/session/session_events.h) into
// these; widgets do not know the engine's enums, so kinds travel as their
// values. Memory by category is net/memory_by_category.h's one struct.
#pragma once

#include "net/memory_by_category.h"

#include <QString>

#include <cstdint>

namespace smol::widgets {

// One side of a frame as the engine reports it (net::FrameEvent).
struct TimelineFrameSide {
    bool send = true;
    int src = -1;
    int dst = -1;
    std::uint64_t bytes = 0;
    int collective = 0; // net::CollectiveKind's value
    std::uint64_t seq = 0;
    std::uint32_t tag = 0;
    std::int64_t sendStartNs = 0;
    std::int64_t sendCompleteNs = 0; // send side
    std::int64_t recvCompleteNs = 0; // receive side
};

// engine::SpanEvent::Kind's values.
enum class TimelineSpanKind : std::uint8_t { Forward = 0, Backward = 1, Optimizer = 2, Collective = 3, Pause = 4, Step = 5 };

// A collective run by c10d's Gloo (--backend gloo) carries this in front of
// its name: one span per rank with its bytes; its packets are not visible.
inline const QString kGlooSpanPrefix = QStringLiteral("gloo · ");
inline bool isGlooSpanName(const QString &name)
{
    return name.startsWith(kGlooSpanPrefix);
}

struct TimelineSpan {
    int node = -1;
    TimelineSpanKind kind = TimelineSpanKind::Forward;
    QString name;
    std::int64_t startNs = 0;
    std::int64_t endNs = 0;
    std::int64_t step = -1;
    int collective = 0;
    std::uint64_t seq = 0;
    std::uint64_t bytes = 0;
};

// One node's memory by category at an instant, as the engine reports it
// before and after every collective (engine::MemorySample); exact at tNs.
struct TimelineMemorySample {
    int node = -1;
    std::int64_t tNs = 0;
    std::int64_t step = -1;
    net::MemoryByCategory memory;
    int collective = 0; // net::CollectiveKind's value; 0: not at a collective (a per-step sample)
    std::uint64_t seq = 0;
    bool before = false; // taken entering the collective (else leaving it)
    // Each category at its largest during `step` (stamped at its end), not
    // the memory at tNs (engine::MemorySample::stepPeak).
    bool stepPeak = false;
};

} // namespace smol::widgets
