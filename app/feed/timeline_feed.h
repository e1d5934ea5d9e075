// The engine's events in the timeline's words: frame sides, spans and
// memory samples (net/trace.h, engine/session/session_events.h) translated
// into widgets::TimelineFrameSide / TimelineSpan / TimelineMemorySample, and
// a whole session file loaded into a widgets::TimelineData. The live bridge, the replay and
// `smolctl bench timeline --session` all go through here.
#pragma once

#include "engine/session/session_events.h"
#include "engine/session/session_reader.h"
#include "widgets/timeline/timeline_data.h"

#include <functional>

namespace smol::app {

widgets::TimelineFrameSide toTimeline(const net::FrameEvent &e);
widgets::TimelineSpan toTimeline(const engine::SpanEvent &s);
widgets::TimelineMemorySample toTimeline(const engine::MemorySample &m);
// What a live feed's timeline gained since its last snapshot, in the
// timeline's words (Gloo's per-collective events marked, not drawn as
// packets): the live bridge and a student's viewer both send it.
struct TimelineBatch {
    QVector<widgets::TimelineFrameSide> frames;
    QVector<widgets::TimelineSpan> spans;
    QVector<widgets::TimelineMemorySample> memory;
};
TimelineBatch toTimeline(const std::vector<net::FrameEvent> &frames, const std::vector<engine::SpanEvent> &spans,
                         const std::vector<engine::MemorySample> &memory, bool gloo);
// net::collectiveName() by CollectiveKind value.
QStringList collectiveNames();

// A session recorded with --backend gloo (its config says so). Its
// collectives are shown as the live window shows them: each span marked as
// Gloo's (widgets::kGlooSpanPrefix), its one event per collective (src ==
// dst) not drawn as a packet.
bool recordedOnGloo(const engine::SessionHeader &header);
// Applies that marking; false: the frame is not a packet to draw.
bool glooFrameIsPacket(const net::FrameEvent &e);
void markGlooSpan(widgets::TimelineSpan &span);

// Clears `data` and fills it with the session's nodes, frames, spans and
// memory samples (version 1 files: one a node and step).
// `progress(done, total)` is called now and then (may be empty), in
// nanoseconds of the recording read so far and in all. Throws
// engine::SessionError for a damaged file.
void loadTimeline(const engine::SessionReader &reader, widgets::TimelineData &data,
                  const std::function<void(std::uint64_t, std::uint64_t)> &progress = {});

} // namespace smol::app
