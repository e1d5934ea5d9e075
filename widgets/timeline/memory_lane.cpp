#include "memory_lane.h"

#include <algorithm>

namespace smol::widgets {

void MemoryLane::Extremes::take(std::int64_t total, std::uint64_t at, const MemoryShares &shares)
{
    if (total < minTotal) {
        minTotal = total;
        minAt = at;
        minShares = shares;
    }
    if (total > maxTotal) {
        maxTotal = total;
        maxAt = at;
        maxShares = shares;
    }
}

void MemoryLane::Extremes::take(const Extremes &other)
{
    if (other.minTotal < minTotal) {
        minTotal = other.minTotal;
        minAt = other.minAt;
        minShares = other.minShares;
    }
    if (other.maxTotal > maxTotal) {
        maxTotal = other.maxTotal;
        maxAt = other.maxAt;
        maxShares = other.maxShares;
    }
}

MemoryRange MemoryLane::Extremes::range(std::uint64_t front, std::size_t count) const
{
    MemoryRange r;
    r.count = count;
    r.minAt = std::size_t(minAt - front);
    r.maxAt = std::size_t(maxAt - front);
    r.minTotal = minTotal;
    r.maxTotal = maxTotal;
    r.minShares = minShares;
    r.maxShares = maxShares;
    return r;
}

std::size_t MemoryLane::bytes() const
{
    std::size_t bytes = m_samples.bytes() + m_keys.bytes() + m_levels.capacity() * sizeof(Level);
    for (const Level &level : m_levels)
        bytes += level.groups.bytes();
    return bytes;
}

bool MemoryLane::add(const StoredMemory &sample)
{
    std::size_t at = m_samples.size();
    if (!m_keys.empty() && m_keys.back().tNs > sample.tNs) // out of order: after the samples of its instant
        at = std::size_t(std::upper_bound(m_keys.begin(), m_keys.end(), sample.tNs,
                                          [](std::int64_t t, const Key &q) { return t < q.tNs; }) -
                         m_keys.begin());
    bool grew = m_samples.insert(at, sample);
    const Key key{sample.tNs, sample.total(), MemoryShares::of(sample)};
    grew |= m_keys.insert(at, key);
    const std::uint64_t abs = m_dropped + at;
    const std::uint64_t end = m_dropped + m_samples.size();
    // The samples after an insert moved up by one: their groups are redone
    // (O(n - at), like the insert itself).
    grew |= at + 1 < m_samples.size() ? rebuildLevels(abs, 0) : addToGroups(abs, key);
    // A level once the lane has had a whole group of its size.
    while (int(m_levels.size()) < kLevels && end >= groupSize(int(m_levels.size()))) {
        const int level = int(m_levels.size());
        m_levels.push_back(Level{{}, m_dropped >> groupShift(level)});
        grew |= rebuildLevels(m_dropped, level);
    }
    return grew;
}

bool MemoryLane::addToGroups(std::uint64_t abs, const Key &key)
{
    bool grew = false;
    for (Level &level : m_levels) {
        const std::uint64_t g = abs >> groupShift(int(&level - m_levels.data()));
        if (g - level.front == level.groups.size()) {
            grew |= level.groups.push_back(
                Extremes{abs, abs, key.total, key.total, key.shares, key.shares, key.tNs});
            continue;
        }
        level.groups[std::size_t(g - level.front)].take(key.total, abs, key.shares);
    }
    return grew;
}

std::size_t MemoryLane::dropBefore(std::int64_t cutNs)
{
    // The groups wholly before the cut go (the one the cut splits stays,
    // never used whole again).
    const std::size_t m =
        std::size_t(std::lower_bound(m_keys.begin(), m_keys.end(), cutNs) - m_keys.begin());
    m_samples.dropFront(m);
    m_keys.dropFront(m);
    m_dropped += m;
    for (std::size_t level = 0; level < m_levels.size(); ++level) {
        Level &lv = m_levels[level];
        const std::uint64_t front = m_dropped >> groupShift(int(level));
        lv.groups.dropFront(std::size_t(std::min<std::uint64_t>(front - lv.front, lv.groups.size())));
        lv.front = front;
    }
    return m;
}

bool MemoryLane::rebuildLevels(std::uint64_t fromAbs, int firstLevel)
{
    bool grew = false;
    const std::uint64_t front = m_dropped, end = m_dropped + m_samples.size();
    for (int level = firstLevel; level < int(m_levels.size()); ++level) {
        Level &lv = m_levels[std::size_t(level)];
        const std::uint64_t size = groupSize(level);
        const std::uint64_t g0 = std::max(fromAbs / size, lv.front);
        lv.groups.truncate(std::size_t(g0 - lv.front));
        // From the groups below, which are whole by now.
        for (std::uint64_t g = g0; g * size < end; ++g) {
            const std::uint64_t first = std::max(front, g * size);
            Extremes group = extremes(first, std::min(end, (g + 1) * size), level - 1);
            group.firstNs = m_keys[std::size_t(first - front)].tNs;
            grew |= lv.groups.push_back(group);
        }
    }
    return grew;
}

void MemoryLane::foldSamples(Extremes &acc, std::uint64_t from, std::uint64_t to) const
{
    // Block by block through plain pointers.
    while (from < to) {
        std::size_t n = 0;
        const Key *k = m_keys.run(std::size_t(from - m_dropped), n);
        n = std::min<std::size_t>(n, std::size_t(to - from));
        for (std::size_t i = 0; i < n; ++i, ++k)
            acc.take(k->total, from + i, k->shares);
        from += n;
    }
}

MemoryLane::Extremes MemoryLane::extremes(std::uint64_t a, std::uint64_t b, int maxLevel) const
{
    Extremes r;
    const int levels = std::min(maxLevel + 1, int(m_levels.size()));
    const std::uint64_t g0 = groupSize(0);
    if (levels <= 0 || b - a < g0) {
        foldSamples(r, a, b);
        return r;
    }
    // Samples up to a group boundary, the largest groups that fit, samples after.
    const std::uint64_t aligned = std::min(b, (a + g0 - 1) & ~(g0 - 1));
    foldSamples(r, a, aligned);
    a = aligned;
    while (a + g0 <= b) {
        int use = 0;
        while (use + 1 < levels && (a & (groupSize(use + 1) - 1)) == 0 && a + groupSize(use + 1) <= b)
            ++use;
        const Level &lv = m_levels[std::size_t(use)];
        r.take(lv.groups[std::size_t((a >> groupShift(use)) - lv.front)]);
        a += groupSize(use);
    }
    foldSamples(r, a, b);
    return r;
}

MemoryRange MemoryLane::range(std::size_t i, std::size_t j) const
{
    // i: the first sample at or after the range's start, j: the first at or
    // after its end. In effect: the one before i (if any) and [i, j).
    const std::size_t n = m_samples.size();
    if (i >= n || (i == 0 && j == 0))
        return {};
    const std::size_t from = i > 0 ? i - 1 : 0;
    const std::size_t to = std::max(j, from + 1);
    if (to - from == 1) {
        MemoryRange r;
        r.count = 1;
        r.minAt = r.maxAt = from;
        r.minTotal = r.maxTotal = m_keys[from].total;
        r.minShares = r.maxShares = m_keys[from].shares;
        return r;
    }
    return extremes(m_dropped + from, m_dropped + to, kLevels).range(m_dropped, to - from);
}

MemoryRange MemoryLane::in(std::int64_t t0, std::int64_t t1) const
{
    const std::size_t i = std::size_t(std::lower_bound(m_keys.begin(), m_keys.end(), t0) - m_keys.begin());
    const auto after = m_keys.begin() + std::ptrdiff_t(i);
    const std::size_t j = std::size_t(std::lower_bound(after, m_keys.end(), std::max(t0, t1)) - m_keys.begin());
    return range(i, j);
}

// One walk over the columns, each sample read once: a column is the sample
// in effect at its start, the rest of that sample's group of 16, whole
// groups (the min/max levels), and the samples of the group its end falls
// in, read while looking for that end. Where the end is among the groups is
// found by galloping over their first times.
void MemoryLane::forEachColumn(const TimeAxis &axis, double x0, int columns,
                               const std::function<void(int, const MemoryRange &)> &fn) const
{
    const std::size_t n = m_keys.size();
    if (columns <= 0 || n == 0)
        return;
    std::int64_t t = axis.time(x0);
    std::size_t i = std::size_t(std::lower_bound(m_keys.begin(), m_keys.end(), t) - m_keys.begin());
    for (int c = 0; c < columns && i < n; ++c) { // past the last sample the rest are empty
        const std::int64_t next = std::max(t, axis.time(x0 + c + 1));
        Extremes acc;
        const std::size_t from = i > 0 ? i - 1 : 0;
        if (i > 0)
            acc.take(m_keys[i - 1].total, m_dropped + i - 1, m_keys[i - 1].shares);
        const std::size_t j = foldColumn(acc, i, next);
        prefetchAfter(i, j);
        if (j > 0) // else nothing is in effect before the first sample
            fn(c, acc.range(m_dropped, std::max(j, from + 1) - from));
        i = j;
        t = next;
    }
}

std::size_t MemoryLane::foldColumn(Extremes &acc, std::size_t k, std::int64_t end) const
{
    constexpr unsigned kShift = groupShift(0);
    const bool grouped = !m_levels.empty() && !m_levels[0].groups.empty();
    if (grouped && m_keys[k].tNs < end) {
        const std::uint64_t gk = (m_dropped + k) >> kShift;
        const std::uint64_t lo = lastGroupBefore(gk, end);
        if (lo > gk) { // the rest of k's group, then the whole groups up to lo's
            const std::size_t groupEnd = std::size_t(((gk + 1) << kShift) - m_dropped);
            k = scan(acc, k, groupEnd, end);
            const std::uint64_t a = (gk + 1) << kShift, b = lo << kShift;
            if (a < b)
                acc.take(extremes(a, b, kLevels));
            k = std::size_t(b - m_dropped);
        }
    }
    return scan(acc, k, m_keys.size(), end);
}

std::uint64_t MemoryLane::lastGroupBefore(std::uint64_t fromGroup, std::int64_t end) const
{
    const Level &groups = m_levels[0];
    const auto firstNs = [&](std::uint64_t g) {
        return groups.groups[std::size_t(g - groups.front)].firstNs;
    };
    const std::uint64_t last = groups.front + groups.groups.size() - 1;
    std::uint64_t lo = fromGroup, step = 1;
    while (lo + step <= last && firstNs(lo + step) < end) {
        lo += step;
        step *= 2;
    }
    std::uint64_t hi = std::min(lo + step, last + 1);
    while (hi - lo > 1) {
        const std::uint64_t mid = lo + (hi - lo) / 2;
        (firstNs(mid) < end ? lo : hi) = mid;
    }
    return lo;
}

std::size_t MemoryLane::scan(Extremes &acc, std::size_t k, std::size_t limit, std::int64_t end) const
{
    while (k < limit) {
        std::size_t run = 0;
        const Key *p = m_keys.run(k, run);
        run = std::min(run, limit - k);
        for (std::size_t r = 0; r < run; ++r, ++p, ++k)
            if (p->tNs < end)
                acc.take(p->total, m_dropped + k, p->shares);
            else
                return k;
    }
    return k;
}

void MemoryLane::prefetchAfter(std::size_t i, std::size_t j) const
{
    // A column's samples are read in one short burst, too short for the
    // hardware to see the stream.
    const std::size_t ahead = j + 2 * (j - i);
    if (ahead + 24 < m_keys.size() && j > i) {
        std::size_t run = 0;
        const Key *first = m_keys.run(ahead - std::min<std::size_t>(ahead, 8), run);
        const char *p = reinterpret_cast<const char *>(first);
        for (std::size_t line = 0; line < 24 * sizeof(Key) && line < run * sizeof(Key); line += 64)
            __builtin_prefetch(p + line);
    }
}

} // namespace smol::widgets
