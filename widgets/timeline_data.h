// What the packets-in-flight timeline draws, held compactly enough for a
// million packets (about 60 bytes each with their indexes): per node lane,
// the packets it sent sorted by send time, its compute spans, collective
// spans and pauses sorted by start, and the steps' start times.
//
// Plain structs in, no engine types: the bridge (app/) translates the
// engine's frame and span events (net/trace.h, engine/session) into
// TimelineFrameSide / TimelineSpan. Sends and receives of one frame arrive
// separately, in either order, possibly from different threads' batches;
// the data pairs them per link (src, dst) by (collective, seq, tag) in
// order. A send without its receive yet is a packet in flight.
//
// The level-of-detail queries (collapsePackets, collapseSpans) walk what a
// view shows with binary searches: their cost grows with the pixels, not
// with the events, so a full zoom-out over a million packets is cheap.
// Not thread-safe: the GUI thread owns it.
#pragma once

#include "timeline_axis.h"

#include <QString>
#include <QStringList>

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <tuple>
#include <vector>

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

// A packet as stored: one frame from its sender's lane to its receiver's.
struct TimelinePacket {
    std::int64_t sendStartNs = 0;
    std::int64_t sendEndNs = 0;
    std::int64_t recvEndNs = 0; // 0: not received yet (in flight, or lost)
    std::uint64_t seq = 0;
    std::uint32_t bytes = 0;    // payload; frames are at most 4 GiB
    std::uint32_t tag = 0;
    std::uint16_t src = 0;
    std::uint16_t dst = 0;
    std::uint8_t collective = 0;
    bool received() const { return recvEndNs != 0; }
};

// A span as stored (names interned).
struct StoredSpan {
    std::int64_t startNs = 0;
    std::int64_t endNs = 0;
    std::int64_t step = -1;
    std::uint64_t seq = 0;
    std::uint64_t bytes = 0;
    std::uint32_t name = 0; // index into names()
    TimelineSpanKind kind = TimelineSpanKind::Forward;
    std::uint8_t collective = 0;
};

// One thing a view draws: a single event (count == 1) or a run of events
// too small to see apart, collapsed into a block that says how many it holds.
struct LodItem {
    std::size_t first = 0; // index into the lane's list
    std::size_t count = 0;
    std::int64_t startNs = 0;
    std::int64_t endNs = 0;
};

class TimelineData {
public:
    enum class Row { Compute, Collective, Pause };

    void clear();
    // Lane names by rank; a lane is made for every rank seen in events too.
    void setNodes(const QStringList &names);
    int laneCount() const { return int(m_lanes.size()); }
    QString laneName(int lane) const;

    // Names of net::CollectiveKind values, by value (set by whoever fills
    // the data; widgets do not know the engine's enums).
    void setCollectiveNames(const QStringList &names) { m_collectiveNames = names; }
    QString collectiveName(int kind) const;

    void addFrame(const TimelineFrameSide &side);
    void addSpan(const TimelineSpan &span);

    // Where the ruler's 0 s is: the recording's start for a replay, set by
    // the caller; else the earliest event.
    void setOriginNs(std::int64_t ns) { m_origin = ns; m_hasOrigin = true; }
    std::int64_t originNs() const { return m_hasOrigin ? m_origin : m_begin; }

    // Earliest and latest time of anything added; begin > end when empty.
    std::int64_t beginNs() const { return m_begin; }
    std::int64_t endNs() const { return m_end; }
    std::size_t packetCount() const { return m_packetCount; }
    std::size_t inFlightCount() const; // sends whose receive has not arrived
    std::size_t spanCount() const { return m_spanCount; }
    // Bytes held by the stored events and their indexes (capacities).
    std::size_t memoryBytes() const;

    const std::vector<TimelinePacket> &packets(int lane) const { return m_lanes[std::size_t(lane)].packets; }
    const std::vector<StoredSpan> &spans(int lane, Row row) const;
    const QString &name(std::uint32_t index) const { return m_names[index]; }
    // Bytes of packets [first, first + count) of a lane.
    std::uint64_t packetBytes(int lane, std::size_t first, std::size_t count) const;

    // Sends whose receive has not arrived (live: in flight), oldest first
    // per link; at most `max`.
    struct Unreceived {
        int src = -1, dst = -1;
        std::int64_t sendStartNs = 0;
        std::uint64_t bytes = 0;
        int collective = 0;
    };
    std::vector<Unreceived> unreceived(std::size_t max) const;
    // The longest send-start-to-receive-end of a lane's packets: a packet in
    // flight at time t started after t minus this.
    std::int64_t longestFlightNs(int lane) const { return m_lanes[std::size_t(lane)].longestFlight; }

    // Steps: the earliest start of each step's Step span over the nodes.
    const std::map<std::int64_t, std::int64_t> &stepStarts() const { return m_stepStarts; }
    std::optional<std::pair<std::int64_t, std::int64_t>> stepRange(std::int64_t step) const;
    // The step whose span holds tNs on `lane` (from its collective span
    // with this kind and seq, else its Step span); -1 when none.
    std::int64_t stepAt(int lane, std::int64_t tNs, int collective = -1, std::uint64_t seq = 0) const;

    // Level of detail. Packets of a lane with send start in [t0, t1]:
    // consecutive packets whose send starts are less than minPx apart on
    // `axis` collapse into one item, which ends once it spans maxRunPx (so
    // a busy stretch reads as a row of counted blocks that shows where the
    // traffic is densest). The items cover the range in order; the work is
    // O(items * log n).
    std::vector<LodItem> collapsePackets(int lane, const TimeAxis &axis, std::int64_t t0, std::int64_t t1,
                                         double minPx, double maxRunPx = 1e300) const;
    // Spans of a lane's row overlapping [t0, t1]: a span narrower than
    // minPx and the narrow ones that start within minPx of the run's end
    // collapse into one item (which ends once it spans maxRunPx); wider
    // spans stay single.
    std::vector<LodItem> collapseSpans(int lane, Row row, const TimeAxis &axis, std::int64_t t0, std::int64_t t1,
                                       double minPx, double maxRunPx = 1e300) const;

private:
    struct Pending {
        int collective = 0;
        std::uint64_t seq = 0;
        std::uint32_t tag = 0;
        std::int64_t sendStartNs = 0;
        std::int64_t timeNs = 0; // the send's sendComplete, the receive's recvComplete
        std::uint64_t bytes = 0;
    };
    struct Link {
        std::deque<Pending> sends;    // in flight: sent, receive not seen
        std::deque<Pending> receives; // receive seen before its send
    };
    struct Lane {
        QString name;
        std::vector<TimelinePacket> packets; // by sendStartNs
        // prefixBytes[i] = bytes of packets [0, i), valid for i <= prefixValid
        // (recomputed on demand after inserts).
        mutable std::vector<std::uint64_t> prefixBytes;
        mutable std::size_t prefixValid = 0;
        std::vector<StoredSpan> compute, collectives, pauses; // by startNs
        std::int64_t longestSpan[3] = {0, 0, 0}; // per row: for window searches by start
        std::int64_t longestFlight = 0;
    };

    Lane &lane(int rank);
    void grow(std::int64_t t0, std::int64_t t1);
    static void insertByStart(std::vector<StoredSpan> &list, const StoredSpan &s);
    void insertPacket(Lane &lane, const TimelinePacket &p);
    TimelinePacket *findPacket(int src, const Pending &send, int dst);
    std::uint32_t intern(const QString &name);

    std::vector<Lane> m_lanes;
    std::map<std::pair<int, int>, Link> m_links;
    QStringList m_collectiveNames;
    std::vector<QString> m_names;
    std::map<QString, std::uint32_t> m_nameIndex;
    std::map<std::int64_t, std::int64_t> m_stepStarts;
    std::map<std::int64_t, std::int64_t> m_stepEnds;
    std::int64_t m_origin = 0;
    bool m_hasOrigin = false;
    std::int64_t m_begin = 1;
    std::int64_t m_end = 0;
    std::size_t m_packetCount = 0;
    std::size_t m_spanCount = 0;
};

} // namespace smol::widgets
