// Coordinator's insides: the state its threads share and the functions
// they run, declared here and defined one concept per file:
//
//   coordinator.cpp              the public calls; send, log, events, addresses
//   coordinator_accept.cpp       the accept thread: bounded admission, hello
//   coordinator_readers.cpp      a reader per node, the monitor (heartbeats, pings)
//   coordinator_trace.cpp        trace batches moved onto this process's clock
//   coordinator_breakpoints.cpp  proxy threads that pause remote nodes
//   coordinator_steps.cpp        steps as nodes report them (StepAggregator)
//   coordinator_run.cpp          one run's state machine (Coordinator::Run)
//   coordinator_viewers.cpp      a run streamed to viewers (run(); viewer_hub.h)
//
// Not part of the engine's interface.
#pragma once

#include "admission.h"
#include "coordinator.h"
#include "rendezvous_board.h"
#include "telemetry.h"
#include "viewer_hub.h"

#include "engine/breakpoints/breakpoints.h"
#include "engine/session/session_events.h"
#include "net/clock_sync.h"
#include "net/control_channel.h"
#include "net/errors.h"
#include "net/socket_util.h"

#include <QJsonArray>
#include <QJsonObject>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

namespace smol::engine {
namespace coord {

using Clock = std::chrono::steady_clock;

// A 64-bit integer a node sent as text (or, small, as a number).
std::int64_t bigInt(const QJsonValue &v);

// What the readers hand run(): a node's message, its loss, or the user's stop.
struct Event {
    int node = -1; // -1 with stop: the user's stop
    bool stop = false;
    bool lost = false;
    std::string reason;
    net::ControlMessage message;
};

// Steps as the nodes report them; a step is complete when every rank of
// the epoch that ran it reported (asynchronous runs: when rank 0 did).
// run()'s thread only. coordinator_steps.cpp.
class StepAggregator {
public:
    StepAggregator(std::int64_t steps, std::int64_t samplesPerStep, bool leaderPaced,
                   TrainObserver *observer);
    // `lossRows`: by rank, the rows each reported loss is the mean over
    // (lossRows() in strategy.h); empty: a plain mean.
    void beginEpoch(int world, std::int64_t firstStep, std::vector<std::int64_t> lossRows);
    void report(int rank, std::int64_t step, double loss, const net::MemoryByCategory &mem);
    void setResumedAt(std::int64_t step) { m_resumedAt = step; }
    const std::vector<double> &curve() const { return m_curve; }
    const std::vector<net::MemoryByCategory> &lastMemory() const { return m_lastMemory; }

private:
    struct Pending {
        int count = 0;
        std::vector<std::pair<int, double>> losses; // (rank, loss)
        std::vector<net::MemoryByCategory> memory;
    };
    // One StepReport for `step` from what `p` gathered: to the curve and the observer.
    void complete(std::int64_t step, const Pending &p);

    std::vector<std::int64_t> m_lossRows;
    std::vector<double> m_curve;
    std::int64_t m_samplesPerStep;
    bool m_leaderPaced;
    TrainObserver *m_observer;
    Clock::time_point m_start;
    int m_world = 0;
    std::int64_t m_firstStep = 0;
    std::int64_t m_resumedAt = 0;
    std::map<std::int64_t, Pending> m_pending;
    std::vector<net::MemoryByCategory> m_latest;
    std::vector<net::MemoryByCategory> m_lastMemory;
};

} // namespace coord

struct Coordinator::Private {
    using Clock = coord::Clock;
    using Event = coord::Event;
    struct Conn {
        ClusterNode info;
        std::string coordinatorAddress; // this process's address as the node reached it
        std::unique_ptr<net::ControlChannel> channel;
        std::thread reader;
        net::ClockEstimator clock;
        Clock::time_point lastSeen;
        bool toldOffMalformedTrace = false; // said once per connection (the reader's)
    };

    CoordinatorOptions options;
    int listenFd = -1;
    std::uint16_t port = 0;
    std::atomic<bool> stop{false};
    std::atomic<bool> shuttingDown{false}; // nodes told to exit: their goodbyes are not losses
    std::thread acceptThread;
    std::thread monitorThread;
    // Students' windows and `smolctl watch` (viewer_hub.h): made before the
    // accept thread, gone before the nodes' connections.
    std::unique_ptr<ViewerHub> viewers;

    mutable std::mutex mutex; // guards conns, events, logSink, epochOffsets, traceEpoch
    std::condition_variable changed;
    std::vector<std::unique_ptr<Conn>> conns; // by id
    // Bounded admission (admission.h): at most kMaxHandshakes handshakes in
    // progress, kMaxHandshakesPerAddress from one address; the rest are
    // closed at once. Each handshake's thread is joined as soon as it ends.
    static constexpr int kMaxHandshakes = 16;
    static constexpr int kMaxHandshakesPerAddress = 4;
    struct Handshake {
        std::thread thread;
        std::atomic<bool> done{false};
    };
    AdmissionGate gate{kMaxHandshakes, kMaxHandshakesPerAddress};
    RefusalLog refusals{std::chrono::seconds(10)};
    std::list<Handshake> handshakes; // accept thread and destructor only
    std::deque<Event> events;
    std::function<void(const std::string &)> logSink;
    net::TraceSink *traceSink = nullptr;
    SessionEventSink *eventSink = nullptr; // the running run's, under mutex
    std::function<void(int, const std::vector<std::string> &)> gatheredSink;
    int traceEpoch = -1; // the epoch begun last: its traces and messages are kept, others dropped
    std::vector<int> epochNodeOfRank; // rank -> node id, current epoch
    int epochCounter = 0;
    // `--backend gloo`: the epoch's rendezvous, answered on the readers' threads.
    RendezvousBoard board{
        [this](int node, const QJsonObject &json, const QByteArray &blob) { send(node, json, blob); }};

    // Breakpoints for remote nodes: one proxy thread per (node, calling
    // thread) runs BreakpointController::decide/holdFor/afterRemote for it,
    // so thread-local step tickets and concurrent callers (edp's server
    // threads) behave as they do in one process.
    struct Proxy {
        std::thread thread;
        std::deque<net::ControlMessage> queue;
        std::condition_variable cv;
    };
    BreakpointController *breakpoints = nullptr; // of the running run, under mutex
    int breakpointEpoch = -1;
    std::vector<int> breakpointRankOfNode; // node id -> rank in breakpointEpoch
    std::map<std::pair<int, std::uint64_t>, std::unique_ptr<Proxy>> proxies;
    bool proxiesStopping = false;

    // coordinator_accept.cpp: the accept thread and each handshake's.
    void acceptLoop();
    void reapHandshakes(bool all); // join finished handshakes (all: every one, waiting)
    void refuse(const std::string &from, const std::string &reason);
    static void checkHello(const net::ControlMessage &hello);
    Conn *admit(int fd, const std::string &from); // the node's connection when it joined
    // A connection whose hello said "viewer" goes to the hub; a watch token's
    // connection that asks to join as a node is refused. True when handled.
    bool admitViewer(std::unique_ptr<net::ControlChannel> &channel, const net::ControlMessage &hello,
                     bool watchToken, const std::string &from);
    void greet(Conn *c);

    // coordinator_readers.cpp: what nodes send, and when they are lost.
    void readLoop(Conn *c);
    void monitorLoop();
    void ping(Conn &c);
    void markLost(Conn &c, const std::string &reason);

    // coordinator_trace.cpp
    void forwardTrace(Conn &from, const net::ControlMessage &m);

    // coordinator_breakpoints.cpp
    void dispatchToProxy(int node, net::ControlMessage m);
    std::optional<net::ControlMessage> proxyNext(Proxy *p);
    void proxyLoop(int node, Proxy *p);
    void stopProxies(); // end of a run's epoch: release held proxies and join them
    // A pause began (true) or ended: every node of the epoch holds its data
    // plane's receive timeouts meanwhile (`hold_waits`; node_agent.cpp).
    void holdWaits(bool held);

    // coordinator.cpp: used by every thread.
    void log(const std::string &text);
    Conn &conn(int id) { return *conns[std::size_t(id)]; }
    bool send(int id, const QJsonObject &json, const QByteArray &blob = {});
    std::optional<Event> nextEvent(Clock::time_point deadline); // nullopt at the deadline
    std::string dataAddressFor(const Conn &peer, const Conn &recipient) const;
    std::string glooBindAddressFor(const Conn &node, const std::vector<int> &members) const;
};

} // namespace smol::engine
