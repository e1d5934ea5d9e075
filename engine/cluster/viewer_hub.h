// The coordinator's side of the viewers' stream (viewer_protocol.h): a
// SessionEventSink beside the run's own, which gathers what the run does and
// every 100 ms sends each viewer one batch, thinned to that viewer's budget.
//
// The run's threads only append to the pending batch (bounded) and return;
// a ticker thread encodes each batch once, in up to four sizes (every
// event; frames as per-link totals; only the steps' events; only each
// node's newest),
// and each viewer gets the largest its budget has room for. Each viewer has
// a bounded queue and a writer thread of its own: a viewer whose queue
// overflows, or whose socket takes nothing for kStallTimeout, is dropped
// with a log line, so a slow viewer never slows the run or another viewer.
// A reader thread per viewer takes its predictions (and nothing else).
//
// No LibTorch.
#pragma once

#include "coordinator.h"
#include "engine/session/session_events.h"

#include <QJsonObject>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace smol::net {
class ControlChannel;
}

namespace smol::engine {

class ViewerHub : public SessionEventSink {
public:
    // `log`: one line per viewer that arrives, leaves or is dropped, and per
    // refused message (rate limited). `nodes`: the cluster's nodes now, asked
    // every batch; a change goes to the viewers.
    ViewerHub(std::function<void(const std::string &)> log, std::function<std::vector<ClusterNode>()> nodes);
    ~ViewerHub() override; // drops every viewer, joins every thread
    ViewerHub(const ViewerHub &) = delete;
    ViewerHub &operator=(const ViewerHub &) = delete;

    void setBudget(std::int64_t bytesPerSecond);
    void setPredictionSink(std::function<void(const Prediction &)> sink);

    // A connection that passed the handshake and said hello as a viewer:
    // welcomed, brought up to date (the run, nodes, lesson, pause), then streamed to.
    // False (and the channel closed) when the hub is full.
    bool add(std::unique_ptr<net::ControlChannel> channel, const std::string &name, const std::string &host,
             int node);
    int count() const;
    std::vector<std::pair<int, std::uint64_t>> bytesSent() const; // by viewer id

    // The run: what viewers are told besides its events.
    void runStarted(const SessionHeader &header);
    void runEnded(bool ok, const std::string &summary);
    void setHeld(bool held);
    void publishLesson(const QJsonObject &lesson);

    // SessionEventSink: appended to the pending batch.
    void onFrame(const net::FrameEvent &e) override;
    void onSpan(const SpanEvent &s) override;
    void onMemory(const MemorySample &m) override;
    void onMetric(const MetricSample &m) override;
    void onLog(const LogLine &l) override;
    void onTensor(const TensorRecord &t) override;

    // What one batch becomes at each tier (tests: the thinning itself).
    // Tier 0: every event; 1: frames as per-link totals, memory at step ends
    // only; 2: and only step and pause spans; 3: and per node only its
    // newest step span, memory sample and metric of each name. A viewer gets
    // the lowest tier its budget has room for (3 when none has).
    struct Encoded {
        QJsonObject json;
        QByteArray blob;
        std::size_t wireBytes() const;
    };
    static Encoded encodeBatch(const SessionEvents &events, int tier, std::int64_t t0, std::int64_t t1);
    static SessionEvents thinned(const SessionEvents &events, int tier);

private:
    struct Private;
    std::unique_ptr<Private> d;
};

} // namespace smol::engine
