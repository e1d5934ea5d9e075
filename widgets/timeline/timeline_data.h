// What the packets-in-flight timeline draws, held compactly enough for a
// million packets (about 60 bytes each with their indexes): per node lane,
// the packets it sent sorted by send time, its compute spans, collective
// spans and pauses sorted by start, its memory samples by time, and the
// steps' start times.
//
// Plain structs in, no engine types: the bridge (app/) translates the
// engine's frame and span events and memory samples (net/trace.h,
// engine/session) into TimelineFrameSide / TimelineSpan /
// TimelineMemorySample. Sends and receives of one frame arrive
// separately, in either order, possibly from different threads' batches;
// the data pairs them per link (src, dst) by (collective, seq, tag) in
// order. A send without its receive yet is a packet in flight.
//
// The level-of-detail queries (collapsePackets, collapseSpans,
// memoryEnvelope) walk what a view shows with binary searches: their cost
// grows with the pixels, not with the events, so a full zoom-out over a
// million packets and a million memory samples is cheap.
// Not thread-safe: the GUI thread owns it.
//
// A memory budget (setMemoryBudget; the live view sets one, a replay does
// not) bounds what is held: once memoryBytes() passes it, the oldest events
// go, a sixteenth of the budget at a time, by time across every lane, so
// what is kept is everything after historyStartNs(). The lists are
// BlockLists, so dropping a prefix costs O(1) per event and the indexes
// (sorted order, byte prefix sums, steps, pending pairings) stay valid.
// Events that arrive later for the dropped past are not kept either. This
// is the view's history only: a recording is written by engine/session.
#pragma once

#include "block_list.h"
#include "memory_lane.h"
#include "stored_events.h"
#include "timeline_axis.h"
#include "timeline_events.h"

#include <QString>
#include <QStringList>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <vector>

namespace smol::widgets {

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

    // The live view's default budget. A 4-node ddp run adds about 0.7 MB/s
    // (12k packets/s, ~60 B each with their indexes): 256 MiB keeps its last
    // ~6 minutes in full detail, and an hour's class (2.5 GB unbounded)
    // stays within 256 MiB on a laptop.
    static constexpr std::size_t kDefaultLiveBudget = std::size_t(256) << 20;
    static constexpr std::size_t kMinBudget = std::size_t(1) << 20;
    // 0: no budget (a replay holds its whole window). Else at least
    // kMinBudget; applied now and at every growth after. clear() keeps it.
    void setMemoryBudget(std::size_t bytes);
    std::size_t memoryBudget() const { return m_budget; }
    // Dropping frees this much at a time (memory stays in
    // [budget - chunk, budget + one block]).
    std::size_t dropChunkBytes() const { return m_budget / 16; }
    // Whether the budget dropped history, and where what is kept starts
    // (events before it are gone from this view); the budget it kept to.
    bool historyDropped() const { return m_keptFromNs != kNoCut; }
    std::int64_t historyStartNs() const { return m_keptFromNs; }
    std::size_t droppedBudget() const { return m_droppedBudget; }
    std::size_t droppedPackets() const { return m_droppedPackets; }
    std::size_t droppedSpans() const { return m_droppedSpans; }
    // Increments at every drop: indexes into the lists taken before a
    // change of this are stale (see packetsDroppedFrom).
    std::uint64_t dropGeneration() const { return m_dropGeneration; }
    // How many events left the front of a lane's list since clear(): an
    // index i now was i + this when the list held everything.
    std::uint64_t packetsDroppedFrom(int lane) const;
    std::uint64_t spansDroppedFrom(int lane, Row row) const;

    // Where the ruler's 0 s is: the recording's start for a replay, set by
    // the caller; else the earliest event.
    void setOriginNs(std::int64_t ns) { m_origin = ns; m_hasOrigin = true; }
    std::int64_t originNs() const { return m_hasOrigin ? m_origin : m_begin; }

    // Earliest (after a drop: historyStartNs()) and latest time of anything
    // kept; begin > end when empty.
    std::int64_t beginNs() const { return m_begin; }
    std::int64_t endNs() const { return m_end; }
    std::size_t packetCount() const { return m_packetCount; }
    std::size_t inFlightCount() const; // sends whose receive has not arrived
    std::size_t spanCount() const { return m_spanCount; }
    // Bytes held by the stored events and their indexes (capacities).
    std::size_t memoryBytes() const;

    const BlockList<TimelinePacket> &packets(int lane) const { return m_lanes[std::size_t(lane)].packets; }
    const BlockList<StoredSpan> &spans(int lane, Row row) const;
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

    // Memory by category, per lane in time order (samples at the same
    // instant keep the order they came in), under the same budget and drop
    // rule as the events: a sample before historyStartNs() is not kept.
    void addMemory(const TimelineMemorySample &sample);
    const BlockList<StoredMemory> &memory(int lane) const { return m_lanes[std::size_t(lane)].memory.samples(); }
    std::size_t memorySampleCount() const { return m_memoryCount; }
    std::size_t droppedMemorySamples() const { return m_droppedMemory; }
    std::uint64_t memoryDroppedFrom(int lane) const;
    // A lane's step peaks (TimelineMemorySample::stepPeak), in time order:
    // over [startNs, endNs), the step's highest total (the categories
    // stacked, each at its largest) and its activations. startNs is the
    // lane's previous step peak (the step's first: the lane's first memory
    // sample). Under the same drop rule as the samples.
    struct StepPeak {
        std::int64_t startNs = 0, endNs = 0;
        std::int64_t step = -1;
        std::int64_t total = 0;
        std::int64_t activations = 0;
    };
    const std::deque<StepPeak> &stepPeaks(int lane) const { return m_lanes[std::size_t(lane)].stepPeaks; }
    // The highest step-peak total of the lane's peaks overlapping [t0, t1).
    std::int64_t stepPeakIn(int lane, std::int64_t t0, std::int64_t t1) const;
    // Whether any memory sample came since clear(): the lanes get their
    // memory strips (and keep them while the budget drops history).
    bool hasMemory() const { return m_hasMemory; }

    // What a lane's memory was over [t0, t1) (MemoryLane::in): the sample
    // in effect at t0 (the last one before it) and those in [t0, t1).
    // count: how many samples that is (0: the lane had none in effect);
    // minAt / maxAt: the earliest of them with the lowest / highest total.
    // O(log n).
    using MemoryRange = widgets::MemoryRange;
    MemoryRange memoryIn(int lane, std::int64_t t0, std::int64_t t1) const;
    // Level of detail: the min/max envelope of a lane's memory, one range
    // per pixel column, column c covering [axis.time(x0 + c),
    // axis.time(x0 + c + 1)). O(columns * log n), whatever the samples.
    std::vector<MemoryRange> memoryEnvelope(int lane, const TimeAxis &axis, double x0, int columns) const;
    // The same, handed over column by column (columns after the lane's last
    // sample are skipped): a painter takes each column's samples while they
    // are still in the cache.
    void forEachMemoryColumn(int lane, const TimeAxis &axis, double x0, int columns,
                             const std::function<void(int column, const MemoryRange &range)> &fn) const;

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
        BlockList<TimelinePacket> packets; // by sendStartNs
        // One per packet: prefixBytes[i] = bytes of packets [0, i] plus a
        // constant (what was dropped before), valid for i < prefixValid
        // (recomputed on demand after inserts out of order).
        mutable BlockList<std::uint64_t> prefixBytes;
        mutable std::size_t prefixValid = 0;
        BlockList<StoredSpan> compute, collectives, pauses; // by startNs
        std::int64_t longestSpan[3] = {0, 0, 0}; // per row: for window searches by start (upper bounds)
        std::int64_t longestFlight = 0;
        std::uint64_t droppedPackets = 0;
        std::uint64_t droppedSpans[3] = {0, 0, 0};
        MemoryLane memory;
        std::deque<StepPeak> stepPeaks;
        BlockList<StoredSpan> &row(Row r)
        {
            return r == Row::Collective ? collectives : r == Row::Pause ? pauses : compute;
        }
    };
    static constexpr std::int64_t kNoCut = std::numeric_limits<std::int64_t>::min();

    Lane &lane(int rank);
    void grow(std::int64_t t0, std::int64_t t1);
    static bool insertByStart(BlockList<StoredSpan> &list, const StoredSpan &s);
    bool insertPacket(Lane &lane, const TimelinePacket &p);
    // Called when a list took a block: over budget, drop the oldest.
    void enforceBudget();
    void dropBefore(std::int64_t cutNs);
    void addStepPeak(const TimelineMemorySample &m);
    std::size_t eventBytes() const; // the part of memoryBytes() dropping can free
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
    std::size_t m_budget = 0;
    std::int64_t m_keptFromNs = kNoCut;
    std::size_t m_droppedBudget = 0;
    std::size_t m_droppedPackets = 0;
    std::size_t m_droppedSpans = 0;
    std::size_t m_memoryCount = 0;
    std::size_t m_droppedMemory = 0;
    bool m_hasMemory = false;
    std::uint64_t m_dropGeneration = 0;
    bool m_dropping = false;
};

} // namespace smol::widgets
