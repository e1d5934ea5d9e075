// SessionReader: a session file opened read-only (docs/session-format.md).
//
// Opening checks, in order: the file exists, its first 16 bytes are the
// SQLite magic, SQLite can read its schema, it has our meta table and
// format tag, its schema version is not newer than this build's, and the
// tables of that version are there. Anything else is a SessionError of one
// line naming the file; so is every later query that SQLite fails (a
// damaged page can surface long after opening) and every stored value out
// of range. Nothing a file contains can crash the reader.
//
// An event's time is when it became known: the end of a frame or span
// (t_end), the instant of the others (t). Window queries return what
// overlaps [t0, t1]: frames and spans whose [t_start, t_end] meets it, the
// other records whose t lies in it; each list is ordered by event time. The
// time indexes plus the longest duration per table (kept in meta by the
// recorder) make a window an index range scan.
//
// Read through SQLite's own API (sqlite3_column_*, no QVariant per value:
// ~3x less time per row than Qt Sql). Thread-safe: each thread that calls
// in gets its own read-only connection; all are closed by the destructor.
#pragma once

#include "session_events.h"

#include <QString>

#include <array>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

struct sqlite3;

namespace smol::engine {

struct SessionLink {
    int src = -1;
    int dst = -1;
    std::uint64_t bytes = 0;  // payload bytes of the send-side frames
    std::uint64_t frames = 0; // send-side frames
};

// The figures of `smolctl info`, every one read or counted from the file.
struct SessionInfo {
    int schemaVersion = 0;
    bool complete = false; // the end marker is there; false: the recording was interrupted
    std::string strategy;
    std::string model;
    int nodes = 0;
    std::vector<SessionNode> nodeList;
    std::int64_t stepsPlanned = 0;
    std::int64_t stepsRecorded = 0; // distinct step numbers among spans and metrics
    std::int64_t lastStep = -1;
    std::int64_t startNs = 0;
    std::int64_t lastEventNs = 0; // the newest event time (startNs when there is none)
    std::int64_t durationNs = 0;  // complete: the end marker's; interrupted: lastEventNs - startNs
    std::uint64_t framesSend = 0, framesReceive = 0;
    std::array<std::uint64_t, SpanEvent::kKinds> spans{}; // by SpanEvent::Kind
    std::uint64_t memory = 0, metrics = 0, logs = 0, tensors = 0;
    std::uint64_t memoryAtCollectives = 0; // of memory: taken before or after a collective (version 2 on)
    std::uint64_t memoryStepPeaks = 0;     // of memory: a node's peaks over a step (version 3 on)
    std::vector<SessionLink> links;        // by (src, dst)
    std::optional<double>
        finalLoss; // the last "loss" metric (cluster-wide ones first), else the end marker's
    std::int64_t finalLossStep = -1;
    std::uint64_t events() const;
};

// One collective across the nodes: its Collective spans grouped by
// (step, kind, seq).
struct CollectiveBoundary {
    net::CollectiveKind kind = net::CollectiveKind::None;
    std::uint64_t seq = 0;
    std::int64_t step = -1;
    std::int64_t startNs = 0; // the earliest node's start
    std::int64_t endNs = 0;   // the latest node's end
};

class SessionReader {
public:
    explicit SessionReader(const QString &path); // throws SessionError
    ~SessionReader();
    SessionReader(const SessionReader &) = delete;
    SessionReader &operator=(const SessionReader &) = delete;

    const QString &path() const { return m_path; }
    int schemaVersion() const { return m_version; }
    // The memory table's columns as this file's version has them.
    const char *memoryColumns() const;
    const SessionHeader &header() const { return m_header; }
    bool isComplete() const; // has the end marker
    SessionInfo info() const;
    // [first, last]: from the earlier of the run's start and the first event
    // to the later of the end marker and the last event.
    std::pair<std::int64_t, std::int64_t> timeRange() const;

    // Windows: what overlaps [t0, t1].
    std::vector<net::FrameEvent> frames(std::int64_t t0, std::int64_t t1) const;
    std::vector<SpanEvent> spans(std::int64_t t0, std::int64_t t1) const;
    std::vector<MemorySample> memory(std::int64_t t0, std::int64_t t1) const;
    std::vector<MetricSample> metrics(std::int64_t t0, std::int64_t t1, const std::string &name = {}) const;
    std::vector<LogLine> logs(std::int64_t t0, std::int64_t t1) const;
    std::vector<TensorRecord> tensors(std::int64_t t0, std::int64_t t1) const;
    std::vector<TensorRecord> tensorsOfPause(std::uint64_t pauseId) const;

    // Every record with event time in (after, upTo], each list in time
    // order: what a replay emits when its position moves from `after` to `upTo`.
    SessionEvents eventsIn(std::int64_t after, std::int64_t upTo) const;
    // The first event time after `tNs`; nullopt if none.
    std::optional<std::int64_t> nextEventTime(std::int64_t tNs) const;
    // Each node's newest memory sample at or before `tNs`, by rank (step
    // peaks aside: latestStepPeaks).
    std::vector<MemorySample> latestMemory(std::int64_t tNs) const;
    // Each node's newest step peaks at or before `tNs`, by rank (none before
    // version 3).
    std::vector<MemorySample> latestStepPeaks(std::int64_t tNs) const;
    // The time of step `step`'s first span or metric; nullopt if none.
    std::optional<std::int64_t> stepStart(std::int64_t step) const;
    // Every collective, by start time.
    std::vector<CollectiveBoundary> collectives() const;

    // The whole file, streamed (no list in memory): frames, memory, metrics
    // and logs in event-time order; spans in start-time order.
    void forEachFrame(const std::function<void(const net::FrameEvent &)> &fn) const;
    void forEachSpanByStart(const std::function<void(const SpanEvent &)> &fn) const;
    void forEachMemory(const std::function<void(const MemorySample &)> &fn) const;
    void forEachMetric(const std::function<void(const MetricSample &)> &fn) const;
    void forEachLog(const std::function<void(const LogLine &)> &fn) const;

private:
    class Query;  // a prepared forward-only query that throws SessionError on any failure
    struct Slice; // a packed row's key columns (version 4 on)

    // Version 4 on, frames, spans and memory samples are packed in slices
    // (event_slices.h); their version-1 tables are not read. The sliced*
    // functions are those reads on the slices (session_reader_slices.cpp).
    bool packed() const { return m_version >= 4; }
    // Decodes each slice of `table` the query's `where` (over t_min, t_max,
    // t_start_min, with `binds` for its ?s; may end in ORDER BY) selects and
    // hands it to fn(slice, events), which returns false to stop.
    template <class E, class Fn> void scanSlices(const char *table, const QString &where,
                                                 std::initializer_list<std::int64_t> binds, Fn fn) const;
    // The events of the slices selected that keep(e) accepts, in event-time
    // order (ties in file order).
    template <class E, class Keep> std::vector<E> slicedWindow(const char *table, const QString &where,
                                                               std::initializer_list<std::int64_t> binds,
                                                               Keep keep) const;
    // Every event of `table`, streamed in event-time order or (byStart) start-time order.
    template <class E>
    void streamSlices(const char *table, bool byStart, const std::function<void(const E &)> &fn) const;
    std::int64_t sliceExtent() const; // the largest t_max - t_min of a slice
    std::vector<net::FrameEvent> slicedFrames(std::int64_t t0, std::int64_t t1) const;
    std::vector<SpanEvent> slicedSpans(std::int64_t t0, std::int64_t t1) const;
    std::vector<MemorySample> slicedMemory(std::int64_t t0, std::int64_t t1) const;
    void slicedEventsIn(std::int64_t after, std::int64_t upTo, SessionEvents &out) const;
    void slicedTimeRange(std::int64_t &first, std::int64_t &last) const;
    std::optional<std::int64_t> slicedNextEventTime(std::int64_t tNs) const;
    std::vector<MemorySample> slicedNewestMemory(std::int64_t tNs, bool stepPeaks) const;
    std::optional<std::int64_t> slicedStepStart(std::int64_t step) const;
    std::vector<CollectiveBoundary> slicedCollectives() const;
    std::int64_t slicedMaxDuration(int spanKind) const; // -1: frames
    // info()'s counts from the slices; the distinct steps >= 0 of the spans into `steps`.
    void slicedCount(SessionInfo &info, std::set<std::int64_t> &steps) const;
    void forEachSlicedFrame(const std::function<void(const net::FrameEvent &)> &fn) const;
    void forEachSlicedSpanByStart(const std::function<void(const SpanEvent &)> &fn) const;
    void forEachSlicedMemory(const std::function<void(const MemorySample &)> &fn) const;

    // Throws SessionError "FILE: reason".
    [[noreturn]] void fail(const QString &reason) const;
    // The connection of the calling thread (opened on first use).
    sqlite3 *connection() const;
    void closeConnections();
    void validate();
    void readHeader();
    std::int64_t maxDuration(const QString &key, const char *table, int spanKind) const;
    std::vector<MemorySample> newestMemoryPerNode(std::int64_t tNs, bool stepPeaks) const;
    void countEvents(SessionInfo &info) const;
    void countEventsTail(SessionInfo &info) const;

    QString m_path;
    int m_version = 0;
    SessionHeader m_header;
    mutable std::mutex m_mutex;
    mutable std::vector<std::pair<std::thread::id, sqlite3 *>> m_connections;
};

} // namespace smol::engine
