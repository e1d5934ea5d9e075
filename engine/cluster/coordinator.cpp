#include "coordinator.h"

#include "config_json.h"
#include "state_blob.h"
#include "telemetry.h"

#include "engine/breakpoints.h"
#include "engine/checkpoint_file.h"
#include "engine/session/session_events.h"
#include "engine/model.h"
#include "engine/strategy.h"
#include "net/clock_sync.h"
#include "net/control_channel.h"
#include "net/errors.h"
#include "net/socket_util.h"

#include <QJsonArray>
#include <QJsonDocument>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <numeric>
#include <poll.h>
#include <set>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

namespace smol::engine {

const char *clusterNodeStateName(ClusterNode::State state)
{
    switch (state) {
    case ClusterNode::State::Idle:
        return "idle";
    case ClusterNode::State::Running:
        return "running";
    case ClusterNode::State::Lost:
        return "lost";
    }
    return "?";
}

namespace {

using Clock = std::chrono::steady_clock;

// After the user's stop, how long run() waits for the nodes to report their
// abort before it returns anyway.
constexpr std::chrono::milliseconds kStopGrace{1000};

std::int64_t bigInt(const QJsonValue &v)
{
    return v.isString() ? v.toString().toLongLong() : std::int64_t(v.toDouble());
}

NodeMemory memoryFromJson(const QJsonObject &o)
{
    NodeMemory m;
    m.params = std::int64_t(o.value(QStringLiteral("params")).toDouble());
    m.grads = std::int64_t(o.value(QStringLiteral("grads")).toDouble());
    m.optimizer = std::int64_t(o.value(QStringLiteral("optimizer")).toDouble());
    m.activations = std::int64_t(o.value(QStringLiteral("activations")).toDouble());
    m.comm = std::int64_t(o.value(QStringLiteral("comm")).toDouble());
    m.live = std::int64_t(o.value(QStringLiteral("live")).toDouble());
    m.peak = std::int64_t(o.value(QStringLiteral("peak")).toDouble());
    return m;
}

std::vector<std::int64_t> intVector(const QJsonValue &v)
{
    std::vector<std::int64_t> out;
    for (const QJsonValue &x : v.toArray())
        out.push_back(std::int64_t(x.toDouble()));
    return out;
}

std::int64_t paramCountOf(const ModelConfig &model)
{
    std::int64_t n = 0;
    for (const auto &[name, p] : makeModel(model)->namedParameters())
        n += p.numel();
    return n;
}

struct Event {
    int node = -1; // -1 with stop: the user's stop
    bool stop = false;
    bool lost = false;
    std::string reason;
    net::ControlMessage message;
};

// Steps as the nodes report them; a step is complete when every rank of
// the epoch that ran it reported (asynchronous runs: when rank 0 did).
class StepAggregator {
public:
    StepAggregator(std::int64_t steps, std::int64_t samplesPerStep, bool leaderPaced, TrainObserver *observer)
        : m_curve(std::size_t(steps), std::nan("")), m_samplesPerStep(samplesPerStep), m_leaderPaced(leaderPaced),
          m_observer(observer), m_start(Clock::now()) {}

    void beginEpoch(int world, std::int64_t firstStep)
    {
        m_world = world;
        m_pending.clear();
        m_latest.assign(std::size_t(world), NodeMemory{});
        m_firstStep = firstStep;
        for (std::size_t k = std::size_t(firstStep); k < m_curve.size(); ++k)
            m_curve[k] = std::nan("");
    }

    void report(int rank, std::int64_t step, double loss, const NodeMemory &mem)
    {
        if (rank < 0 || rank >= m_world || step < 0 || step >= std::int64_t(m_curve.size()))
            return;
        m_latest[std::size_t(rank)] = mem;
        m_lastMemory = m_latest;
        if (m_leaderPaced && rank != 0)
            return;
        Pending &p = m_pending[step];
        if (p.memory.empty())
            p.memory.assign(std::size_t(m_world), NodeMemory{});
        p.memory[std::size_t(rank)] = mem;
        if (!std::isnan(loss))
            p.losses.push_back(loss);
        if (!m_leaderPaced && ++p.count < m_world)
            return;
        StepReport r;
        r.step = step;
        r.loss = p.losses.empty() ? std::nan("")
                                  : std::accumulate(p.losses.begin(), p.losses.end(), 0.0) / double(p.losses.size());
        r.seconds = std::chrono::duration<double>(Clock::now() - m_start).count();
        r.samplesPerS = r.seconds > 0 ? double((step + 1 - m_resumedAt) * m_samplesPerStep) / r.seconds : 0;
        r.memory = m_leaderPaced ? m_latest : p.memory;
        m_curve[std::size_t(step)] = r.loss;
        m_pending.erase(step);
        if (m_observer)
            m_observer->onStep(r);
    }
    void setResumedAt(std::int64_t step) { m_resumedAt = step; }
    const std::vector<double> &curve() const { return m_curve; }
    const std::vector<NodeMemory> &lastMemory() const { return m_lastMemory; }

private:
    struct Pending {
        int count = 0;
        std::vector<double> losses;
        std::vector<NodeMemory> memory;
    };
    std::vector<double> m_curve;
    std::int64_t m_samplesPerStep;
    bool m_leaderPaced;
    TrainObserver *m_observer;
    Clock::time_point m_start;
    int m_world = 0;
    std::int64_t m_firstStep = 0;
    std::int64_t m_resumedAt = 0;
    std::map<std::int64_t, Pending> m_pending;
    std::vector<NodeMemory> m_latest;
    std::vector<NodeMemory> m_lastMemory;
};

} // namespace

struct Coordinator::Private {
    struct Conn {
        ClusterNode info;
        std::string coordinatorAddress; // this process's address as the node reached it
        std::unique_ptr<net::ControlChannel> channel;
        std::thread reader;
        net::ClockEstimator clock;
        Clock::time_point lastSeen;
    };

    CoordinatorOptions options;
    int listenFd = -1;
    std::uint16_t port = 0;
    std::atomic<bool> stop{false};
    std::atomic<bool> shuttingDown{false}; // nodes told to exit: their goodbyes are not losses
    std::thread acceptThread;
    std::thread monitorThread;

    mutable std::mutex mutex; // guards conns, events, logSink, epochOffsets, traceEpoch
    std::condition_variable changed;
    std::vector<std::unique_ptr<Conn>> conns; // by id
    std::vector<std::thread> handshakes;
    std::deque<Event> events;
    std::function<void(const std::string &)> logSink;
    net::TraceSink *traceSink = nullptr;
    SessionEventSink *eventSink = nullptr; // the running run's, under mutex
    std::function<void(int, const std::vector<std::string> &)> gatheredSink;
    int traceEpoch = -1;
    std::vector<int> epochNodeOfRank; // rank -> node id, current epoch
    int epochCounter = 0;

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
    std::vector<int> breakpointRankOfNode;       // node id -> rank in breakpointEpoch
    std::map<std::pair<int, std::uint64_t>, std::unique_ptr<Proxy>> proxies;
    bool proxiesStopping = false;

    void dispatchToProxy(int node, net::ControlMessage m)
    {
        const std::uint64_t caller = m.json.value(QStringLiteral("caller")).toString().toULongLong();
        {
            std::lock_guard lock(mutex);
            const bool current = breakpoints && !proxiesStopping &&
                                 m.json.value(QStringLiteral("epoch")).toInt() == breakpointEpoch;
            if (current) {
                auto &p = proxies[{node, caller}];
                if (!p) {
                    p = std::make_unique<Proxy>();
                    Proxy *raw = p.get();
                    p->thread = std::thread([this, node, raw] { proxyLoop(node, raw); });
                }
                p->queue.push_back(std::move(m));
                p->cv.notify_all();
                return;
            }
        }
        // A collective of an ended epoch or run: let it through.
        if (m.type() != "coll_after")
            send(node, QJsonObject{{"type", "coll_go"}, {"epoch", m.json.value(QStringLiteral("epoch"))},
                                   {"call", m.json.value(QStringLiteral("call"))}});
    }

    // The next message for this proxy; nullopt when proxies are stopping.
    std::optional<net::ControlMessage> proxyNext(Proxy *p)
    {
        std::unique_lock lock(mutex);
        p->cv.wait(lock, [&] { return proxiesStopping || !p->queue.empty(); });
        if (p->queue.empty())
            return std::nullopt;
        net::ControlMessage m = std::move(p->queue.front());
        p->queue.pop_front();
        return m;
    }

    static net::CollectiveInfo infoFrom(const QJsonObject &o, void *data)
    {
        net::CollectiveInfo info;
        const int kind = o.value(QStringLiteral("kind")).toInt();
        info.kind = net::isValidCollectiveKind(std::uint8_t(kind)) ? net::CollectiveKind(kind) : net::CollectiveKind::None;
        info.seq = o.value(QStringLiteral("seq")).toString().toULongLong();
        info.name = o.value(QStringLiteral("name")).toString().toStdString();
        info.rank = o.value(QStringLiteral("rank")).toInt();
        info.worldSize = o.value(QStringLiteral("world")).toInt();
        info.peer = o.value(QStringLiteral("peer")).toInt();
        const int dtype = o.value(QStringLiteral("dtype")).toInt();
        info.buffer.dtype = net::isValidDType(std::uint8_t(dtype)) ? net::DType(dtype) : net::DType::UInt8;
        info.buffer.count = std::size_t(o.value(QStringLiteral("count")).toDouble());
        const QJsonArray shape = o.value(QStringLiteral("shape")).toArray();
        info.buffer.shape.ndim = std::uint8_t(std::min<qsizetype>(shape.size(), net::kMaxDims));
        for (int d = 0; d < info.buffer.shape.ndim; ++d)
            info.buffer.shape.dims[std::size_t(d)] = std::int64_t(shape[d].toDouble());
        info.buffer.data = data;
        return info;
    }

    void proxyLoop(int node, Proxy *p)
    {
        BreakpointController *ctl = nullptr;
        int rank = -1;
        {
            std::lock_guard lock(mutex);
            ctl = breakpoints;
        }
        while (std::optional<net::ControlMessage> m = proxyNext(p)) {
            const QJsonValue epoch = m->json.value(QStringLiteral("epoch"));
            const QJsonValue call = m->json.value(QStringLiteral("call"));
            const std::int64_t step = std::int64_t(m->json.value(QStringLiteral("step")).toDouble());
            rank = m->json.value(QStringLiteral("rank")).toInt();
            if (m->type() == "coll_after") {
                net::CollectiveInfo info = infoFrom(m->json, m->blob.data());
                if (m->blob.size() == qsizetype(info.buffer.bytes()))
                    ctl->afterRemote(rank, step, info);
                continue;
            }
            if (m->type() != "coll")
                continue;
            const net::CollectiveInfo probe = infoFrom(m->json, nullptr);
            const std::uint64_t pauseId = ctl->decide(rank, step, probe);
            if (pauseId == 0) {
                send(node, QJsonObject{{"type", "coll_go"}, {"epoch", epoch}, {"call", call}});
                continue;
            }
            send(node, QJsonObject{{"type", "coll_hold"}, {"epoch", epoch}, {"call", call}});
            std::optional<net::ControlMessage> buffer = proxyNext(p);
            if (!buffer)
                break;
            net::CollectiveInfo info = infoFrom(m->json, buffer->blob.data());
            std::function<void(int, const std::vector<std::string> &)> gatheredTo;
            {
                std::lock_guard lock(mutex);
                gatheredTo = gatheredSink;
            }
            if (gatheredTo) {
                std::vector<std::string> params;
                for (const QJsonValue &v : buffer->json.value(QStringLiteral("gathered")).toArray())
                    params.push_back(v.toString().toStdString());
                gatheredTo(rank, params);
            }
            bool stepped = false;
            if (buffer->type() == "coll_buffer" && buffer->blob.size() == qsizetype(info.buffer.bytes()))
                stepped = ctl->holdFor(pauseId, rank, step, info); // the user's edits land in buffer->blob
            send(node, QJsonObject{{"type", "coll_go"}, {"epoch", epoch}, {"call", call}, {"stepped", stepped}},
                 buffer->blob);
        }
    }

    // End of a run's epoch: release held proxies and join them.
    void stopProxies()
    {
        std::map<std::pair<int, std::uint64_t>, std::unique_ptr<Proxy>> stopping;
        BreakpointController *ctl = nullptr;
        {
            std::lock_guard lock(mutex);
            proxiesStopping = true;
            ctl = breakpoints;
            for (auto &[key, p] : proxies)
                p->cv.notify_all();
        }
        if (ctl)
            ctl->abort(); // holdFor() returns
        {
            std::lock_guard lock(mutex);
            stopping.swap(proxies);
        }
        for (auto &[key, p] : stopping)
            p->thread.join();
        std::lock_guard lock(mutex);
        proxiesStopping = false;
    }

    void log(const std::string &text)
    {
        std::function<void(const std::string &)> sink;
        SessionEventSink *events = nullptr;
        {
            std::lock_guard lock(mutex);
            sink = logSink;
            events = eventSink;
        }
        if (sink)
            sink(text);
        if (events)
            events->onLog(LogLine{net::monotonicNs(), -1, text});
    }

    void acceptLoop()
    {
        while (!stop) {
            pollfd p{listenFd, POLLIN, 0};
            if (::poll(&p, 1, 200) <= 0)
                continue;
            const int fd = ::accept4(listenFd, nullptr, nullptr, SOCK_CLOEXEC);
            if (fd < 0)
                continue;
            std::lock_guard lock(mutex);
            handshakes.emplace_back([this, fd] { admit(fd); });
        }
    }

    void admit(int fd)
    {
        int owned = fd;
        std::unique_ptr<net::ControlChannel> channel;
        std::string from = "?";
        try {
            net::sock::tuneDataSocket(owned);
            channel = std::make_unique<net::ControlChannel>(owned);
            from = channel->peerAddress();
            net::ControlChannel::acceptHandshake(fd, options.token, std::chrono::seconds(5));
        } catch (const std::exception &e) {
            log("refused a node from " + from + ": " + e.what());
            return; // the channel's destructor closes the socket
        }
        net::ControlMessage hello;
        try {
            // The first message must be hello, within the handshake's time.
            pollfd p{fd, POLLIN, 0};
            if (::poll(&p, 1, 5000) <= 0)
                throw std::runtime_error("no hello within 5 s");
            hello = channel->receive();
            if (hello.type() != "hello")
                throw std::runtime_error("expected hello, got '" + hello.type() + "'");
            const QJsonValue advertise = hello.json.value(QStringLiteral("advertise"));
            if (!advertise.isUndefined() &&
                (!advertise.isString() || !net::sock::isPlausibleHost(advertise.toString().toStdString())))
                throw std::runtime_error("its advertised address is not a host name or IPv4 address");
        } catch (const std::exception &e) {
            log("refused a node from " + from + ": " + e.what());
            return;
        }
        Conn *c = nullptr;
        {
            std::lock_guard lock(mutex);
            if (stop)
                return;
            auto conn = std::make_unique<Conn>();
            conn->info.id = int(conns.size());
            conn->info.name = hello.json.value(QStringLiteral("name")).toString().toStdString();
            conn->info.host = from;
            conn->info.advertise = hello.json.value(QStringLiteral("advertise")).toString().toStdString();
            conn->coordinatorAddress = channel->localAddress();
            conn->info.pid = std::int64_t(hello.json.value(QStringLiteral("pid")).toDouble());
            if (conn->info.name.empty())
                conn->info.name = "node" + std::to_string(conn->info.id);
            conn->lastSeen = Clock::now();
            conn->channel = std::move(channel);
            c = conn.get();
            conns.push_back(std::move(conn));
            c->reader = std::thread([this, c] { readLoop(c); });
        }
        log("node " + std::to_string(c->info.id) + " '" + c->info.name + "' joined from " + from);
        try {
            c->channel->send(QJsonObject{{"type", "welcome"}, {"node", c->info.id}});
            for (int i = 0; i < 8 && !stop; ++i) { // a burst of pings for a first clock estimate
                ping(*c);
                std::this_thread::sleep_for(std::chrono::milliseconds(15));
            }
        } catch (const std::exception &e) {
            markLost(*c, std::string("control connection failed: ") + e.what());
        }
        changed.notify_all();
    }

    void ping(Conn &c)
    {
        c.channel->send(QJsonObject{{"type", "ping"}, {"t0", QString::number(net::monotonicNs())}},
                        {}, std::chrono::seconds(2));
    }

    void readLoop(Conn *c)
    {
        try {
            for (;;) {
                net::ControlMessage m = c->channel->receive();
                const std::int64_t t1 = net::monotonicNs();
                const std::string type = m.type();
                {
                    std::lock_guard lock(mutex);
                    c->lastSeen = Clock::now();
                    if (type == "pong") {
                        c->clock.addSample(bigInt(m.json.value(QStringLiteral("t0"))),
                                           bigInt(m.json.value(QStringLiteral("tn"))), t1);
                        c->info.clockValid = c->clock.valid();
                        c->info.clockOffsetNs = c->clock.offsetNs();
                        c->info.clockErrorNs = c->clock.errorNs();
                        continue;
                    }
                    if (type == "hb")
                        continue;
                }
                if (type == "trace") {
                    forwardTrace(m);
                    continue;
                }
                if (type == "coll" || type == "coll_buffer" || type == "coll_after") {
                    dispatchToProxy(c->info.id, std::move(m));
                    continue;
                }
                if (type == "log") {
                    log("node " + std::to_string(c->info.id) + " '" + c->info.name +
                        "': " + m.json.value(QStringLiteral("text")).toString().left(1000).toStdString());
                    continue;
                }
                std::lock_guard lock(mutex);
                events.push_back(Event{c->info.id, false, false, {}, std::move(m)});
                changed.notify_all();
            }
        } catch (const std::exception &e) {
            markLost(*c, e.what());
        }
    }

    void forwardTrace(const net::ControlMessage &m)
    {
        std::vector<net::FrameEvent> batch;
        try {
            batch = unpackEvents(m.blob);
        } catch (const std::exception &e) {
            log(std::string("dropped a malformed trace batch: ") + e.what());
            return;
        }
        std::lock_guard lock(mutex);
        if ((!traceSink && !eventSink) || m.json.value(QStringLiteral("epoch")).toInt() != traceEpoch)
            return;
        if (eventSink) {
            // Collective and pause spans, on the sending node's clock.
            const int rank = m.json.value(QStringLiteral("rank")).toInt(-1);
            const std::int64_t offset = rank >= 0 && rank < int(epochNodeOfRank.size())
                                            ? conns[std::size_t(epochNodeOfRank[std::size_t(rank)])]->clock.offsetNs()
                                            : 0;
            for (const QJsonValue &v : m.json.value(QStringLiteral("spans")).toArray()) {
                const QJsonArray a = v.toArray();
                if (a.size() != 8)
                    continue;
                SpanEvent s;
                s.node = rank;
                const int kind0 = a[0].toInt();
                if (kind0 < 0 || kind0 >= SpanEvent::kKinds)
                    continue;
                s.kind = SpanEvent::Kind(kind0);
                s.name = a[1].toString().toStdString();
                s.startNs = a[2].toString().toLongLong() - offset;
                s.endNs = a[3].toString().toLongLong() - offset;
                s.step = std::int64_t(a[4].toDouble());
                const int kind = a[5].toInt();
                s.collective = net::isValidCollectiveKind(std::uint8_t(kind)) ? net::CollectiveKind(kind)
                                                                              : net::CollectiveKind::None;
                s.seq = a[6].toString().toULongLong();
                s.bytes = std::uint64_t(a[7].toDouble());
                eventSink->onSpan(s);
            }
        }
        auto offsetOf = [&](int rank) -> std::int64_t {
            if (rank < 0 || rank >= int(epochNodeOfRank.size()))
                return 0;
            return conns[std::size_t(epochNodeOfRank[std::size_t(rank)])]->clock.offsetNs();
        };
        for (net::FrameEvent e : batch) {
            // Send side: both stamps are the sender's clock. Receive side:
            // sendStart is the sender's (from the frame header), recvComplete
            // the receiver's.
            const std::int64_t senderOffset = offsetOf(e.src);
            e.sendStartNs -= senderOffset;
            if (e.side == net::FrameEvent::Side::Send) {
                e.sendCompleteNs -= senderOffset;
            } else {
                e.recvCompleteNs -= offsetOf(e.dst);
            }
            if (traceSink)
                traceSink->onFrame(e);
            if (eventSink)
                eventSink->onFrame(e);
        }
    }

    void markLost(Conn &c, const std::string &reason)
    {
        {
            std::lock_guard lock(mutex);
            if (c.info.state == ClusterNode::State::Lost)
                return;
            c.info.state = ClusterNode::State::Lost;
            c.info.lostReason = shuttingDown ? "shut down" : reason;
            events.push_back(Event{c.info.id, false, true, reason, {}});
        }
        c.channel->close();
        changed.notify_all();
        if (!shuttingDown)
            log("node " + std::to_string(c.info.id) + " '" + c.info.name + "' lost: " + reason);
    }

    void monitorLoop()
    {
        auto nextPing = Clock::now() + options.pingInterval;
        while (!stop) {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            std::vector<Conn *> live;
            std::vector<std::pair<Conn *, std::string>> silent;
            {
                std::lock_guard lock(mutex);
                for (auto &c : conns) {
                    if (c->info.state == ClusterNode::State::Lost)
                        continue;
                    const auto quiet = Clock::now() - c->lastSeen;
                    if (quiet > options.heartbeatTimeout)
                        silent.emplace_back(
                            c.get(), "no heartbeat for " +
                                         QString::number(std::chrono::duration<double>(quiet).count(), 'f', 1)
                                             .toStdString() +
                                         " s");
                    else
                        live.push_back(c.get());
                }
            }
            for (auto &[c, why] : silent)
                markLost(*c, why);
            if (Clock::now() >= nextPing) {
                nextPing += options.pingInterval;
                for (Conn *c : live) {
                    try {
                        ping(*c);
                    } catch (const std::exception &e) {
                        markLost(*c, std::string("control connection failed: ") + e.what());
                    }
                }
            }
        }
    }

    Conn &conn(int id) { return *conns[std::size_t(id)]; }

    // The data-plane address `recipient` dials to reach `peer` (under
    // mutex). docs/runtime.md, "Which address a node advertises":
    //   1. the address the peer advertised (--advertise), if any;
    //   2. a peer on this machine (it joined over loopback, like the
    //      window's own nodes) is reached where the recipient reaches this
    //      coordinator, when the recipient is on another machine;
    //   3. otherwise the address the peer connected from.
    std::string dataAddressFor(const Conn &peer, const Conn &recipient) const
    {
        if (!peer.info.advertise.empty())
            return peer.info.advertise;
        if (net::sock::isLoopbackHost(peer.info.host) && !net::sock::isLoopbackHost(recipient.info.host))
            return recipient.coordinatorAddress;
        return peer.info.host;
    }

    bool send(int id, const QJsonObject &json, const QByteArray &blob = {})
    {
        Conn &c = conn(id);
        try {
            c.channel->send(json, blob);
            return true;
        } catch (const std::exception &e) {
            markLost(c, std::string("control connection failed: ") + e.what());
            return false;
        }
    }

    // The next event, or nullopt at the deadline.
    std::optional<Event> nextEvent(Clock::time_point deadline)
    {
        std::unique_lock lock(mutex);
        if (!changed.wait_until(lock, deadline, [&] { return !events.empty(); }))
            return std::nullopt;
        Event e = std::move(events.front());
        events.pop_front();
        return e;
    }
};

Coordinator::Coordinator(const CoordinatorOptions &options) : d(std::make_unique<Private>())
{
    if (options.token.empty())
        throw std::invalid_argument("the cluster needs a token");
    d->options = options;
    d->listenFd = net::sock::listenTcp(options.bindAddress, options.port, &d->port);
    d->acceptThread = std::thread([this] { d->acceptLoop(); });
    d->monitorThread = std::thread([this] { d->monitorLoop(); });
}

Coordinator::~Coordinator()
{
    d->stop = true;
    if (d->acceptThread.joinable())
        d->acceptThread.join();
    if (d->monitorThread.joinable())
        d->monitorThread.join();
    net::sock::closeFd(d->listenFd);
    std::vector<std::thread> handshakes;
    {
        std::lock_guard lock(d->mutex);
        handshakes.swap(d->handshakes);
    }
    for (auto &t : handshakes)
        t.join();
    for (auto &c : d->conns)
        c->channel->close();
    for (auto &c : d->conns)
        if (c->reader.joinable())
            c->reader.join();
}

std::uint16_t Coordinator::port() const { return d->port; }

void Coordinator::setLogSink(std::function<void(const std::string &)> sink)
{
    std::lock_guard lock(d->mutex);
    d->logSink = std::move(sink);
}

void Coordinator::setGatheredSink(std::function<void(int, const std::vector<std::string> &)> sink)
{
    std::lock_guard lock(d->mutex);
    d->gatheredSink = std::move(sink);
}

void Coordinator::setTraceSink(net::TraceSink *sink)
{
    std::lock_guard lock(d->mutex);
    d->traceSink = sink;
}

bool Coordinator::waitForNodes(int n, std::chrono::milliseconds timeout)
{
    std::unique_lock lock(d->mutex);
    return d->changed.wait_for(lock, timeout, [&] {
        return std::count_if(d->conns.begin(), d->conns.end(), [](const auto &c) {
                   return c->info.state != ClusterNode::State::Lost;
               }) >= n;
    });
}

std::vector<ClusterNode> Coordinator::nodes() const
{
    std::lock_guard lock(d->mutex);
    std::vector<ClusterNode> out;
    for (const auto &c : d->conns)
        out.push_back(c->info);
    return out;
}

void Coordinator::kill(int nodeId)
{
    {
        std::lock_guard lock(d->mutex);
        if (nodeId < 0 || nodeId >= int(d->conns.size()))
            throw std::invalid_argument("no node " + std::to_string(nodeId));
    }
    d->log("killing node " + std::to_string(nodeId));
    d->send(nodeId, QJsonObject{{"type", "kill"}});
}

bool Coordinator::shutdownNode(int nodeId)
{
    {
        std::lock_guard lock(d->mutex);
        if (nodeId < 0 || nodeId >= int(d->conns.size()) ||
            d->conns[std::size_t(nodeId)]->info.state != ClusterNode::State::Idle)
            return false;
        d->conns[std::size_t(nodeId)]->info.state = ClusterNode::State::Lost; // gone, by request
        d->conns[std::size_t(nodeId)]->info.lostReason = "removed";
    }
    d->log("removing node " + std::to_string(nodeId));
    d->send(nodeId, QJsonObject{{"type", "shutdown"}});
    return true;
}

void Coordinator::stop()
{
    {
        std::lock_guard lock(d->mutex);
        d->events.push_back(Event{-1, true, false, {}, {}});
    }
    d->changed.notify_all();
}

void Coordinator::shutdownNodes()
{
    d->shuttingDown = true;
    std::vector<int> ids;
    {
        std::lock_guard lock(d->mutex);
        for (const auto &c : d->conns)
            if (c->info.state != ClusterNode::State::Lost)
                ids.push_back(c->info.id);
    }
    for (int id : ids)
        d->send(id, QJsonObject{{"type", "shutdown"}});
}

TrainSummary Coordinator::run(const TrainConfig &configIn, const ClusterRunOptions &options, TrainObserver *observer)
{
    if (configIn.backend != TrainConfig::Backend::Ours)
        throw std::invalid_argument("a cluster of node processes runs our transport only (--backend ours)");
    if (configIn.transport != net::TransportKind::Tcp)
        throw std::invalid_argument("a cluster of node processes talks TCP (--transport tcp)");
    if (options.checkpointEvery > 0 && options.checkpointDir.isEmpty())
        throw std::invalid_argument("--checkpoint-every needs --checkpoint-dir");
    TrainConfig config = configIn;
    config.model.seed = config.seed;
    {
        std::lock_guard lock(d->mutex); // a stop() between runs does not stop this one
        d->events.erase(std::remove_if(d->events.begin(), d->events.end(), [](const Event &e) { return e.stop; }),
                        d->events.end());
    }
    const std::unique_ptr<Strategy> kind = makeStrategy(config.strategy);
    const bool async = kind->isAsynchronous();
    BreakpointController *const ctl = options.breakpoints;
    SessionEventSink *const events = options.events;
    {
        std::lock_guard lock(d->mutex);
        d->breakpoints = ctl;
        d->eventSink = events;
    }
    struct ProxyGuard { // whichever way run() ends, no proxy outlives it
        Private &p;
        ~ProxyGuard()
        {
            p.stopProxies();
            std::lock_guard lock(p.mutex);
            p.breakpoints = nullptr;
            p.eventSink = nullptr;
        }
    } proxyGuard{*d};
    std::unique_ptr<TrainObserver> metricEmitter;
    if (events) {
        metricEmitter = makeMetricEmitter(events, observer);
        observer = metricEmitter.get();
    }
    if (async && (options.checkpointEvery > 0 || !options.resumeDir.isEmpty()))
        throw std::invalid_argument(config.strategy + " keeps no checkpoints (its server's updates are asynchronous)");

    // Members of the first epoch: the first idle nodes, in join order.
    std::vector<int> members;
    {
        std::lock_guard lock(d->mutex);
        for (const auto &c : d->conns)
            if (c->info.state == ClusterNode::State::Idle &&
                (options.nodes <= 0 || int(members.size()) < options.nodes))
                members.push_back(c->info.id);
    }
    if (members.empty() || (options.nodes > 0 && int(members.size()) < options.nodes))
        throw std::invalid_argument("the cluster has " + std::to_string(members.size()) + " idle node(s), the run needs " +
                                    std::to_string(std::max(1, options.nodes)));

    // The coordinator loads the data too: gpt's vocabulary, and test accuracy.
    const std::shared_ptr<const DataSource> data = loadTrainingData(config);
    const std::int64_t paramCount = paramCountOf(config.model);

    std::int64_t startStep = 0;
    TrainingState start; // undefined params: the seed's weights
    if (!options.resumeDir.isEmpty()) {
        const Checkpoint ck = readCheckpoint(options.resumeDir);
        if (std::int64_t(ck.params.size()) != paramCount)
            throw std::invalid_argument("checkpoint " + checkpointPath(options.resumeDir).toStdString() + " holds " +
                                        std::to_string(ck.params.size()) + " parameters; this model has " +
                                        std::to_string(paramCount));
        if (ck.stepsDone >= config.steps)
            throw std::invalid_argument("checkpoint is at step " + std::to_string(ck.stepsDone) +
                                        ", not before --steps " + std::to_string(config.steps));
        startStep = ck.stepsDone;
        start.params = floatsFrom(reinterpret_cast<const char *>(ck.params.data()), std::int64_t(ck.params.size()));
        if (ck.optimizerState.size() == 2 * ck.params.size()) {
            start.moments.exp = floatsFrom(reinterpret_cast<const char *>(ck.optimizerState.data()), paramCount);
            start.moments.expSq = floatsFrom(reinterpret_cast<const char *>(ck.optimizerState.data() + paramCount), paramCount);
        }
        d->log("resuming from " + checkpointPath(options.resumeDir).toStdString() + " at step " +
               std::to_string(startStep));
    }
    const QByteArray configText = QJsonDocument(configToJson(config)).toJson(QJsonDocument::Compact);

    StepAggregator board(config.steps, kind->samplesPerStep(config.globalBatch, int(members.size())), async,
                         observer);
    board.setResumedAt(startStep);
    const std::int64_t resumedAt = startStep;
    const auto runStart = Clock::now();
    int reforms = 0;
    std::set<int> lostEver;

    for (;;) {
        const int world = int(members.size());
        TrainConfig epochConfig = config;
        epochConfig.nodes = world;
        try {
            validateConfig(epochConfig);
            const int shares = kind->batchShares(world);
            if (shares < 1)
                throw std::invalid_argument(config.strategy + " needs at least 2 nodes (a server and a worker)");
            if (epochConfig.globalBatch % shares != 0)
                throw std::invalid_argument("--global-batch " + std::to_string(epochConfig.globalBatch) +
                                            " does not split evenly over " + std::to_string(shares) + " nodes");
            kind->checkContext(epochConfig.model, nodeContextOf(epochConfig, /*rank=*/0));
        } catch (const std::invalid_argument &e) {
            if (reforms == 0)
                throw;
            throw std::runtime_error("cannot re-form with " + std::to_string(world) + " node(s): " + e.what());
        }
        const int epoch = ++d->epochCounter;
        {
            std::lock_guard lock(d->mutex);
            d->traceEpoch = epoch;
            d->epochNodeOfRank = members;
            // Messages of earlier epochs are skipped by their epoch number; losses stay.
            d->breakpointEpoch = epoch;
            for (int r = 0; r < world; ++r) {
                d->conn(members[std::size_t(r)]).info.rank = r;
                d->conn(members[std::size_t(r)]).info.state = ClusterNode::State::Running;
                d->conn(members[std::size_t(r)]).info.lastError.clear();
            }
        }
        board.beginEpoch(world, startStep);
        if (ctl)
            ctl->beginRun(world);
        const QJsonObject configJson = configToJson(epochConfig);
        const QByteArray startBlob = packState(start);
        for (int r = 0; r < world; ++r)
            d->send(members[std::size_t(r)],
                    QJsonObject{{"type", "assign"},
                                {"epoch", epoch},
                                {"rank", r},
                                {"world", world},
                                {"first_step", double(startStep)},
                                {"checkpoint_every", double(options.checkpointEvery)},
                                {"recovery_every", double(options.recoveryEvery)},
                                {"breakpoints", ctl != nullptr},
                                {"record", events != nullptr},
                                {"moments", start.moments.defined()},
                                {"config", configJson}},
                    startBlob);

        // Per-epoch state.
        std::vector<std::uint16_t> ports(std::size_t(world), 0);
        std::vector<bool> listening(std::size_t(world), false), ready(std::size_t(world), false);
        std::vector<bool> finished(std::size_t(world), false), lost(std::size_t(world), false);
        std::vector<bool> failed(std::size_t(world), false); // finished by reporting a failure
        std::vector<QJsonObject> done(static_cast<std::size_t>(world));
        torch::Tensor finalParams;
        std::string firstError;
        std::int64_t bestCkptSteps = -1;
        TrainingState bestCkpt;
        std::vector<std::int64_t> stepStart(std::size_t(world), net::monotonicNs()); // per rank, for Step spans
        bool aborting = false;
        bool started = false;
        bool stopped = false;
        auto rankOf = [&](int node) {
            auto it = std::find(members.begin(), members.end(), node);
            return it == members.end() ? -1 : int(it - members.begin());
        };
        auto nameOf = [&](int rank) {
            std::lock_guard lock(d->mutex);
            return "node " + std::to_string(members[std::size_t(rank)]) + " '" +
                   d->conn(members[std::size_t(rank)]).info.name + "' (rank " + std::to_string(rank) + ")";
        };
        auto abortAll = [&] {
            if (aborting)
                return;
            aborting = true;
            if (ctl)
                ctl->abort(); // release held nodes: they are told to stop next
            for (int r = 0; r < world; ++r)
                if (!lost[std::size_t(r)] && !finished[std::size_t(r)])
                    d->send(members[std::size_t(r)], QJsonObject{{"type", "abort"}, {"epoch", epoch}});
        };
        auto allSettled = [&] {
            for (int r = 0; r < world; ++r)
                if (!lost[std::size_t(r)] && !finished[std::size_t(r)])
                    return false;
            return true;
        };
        auto phaseDeadline = Clock::now() + options.setupTimeout;

        while (!allSettled()) {
            const std::optional<Event> ev = d->nextEvent(phaseDeadline);
            if (!ev && stopped)
                break; // the user's stop: nodes that have not settled finish their abort on their own
            if (!ev) {
                // Someone is stuck in set-up (or in an abort): give up on it.
                for (int r = 0; r < world; ++r) {
                    if (lost[std::size_t(r)] || finished[std::size_t(r)] || (started && !aborting))
                        continue;
                    Private::Conn &c = d->conn(members[std::size_t(r)]);
                    d->markLost(c, "did not answer within " + std::to_string(options.setupTimeout.count() / 1000) +
                                       " s");
                    lost[std::size_t(r)] = true; // its loss event, if any, is then skipped
                    lostEver.insert(c.info.id);
                    if (firstError.empty())
                        firstError = nameOf(r) + " did not answer";
                    abortAll();
                }
                phaseDeadline = Clock::now() + options.setupTimeout;
                continue;
            }
            if (ev->stop) {
                stopped = true;
                firstError = "stopped by the user";
                abortAll();
                phaseDeadline = Clock::now() + kStopGrace; // Stop always stops, within a second
                continue;
            }
            const int r = rankOf(ev->node);
            if (r < 0)
                continue; // a node outside this epoch (a late joiner): it waits for the next re-form
            if (ev->lost) {
                if (lost[std::size_t(r)] || (finished[std::size_t(r)] && !failed[std::size_t(r)]))
                    continue;
                lost[std::size_t(r)] = true; // also after its own failure report: it will not re-form
                if (finished[std::size_t(r)]) {
                    lostEver.insert(ev->node);
                    continue;
                }
                lostEver.insert(ev->node);
                const std::string what = nameOf(r) + " lost: " + ev->reason;
                if (async && r != 0 && started) {
                    d->log(config.strategy + " trains on without rank " + std::to_string(r));
                    continue;
                }
                if (firstError.empty())
                    firstError = what;
                abortAll();
                phaseDeadline = Clock::now() + options.setupTimeout;
                continue;
            }
            const net::ControlMessage &m = ev->message;
            if (m.json.value(QStringLiteral("epoch")).toInt() != epoch)
                continue;
            const std::string type = m.type();
            if (type == "listening") {
                listening[std::size_t(r)] = true;
                ports[std::size_t(r)] = std::uint16_t(m.json.value(QStringLiteral("port")).toInt());
                if (!aborting && std::all_of(listening.begin(), listening.end(), [](bool b) { return b; })) {
                    // Each node gets the list as it can reach it (dataAddressFor).
                    std::vector<QJsonArray> peersFor(static_cast<std::size_t>(world));
                    {
                        std::lock_guard lock(d->mutex);
                        for (int q = 0; q < world; ++q)
                            for (int p = 0; p < world; ++p)
                                peersFor[std::size_t(q)].append(QJsonObject{
                                    {"host", QString::fromStdString(d->dataAddressFor(
                                                 d->conn(members[std::size_t(p)]), d->conn(members[std::size_t(q)])))},
                                    {"port", int(ports[std::size_t(p)])}});
                    }
                    for (int q = 0; q < world; ++q)
                        d->send(members[std::size_t(q)],
                                QJsonObject{{"type", "peers"}, {"epoch", epoch}, {"peers", peersFor[std::size_t(q)]}});
                    phaseDeadline = Clock::now() + options.setupTimeout;
                }
            } else if (type == "ready") {
                ready[std::size_t(r)] = true;
                if (!aborting && std::all_of(ready.begin(), ready.end(), [](bool b) { return b; })) {
                    for (int q = 0; q < world; ++q)
                        d->send(members[std::size_t(q)], QJsonObject{{"type", "start"}, {"epoch", epoch}});
                    started = true;
                    // A node's first step starts now, not when the epoch began forming.
                    std::fill(stepStart.begin(), stepStart.end(), net::monotonicNs());
                    phaseDeadline = Clock::time_point::max();
                    d->log("epoch " + std::to_string(epoch) + ": " + std::to_string(world) + " node(s) training " +
                           config.strategy + " from step " + std::to_string(startStep));
                }
            } else if (type == "step") {
                const std::int64_t k = std::int64_t(m.json.value(QStringLiteral("step")).toDouble());
                const double loss = m.json.value(QStringLiteral("loss")).toDouble(std::nan(""));
                const NodeMemory mem = memoryFromJson(m.json.value(QStringLiteral("memory")).toObject());
                if (events) {
                    std::int64_t offset = 0;
                    {
                        std::lock_guard lock(d->mutex);
                        offset = d->conn(ev->node).clock.offsetNs();
                    }
                    const std::int64_t end = bigInt(m.json.value(QStringLiteral("t"))) - offset;
                    emitStepEvents(*events, r, k, loss, mem, std::min(stepStart[std::size_t(r)], end), end);
                    stepStart[std::size_t(r)] = end;
                }
                board.report(r, k, loss, mem);
            } else if (type == "test_loss") {
                const std::int64_t k = std::int64_t(m.json.value(QStringLiteral("step")).toDouble());
                const double loss = m.json.value(QStringLiteral("loss")).toDouble(std::nan(""));
                if (events)
                    events->onMetric(MetricSample{net::monotonicNs(), k, -1, "test_loss", loss});
                if (observer)
                    observer->onTestLoss(k, loss);
            } else if (type == "checkpoint") {
                const bool moments = m.json.value(QStringLiteral("moments")).toBool();
                if (options.checkpointDir.isEmpty() || m.blob.size() != paramCount * 4 * (moments ? 3 : 1))
                    continue;
                Checkpoint ck;
                ck.stepsDone = std::int64_t(m.json.value(QStringLiteral("steps_done")).toDouble());
                ck.configJson = configText.toStdString();
                const float *floats = reinterpret_cast<const float *>(m.blob.constData());
                ck.params.assign(floats, floats + paramCount);
                if (moments)
                    ck.optimizerState.assign(floats + paramCount, floats + 3 * paramCount);
                try {
                    writeCheckpoint(options.checkpointDir, ck);
                    d->log("checkpoint at step " + std::to_string(ck.stepsDone) + " written to " +
                           checkpointPath(options.checkpointDir).toStdString());
                } catch (const std::exception &e) {
                    d->log(std::string("checkpoint not written: ") + e.what());
                }
            } else if (type == "done") {
                finished[std::size_t(r)] = true;
                if (ctl)
                    ctl->nodeFinished(r); // a pause no longer waits for it
                done[std::size_t(r)] = m.json;
                if (r == 0)
                    finalParams = unpackState(m.blob, /*hasMoments=*/false).params;
            } else if (type == "failed") {
                finished[std::size_t(r)] = true;
                failed[std::size_t(r)] = true;
                const std::int64_t steps = std::int64_t(m.json.value(QStringLiteral("ckpt_steps")).toDouble(-1));
                const bool moments = m.json.value(QStringLiteral("moments")).toBool();
                if (steps > bestCkptSteps || (steps == bestCkptSteps && moments && !bestCkpt.moments.defined())) {
                    try {
                        bestCkpt = m.blob.isEmpty() ? start : unpackState(m.blob, moments);
                        bestCkptSteps = steps;
                    } catch (const std::exception &e) {
                        d->log(nameOf(r) + " sent an unusable checkpoint: " + e.what());
                    }
                }
                const std::string error = m.json.value(QStringLiteral("error")).toString().left(2000).toStdString();
                const std::string what = nameOf(r) + ": " + error;
                if (!m.json.value(QStringLiteral("aborted")).toBool()) { // its own failure, not our abort
                    std::lock_guard lock(d->mutex);
                    d->conn(ev->node).info.lastError = error;
                }
                if (!aborting) { // the first to fail; the rest are aborted and report why they stopped
                    if (firstError.empty())
                        firstError = what;
                    abortAll();
                    phaseDeadline = Clock::now() + options.setupTimeout;
                }
            }
        }
        d->stopProxies();
        {
            std::lock_guard lock(d->mutex);
            for (int q = 0; q < world; ++q) {
                auto &info = d->conn(members[std::size_t(q)]).info;
                if (info.state == ClusterNode::State::Lost && !lost[std::size_t(q)] && failed[std::size_t(q)]) {
                    lost[std::size_t(q)] = true; // died after it reported (its loss event is still queued)
                    lostEver.insert(info.id);
                }
                if (info.state == ClusterNode::State::Running)
                    info.state = ClusterNode::State::Idle;
            }
        }

        if (stopped)
            throw std::runtime_error("stopped by the user");
        const bool anyLost = std::any_of(lost.begin(), lost.end(), [](bool b) { return b; });
        if (!aborting) { // every node finished (edp: perhaps minus lost workers)
            TrainSummary s;
            s.strategy = config.strategy;
            s.nodes = world;
            s.steps = config.steps;
            s.lossCurve = board.curve();
            s.finalLoss = s.lossCurve.empty() ? std::nan("") : s.lossCurve.back();
            if (!finalParams.defined() || finalParams.numel() != paramCount)
                throw std::runtime_error("rank 0 finished without sending its parameters");
            s.finalParams = finalParams;
            s.paramCount = finalParams.numel();
            s.paramChecksum = finalParams.to(torch::kFloat64).sum().item<double>();
            s.paramL2 = finalParams.to(torch::kFloat64).norm().item<double>();
            s.seconds = std::chrono::duration<double>(Clock::now() - runStart).count();
            const std::int64_t samples = (config.steps - resumedAt) * kind->samplesPerStep(config.globalBatch, world);
            s.samplesPerS = s.seconds > 0 ? double(samples) / s.seconds : 0;
            std::map<std::string, std::vector<double>> stats;
            for (int q = 0; q < world; ++q) {
                if (lost[std::size_t(q)])
                    s.lostRanks.push_back(q);
                const QJsonObject &o = done[std::size_t(q)];
                s.bytesSentPerNode.push_back(std::uint64_t(o.value(QStringLiteral("bytes_sent")).toDouble()));
                s.peakBytesPerNode.push_back(std::int64_t(o.value(QStringLiteral("peak")).toDouble()));
                s.memoryPerNode.push_back(memoryFromJson(o.value(QStringLiteral("memory")).toObject()));
                const QJsonObject st = o.value(QStringLiteral("stats")).toObject();
                for (auto it = st.begin(); it != st.end(); ++it)
                    stats[it.key().toStdString()].push_back(it.value().toDouble());
            }
            for (const auto &[key, values] : stats)
                s.extra[key] = std::accumulate(values.begin(), values.end(), 0.0) / double(values.size());
            const QJsonObject as = done[0].value(QStringLiteral("async")).toObject();
            if (!as.isEmpty()) {
                s.async.updates = std::int64_t(as.value(QStringLiteral("updates")).toDouble());
                s.async.maxStaleness = std::int64_t(as.value(QStringLiteral("max_staleness")).toDouble());
                s.async.pushes = intVector(as.value(QStringLiteral("pushes")));
                s.async.discarded = intVector(as.value(QStringLiteral("discarded")));
                s.async.waits = intVector(as.value(QStringLiteral("waits")));
                s.async.joinedAt = intVector(as.value(QStringLiteral("joined_at")));
                s.async.lost = intVector(as.value(QStringLiteral("lost")));
                s.async.stalenessHistogram = intVector(as.value(QStringLiteral("histogram")));
            }
            s.extra["reforms"] = reforms;
            s.extra["nodes_lost"] = double(lostEver.size());
            s.testAccuracy = testAccuracyOf(config, *data, finalParams);
            if (events && s.testAccuracy >= 0)
                events->onMetric(MetricSample{net::monotonicNs(), config.steps - 1, -1, "test_accuracy", s.testAccuracy});
            return s;
        }
        if (!anyLost)
            throw std::runtime_error(firstError.empty() ? "the run was aborted" : firstError);
        if (async)
            throw std::runtime_error(firstError + " (" + config.strategy +
                                     " cannot re-form without its server)");
        // Re-form: survivors plus nodes that joined meanwhile, from the newest checkpoint.
        if (++reforms > options.maxReforms)
            throw std::runtime_error(firstError + " (gave up after " + std::to_string(options.maxReforms) +
                                     " re-formations)");
        std::vector<int> next;
        {
            std::lock_guard lock(d->mutex);
            for (int q = 0; q < world; ++q)
                if (!lost[std::size_t(q)] && d->conn(members[std::size_t(q)]).info.state != ClusterNode::State::Lost)
                    next.push_back(members[std::size_t(q)]);
            for (const auto &c : d->conns)
                if (c->info.state == ClusterNode::State::Idle &&
                    std::find(members.begin(), members.end(), c->info.id) == members.end())
                    next.push_back(c->info.id); // joined during the epoch
        }
        if (next.empty())
            throw std::runtime_error(firstError + " (no node left to re-form with)");
        if (bestCkptSteps >= 0) {
            startStep = bestCkptSteps;
            start = bestCkpt;
        }
        d->log("re-forming (attempt " + std::to_string(reforms) + " of " + std::to_string(options.maxReforms) +
               "): " + firstError + "; " + std::to_string(next.size()) + " node(s) resume from step " +
               std::to_string(startStep));
        if (observer)
            observer->onReform(reforms, options.maxReforms, int(next.size()), startStep, firstError);
        members = next;
    }
}

} // namespace smol::engine
