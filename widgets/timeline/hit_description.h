// What the timeline's tooltip says about what the pointer is on
// (TimelineRenderer::describe): a packet, a span, a run of either collapsed
// at this zoom, or a pixel column of a lane's memory strip, in plain words
// with the times from the recording's start.
#pragma once

#include <QString>

#include <cstdint>

namespace smol::widgets {

class TimelineData;
struct TimelineHit;

class HitDescription {
public:
    static QString of(const TimelineData &data, const TimelineHit &hit);

private:
    static QString memory(const TimelineData &data, const TimelineHit &hit);
    // "1.234567 s": a time from the data's origin.
    static QString secondsAt(const TimelineData &data, std::int64_t tNs);
};

} // namespace smol::widgets
