// What a viewer (a student's window, `smolcluster --watch`, `smolctl watch`)
// and the coordinator say to each other on the coordinator's control port
// (net/control_channel.h framing; docs/runtime.md "Viewers").
//
// Handshake: the control handshake keyed with the run's token or the
// --watch-token (the coordinator tries both; a watch token may see, never
// join as a node), then
//   viewer -> coordinator  {"type":"hello","role":"viewer","name":N,
//                           "node":ID (optional: the node this machine joined as)}
//   coordinator -> viewer  {"type":"viewer_welcome","viewer":ID,
//                           "budget":bytes_per_s,"batch_ms":100}
// then, coordinator -> viewer, in this order for a viewer that arrives mid-run
// (the newest of each kind first, then the stream):
//   {"type":"run","header":{...SessionHeader as JSON...},"config":{...TrainConfig JSON...}}
//   {"type":"nodes","nodes":[{"id","name","host","state","rank","reason"}...]}
//   {"type":"lesson", ...the teacher's lesson step, see LessonStepRecord...}
//   {"type":"pause","held":true|false}
//   {"type":"events","frames":n,"spans":n,"memory":n,"metrics":n,"logs":n,
//    "tensors":n,"aggregated":bool,"links":[{"src","dst","bytes","frames"}...],
//    "t0":ns,"t1":ns}  + blob: the events (engine/session/event_stream.h),
//    in the session file's rows; with "aggregated" the single frames of the
//    batch were over the viewer's budget and "links" stands in for them
//   {"type":"end","ok":bool,"summary":text}
// and viewer -> coordinator, nothing but
//   {"type":"predict","step":K,"value":x}  (K: the lesson step index the
//                                           teacher's panel shows; x finite)
// Anything else a viewer sends is refused with a log line (rate limited);
// a viewer that keeps sending refused messages is dropped.
//
// Times in "events" are on the coordinator's clock (ns), as a session file's.
#pragma once

#include "engine/session/session_events.h"

#include <QJsonArray>
#include <QJsonObject>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace smol::engine::viewer {

constexpr std::int64_t kDefaultBudgetBytesPerSecond = 256 * 1024;
constexpr std::chrono::milliseconds kBatchInterval{100};
// A viewer's queue of encoded messages: past either bound it is dropped.
constexpr std::size_t kMaxQueuedBytes = 8u << 20;
constexpr std::size_t kMaxQueuedMessages = 100; // 10 s of batches
// A viewer whose socket has not taken a message for this long is dropped.
constexpr std::chrono::milliseconds kStallTimeout{5000};
constexpr int kMaxViewers = 256;
// Predictions: at most this many a second per viewer are read; more are refused.
constexpr int kMaxPredictionsPerSecond = 4;
// A viewer that sends this many refused messages is dropped.
constexpr int kMaxRefusals = 16;
// A predicted value's magnitude above this is refused as nonsense.
constexpr double kMaxPredictionMagnitude = 1e18;
constexpr int kMaxLessonSteps = 1000;

} // namespace smol::engine::viewer

// The messages' bodies, written by the hub and read (checked: the bytes are
// untrusted) by the client: viewer_messages.cpp.
namespace smol::engine {

struct ClusterNode;
struct ViewerNode;
struct LinkAggregate;

namespace viewer {

QJsonObject headerToJson(const SessionHeader &header);
// Throws std::runtime_error (one line) on a field of the wrong type or size.
SessionHeader headerFromJson(const QJsonObject &json);
QJsonArray nodesToJson(const std::vector<ClusterNode> &nodes);
std::vector<ViewerNode> nodesFromJson(const QJsonArray &nodes);
QJsonArray linksToJson(const std::vector<LinkAggregate> &links);
std::vector<LinkAggregate> linksFromJson(const QJsonArray &links);

} // namespace viewer
} // namespace smol::engine
