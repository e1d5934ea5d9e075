// What the window's views need from a live run's event stream, kept between
// two snapshots: each rank's newest memory, bytes per link and per sender
// over the last second, the frames, spans and memory samples the timeline
// has not had yet, and per rank the spans its idle share is measured from.
// Every event is forwarded to the next sink (a SessionRecorder while
// recording). Called from the engine's threads; read from the GUI thread.
//
// No LibTorch.
#pragma once

#include "engine/session/session_events.h"
#include "engine/session/span_time.h"

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace smol::app {

class LiveSink : public engine::SessionEventSink {
public:
    void setForward(engine::SessionEventSink *next);
    void reset(); // a new run: nothing seen yet

    void onFrame(const net::FrameEvent &e) override;
    void onSpan(const engine::SpanEvent &s) override;
    void onMemory(const engine::MemorySample &m) override;
    void onMetric(const engine::MetricSample &m) override
    {
        forward([&](auto *n) { n->onMetric(m); });
    }
    void onLog(const engine::LogLine &l) override
    {
        forward([&](auto *n) { n->onLog(l); });
    }
    void onTensor(const engine::TensorRecord &t) override
    {
        forward([&](auto *n) { n->onTensor(t); });
    }

    struct Traffic {
        std::map<std::pair<int, int>, double> linkBytesPerSecond;
        std::map<int, double> sentPerSecond;
    };
    // Over the last second of the coordinator's clock (a viewer: `nowNs`,
    // its estimate of the teacher's coordinator's clock).
    Traffic traffic();
    Traffic traffic(std::int64_t nowNs);
    // A link's bytes without its frames (a viewer's batch over its budget:
    // per-link totals stand in for single packets), sent by `t`. Not on the
    // timeline: only the traffic it shows.
    void addLinkBytes(int src, int dst, std::uint64_t bytes, std::int64_t t);
    std::map<int, engine::MemorySample> memory(); // the newest sample, by rank (step peaks aside)
    std::map<int, net::MemoryByCategory> stepPeaks(); // the newest step's peaks, by rank
    // The frames, spans and memory samples since the last call, for the timeline.
    void takeTimeline(std::vector<net::FrameEvent> &frames, std::vector<engine::SpanEvent> &spans,
                      std::vector<engine::MemorySample> &memory);
    // Per rank since reset(): its busy time (engine/session/span_time.h:
    // in compute spans, not in a collective or pause, from its first step's
    // start to its last step's end; what `smolctl compare` measures too) and
    // the most activations any memory sample showed.
    struct RankFigures {
        std::int64_t computeNs = 0;
        std::int64_t wallNs = 0;
        std::int64_t activationPeak = 0;
    };
    std::map<int, RankFigures> rankFigures();
    bool takeDirty(); // anything new for the cluster view since the last call

private:
    template <typename F> void forward(F f)
    {
        engine::SessionEventSink *next = nullptr;
        {
            std::lock_guard lock(m_mutex);
            next = m_next;
        }
        if (next)
            f(next);
    }
    struct Send {
        std::int64_t t;
        int src, dst;
        std::uint64_t bytes;
    };
    struct PerRank {
        engine::spantime::Intervals compute, waits, steps; // waits: collective and pause spans
        std::int64_t activationPeak = 0;
    };
    static constexpr std::size_t kMaxRankSpans = 1 << 17; // per rank: 2 MiB at most

    std::mutex m_mutex;
    engine::SessionEventSink *m_next = nullptr;
    std::map<int, engine::MemorySample> m_memory; // by rank
    std::map<int, net::MemoryByCategory> m_stepPeaks; // by rank
    std::deque<Send> m_sends;
    std::vector<net::FrameEvent> m_timelineFrames;
    std::vector<engine::SpanEvent> m_timelineSpans;
    std::vector<engine::MemorySample> m_timelineMemory;
    std::map<int, PerRank> m_perRank;
    bool m_dirty = true;
};

} // namespace smol::app
