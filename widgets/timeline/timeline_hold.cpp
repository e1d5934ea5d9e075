#include "timeline_hold.h"

#include <algorithm>
#include <limits>
#include <vector>

namespace smol::widgets {

namespace {

using Row = TimelineData::Row;

// The narrowest frame: a few hundred microseconds across ~800 px still puts
// a ring's frames (tens of microseconds apart on loopback) pixels apart.
constexpr std::int64_t kMinFrameNs = 200'000;
// Live: the frame's share left of the collective before the hold, and the
// share right of the hold (the hatch), as fractions of what lies between.
constexpr double kLead = 0.3;
constexpr double kTail = 0.3;
// Spans looked at backwards from a time on one lane when matching a
// collective by kind and seq (a step has a few dozen at most).
constexpr int kScanBack = 64;

struct Collective {
    int kind = -1;
    std::uint64_t seq = 0;
    std::int64_t startNs = std::numeric_limits<std::int64_t>::max();
    std::int64_t endNs = std::numeric_limits<std::int64_t>::min();
    bool found() const { return kind >= 0; }
};

// Index of the first span of a list starting after t.
template <class List> std::size_t firstAfter(const List &spans, std::int64_t t)
{
    return std::size_t(std::upper_bound(spans.begin(), spans.end(), t,
                                        [](std::int64_t x, const StoredSpan &s) { return x < s.startNs; }) -
                       spans.begin());
}

// The collective that ended last at or before t, over every lane.
Collective lastCollectiveBefore(const TimelineData &data, std::int64_t t)
{
    Collective c;
    std::int64_t bestEnd = std::numeric_limits<std::int64_t>::min();
    for (int lane = 0; lane < data.laneCount(); ++lane) {
        const auto &spans = data.spans(lane, Row::Collective);
        const std::size_t end = firstAfter(spans, t);
        for (std::size_t i = end, seen = 0; i > 0 && seen < 4; --i, ++seen) {
            const StoredSpan &s = spans[i - 1];
            if (s.endNs <= t && s.endNs > bestEnd) {
                bestEnd = s.endNs;
                c.kind = s.collective;
                c.seq = s.seq;
            }
        }
    }
    return c;
}

// Widens c to the spans of its collective (kind, seq) on every lane: live,
// the ones nearest before `t`; in a replay, the first ones from `t` on.
void extentOf(const TimelineData &data, Collective &c, std::int64_t t, bool live)
{
    const auto widen = [&c](const StoredSpan &s) {
        if (s.collective != c.kind || s.seq != c.seq)
            return false;
        c.startNs = std::min(c.startNs, s.startNs);
        c.endNs = std::max(c.endNs, s.endNs);
        return true;
    };
    for (int lane = 0; lane < data.laneCount(); ++lane) {
        const auto &spans = data.spans(lane, Row::Collective);
        if (live) {
            const std::size_t end = firstAfter(spans, t);
            for (std::size_t i = end, seen = 0; i > 0 && seen < std::size_t(kScanBack); --i, ++seen)
                if (widen(spans[i - 1]))
                    break;
        } else {
            const std::size_t begin = firstAfter(spans, t - 1);
            for (std::size_t i = begin; i < spans.size() && i < begin + std::size_t(kScanBack); ++i)
                if (widen(spans[i]))
                    break;
        }
    }
}

TimelineHoldFrame liveFrame(const TimelineData &data, const TimelineHold &hold)
{
    // The hold: the last event before it. Nothing happens while every node
    // is held, and the window's clock at the pause (hold.atNs, the newest
    // snapshot's) may come before the last events: after N, the stepped
    // collective runs after that snapshot.
    const std::int64_t held = data.endNs();
    Collective c = lastCollectiveBefore(data, held);
    std::int64_t width = 0;
    if (c.found()) {
        extentOf(data, c, held, /*live=*/true);
        width = held - c.startNs;
    }
    // At most the last step's worth: a collective further back than that
    // would zoom out to where packets merge into blocks.
    const std::int64_t step = recentStepsSpan(data) * 2 / 3;
    if (width <= 0)
        width = step > 0 ? step : std::max(held - data.beginNs(), held - hold.atNs);
    if (step > 0)
        width = std::min(width, std::max(step, c.found() ? c.endNs - c.startNs : 0));
    width = std::max(width, kMinFrameNs);
    const auto lead = std::int64_t(kLead * double(width)), tail = std::int64_t(kTail * double(width));
    return {held - width - lead, held + tail, held};
}

// Replay: the Pause spans around the position name the held collective.
std::optional<TimelineHoldFrame> replayFrame(const TimelineData &data, const TimelineHold &hold)
{
    Collective c;
    std::int64_t pauseStart = std::numeric_limits<std::int64_t>::max(), pauseEnd = hold.atNs;
    for (int lane = 0; lane < data.laneCount(); ++lane) {
        const auto &pauses = data.spans(lane, Row::Pause);
        const std::size_t end = firstAfter(pauses, hold.atNs);
        for (std::size_t i = end, seen = 0; i > 0 && seen < std::size_t(kScanBack); --i, ++seen) {
            const StoredSpan &s = pauses[i - 1];
            if (s.endNs < hold.atNs)
                continue;
            c.kind = s.collective;
            c.seq = s.seq;
            pauseStart = std::min(pauseStart, s.startNs);
            pauseEnd = std::max(pauseEnd, s.endNs);
            break;
        }
    }
    if (c.found()) {
        extentOf(data, c, pauseStart, /*live=*/false);
    } else {
        // No Pause span (a file without them): the first collective after the position.
        for (int lane = 0; lane < data.laneCount(); ++lane) {
            const auto &spans = data.spans(lane, Row::Collective);
            const std::size_t i = firstAfter(spans, hold.atNs - 1);
            if (i < spans.size() && spans[i].startNs < c.startNs) {
                c.kind = spans[i].collective;
                c.seq = spans[i].seq;
                c.startNs = spans[i].startNs;
            }
        }
        if (!c.found())
            return std::nullopt;
        c.startNs = std::numeric_limits<std::int64_t>::max();
        extentOf(data, c, hold.atNs, /*live=*/false);
        pauseStart = pauseEnd = c.startNs;
    }
    if (c.startNs > c.endNs)
        return std::nullopt;
    const std::int64_t width = std::max(c.endNs - c.startNs, kMinFrameNs);
    // A short pause: the spans before it too; a long one: its end, hatched.
    const std::int64_t lead = std::int64_t(kLead * double(width));
    std::int64_t left = pauseEnd - pauseStart <= 2 * width ? pauseStart - lead : c.startNs - lead;
    if (hold.atNs < left && hold.atNs >= left - width) // the playhead just left of it: in view too
        left = hold.atNs - lead / 4;
    return TimelineHoldFrame{left, c.endNs + std::int64_t(kTail * double(width)), pauseStart};
}

} // namespace

QString holdCaption(const TimelineHold &hold)
{
    QString text =
        hold.reason.isEmpty() ? QStringLiteral("paused") : QStringLiteral("paused (%1)").arg(hold.reason);
    if (!hold.collective.isEmpty()) {
        text += QStringLiteral(" at %1").arg(hold.collective);
        if (!hold.name.isEmpty())
            text += QStringLiteral(" '%1'").arg(hold.name);
    }
    if (hold.step >= 0)
        text += QStringLiteral(", step %1").arg(hold.step);
    return text;
}

std::optional<TimelineHoldFrame> holdFrame(const TimelineData &data, const TimelineHold &hold, bool live)
{
    if (data.beginNs() > data.endNs())
        return std::nullopt;
    if (live)
        return liveFrame(data, hold);
    return replayFrame(data, hold);
}

std::int64_t reportedUntilNs(const TimelineData &data, std::int64_t maxLagNs)
{
    std::int64_t until = std::numeric_limits<std::int64_t>::max();
    for (int lane = 0; lane < data.laneCount(); ++lane) {
        std::int64_t newest = std::numeric_limits<std::int64_t>::min();
        const auto &packets = data.packets(lane);
        if (!packets.empty())
            newest = packets.back().sendStartNs;
        for (Row row : {Row::Compute, Row::Collective}) {
            const auto &spans = data.spans(lane, row);
            if (!spans.empty())
                newest = std::max(newest, spans.back().endNs);
        }
        // Not its memory samples: they come by another path, ahead of its spans.
        if (newest != std::numeric_limits<std::int64_t>::min())
            until = std::min(until, newest);
    }
    if (until == std::numeric_limits<std::int64_t>::max())
        return data.endNs();
    return std::clamp(until, data.endNs() - std::max<std::int64_t>(maxLagNs, 0), data.endNs());
}

std::int64_t recentStepsSpan(const TimelineData &data)
{
    constexpr int kSteps = 5;
    std::vector<std::int64_t> durations;
    const auto &starts = data.stepStarts();
    for (auto it = starts.rbegin(); it != starts.rend() && int(durations.size()) < kSteps; ++it) {
        const auto range = data.stepRange(it->first);
        if (range && range->second > range->first)
            durations.push_back(range->second - range->first);
    }
    if (durations.empty())
        return 0;
    std::nth_element(durations.begin(), durations.begin() + std::ptrdiff_t(durations.size() / 2),
                     durations.end());
    return durations[durations.size() / 2] * 3 / 2;
}

} // namespace smol::widgets
