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

#include "timeline_axis.h"

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
    std::int64_t params = 0, grads = 0, optimizer = 0, activations = 0, comm = 0;
    std::int64_t live = 0, peak = 0;
    int collective = 0; // net::CollectiveKind's value; 0: not at a collective (a per-step sample)
    std::uint64_t seq = 0;
    bool before = false; // taken entering the collective (else leaving it)
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

// A memory sample as stored (80 bytes). The categories in the palette's
// stacking order: params, grads, optimizer, activations, comm.
struct StoredMemory {
    static constexpr int kCategories = 5;
    std::int64_t tNs = 0;
    std::int64_t bytes[kCategories] = {0, 0, 0, 0, 0};
    std::int64_t live = 0;
    std::int64_t peak = 0;
    std::uint64_t seq = 0;
    std::int32_t step = -1;
    std::uint8_t collective = 0;
    bool before = false;
    // The stack's height, what the lane draws (a negative category, which
    // the engine should never report, counts as 0).
    std::int64_t total() const
    {
        std::int64_t t = 0;
        for (std::int64_t b : bytes)
            t += std::max<std::int64_t>(b, 0);
        return t;
    }
};

// A sample's stack in 8 bytes, for drawing: where each category ends, as a
// share of the total in 1/65535 (params, + grads, + optimizer, +
// activations; comm fills it up to the total). Exact to a thousandth of a
// pixel on any strip.
struct MemoryShares {
    static constexpr int kSteps = 65535;
    std::uint16_t upTo[StoredMemory::kCategories - 1] = {0, 0, 0, 0};
    static MemoryShares of(const StoredMemory &m)
    {
        MemoryShares s;
        const std::int64_t total = m.total();
        std::int64_t cum = 0;
        for (int k = 0; k + 1 < StoredMemory::kCategories; ++k) {
            cum += std::max<std::int64_t>(m.bytes[k], 0);
            s.upTo[k] = total > 0 ? std::uint16_t(std::llround(double(cum) / double(total) * kSteps)) : 0;
        }
        return s;
    }
    // Bytes from the foot of the stack to the top of category k.
    double bytesUpTo(int k, std::int64_t total) const
    {
        return k + 1 >= StoredMemory::kCategories ? double(total) : double(total) * upTo[k] / kSteps;
    }
};

// A sequence held in fixed-size blocks, indexed and binary-searched like a
// vector (random-access iterators), for the timeline's sorted event lists.
// Unlike a vector it can drop a prefix in O(1) per element (whole blocks are
// freed, the rest does not move) and never holds a doubled capacity, so
// bytes() is what the events really take: blocks * kBlockBytes-ish, plus
// the block table. An insert away from the end shifts the elements after
// it, like a vector's.
template <typename T> class BlockList {
public:
    // Elements per block: a power of two near 16 KiB (256 packets or spans,
    // 2048 prefix sums), so a lane with few events costs a few blocks.
    static constexpr std::size_t kPerBlock = [] {
        std::size_t n = 1;
        while (2 * n * sizeof(T) <= 16384)
            n *= 2;
        return n;
    }();

    class const_iterator {
    public:
        using iterator_category = std::random_access_iterator_tag;
        using value_type = T;
        using difference_type = std::ptrdiff_t;
        using pointer = const T *;
        using reference = const T &;
        const_iterator() = default;
        const_iterator(const BlockList *list, std::size_t i)
            : m_list(list)
            , m_i(i)
        {
        }
        reference operator*() const { return (*m_list)[m_i]; }
        pointer operator->() const { return &(*m_list)[m_i]; }
        reference operator[](difference_type n) const
        {
            return (*m_list)[std::size_t(difference_type(m_i) + n)];
        }
        const_iterator &operator++()
        {
            ++m_i;
            return *this;
        }
        const_iterator operator++(int)
        {
            const_iterator c = *this;
            ++m_i;
            return c;
        }
        const_iterator &operator--()
        {
            --m_i;
            return *this;
        }
        const_iterator operator--(int)
        {
            const_iterator c = *this;
            --m_i;
            return c;
        }
        const_iterator &operator+=(difference_type n)
        {
            m_i = std::size_t(difference_type(m_i) + n);
            return *this;
        }
        const_iterator &operator-=(difference_type n) { return *this += -n; }
        friend const_iterator operator+(const_iterator a, difference_type n) { return a += n; }
        friend const_iterator operator+(difference_type n, const_iterator a) { return a += n; }
        friend const_iterator operator-(const_iterator a, difference_type n) { return a -= n; }
        friend difference_type operator-(const const_iterator &a, const const_iterator &b)
        {
            return difference_type(a.m_i) - difference_type(b.m_i);
        }
        friend bool operator==(const const_iterator &a, const const_iterator &b) { return a.m_i == b.m_i; }
        friend bool operator!=(const const_iterator &a, const const_iterator &b) { return a.m_i != b.m_i; }
        friend bool operator<(const const_iterator &a, const const_iterator &b) { return a.m_i < b.m_i; }
        friend bool operator>(const const_iterator &a, const const_iterator &b) { return a.m_i > b.m_i; }
        friend bool operator<=(const const_iterator &a, const const_iterator &b) { return a.m_i <= b.m_i; }
        friend bool operator>=(const const_iterator &a, const const_iterator &b) { return a.m_i >= b.m_i; }

    private:
        const BlockList *m_list = nullptr;
        std::size_t m_i = 0;
    };

    BlockList() = default;
    BlockList(BlockList &&) noexcept = default;
    BlockList &operator=(BlockList &&) noexcept = default;
    BlockList(const BlockList &o)
        : m_front(o.m_front)
        , m_size(o.m_size)
    {
        for (const auto &b : o.m_blocks) {
            m_blocks.push_back(std::make_unique<T[]>(kPerBlock));
            std::copy(b.get(), b.get() + kPerBlock, m_blocks.back().get());
        }
    }
    BlockList &operator=(const BlockList &o) { return *this = BlockList(o); }

    std::size_t size() const { return m_size; }
    bool empty() const { return m_size == 0; }
    const T &operator[](std::size_t i) const
    {
        const std::size_t k = m_front + i;
        return m_blocks[k / kPerBlock][k % kPerBlock];
    }
    T &operator[](std::size_t i)
    {
        const std::size_t k = m_front + i;
        return m_blocks[k / kPerBlock][k % kPerBlock];
    }
    // Element i and how many follow it in the same block (at least 1 for
    // i < size()): a run to walk with a plain pointer.
    const T *run(std::size_t i, std::size_t &count) const
    {
        const std::size_t k = m_front + i;
        count = std::min(kPerBlock - k % kPerBlock, m_size - i);
        return &m_blocks[k / kPerBlock][k % kPerBlock];
    }
    const T &front() const { return (*this)[0]; }
    const T &back() const { return (*this)[m_size - 1]; }
    const_iterator begin() const { return {this, 0}; }
    const_iterator end() const { return {this, m_size}; }

    // True when it took a new block (the owner's memory grew).
    bool push_back(const T &v)
    {
        const bool grew = m_front + m_size == m_blocks.size() * kPerBlock;
        if (grew)
            m_blocks.push_back(std::make_unique<T[]>(kPerBlock));
        ++m_size;
        (*this)[m_size - 1] = v;
        return grew;
    }
    // Before index `at`: the elements from `at` on move up by one, O(size - at).
    bool insert(std::size_t at, const T &v)
    {
        if (at >= m_size)
            return push_back(v);
        const bool grew = push_back(back());
        for (std::size_t i = m_size - 2; i > at; --i)
            (*this)[i] = (*this)[i - 1];
        (*this)[at] = v;
        return grew;
    }
    // Forgets the first n elements; the blocks they wholly held are freed.
    void dropFront(std::size_t n)
    {
        n = std::min(n, m_size);
        m_front += n;
        m_size -= n;
        const std::size_t freed = m_size == 0 ? m_blocks.size() : m_front / kPerBlock;
        m_blocks.erase(m_blocks.begin(), m_blocks.begin() + std::ptrdiff_t(freed));
        m_front = m_size == 0 ? 0 : m_front - freed * kPerBlock;
        if (m_blocks.capacity() > 2 * m_blocks.size() + 16)
            m_blocks.shrink_to_fit();
    }
    // Keeps the first n elements; the blocks after them are freed.
    void truncate(std::size_t n)
    {
        if (n >= m_size)
            return;
        m_size = n;
        const std::size_t used = m_size == 0 ? 0 : (m_front + m_size - 1) / kPerBlock + 1;
        m_blocks.resize(used);
        if (m_size == 0)
            m_front = 0;
    }
    void clear() { *this = BlockList(); }
    std::size_t bytes() const
    {
        return m_blocks.size() * kPerBlock * sizeof(T) + m_blocks.capacity() * sizeof(std::unique_ptr<T[]>);
    }

private:
    std::vector<std::unique_ptr<T[]>> m_blocks;
    std::size_t m_front = 0; // index of element 0 in the first block
    std::size_t m_size = 0;
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
    const BlockList<StoredMemory> &memory(int lane) const { return m_lanes[std::size_t(lane)].memory; }
    std::size_t memorySampleCount() const { return m_memoryCount; }
    std::size_t droppedMemorySamples() const { return m_droppedMemory; }
    std::uint64_t memoryDroppedFrom(int lane) const;
    // Whether any memory sample came since clear(): the lanes get their
    // memory strips (and keep them while the budget drops history).
    bool hasMemory() const { return m_hasMemory; }

    // What a lane's memory was over [t0, t1). Memory is a step function,
    // each sample holding until the next, defined from the lane's first
    // sample to its last: over [t0, t1) it took the values of the sample in
    // effect at t0 (the last one before it) and of those in [t0, t1).
    // count: how many samples that is (0: the lane had none in effect);
    // minAt / maxAt: the earliest of them with the lowest / highest total.
    // O(log n): min/max groups of 16, 256, ... samples (see Lane).
    struct MemoryRange {
        std::size_t minAt = 0, maxAt = 0; // indexes into memory(lane)
        std::size_t count = 0;
        std::int64_t minTotal = 0, maxTotal = 0;
        MemoryShares minShares, maxShares; // their stacks, so a painter need not fetch them
    };
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
    // Min and max of the totals over an aligned group of a lane's memory
    // samples, by sample number since clear() (so a dropped prefix leaves
    // them valid).
    struct MemoryGroup {
        std::uint64_t minAt = 0, maxAt = 0;
        std::int64_t minTotal = std::numeric_limits<std::int64_t>::max();
        std::int64_t maxTotal = std::numeric_limits<std::int64_t>::min();
        MemoryShares minShares, maxShares;
        // The time of its first sample (after a drop, of its first kept
        // one): the groups of 16 are a coarse index a column's walk
        // gallops over before reading samples.
        std::int64_t firstNs = 0;
    };
    // A sample's time, total and stack, one per sample beside `memory` (24
    // bytes, a lane's 125,000 in 3 MB): a frame reads these, each once,
    // instead of striding over 80-byte samples.
    struct MemoryKey {
        std::int64_t tNs = 0;
        std::int64_t total = 0;
        MemoryShares shares;
        bool operator<(std::int64_t t) const { return tNs < t; }
    };
    struct MemoryLevel {
        BlockList<MemoryGroup> groups; // groups[i] is group number front + i
        std::uint64_t front = 0;
    };
    static constexpr int kMemoryLevels = 5; // groups of 16, 256, 4096, 65536, 1048576 samples
    // Powers of two, so a frame's thousands of range queries shift and mask.
    static constexpr unsigned memoryGroupShift(int level) { return 4 * unsigned(level + 1); }
    static constexpr std::uint64_t memoryGroupSize(int level)
    {
        return std::uint64_t(1) << memoryGroupShift(level);
    }
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
        BlockList<StoredMemory> memory;  // by tNs
        BlockList<MemoryKey> memoryKeys; // memory[i]'s time, total and stack
        // memoryLevels[l] holds the min/max of every aligned group of
        // memoryGroupSize(l) samples (numbered from droppedMemory at
        // memory[0]), kept up to the newest sample: a range query uses the
        // largest groups that fit it, O(16 per level). A group a drop cut
        // in two is never used whole (a query starts at or after it).
        // Level l is made once the lane has had a group's worth.
        std::vector<MemoryLevel> memoryLevels;
        std::uint64_t droppedMemory = 0;
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
    std::size_t eventBytes() const; // the part of memoryBytes() dropping can free
    TimelinePacket *findPacket(int src, const Pending &send, int dst);
    // Min/max over samples [a, b) (numbered from clear()) using groups of
    // levels up to maxLevel (-1: samples only).
    MemoryGroup memoryMinMax(const Lane &lane, std::uint64_t a, std::uint64_t b, int maxLevel) const;
    MemoryRange memoryRange(const Lane &lane, std::size_t i, std::size_t j) const;
    // Redoes the groups from sample fromAbs on, at levels from firstLevel up;
    // true when a list took a block.
    bool rebuildMemoryLevels(Lane &lane, std::uint64_t fromAbs, int firstLevel);
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
