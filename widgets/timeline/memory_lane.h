// One lane's memory samples on the timeline, and the index that answers
// "what was this node's memory over [t0, t1)" in O(log n) whatever the
// samples: TimelineData keeps one per node lane.
//
// Memory is a step function, each sample holding until the next, defined
// from the lane's first sample to its last. Beside the samples (80 bytes
// each) a key per sample holds its time, total and stack (24 bytes, what a
// frame reads), and levels of min/max groups of 16, 256, 4096, ... samples
// make a range query fold at most ~16 items per level. Samples are numbered
// from the lane's start (dropped ones included), so dropping a prefix
// leaves the groups valid; a group a drop cut in two is never used whole.
// Not thread-safe: the GUI thread owns it.
#pragma once

#include "block_list.h"
#include "stored_events.h"
#include "timeline_axis.h"

#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

namespace smol::widgets {

// What a lane's memory was over a stretch of time: count samples in effect
// (0: none), and the earliest of them with the lowest / highest total.
struct MemoryRange {
    std::size_t minAt = 0, maxAt = 0; // indexes into the lane's samples
    std::size_t count = 0;
    std::int64_t minTotal = 0, maxTotal = 0;
    MemoryShares minShares, maxShares; // their stacks, so a painter need not fetch them
};

class MemoryLane {
public:
    const BlockList<StoredMemory> &samples() const { return m_samples; }
    // Samples dropped from the front since the lane began: sample i now was
    // i + dropped() then.
    std::uint64_t dropped() const { return m_dropped; }
    // Bytes held by the samples and their index.
    std::size_t bytes() const;

    // In time order (after the samples of its instant, so equal times keep
    // the order they came in). True when a list took a block.
    bool add(const StoredMemory &sample);
    // Forgets the samples before cutNs; returns how many went.
    std::size_t dropBefore(std::int64_t cutNs);

    // Over [t0, t1): the sample in effect at t0 and those in [t0, t1).
    MemoryRange in(std::int64_t t0, std::int64_t t1) const;
    // The same per pixel column, column c covering [axis.time(x0 + c),
    // axis.time(x0 + c + 1)), handed over column by column (columns after
    // the last sample are skipped). O(columns * log n).
    void forEachColumn(const TimeAxis &axis, double x0, int columns,
                       const std::function<void(int column, const MemoryRange &range)> &fn) const;

private:
    // The lowest and highest totals over some samples, and where (sample
    // numbers from the lane's start).
    struct Extremes {
        std::uint64_t minAt = 0, maxAt = 0;
        std::int64_t minTotal = std::numeric_limits<std::int64_t>::max();
        std::int64_t maxTotal = std::numeric_limits<std::int64_t>::min();
        MemoryShares minShares, maxShares;
        // The time of its first sample (after a drop, of its first kept
        // one): the groups of 16 are a coarse index a column's walk
        // gallops over before reading samples.
        std::int64_t firstNs = 0;
        // In order, strictly: the earliest of equal totals wins.
        void take(std::int64_t total, std::uint64_t at, const MemoryShares &shares);
        void take(const Extremes &other);
        MemoryRange range(std::uint64_t front, std::size_t count) const;
    };
    struct Key {
        std::int64_t tNs = 0;
        std::int64_t total = 0;
        MemoryShares shares;
        bool operator<(std::int64_t t) const { return tNs < t; }
    };
    struct Level {
        BlockList<Extremes> groups; // groups[i] is group number front + i
        std::uint64_t front = 0;
    };
    static constexpr int kLevels = 5; // groups of 16, 256, 4096, 65536, 1048576 samples
    // Powers of two, so a frame's thousands of range queries shift and mask.
    static constexpr unsigned groupShift(int level) { return 4 * unsigned(level + 1); }
    static constexpr std::uint64_t groupSize(int level) { return std::uint64_t(1) << groupShift(level); }

    // Folds a new last sample (number abs) into the groups it belongs to.
    bool addToGroups(std::uint64_t abs, const Key &key);
    // Redoes the groups from sample fromAbs on, at levels from firstLevel
    // up; true when a list took a block.
    bool rebuildLevels(std::uint64_t fromAbs, int firstLevel);
    // Over samples [a, b) using groups of levels up to maxLevel (-1: samples only).
    Extremes extremes(std::uint64_t a, std::uint64_t b, int maxLevel) const;
    void foldSamples(Extremes &acc, std::uint64_t from, std::uint64_t to) const;
    MemoryRange range(std::size_t i, std::size_t j) const;

    // A column's walk (forEachColumn): from sample k, folds those before
    // `end`, skipping whole groups through the levels; returns where the
    // column's samples end.
    std::size_t foldColumn(Extremes &acc, std::size_t k, std::int64_t end) const;
    // The last group (from k's) whose first sample is before `end`.
    std::uint64_t lastGroupBefore(std::uint64_t fromGroup, std::int64_t end) const;
    // Folds samples from k while before `end` (and before index `limit`);
    // returns where it stopped.
    std::size_t scan(Extremes &acc, std::size_t k, std::size_t limit, std::int64_t end) const;
    // Asks for the samples two columns on, where that column's end likely
    // falls.
    void prefetchAfter(std::size_t i, std::size_t j) const;

    BlockList<StoredMemory> m_samples; // by tNs
    BlockList<Key> m_keys;             // m_samples[i]'s time, total and stack
    // m_levels[l] holds the extremes of every aligned group of groupSize(l)
    // samples, kept up to the newest sample; level l is made once the lane
    // has had a group's worth.
    std::vector<Level> m_levels;
    std::uint64_t m_dropped = 0;
};

} // namespace smol::widgets
