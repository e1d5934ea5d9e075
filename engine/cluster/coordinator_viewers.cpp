// Coordinator::run: a run streamed to viewers (viewer_hub.h). The hub is
// told the run's header first and its end last; between them the run's
// events reach it through a tee beside the run's own sink, when the run has
// one or the coordinator was asked to stream. The run itself:
// coordinator_run.cpp.
#include "coordinator.h"
#include "coordinator_private.h"

#include "config_json.h"

#include <cmath>
#include <cstdio>

namespace smol::engine {

namespace {

// The run's events to its own sink and to the viewers' hub.
class TeeSink : public SessionEventSink {
public:
    TeeSink(SessionEventSink *a, SessionEventSink *b) : m_a(a), m_b(b) { }
    void onFrame(const net::FrameEvent &e) override { each([&](SessionEventSink *s) { s->onFrame(e); }); }
    void onSpan(const SpanEvent &e) override { each([&](SessionEventSink *s) { s->onSpan(e); }); }
    void onMemory(const MemorySample &e) override { each([&](SessionEventSink *s) { s->onMemory(e); }); }
    void onMetric(const MetricSample &e) override { each([&](SessionEventSink *s) { s->onMetric(e); }); }
    void onLog(const LogLine &e) override { each([&](SessionEventSink *s) { s->onLog(e); }); }
    void onTensor(const TensorRecord &e) override { each([&](SessionEventSink *s) { s->onTensor(e); }); }

private:
    template <class F> void each(F f)
    {
        if (m_a)
            f(m_a);
        if (m_b)
            f(m_b);
    }
    SessionEventSink *m_a, *m_b;
};

std::string summaryLine(const TrainSummary &s)
{
    char loss[32];
    std::snprintf(loss, sizeof loss, "%.4f", s.finalLoss);
    return s.strategy + " on " + std::to_string(s.nodes) + " node(s), " + std::to_string(s.steps) +
           " steps: final loss " + loss + ", " + std::to_string(std::llround(s.samplesPerS)) + " samples/s";
}

} // namespace

// The run, streamed to viewers (viewer_hub.h) when it has events of its own
// or the coordinator was asked to stream.
TrainSummary Coordinator::run(const TrainConfig &config, const ClusterRunOptions &options, TrainObserver *observer)
{
    TeeSink tee(options.events, d->viewers.get());
    ClusterRunOptions streamed = options;
    if (options.events || d->options.streamToViewers)
        streamed.events = &tee;
    d->viewers->runStarted(sessionHeaderFor(config, ""));
    try {
        const TrainSummary s = runStreamed(config, streamed, observer);
        d->viewers->runEnded(true, summaryLine(s));
        return s;
    } catch (const std::exception &e) {
        d->viewers->runEnded(false, e.what());
        throw;
    }
}

} // namespace smol::engine
