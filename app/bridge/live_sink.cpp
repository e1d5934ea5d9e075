#include "live_sink.h"

#include "net/trace.h"

#include <algorithm>

namespace smol::app {

void LiveSink::setForward(engine::SessionEventSink *next)
{
    std::lock_guard lock(m_mutex);
    m_next = next;
}

void LiveSink::reset()
{
    std::lock_guard lock(m_mutex);
    m_memory.clear();
    m_stepPeaks.clear();
    m_sends.clear();
    m_timelineFrames.clear();
    m_timelineSpans.clear();
    m_timelineMemory.clear();
    m_perRank.clear();
    m_dirty = true;
}

void LiveSink::onFrame(const net::FrameEvent &e)
{
    engine::SessionEventSink *next = nullptr;
    {
        std::lock_guard lock(m_mutex);
        if (e.side == net::FrameEvent::Side::Send) {
            // src == dst: --backend gloo's one event per collective, the
            // bytes this node handed to it; a node's, on no link (dst -1).
            m_sends.push_back({e.sendCompleteNs, e.src, e.src != e.dst ? e.dst : -1, e.bytes});
            m_dirty = true;
        }
        if (e.src != e.dst)
            m_timelineFrames.push_back(e);
        next = m_next;
    }
    if (next)
        next->onFrame(e);
}

void LiveSink::onSpan(const engine::SpanEvent &s)
{
    {
        std::lock_guard lock(m_mutex);
        m_timelineSpans.push_back(s);
        // A rank's spans for its idle share (bounded: past the bound the
        // figures are those of the run's first part, steps included).
        PerRank &r = m_perRank[s.node];
        using K = engine::SpanEvent::Kind;
        const std::size_t held = r.compute.size() + r.waits.size() + r.steps.size();
        if (held < kMaxRankSpans) {
            if (s.kind == K::Forward || s.kind == K::Backward || s.kind == K::Optimizer)
                r.compute.emplace_back(s.startNs, s.endNs);
            else if (s.kind == K::Collective || s.kind == K::Pause)
                r.waits.emplace_back(s.startNs, s.endNs);
            else if (s.kind == K::Step)
                r.steps.emplace_back(s.startNs, s.endNs);
        }
    }
    forward([&](auto *n) { n->onSpan(s); });
}

void LiveSink::onMemory(const engine::MemorySample &m)
{
    {
        std::lock_guard lock(m_mutex);
        if (m.stepPeak)
            m_stepPeaks[m.node] = m.memory;
        else
            m_memory[m.node] = m;
        m_timelineMemory.push_back(m);
        PerRank &r = m_perRank[m.node];
        r.activationPeak = std::max(r.activationPeak, m.memory.activations);
        m_dirty = true;
    }
    forward([&](auto *n) { n->onMemory(m); });
}

LiveSink::Traffic LiveSink::traffic()
{
    return traffic(net::monotonicNs());
}

void LiveSink::addLinkBytes(int src, int dst, std::uint64_t bytes, std::int64_t t)
{
    std::lock_guard lock(m_mutex);
    m_sends.push_back({t, src, src != dst ? dst : -1, bytes});
    m_dirty = true;
}

LiveSink::Traffic LiveSink::traffic(std::int64_t now)
{
    std::lock_guard lock(m_mutex);
    while (!m_sends.empty() && m_sends.front().t < now - 1'000'000'000)
        m_sends.pop_front();
    Traffic t;
    for (const Send &s : m_sends) {
        if (s.dst >= 0)
            t.linkBytesPerSecond[{s.src, s.dst}] += double(s.bytes);
        t.sentPerSecond[s.src] += double(s.bytes);
    }
    return t;
}

std::map<int, engine::MemorySample> LiveSink::memory()
{
    std::lock_guard lock(m_mutex);
    return m_memory;
}

std::map<int, net::MemoryByCategory> LiveSink::stepPeaks()
{
    std::lock_guard lock(m_mutex);
    return m_stepPeaks;
}

void LiveSink::takeTimeline(std::vector<net::FrameEvent> &frames, std::vector<engine::SpanEvent> &spans,
                            std::vector<engine::MemorySample> &memory)
{
    std::lock_guard lock(m_mutex);
    frames.swap(m_timelineFrames);
    spans.swap(m_timelineSpans);
    memory.swap(m_timelineMemory);
}

std::map<int, LiveSink::RankFigures> LiveSink::rankFigures()
{
    using namespace engine::spantime;
    std::lock_guard lock(m_mutex);
    std::map<int, RankFigures> out;
    for (const auto &[rank, r] : m_perRank) {
        RankFigures f;
        if (const auto busy = busyTime(merged(r.steps), merged(r.compute), merged(r.waits))) {
            f.computeNs = busy->computeNs;
            f.wallNs = busy->wallNs;
        }
        f.activationPeak = r.activationPeak;
        out[rank] = f;
    }
    return out;
}

bool LiveSink::takeDirty()
{
    std::lock_guard lock(m_mutex);
    return std::exchange(m_dirty, false);
}

} // namespace smol::app
