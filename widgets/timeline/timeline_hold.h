// A pause as the timeline shows it: which collective the cluster is held
// at, and the stretch of time that frames it, so the class sees the held
// collective at a zoom where its packets are drawn apart instead of a red
// hatch growing from the right.
//
// Live, the nodes are held *entering* the collective (engine/breakpoints:
// the hook runs before the algorithm), so its packets do not exist yet: the
// frame ends a little after the last event before the hold and starts before
// the collective that ran just before it (after N, the one just stepped,
// with its packets), so about a fifth of the width is the pause's hatch and
// the rest the work that led to it. In a replay the recording holds the
// collective's spans and packets after the pause: the frame is the held
// collective itself (its Pause spans name it by kind and seq), led by the
// end of the pause, or by the spans before the pause when it was short.
//
// Plain functions over TimelineData, no widgets: tests/tst_timeline.cpp
// checks them on hand-made runs.
#pragma once

#include "timeline_data.h"

#include <QString>

#include <cstdint>
#include <optional>

namespace smol::widgets {

struct TimelineHold {
    // Live: the window's clock when it learned of the pause (the newest
    // snapshot's; the hatch starts at the last event, TimelineHoldFrame);
    // a replay: the position, inside a recorded pause.
    std::int64_t atNs = 0;
    QString reason;     // "pause", "next", a breakpoint's text, "recorded pause"
    QString collective; // "all-gather" (empty: not known)
    QString name;       // the held tensor's name, "params.fc2"
    // The engine's step index (0-based), as the ruler's "step N" labels it;
    // -1: not known.
    std::int64_t step = -1;
};

// What the hatch says: "paused (pause) at all-gather 'params.fc2', step 71".
QString holdCaption(const TimelineHold &hold);

// The time range [startNs, endNs] that frames the held collective, and
// heldNs: live, the last event before the hold (where the hatch starts: the
// window learns of a pause up to a snapshot, 34 ms, after it; nothing
// happens in between); in a replay, where the recorded pause starts.
struct TimelineHoldFrame {
    std::int64_t startNs = 0;
    std::int64_t endNs = 0;
    std::int64_t heldNs = 0;
};
// nullopt when the data has nothing to frame (no events yet). `live`: the
// collective has not run (see above); else it is in the data after atNs.
std::optional<TimelineHoldFrame> holdFrame(const TimelineData &data, const TimelineHold &hold, bool live);

// The live view's time span while it follows "now": one and a half of the
// recent steps (the median of the last few complete ones), so the newest
// step and the end of the one before are in view with their packets drawn
// apart; 0 while no step has completed.
std::int64_t recentStepsSpan(const TimelineData &data);

// Live: the time up to which every node has reported, the oldest of the
// lanes' newest spans and packets (lanes without any left out), but no earlier than
// `maxLagNs` before the newest event. Nodes report in batches, some tens of
// ms apart: right of this, a node that has not reported yet looks idle and
// the packets to it look in flight. Following puts its right edge here.
std::int64_t reportedUntilNs(const TimelineData &data, std::int64_t maxLagNs);

} // namespace smol::widgets
