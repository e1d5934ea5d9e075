#include "timeline_data.h"

#include <algorithm>

namespace smol::widgets {

namespace {

// How far back a pairing looks in a link's queue: frames of one link arrive
// in order, so a match is normally at the front; a bound keeps garbage
// (a peer lost mid-collective) from making pairing quadratic.
constexpr std::size_t kPairWindow = 256;

bool sameFrame(int collective, std::uint64_t seq, std::uint32_t tag, int c2, std::uint64_t s2, std::uint32_t t2)
{
    return collective == c2 && seq == s2 && tag == t2;
}

} // namespace

void TimelineData::clear()
{
    const QStringList names = m_collectiveNames;
    const std::size_t budget = m_budget;
    *this = TimelineData();
    m_collectiveNames = names;
    m_budget = budget;
}

void TimelineData::setNodes(const QStringList &names)
{
    for (int r = 0; r < names.size(); ++r)
        lane(r).name = names[r];
}

QString TimelineData::laneName(int lane) const
{
    const QString &n = m_lanes[std::size_t(lane)].name;
    return n.isEmpty() ? QStringLiteral("node %1").arg(lane) : n;
}

TimelineData::Lane &TimelineData::lane(int rank)
{
    if (rank >= int(m_lanes.size()))
        m_lanes.resize(std::size_t(rank) + 1);
    return m_lanes[std::size_t(rank)];
}

void TimelineData::grow(std::int64_t t0, std::int64_t t1)
{
    if (m_begin > m_end) {
        m_begin = t0;
        m_end = t1;
        return;
    }
    m_begin = std::min(m_begin, t0);
    m_end = std::max(m_end, t1);
}

std::uint32_t TimelineData::intern(const QString &name)
{
    const auto it = m_nameIndex.find(name);
    if (it != m_nameIndex.end())
        return it->second;
    const auto index = std::uint32_t(m_names.size());
    m_names.push_back(name);
    m_nameIndex.emplace(name, index);
    return index;
}

bool TimelineData::insertPacket(Lane &l, const TimelinePacket &p)
{
    auto &v = l.packets;
    const std::size_t n = v.size();
    std::size_t at = n;
    if (!v.empty() && v.back().sendStartNs > p.sendStartNs) // out of order: usually near the end
        at = std::size_t(std::upper_bound(v.begin(), v.end(), p.sendStartNs,
                                          [](std::int64_t t, const TimelinePacket &q) { return t < q.sendStartNs; }) -
                         v.begin());
    bool grew = v.insert(at, p);
    // The byte prefix sums follow appends; an insert before the end makes
    // them stale from there on (packetBytes() redoes them).
    if (at == n && l.prefixValid == n) {
        grew |= l.prefixBytes.push_back((n > 0 ? l.prefixBytes[n - 1] : 0) + p.bytes);
        l.prefixValid = n + 1;
    } else {
        grew |= l.prefixBytes.push_back(0);
        l.prefixValid = std::min(l.prefixValid, at);
    }
    ++m_packetCount;
    return grew;
}

TimelinePacket *TimelineData::findPacket(int src, const Pending &send, int dst)
{
    auto &v = lane(src).packets;
    std::size_t i = std::size_t(
        std::lower_bound(v.begin(), v.end(), send.sendStartNs,
                         [](const TimelinePacket &q, std::int64_t t) { return q.sendStartNs < t; }) -
        v.begin());
    for (; i < v.size() && v[i].sendStartNs == send.sendStartNs; ++i)
        if (v[i].dst == dst && !v[i].received() &&
            sameFrame(v[i].collective, v[i].seq, v[i].tag, send.collective, send.seq, send.tag))
            return &v[i];
    return nullptr;
}

void TimelineData::addFrame(const TimelineFrameSide &f)
{
    if (f.src < 0 || f.dst < 0 || f.src == f.dst || f.src > 0xffff || f.dst > 0xffff)
        return; // a backend's per-collective event (no frames to draw), or nonsense
    lane(std::max(f.src, f.dst));
    if ((f.send ? f.sendStartNs : f.recvCompleteNs) < m_keptFromNs) { // late, for the dropped history
        m_droppedPackets += f.send ? 1 : 0;
        return;
    }
    Link &link = m_links[{f.src, f.dst}];
    if (f.send) {
        grow(f.sendStartNs, std::max(f.sendStartNs, f.sendCompleteNs));
        TimelinePacket p;
        p.sendStartNs = f.sendStartNs;
        p.sendEndNs = std::max(f.sendStartNs, f.sendCompleteNs);
        p.seq = f.seq;
        p.bytes = std::uint32_t(std::min<std::uint64_t>(f.bytes, 0xffffffffu));
        p.tag = f.tag;
        p.src = std::uint16_t(f.src);
        p.dst = std::uint16_t(f.dst);
        p.collective = std::uint8_t(f.collective);
        const std::size_t n = std::min(link.receives.size(), kPairWindow);
        for (std::size_t i = 0; i < n; ++i) {
            const Pending &r = link.receives[i];
            if (sameFrame(r.collective, r.seq, r.tag, f.collective, f.seq, f.tag)) {
                p.recvEndNs = std::max(r.timeNs, p.sendStartNs);
            lane(f.src).longestFlight = std::max(lane(f.src).longestFlight, p.recvEndNs - p.sendStartNs);
                link.receives.erase(link.receives.begin() + std::ptrdiff_t(i));
                break;
            }
        }
        if (!p.received())
            link.sends.push_back(Pending{f.collective, f.seq, f.tag, p.sendStartNs, p.sendEndNs, f.bytes});
        if (insertPacket(lane(f.src), p))
            enforceBudget();
        return;
    }
    grow(f.recvCompleteNs, f.recvCompleteNs);
    const std::size_t n = std::min(link.sends.size(), kPairWindow);
    for (std::size_t i = 0; i < n; ++i) {
        const Pending &s = link.sends[i];
        if (!sameFrame(s.collective, s.seq, s.tag, f.collective, f.seq, f.tag))
            continue;
        if (TimelinePacket *p = findPacket(f.src, s, f.dst)) {
            p->recvEndNs = std::max(f.recvCompleteNs, p->sendStartNs);
            Lane &l = lane(f.src);
            l.longestFlight = std::max(l.longestFlight, p->recvEndNs - p->sendStartNs);
        }
        link.sends.erase(link.sends.begin() + std::ptrdiff_t(i));
        return;
    }
    link.receives.push_back(Pending{f.collective, f.seq, f.tag, f.sendStartNs, f.recvCompleteNs, f.bytes});
}

bool TimelineData::insertByStart(BlockList<StoredSpan> &list, const StoredSpan &s)
{
    if (list.empty() || list.back().startNs <= s.startNs)
        return list.push_back(s);
    const auto at = std::upper_bound(list.begin(), list.end(), s.startNs,
                                     [](std::int64_t t, const StoredSpan &q) { return t < q.startNs; });
    return list.insert(std::size_t(at - list.begin()), s);
}

void TimelineData::addSpan(const TimelineSpan &s)
{
    if (s.node < 0 || s.node > 0xffff)
        return;
    const std::int64_t end = std::max(s.startNs, s.endNs);
    if (end < m_keptFromNs) { // wholly in the dropped history
        m_droppedSpans += s.kind == TimelineSpanKind::Step ? 0 : 1;
        return;
    }
    // One that began there (a long pause reported as it ends) is kept from
    // where the history starts, so every list stays after historyStartNs().
    const std::int64_t start = std::max(s.startNs, m_keptFromNs);
    grow(start, end);
    if (s.kind == TimelineSpanKind::Step) {
        auto [it, fresh] = m_stepStarts.emplace(s.step, start);
        if (!fresh)
            it->second = std::min(it->second, start);
        auto [e, freshEnd] = m_stepEnds.emplace(s.step, end);
        if (!freshEnd)
            e->second = std::max(e->second, end);
        lane(s.node);
        return;
    }
    const StoredSpan st{start, end, s.step, s.seq, s.bytes, intern(s.name), s.kind, std::uint8_t(s.collective)};
    Lane &l = lane(s.node);
    const Row row = s.kind == TimelineSpanKind::Collective ? Row::Collective
                    : s.kind == TimelineSpanKind::Pause    ? Row::Pause
                                                           : Row::Compute;
    std::int64_t &longest = l.longestSpan[int(row)];
    longest = std::max(longest, end - start);
    ++m_spanCount;
    if (insertByStart(l.row(row), st))
        enforceBudget();
}

void TimelineData::addMemory(const TimelineMemorySample &m)
{
    if (m.node < 0 || m.node > 0xffff)
        return;
    if (m.stepPeak) { // not memory at an instant: a mark over the step
        addStepPeak(m);
        return;
    }
    Lane &l = lane(m.node);
    m_hasMemory = true;
    if (m.tNs < m_keptFromNs) { // late, for the dropped history
        ++m_droppedMemory;
        return;
    }
    grow(m.tNs, m.tNs);
    StoredMemory st;
    st.tNs = m.tNs;
    st.memory = m.memory;
    st.seq = m.seq;
    st.step = std::int32_t(std::clamp<std::int64_t>(m.step, -1, std::numeric_limits<std::int32_t>::max()));
    st.collective = std::uint8_t(m.collective);
    st.before = m.before;
    ++m_memoryCount;
    if (l.memory.add(st))
        enforceBudget();
}

void TimelineData::addStepPeak(const TimelineMemorySample &m)
{
    Lane &l = lane(m.node);
    if (m.tNs < m_keptFromNs)
        return;
    StepPeak peak;
    peak.endNs = m.tNs;
    peak.startNs = !l.stepPeaks.empty()         ? l.stepPeaks.back().endNs
                   : !l.memory.samples().empty() ? std::min(l.memory.samples()[0].tNs, m.tNs)
                                                 : m.tNs;
    peak.step = m.step;
    peak.total = m.memory.stacked();
    peak.activations = m.memory.activations;
    if (!l.stepPeaks.empty() && m.tNs < l.stepPeaks.back().endNs)
        return; // out of order: the marks are a chain in time
    grow(peak.startNs, peak.endNs);
    l.stepPeaks.push_back(peak);
}

std::int64_t TimelineData::stepPeakIn(int laneIndex, std::int64_t t0, std::int64_t t1) const
{
    if (laneIndex < 0 || laneIndex >= laneCount())
        return 0;
    const std::deque<StepPeak> &peaks = m_lanes[std::size_t(laneIndex)].stepPeaks;
    auto it = std::lower_bound(peaks.begin(), peaks.end(), t0,
                               [](const StepPeak &p, std::int64_t t) { return p.endNs <= t; });
    std::int64_t highest = 0;
    for (; it != peaks.end() && it->startNs < t1; ++it)
        highest = std::max(highest, it->total);
    return highest;
}

TimelineData::MemoryRange TimelineData::memoryIn(int laneIndex, std::int64_t t0, std::int64_t t1) const
{
    if (laneIndex < 0 || laneIndex >= laneCount())
        return {};
    return m_lanes[std::size_t(laneIndex)].memory.in(t0, t1);
}

std::vector<TimelineData::MemoryRange> TimelineData::memoryEnvelope(int laneIndex, const TimeAxis &axis,
                                                                    double x0, int columns) const
{
    std::vector<MemoryRange> out(std::size_t(std::max(columns, 0)));
    forEachMemoryColumn(laneIndex, axis, x0, columns,
                        [&](int c, const MemoryRange &r) { out[std::size_t(c)] = r; });
    return out;
}

void TimelineData::forEachMemoryColumn(int laneIndex, const TimeAxis &axis, double x0, int columns,
                                       const std::function<void(int, const MemoryRange &)> &fn) const
{
    if (laneIndex >= 0 && laneIndex < laneCount())
        m_lanes[std::size_t(laneIndex)].memory.forEachColumn(axis, x0, columns, fn);
}

std::uint64_t TimelineData::memoryDroppedFrom(int laneIndex) const
{
    return laneIndex >= 0 && laneIndex < laneCount() ? m_lanes[std::size_t(laneIndex)].memory.dropped() : 0;
}

const BlockList<StoredSpan> &TimelineData::spans(int lane, Row row) const
{
    const Lane &l = m_lanes[std::size_t(lane)];
    return row == Row::Collective ? l.collectives : row == Row::Pause ? l.pauses : l.compute;
}

QString TimelineData::collectiveName(int kind) const
{
    if (kind >= 0 && kind < m_collectiveNames.size())
        return m_collectiveNames[kind];
    return QStringLiteral("collective %1").arg(kind);
}

std::vector<TimelineData::Unreceived> TimelineData::unreceived(std::size_t max) const
{
    std::vector<Unreceived> out;
    for (const auto &[key, link] : m_links)
        for (const Pending &s : link.sends) {
            if (out.size() >= max)
                return out;
            out.push_back(Unreceived{key.first, key.second, s.sendStartNs, s.bytes, s.collective});
        }
    return out;
}

std::size_t TimelineData::inFlightCount() const
{
    std::size_t n = 0;
    for (const auto &[key, link] : m_links)
        n += link.sends.size();
    return n;
}

std::size_t TimelineData::memoryBytes() const
{
    std::size_t bytes = sizeof(*this);
    bytes += m_lanes.capacity() * sizeof(Lane) + eventBytes();
    for (const auto &[key, link] : m_links)
        bytes += 64 + (link.sends.size() + link.receives.size()) * sizeof(Pending);
    for (const QString &n : m_names)
        bytes += 2 * (sizeof(QString) + std::size_t(n.capacity()) * 2) + 48; // the list and the index
    bytes += (m_stepStarts.size() + m_stepEnds.size()) * 48;
    return bytes;
}

std::size_t TimelineData::eventBytes() const
{
    std::size_t bytes = 0;
    for (const Lane &l : m_lanes) {
        bytes += l.packets.bytes() + l.prefixBytes.bytes() + l.compute.bytes() + l.collectives.bytes() +
                 l.pauses.bytes() + l.memory.bytes() +
                 l.stepPeaks.size() * sizeof(StepPeak);
    }
    return bytes;
}

void TimelineData::setMemoryBudget(std::size_t bytes)
{
    m_budget = bytes == 0 ? 0 : std::max(bytes, kMinBudget);
    enforceBudget();
}

std::uint64_t TimelineData::packetsDroppedFrom(int laneIndex) const
{
    return laneIndex >= 0 && laneIndex < laneCount() ? m_lanes[std::size_t(laneIndex)].droppedPackets : 0;
}

std::uint64_t TimelineData::spansDroppedFrom(int laneIndex, Row row) const
{
    return laneIndex >= 0 && laneIndex < laneCount() ? m_lanes[std::size_t(laneIndex)].droppedSpans[int(row)]
                                                     : 0;
}

void TimelineData::enforceBudget()
{
    if (m_budget == 0 || m_dropping || m_begin > m_end)
        return;
    std::size_t held = memoryBytes();
    if (held <= m_budget)
        return;
    m_dropping = true;
    // Down to a chunk under the budget, so the next drop is a chunk of
    // events away: each costs O(lanes + blocks + pending), O(1) per event.
    const std::size_t target = m_budget - dropChunkBytes();
    // Where to cut: assume the events are spread evenly in time over what
    // is kept and cut the fraction that frees enough; a burst or the blocks
    // left half-used take another round or two.
    for (int round = 0; round < 64 && held > target && m_begin < m_end; ++round) {
        const std::size_t freeable = eventBytes();
        if (freeable == 0)
            break;
        const double fraction = std::min(1.0, double(held - target) / double(freeable));
        const double kept = double(m_end - m_begin);
        const std::int64_t step =
            std::max<std::int64_t>(std::llround(fraction * kept), std::int64_t(kept / 256) + 1);
        dropBefore(std::min(m_end, m_begin + step)); // the newest events always stay
        held = memoryBytes();
    }
    m_dropping = false;
}

void TimelineData::dropBefore(std::int64_t cut)
{
    if (!m_hasOrigin) { // the ruler keeps counting from the run's start
        m_origin = m_begin;
        m_hasOrigin = true;
    }
    const auto beforeCut = [cut](std::int64_t t) { return t < cut; };
    for (Lane &l : m_lanes) {
        const std::size_t k = std::size_t(
            std::lower_bound(l.packets.begin(), l.packets.end(), cut,
                             [](const TimelinePacket &q, std::int64_t t) { return q.sendStartNs < t; }) -
            l.packets.begin());
        l.packets.dropFront(k);
        l.prefixBytes.dropFront(k); // the rest stay prefix sums (plus a constant)
        l.prefixValid = l.prefixValid > k ? l.prefixValid - k : 0;
        l.droppedPackets += k;
        m_packetCount -= k;
        m_droppedPackets += k;
        const auto byStart = [](const StoredSpan &q, std::int64_t t) { return q.startNs < t; };
        for (Row row : {Row::Compute, Row::Collective, Row::Pause}) {
            BlockList<StoredSpan> &list = l.row(row);
            std::size_t n =
                std::size_t(std::lower_bound(list.begin(), list.end(), cut, byStart) - list.begin());
            // Spans that began before the cut and go on after it (a long
            // pause) stay, from the cut: moved, in order, to the end of the
            // dropped prefix, so the list stays sorted by start.
            const std::size_t from = std::size_t(
                std::lower_bound(list.begin(), list.end(), cut - l.longestSpan[int(row)], byStart) -
                list.begin());
            const std::size_t prefix = n;
            for (std::size_t j = prefix; j-- > from;)
                if (list[j].endNs >= cut) {
                    list[--n] = list[j];
                    list[n].startNs = cut;
                }
            list.dropFront(n);
            l.droppedSpans[int(row)] += n;
            m_spanCount -= n;
            m_droppedSpans += n;
        }
        while (!l.stepPeaks.empty() && l.stepPeaks.front().endNs < cut)
            l.stepPeaks.pop_front();
        const std::size_t m = l.memory.dropBefore(cut);
        m_memoryCount -= m;
        m_droppedMemory += m;
    }
    // Steps (numbered in time order) that ended before the cut.
    while (!m_stepStarts.empty()) {
        const auto e = m_stepEnds.find(m_stepStarts.begin()->first);
        if (e != m_stepEnds.end() && !beforeCut(e->second))
            break;
        if (e != m_stepEnds.end())
            m_stepEnds.erase(e);
        m_stepStarts.erase(m_stepStarts.begin());
    }
    for (auto it = m_stepStarts.begin(); it != m_stepStarts.end() && beforeCut(it->second); ++it)
        it->second = cut; // a step going on at the cut starts there, as one reported later would
    // Pairings waiting for a side that belongs to the dropped past.
    for (auto &[key, link] : m_links) {
        const auto sentBefore = [&](const Pending &p) { return beforeCut(p.sendStartNs); };
        const auto receivedBefore = [&](const Pending &p) { return beforeCut(p.timeNs); };
        link.sends.erase(std::remove_if(link.sends.begin(), link.sends.end(), sentBefore), link.sends.end());
        link.receives.erase(std::remove_if(link.receives.begin(), link.receives.end(), receivedBefore),
                            link.receives.end());
    }
    m_begin = std::max(m_begin, cut);
    m_keptFromNs = std::max(m_keptFromNs, cut);
    m_droppedBudget = m_budget;
    ++m_dropGeneration;
}

std::uint64_t TimelineData::packetBytes(int laneIndex, std::size_t first, std::size_t count) const
{
    const Lane &l = m_lanes[std::size_t(laneIndex)];
    const std::size_t n = l.packets.size();
    if (first >= n || count == 0)
        return 0;
    const std::size_t last = std::min(n, first + count) - 1;
    for (std::size_t i = l.prefixValid; i < n; ++i)
        l.prefixBytes[i] = (i > 0 ? l.prefixBytes[i - 1] : 0) + l.packets[i].bytes;
    l.prefixValid = n;
    return l.prefixBytes[last] - l.prefixBytes[first] + l.packets[first].bytes;
}

std::optional<std::pair<std::int64_t, std::int64_t>> TimelineData::stepRange(std::int64_t step) const
{
    const auto s = m_stepStarts.find(step);
    if (s == m_stepStarts.end())
        return std::nullopt;
    const auto e = m_stepEnds.find(step);
    return std::make_pair(s->second, e == m_stepEnds.end() ? s->second : e->second);
}

std::int64_t TimelineData::stepAt(int laneIndex, std::int64_t tNs, int collective, std::uint64_t seq) const
{
    if (laneIndex >= 0 && laneIndex < laneCount()) {
        const Lane &l = m_lanes[std::size_t(laneIndex)];
        const auto &v = l.collectives;
        auto it = std::upper_bound(v.begin(), v.end(), tNs, [](std::int64_t t, const StoredSpan &q) { return t < q.startNs; });
        const std::int64_t longest = l.longestSpan[int(Row::Collective)];
        while (it != v.begin()) {
            --it;
            if (it->startNs < tNs - longest)
                break;
            if (it->endNs >= tNs && (collective < 0 || (it->collective == collective && it->seq == seq)))
                return it->step;
        }
    }
    // The newest step that started at or before tNs and had not ended.
    std::int64_t best = -1;
    for (auto it = m_stepStarts.begin(); it != m_stepStarts.end(); ++it) {
        const auto e = m_stepEnds.find(it->first);
        if (it->second <= tNs && e != m_stepEnds.end() && e->second >= tNs)
            best = it->first;
    }
    return best;
}

std::vector<LodItem> TimelineData::collapsePackets(int laneIndex, const TimeAxis &axis, std::int64_t t0,
                                                   std::int64_t t1, double minPx, double maxRunPx) const
{
    std::vector<LodItem> items;
    if (laneIndex < 0 || laneIndex >= laneCount())
        return items;
    const auto &v = m_lanes[std::size_t(laneIndex)].packets;
    const auto byStart = [](const TimelinePacket &q, std::int64_t t) { return q.sendStartNs < t; };
    const std::size_t begin = std::size_t(std::lower_bound(v.begin(), v.end(), t0, byStart) - v.begin());
    const std::size_t end = std::size_t(
        std::upper_bound(v.begin(), v.end(), t1, [](std::int64_t t, const TimelinePacket &q) { return t < q.sendStartNs; }) -
        v.begin());
    std::size_t i = begin;
    while (i < end) {
        std::size_t last = i;
        // A run never reaches past this (the first packet after it starts the next run).
        const double runLimitPx = axis.x(v[i].sendStartNs) + std::max(maxRunPx, minPx);
        for (;;) {
            // Every packet that starts less than minPx after `last` joins the run.
            const double limitPx = std::min(axis.x(v[last].sendStartNs) + minPx, runLimitPx);
            const std::int64_t limit = std::max(axis.time(limitPx), v[last].sendStartNs + 1);
            const std::size_t k = std::size_t(
                std::lower_bound(v.begin() + std::ptrdiff_t(last) + 1, v.begin() + std::ptrdiff_t(end), limit, byStart) -
                v.begin());
            if (k == last + 1)
                break;
            last = k - 1;
        }
        items.push_back(LodItem{i, last - i + 1, v[i].sendStartNs, v[last].sendStartNs});
        i = last + 1;
    }
    return items;
}

std::vector<LodItem> TimelineData::collapseSpans(int laneIndex, Row row, const TimeAxis &axis, std::int64_t t0,
                                                 std::int64_t t1, double minPx, double maxRunPx) const
{
    std::vector<LodItem> items;
    if (laneIndex < 0 || laneIndex >= laneCount())
        return items;
    const Lane &l = m_lanes[std::size_t(laneIndex)];
    const auto &v = spans(laneIndex, row);
    const std::int64_t longest = l.longestSpan[int(row)];
    std::size_t i = std::size_t(std::lower_bound(v.begin(), v.end(), t0 - longest,
                                                 [](const StoredSpan &q, std::int64_t t) { return q.startNs < t; }) -
                                v.begin());
    const std::size_t n = v.size();
    const double minNs = minPx * axis.nsPerPixel;
    while (i < n && v[i].startNs <= t1) {
        if (v[i].endNs < t0) {
            ++i;
            continue;
        }
        if (double(v[i].endNs - v[i].startNs) >= minNs) {
            items.push_back(LodItem{i, 1, v[i].startNs, v[i].endNs});
            ++i;
            continue;
        }
        // A run of narrow spans: each next one starts within minPx of the run's end.
        std::int64_t runEnd = v[i].endNs;
        std::size_t last = i;
        const double runLimit = double(v[i].startNs) + std::max(maxRunPx, minPx) * axis.nsPerPixel;
        for (std::size_t j = i + 1; j < n; ++j) {
            if (double(v[j].startNs) >= double(runEnd) + minNs || double(v[j].endNs - v[j].startNs) >= minNs ||
                double(v[j].endNs) > runLimit)
                break;
            runEnd = std::max(runEnd, v[j].endNs);
            last = j;
        }
        items.push_back(LodItem{i, last - i + 1, v[i].startNs, runEnd});
        i = last + 1;
    }
    return items;
}

} // namespace smol::widgets
