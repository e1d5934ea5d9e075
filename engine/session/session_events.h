// The vocabulary of a run as a stream of events: frames (net/trace.h),
// spans (compute, collectives, pauses, steps), memory snapshots, metrics,
// log lines and tensor snapshots, plus the header a session file starts
// with. Plain structs; no LibTorch, no Qt Gui.
//
// SessionEventSink is the one interface that both a live cluster and a
// ReplaySource feed, so every view works on live and recorded runs alike;
// SessionRecorder is the sink that writes a session file
// (docs/session-format.md).
//
// All times are int64 nanoseconds on the coordinator's monotonic clock
// (net::monotonicNs() there; remote clocks corrected by their offsets).
#pragma once

#include "net/memory_by_category.h"
#include "net/trace.h"

#include <QByteArray>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace smol::engine {

// The schema this build writes and the newest one it reads
// (docs/session-format.md). A reader opens every file with version <= this.
// Version 4 packs frames, spans and memory samples into one row per time
// slice (event_slices.h).
constexpr int kSessionSchemaVersion = 4;

// A session file that cannot be created, written or read: missing,
// truncated, corrupted, foreign, too new. One line, naming the file.
class SessionError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// A stretch of time on one node. Kind values are stored in session files:
// append, never renumber.
struct SpanEvent {
    enum class Kind { Forward = 0, Backward = 1, Optimizer = 2, Collective = 3, Pause = 4, Step = 5 };
    static constexpr int kKinds = 6;

    int node = -1;
    Kind kind = Kind::Forward;
    std::string name; // free text: "fc1", "bucket 3", "breakpoint: allreduce"
    std::int64_t startNs = 0;
    std::int64_t endNs = 0;
    std::int64_t step = -1;
    // Collective spans (and pauses at a collective): which one.
    net::CollectiveKind collective = net::CollectiveKind::None;
    std::uint64_t seq = 0;
    std::uint64_t bytes = 0; // the collective's buffer
};

inline const char *spanKindName(SpanEvent::Kind kind)
{
    static constexpr const char *kNames[SpanEvent::kKinds] = {"forward",    "backward", "optimizer",
                                                              "collective", "pause",    "step"};
    const int k = int(kind);
    return k >= 0 && k < SpanEvent::kKinds ? kNames[k] : "?";
}

// A node's memory by category: at the end of a step (collective None), or
// before or after a collective (schema version 2 on), or (stepPeak, version
// 3 on) each category at its largest during the step, stamped at its end
// (engine::StepMemory::peak). Views of memory "now" skip the step peaks.
struct MemorySample {
    std::int64_t tNs = 0;
    int node = -1;
    std::int64_t step = -1;
    net::MemoryByCategory memory;
    net::CollectiveKind collective = net::CollectiveKind::None;
    std::uint64_t seq = 0;
    bool before = false;
    bool stepPeak = false;
};

struct MetricSample {
    std::int64_t tNs = 0;
    std::int64_t step = -1;
    int node = -1;    // -1: cluster-wide
    std::string name; // loss, test_accuracy, samples_per_s, ...
    double value = 0;
};

struct LogLine {
    std::int64_t tNs = 0;
    int node = -1; // -1: coordinator
    std::string text;
};

// A tensor entering (before) or leaving a collective, taken while the
// cluster was paused. The engine's TensorSnapshot travels as JSON bytes.
struct TensorRecord {
    std::int64_t tNs = 0;
    std::uint64_t pauseId = 0;
    int node = -1;
    std::int64_t step = -1;
    net::CollectiveKind collective = net::CollectiveKind::None;
    std::uint64_t seq = 0;
    std::string name;
    bool before = true;
    QByteArray snapshotJson;
};

struct SessionNode {
    int rank = -1;
    std::string name;
    std::string host;
    std::string role; // "worker", "server", "stage 1", ...
};

// What a session file says about its run before the first event.
struct SessionHeader {
    QByteArray configJson; // the run's TrainConfig as JSON
    std::string strategy;
    std::string model;
    int nodes = 0;
    std::int64_t steps = 0; // planned
    std::vector<SessionNode> nodeList;
    QByteArray placementJson;
    std::int64_t startNs = 0;
};

// When an event became known: a frame side's completion, a span's end, the
// instant of the others. Replay emits events at this time; session files
// index it.
inline std::int64_t eventTimeNs(const net::FrameEvent &e)
{
    return e.side == net::FrameEvent::Side::Send ? e.sendCompleteNs : e.recvCompleteNs;
}
inline std::int64_t eventTimeNs(const SpanEvent &e)
{
    return e.endNs;
}
inline std::int64_t eventTimeNs(const MemorySample &e)
{
    return e.tNs;
}
inline std::int64_t eventTimeNs(const MetricSample &e)
{
    return e.tNs;
}
inline std::int64_t eventTimeNs(const LogLine &e)
{
    return e.tNs;
}
inline std::int64_t eventTimeNs(const TensorRecord &e)
{
    return e.tNs;
}

// Records of every kind, one list each: a window a reader returns, a batch
// a recorder writes.
struct SessionEvents {
    std::vector<net::FrameEvent> frames;
    std::vector<SpanEvent> spans;
    std::vector<MemorySample> memory;
    std::vector<MetricSample> metrics;
    std::vector<LogLine> logs;
    std::vector<TensorRecord> tensors;
    std::size_t size() const
    {
        return frames.size() + spans.size() + memory.size() + metrics.size() + logs.size() + tensors.size();
    }
    void clear()
    {
        frames.clear();
        spans.clear();
        memory.clear();
        metrics.clear();
        logs.clear();
        tensors.clear();
    }
};

// Where a run's events go: a recorder, the GUI bridge, a test. Live
// clusters and ReplaySource call it the same way.
//
// Calls may come from any thread (transport I/O threads, node compute
// threads, the coordinator, a replay thread): implementations must be
// thread-safe and quick (copy the event and return). Every method defaults
// to doing nothing, so a sink overrides only what it shows. A sink is also a
// net::TraceSink, so it can be attached to a transport directly.
class SessionEventSink : public net::TraceSink {
public:
    ~SessionEventSink() override = default;
    void onFrame(const net::FrameEvent &) override { }
    virtual void onSpan(const SpanEvent &) { }
    virtual void onMemory(const MemorySample &) { }
    virtual void onMetric(const MetricSample &) { }
    virtual void onLog(const LogLine &) { }
    virtual void onTensor(const TensorRecord &) { }
};

} // namespace smol::engine
