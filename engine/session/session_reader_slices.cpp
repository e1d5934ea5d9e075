// SessionReader's second read path: the packed slices of schema version 4
// (event_slices.h, docs/session-format.md §2). Each read selects slices by
// their key columns through an index (t_max for windows and replay,
// t_start_min for the whole file in order), decodes their blobs, and keeps
// the events the version-3 query would have returned, in the same order:
// event time (or start time), ties in file order (slice id, then place in
// the slice), which is the order the recorder received them in.
//
// A slice holds at most `extent` (meta max_slice_ns) of event time, so the
// slice holding an event at time t has t_max in [t, t + extent]: that bound
// turns every time condition on events into an index range on t_max.
// Aggregates over the whole file (info's counts, collectives, step starts)
// decode every slice: ~20-50 ns per record, faster than SQLite's GROUP BY
// over one row per event was.
#include "session_reader.h"

#include "event_slices.h"
#include "session_reader_query.h"

#include <algorithm>
#include <array>
#include <iterator>
#include <map>
#include <queue>
#include <tuple>

namespace smol::engine {

using namespace session_detail;

namespace {

constexpr const char *kFrameSlices = "frame_slices";
constexpr const char *kSpanSlices = "span_slices";
constexpr const char *kMemorySlices = "memory_slices";

QString where(const char *condition)
{
    return QString::fromLatin1(condition);
}

} // namespace

struct SessionReader::Slice {
    std::int64_t id = 0;
    std::int64_t tMin = 0, tMax = 0, tStartMin = 0;
};

template <class E, class Fn> void SessionReader::scanSlices(const char *table, const QString &condition,
                                                            std::initializer_list<std::int64_t> binds,
                                                            Fn fn) const
{
    Query q(*this, QStringLiteral("SELECT id, t_min, t_max, t_start_min, count, events FROM %1 WHERE %2")
                       .arg(QLatin1String(table), condition));
    for (std::int64_t b : binds)
        q.bind(b);
    std::vector<E> events;
    for (q.exec(); q.next();) {
        const Slice s{q.i64(0), q.i64(1), q.i64(2), q.i64(3)};
        const auto [data, size] = q.bytes(5);
        events.clear();
        try {
            EventSlices::decode(data, size, q.i64(4), events);
        } catch (const SessionError &e) {
            fail(QStringLiteral("damaged: %1 row %2: %3")
                     .arg(QLatin1String(table))
                     .arg(s.id)
                     .arg(QString::fromUtf8(e.what())));
        }
        if (!fn(s, events))
            return;
    }
}

template <class E, class Keep>
std::vector<E> SessionReader::slicedWindow(const char *table, const QString &condition,
                                           std::initializer_list<std::int64_t> binds, Keep keep) const
{
    std::vector<std::pair<std::int64_t, std::vector<E>>> chunks; // by slice id
    scanSlices<E>(table, condition, binds, [&](const Slice &s, std::vector<E> &events) {
        std::vector<E> kept;
        for (E &e : events) {
            if (keep(e))
                kept.push_back(std::move(e));
        }
        if (!kept.empty())
            chunks.emplace_back(s.id, std::move(kept));
        return true;
    });
    std::sort(chunks.begin(), chunks.end(), [](const auto &a, const auto &b) { return a.first < b.first; });
    std::vector<E> out;
    for (auto &chunk : chunks)
        std::move(chunk.second.begin(), chunk.second.end(), std::back_inserter(out));
    std::stable_sort(out.begin(), out.end(),
                     [](const E &a, const E &b) { return eventTimeNs(a) < eventTimeNs(b); });
    return out;
}

// Slices come in t_start_min order, and every event of a later slice starts
// (and so ends) at or after that slice's t_start_min: whatever is pending
// before it can go.
template <class E> void SessionReader::streamSlices(const char *table, bool byStart,
                                                    const std::function<void(const E &)> &fn) const
{
    struct Pending {
        std::int64_t t, slice;
        std::size_t index;
        E e;
    };
    auto later = [](const Pending &a, const Pending &b) {
        return std::tie(a.t, a.slice, a.index) > std::tie(b.t, b.slice, b.index);
    };
    std::priority_queue<Pending, std::vector<Pending>, decltype(later)> pending(later);
    auto emitBefore = [&](std::optional<std::int64_t> bound) {
        while (!pending.empty() && (!bound || pending.top().t < *bound)) {
            fn(pending.top().e);
            pending.pop();
        }
    };
    scanSlices<E>(table, where("1 ORDER BY t_start_min"), {}, [&](const Slice &s, std::vector<E> &events) {
        emitBefore(s.tStartMin);
        for (std::size_t i = 0; i < events.size(); ++i) {
            const std::int64_t t = byStart ? startTimeNs(events[i]) : eventTimeNs(events[i]);
            pending.push({t, s.id, i, std::move(events[i])});
        }
        return true;
    });
    emitBefore(std::nullopt);
}

std::int64_t SessionReader::sliceExtent() const
{
    std::optional<std::int64_t> extent =
        Query(*this, QStringLiteral("SELECT value FROM meta WHERE key = 'max_slice_ns'")).scalar();
    if (!extent) { // not recorded (no slices yet, or a file from another writer): measure
        for (const char *table : {kFrameSlices, kSpanSlices, kMemorySlices}) {
            if (auto v = Query(*this,
                               QStringLiteral("SELECT MAX(t_max - t_min) FROM %1").arg(QLatin1String(table)))
                             .scalar())
                extent = std::max(extent.value_or(0), *v);
        }
    }
    return std::max<std::int64_t>(0, extent.value_or(0));
}

std::vector<net::FrameEvent> SessionReader::slicedFrames(std::int64_t t0, std::int64_t t1) const
{
    const std::int64_t longest = maxDuration(QStringLiteral("max_frame_ns"), "frames", -1);
    const std::int64_t lastEnd = saturatingAdd(t1, longest);
    return slicedWindow<net::FrameEvent>(
        kFrameSlices, where("t_max >= ? AND t_max <= ? AND t_min <= ? AND t_start_min <= ?"),
        {t0, saturatingAdd(lastEnd, sliceExtent()), lastEnd, t1}, [&](const net::FrameEvent &e) {
            const std::int64_t end = eventTimeNs(e);
            return end >= t0 && end <= lastEnd && e.sendStartNs <= t1;
        });
}

std::vector<SpanEvent> SessionReader::slicedSpans(std::int64_t t0, std::int64_t t1) const
{
    // As version 3 reads them: per kind, starts no earlier than that kind's
    // longest span before t0.
    std::array<std::int64_t, SpanEvent::kKinds> longest{};
    std::int64_t longestAny = 0;
    for (int k = 0; k < SpanEvent::kKinds; ++k) {
        longest[std::size_t(k)] =
            maxDuration(QStringLiteral("max_span_ns.%1").arg(QLatin1String(spanKindName(SpanEvent::Kind(k)))),
                        "spans", k);
        longestAny = std::max(longestAny, longest[std::size_t(k)]);
    }
    const std::int64_t lastEnd = saturatingAdd(t1, longestAny);
    return slicedWindow<SpanEvent>(kSpanSlices, where("t_max >= ? AND t_max <= ? AND t_start_min <= ?"),
                                   {t0, saturatingAdd(lastEnd, sliceExtent()), t1}, [&](const SpanEvent &e) {
                                       return e.startNs >= saturatingSub(t0, longest[std::size_t(e.kind)]) &&
                                              e.startNs <= t1 && e.endNs >= t0;
                                   });
}

std::vector<MemorySample> SessionReader::slicedMemory(std::int64_t t0, std::int64_t t1) const
{
    return slicedWindow<MemorySample>(kMemorySlices, where("t_max >= ? AND t_max <= ? AND t_min <= ?"),
                                      {t0, saturatingAdd(t1, sliceExtent()), t1},
                                      [&](const MemorySample &m) { return m.tNs >= t0 && m.tNs <= t1; });
}

void SessionReader::slicedEventsIn(std::int64_t after, std::int64_t upTo, SessionEvents &out) const
{
    const QString condition = where("t_max > ? AND t_max <= ? AND t_min <= ?");
    const std::int64_t lastMax = saturatingAdd(upTo, sliceExtent());
    auto in = [&](const auto &e) { return eventTimeNs(e) > after && eventTimeNs(e) <= upTo; };
    out.frames = slicedWindow<net::FrameEvent>(kFrameSlices, condition, {after, lastMax, upTo}, in);
    out.spans = slicedWindow<SpanEvent>(kSpanSlices, condition, {after, lastMax, upTo}, in);
    out.memory = slicedWindow<MemorySample>(kMemorySlices, condition, {after, lastMax, upTo}, in);
}

void SessionReader::slicedTimeRange(std::int64_t &first, std::int64_t &last) const
{
    for (const char *table : {kFrameSlices, kSpanSlices, kMemorySlices}) {
        if (auto v =
                Query(*this, QStringLiteral("SELECT MAX(t_max) FROM %1").arg(QLatin1String(table))).scalar())
            last = std::max(last, *v);
        // t_start_min <= t_min: walk up the start index until no slice can start earlier.
        Query q(*this, QStringLiteral("SELECT t_min, t_start_min FROM %1 ORDER BY t_start_min")
                           .arg(QLatin1String(table)));
        std::optional<std::int64_t> earliest;
        for (q.exec(); q.next() && (!earliest || q.i64(1) <= *earliest);)
            earliest = std::min(earliest.value_or(q.i64(0)), q.i64(0));
        if (earliest)
            first = std::min(first, *earliest);
    }
}

std::optional<std::int64_t> SessionReader::slicedNextEventTime(std::int64_t tNs) const
{
    const std::int64_t extent = sliceExtent();
    std::optional<std::int64_t> next;
    auto offer = [&next](std::int64_t t) { next = next ? std::min(*next, t) : t; };
    // Slices that straddle tNs: their first event after it needs the records.
    auto straddling = where("t_max > ? AND t_max <= ? AND t_min <= ?");
    auto after = [&](const auto &events) {
        for (const auto &e : events) {
            if (eventTimeNs(e) > tNs)
                offer(eventTimeNs(e));
        }
        return true;
    };
    const std::int64_t lastMax = saturatingAdd(tNs, extent);
    scanSlices<net::FrameEvent>(kFrameSlices, straddling, {tNs, lastMax, tNs},
                                [&](const Slice &, auto &events) { return after(events); });
    scanSlices<SpanEvent>(kSpanSlices, straddling, {tNs, lastMax, tNs},
                          [&](const Slice &, auto &events) { return after(events); });
    scanSlices<MemorySample>(kMemorySlices, straddling, {tNs, lastMax, tNs},
                             [&](const Slice &, auto &events) { return after(events); });
    // Slices wholly after tNs: their t_min is their first event.
    for (const char *table : {kFrameSlices, kSpanSlices, kMemorySlices}) {
        Query q(*this, QStringLiteral("SELECT t_min, t_max FROM %1 WHERE t_max > ? ORDER BY t_max")
                           .arg(QLatin1String(table)));
        for (q.bind(tNs).exec(); q.next();) {
            if (next && saturatingSub(q.i64(1), extent) > *next)
                break;
            if (q.i64(0) > tNs)
                offer(q.i64(0));
        }
    }
    return next;
}

std::vector<MemorySample> SessionReader::slicedNewestMemory(std::int64_t tNs, bool stepPeaks) const
{
    std::set<int> missing;
    for (const SessionNode &n : m_header.nodeList)
        missing.insert(n.rank);
    const bool knownNodes = !missing.empty();
    // Per node the newest sample by (t, slice, place): the order of version 3's (t, id).
    std::map<int, std::pair<std::tuple<std::int64_t, std::int64_t, std::size_t>, MemorySample>> latest;
    std::optional<std::int64_t> oldestFound; // the oldest of the nodes' newest, once all are found
    scanSlices<MemorySample>(
        kMemorySlices, where("t_min <= ? AND t_max <= ? ORDER BY t_max DESC"),
        {tNs, saturatingAdd(tNs, sliceExtent())}, [&](const Slice &s, std::vector<MemorySample> &events) {
            if (oldestFound && s.tMax < *oldestFound)
                return false;
            for (std::size_t i = 0; i < events.size(); ++i) {
                MemorySample &m = events[i];
                if (m.tNs > tNs || m.stepPeak != stepPeaks)
                    continue;
                const auto key = std::make_tuple(m.tNs, s.id, i);
                const int node = m.node;
                auto found = latest.find(node);
                if (found == latest.end())
                    latest.emplace(node, std::make_pair(key, std::move(m)));
                else if (key > found->second.first)
                    found->second = {key, std::move(m)};
                missing.erase(node);
            }
            if (knownNodes && missing.empty()) {
                oldestFound = tNs;
                for (const auto &entry : latest)
                    oldestFound = std::min(*oldestFound, std::get<0>(entry.second.first));
            }
            return true;
        });
    std::vector<MemorySample> out;
    for (auto &entry : latest)
        out.push_back(std::move(entry.second.second));
    return out;
}

std::optional<std::int64_t> SessionReader::slicedStepStart(std::int64_t step) const
{
    std::optional<std::int64_t> start;
    scanSlices<SpanEvent>(kSpanSlices, where("1"), {}, [&](const Slice &, std::vector<SpanEvent> &spans) {
        for (const SpanEvent &s : spans) {
            if (s.step == step)
                start = start ? std::min(*start, s.startNs) : s.startNs;
        }
        return true;
    });
    return start;
}

std::vector<CollectiveBoundary> SessionReader::slicedCollectives() const
{
    std::map<std::tuple<std::int64_t, int, std::uint64_t>, CollectiveBoundary> byKey;
    scanSlices<SpanEvent>(kSpanSlices, where("1"), {}, [&](const Slice &, std::vector<SpanEvent> &spans) {
        for (const SpanEvent &s : spans) {
            if (s.kind != SpanEvent::Kind::Collective)
                continue;
            auto [it, fresh] =
                byKey.try_emplace(std::make_tuple(s.step, int(s.collective), s.seq),
                                  CollectiveBoundary{s.collective, s.seq, s.step, s.startNs, s.endNs});
            if (!fresh) {
                it->second.startNs = std::min(it->second.startNs, s.startNs);
                it->second.endNs = std::max(it->second.endNs, s.endNs);
            }
        }
        return true;
    });
    std::vector<CollectiveBoundary> out;
    for (auto &entry : byKey)
        out.push_back(entry.second);
    std::stable_sort(out.begin(), out.end(), [](const CollectiveBoundary &a, const CollectiveBoundary &b) {
        return a.startNs < b.startNs;
    });
    return out;
}

std::int64_t SessionReader::slicedMaxDuration(int spanKind) const
{
    std::int64_t longest = 0;
    if (spanKind < 0) {
        scanSlices<net::FrameEvent>(kFrameSlices, where("1"), {}, [&](const Slice &, auto &frames) {
            for (const net::FrameEvent &e : frames)
                longest = std::max(longest, saturatingSub(eventTimeNs(e), e.sendStartNs));
            return true;
        });
        return longest;
    }
    scanSlices<SpanEvent>(kSpanSlices, where("1"), {}, [&](const Slice &, auto &spans) {
        for (const SpanEvent &s : spans) {
            if (int(s.kind) == spanKind)
                longest = std::max(longest, saturatingSub(s.endNs, s.startNs));
        }
        return true;
    });
    return longest;
}

void SessionReader::slicedCount(SessionInfo &info, std::set<std::int64_t> &steps) const
{
    std::map<std::pair<int, int>, SessionLink> links;
    scanSlices<net::FrameEvent>(kFrameSlices, where("1"), {}, [&](const Slice &, auto &frames) {
        for (const net::FrameEvent &e : frames) {
            if (e.side == net::FrameEvent::Side::Send) {
                ++info.framesSend;
                SessionLink &l = links[{e.src, e.dst}];
                l.src = e.src;
                l.dst = e.dst;
                l.bytes += e.bytes;
                ++l.frames;
            } else {
                ++info.framesReceive;
            }
        }
        return true;
    });
    for (const auto &entry : links)
        info.links.push_back(entry.second);
    scanSlices<SpanEvent>(kSpanSlices, where("1"), {}, [&](const Slice &, auto &spans) {
        for (const SpanEvent &s : spans) {
            ++info.spans[std::size_t(s.kind)];
            if (s.step >= 0)
                steps.insert(s.step);
        }
        return true;
    });
    scanSlices<MemorySample>(kMemorySlices, where("1"), {}, [&](const Slice &, auto &samples) {
        for (const MemorySample &m : samples) {
            ++info.memory;
            info.memoryAtCollectives += m.collective != net::CollectiveKind::None;
            info.memoryStepPeaks += m.stepPeak;
        }
        return true;
    });
}

// The reads SessionReader's public functions make; instantiated here, used in session_reader.cpp.
void SessionReader::forEachSlicedFrame(const std::function<void(const net::FrameEvent &)> &fn) const
{
    streamSlices<net::FrameEvent>(kFrameSlices, false, fn);
}

void SessionReader::forEachSlicedSpanByStart(const std::function<void(const SpanEvent &)> &fn) const
{
    streamSlices<SpanEvent>(kSpanSlices, true, fn);
}

void SessionReader::forEachSlicedMemory(const std::function<void(const MemorySample &)> &fn) const
{
    streamSlices<MemorySample>(kMemorySlices, false, fn);
}

} // namespace smol::engine
