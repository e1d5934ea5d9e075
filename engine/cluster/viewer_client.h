// A viewer's end of the coordinator's stream (viewer_protocol.h): connects
// with the run's token or the watch token, says hello as a viewer, and hands
// every message it receives, checked and decoded, to its handlers on its
// reader thread. The only thing it sends after the hello is a prediction.
// `smolctl watch` prints what it gets; the window's ViewerFeed
// (app/feed/viewer_feed.h) turns it into a RunFeed.
//
// Everything a coordinator sends is untrusted here: field types and sizes
// are checked, text is made printable, and a message that fails a check
// closes the connection with a one-line reason (closed handler).
//
// No LibTorch.
#pragma once

#include "engine/session/session_events.h"

#include <QJsonArray>
#include <QJsonObject>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace smol::engine {

struct ViewerClientOptions {
    std::string host = "127.0.0.1";
    std::uint16_t port = 0;
    std::string token; // the run's token or its watch token
    std::string name;  // shown to the teacher beside this viewer's predictions
    int node = -1;     // the node id this machine joined as (-1: none): "you" in the views
    std::chrono::milliseconds timeout{10000};
    // The socket's kernel receive buffer (0: the system's). Tests of a
    // viewer that stalls make it small, so the coordinator sees the stall
    // within seconds rather than after megabytes.
    int receiveBuffer = 0;
};

// One link's traffic in a batch whose single frames were over the budget.
struct LinkAggregate {
    int src = -1, dst = -1;
    std::uint64_t bytes = 0;
    std::uint64_t frames = 0;
};

struct ViewerBatch {
    SessionEvents events;
    bool aggregated = false;           // the frames were over budget: `links` stands in for them
    std::vector<LinkAggregate> links;  // with aggregated
    std::int64_t t0 = 0, t1 = 0;       // the coordinator's clock, the batch's span
    std::size_t wireBytes = 0;         // the message's size on the wire (JSON + blob + header)
};

// A node as the coordinator lists it to viewers.
struct ViewerNode {
    int id = -1;
    std::string name, host;
    std::string state; // "idle", "running", "lost"
    int rank = -1;
    std::string reason; // why lost or failed ("" otherwise)
};

class ViewerClient {
public:
    struct Handlers {
        // A run begins (or is going on when this viewer arrived): its session
        // header and its TrainConfig as JSON (engine/cluster/config_json.h).
        std::function<void(const SessionHeader &header, const QJsonObject &config)> run;
        std::function<void(const std::vector<ViewerNode> &nodes)> nodes;
        // The teacher's lesson step (an object of the window's lesson panel;
        // its text fields already made printable).
        std::function<void(const QJsonObject &lesson)> lesson;
        std::function<void(bool held)> pause;
        std::function<void(ViewerBatch &batch)> events;
        std::function<void(bool ok, const std::string &summary)> end;
        // The connection ended: the coordinator went away, dropped this
        // viewer (a line saying why), or sent something malformed. Called once.
        std::function<void(const std::string &reason)> closed;
    };

    // Connects, authenticates and says hello; the reader starts at once.
    // Throws net::NetError / net::AuthError (one line) when it cannot.
    ViewerClient(const ViewerClientOptions &options, Handlers handlers);
    ~ViewerClient(); // close(), then joins the reader
    ViewerClient(const ViewerClient &) = delete;
    ViewerClient &operator=(const ViewerClient &) = delete;

    int viewerId() const;
    std::int64_t budgetBytesPerSecond() const;
    // The teacher's lesson step `step` asked for a number: send this viewer's
    // answer (the last one per step counts). False when the connection is closed.
    bool sendPrediction(int step, double value);
    // Stop reading (tests: a viewer that stalls stays connected but reads
    // nothing, so the coordinator's writes back up).
    void stopReading();
    void close();
    bool isOpen() const;
    std::uint64_t bytesReceived() const; // every message's wire size since the connection

private:
    struct Private;
    std::unique_ptr<Private> d;
};

} // namespace smol::engine
