// Coordinator's insides, shared by coordinator.cpp (admission, readers,
// heartbeats, breakpoint proxies, the public calls) and coordinator_run.cpp
// (the run's state machine). Not part of the engine's interface.
#pragma once

#include "admission.h"
#include "coordinator.h"
#include "rendezvous_board.h"
#include "telemetry.h"

#include "engine/breakpoints.h"
#include "engine/session/session_events.h"
#include "net/clock_sync.h"
#include "net/control_channel.h"
#include "net/errors.h"
#include "net/socket_util.h"

#include <QJsonArray>
#include <QJsonObject>

#include <arpa/inet.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <poll.h>
#include <set>
#include <sys/socket.h>
#include <thread>

namespace smol::engine {
namespace coord {

using Clock = std::chrono::steady_clock;

inline std::int64_t bigInt(const QJsonValue &v)
{
    return v.isString() ? v.toString().toLongLong() : std::int64_t(v.toDouble());
}

inline NodeMemory memoryFromJson(const QJsonObject &o)
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

inline std::vector<std::int64_t> intVector(const QJsonValue &v)
{
    std::vector<std::int64_t> out;
    for (const QJsonValue &x : v.toArray())
        out.push_back(std::int64_t(x.toDouble()));
    return out;
}

struct Event {
    int node = -1; // -1 with stop: the user's stop
    bool stop = false;
    bool lost = false;
    std::string reason;
    net::ControlMessage message;
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
    int traceEpoch = -1;
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
        info.receiving = o.value(QStringLiteral("receiving")).toBool();
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

    // A hello's fields, each of the type it must have (one line otherwise).
    static void checkHello(const net::ControlMessage &hello)
    {
        if (hello.type() != "hello")
            throw std::runtime_error("expected hello, got '" + printableText(hello.type(), 32) + "'");
        auto optional = [&](const char *field, bool (QJsonValue::*is)() const, const char *what) {
            const QJsonValue v = hello.json.value(QLatin1String(field));
            if (!v.isUndefined() && !(v.*is)())
                throw std::runtime_error(std::string("hello's '") + field + "' is not " + what);
        };
        optional("name", &QJsonValue::isString, "a string");
        optional("host", &QJsonValue::isString, "a string");
        optional("pid", &QJsonValue::isDouble, "a number");
        optional("version", &QJsonValue::isDouble, "a number");
        const QJsonValue advertise = hello.json.value(QStringLiteral("advertise"));
        if (!advertise.isUndefined() &&
            (!advertise.isString() || !net::sock::isPlausibleHost(advertise.toString().toStdString())))
            throw std::runtime_error("its advertised address is not a host name or IPv4 address");
    }

    void acceptLoop()
    {
        while (!stop) {
            reapHandshakes(/*all=*/false);
            pollfd p{listenFd, POLLIN, 0};
            if (::poll(&p, 1, 200) <= 0)
                continue;
            sockaddr_in peer{};
            socklen_t len = sizeof peer;
            const int fd = ::accept4(listenFd, reinterpret_cast<sockaddr *>(&peer), &len, SOCK_CLOEXEC);
            if (fd < 0)
                continue;
            char text[INET_ADDRSTRLEN] = {};
            ::inet_ntop(AF_INET, &peer.sin_addr, text, sizeof text);
            const std::string from = text;
            if (!gate.tryEnter(from)) {
                int closing = fd;
                net::sock::closeFd(closing);
                refuse(from, "too many handshakes in progress");
                continue;
            }
            Handshake &h = handshakes.emplace_back();
            h.thread = std::thread([this, fd, from, &h] {
                Conn *joined = admit(fd, from);
                gate.leave(from); // the gate bounds handshakes, not the nodes that passed one
                if (joined)
                    greet(joined);
                h.done = true;
            });
        }
    }

    // Join finished handshakes (all: every one, waiting for them).
    void reapHandshakes(bool all)
    {
        for (auto it = handshakes.begin(); it != handshakes.end();) {
            if (!all && !it->done) {
                ++it;
                continue;
            }
            it->thread.join();
            it = handshakes.erase(it);
        }
    }

    // One log line per address and reason per 10 s (RefusalLog).
    void refuse(const std::string &from, const std::string &reason)
    {
        const std::string line = refusals.refuse(from, reason, Clock::now());
        if (!line.empty())
            log(line);
    }

    // The handshake and hello; the node's connection when it joined.
    Conn *admit(int fd, const std::string &from)
    {
        int owned = fd;
        std::unique_ptr<net::ControlChannel> channel;
        try {
            net::sock::tuneDataSocket(owned);
            channel = std::make_unique<net::ControlChannel>(owned);
            net::ControlChannel::acceptHandshake(fd, options.token, std::chrono::seconds(5));
        } catch (const std::exception &e) {
            refuse(from, e.what());
            return nullptr; // the channel's destructor closes the socket
        }
        net::ControlMessage hello;
        try {
            // The first message must be hello, within the handshake's time.
            pollfd p{fd, POLLIN, 0};
            if (::poll(&p, 1, 5000) <= 0)
                throw std::runtime_error("no hello within 5 s");
            hello = channel->receive();
            checkHello(hello);
        } catch (const std::exception &e) {
            refuse(from, e.what());
            return nullptr;
        }
        Conn *c = nullptr;
        {
            std::lock_guard lock(mutex);
            if (stop)
                return nullptr;
            auto conn = std::make_unique<Conn>();
            conn->info.id = int(conns.size());
            conn->info.name =
                printableText(hello.json.value(QStringLiteral("name")).toString(), kMaxNodeNameChars).toStdString();
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
        return c;
    }

    // Welcome a node that joined, with a burst of pings for a first clock estimate.
    void greet(Conn *c)
    {
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
                        c->clock.addSample(coord::bigInt(m.json.value(QStringLiteral("t0"))),
                                           coord::bigInt(m.json.value(QStringLiteral("tn"))), t1);
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
                if (type == "store") {
                    board.handle(c->info.id, m);
                    continue;
                }
                if (type == "coll" || type == "coll_buffer" || type == "coll_after") {
                    dispatchToProxy(c->info.id, std::move(m));
                    continue;
                }
                if (type == "log") {
                    log("node " + std::to_string(c->info.id) + " '" + c->info.name +
                        "': " + printableText(m.json.value(QStringLiteral("text")).toString(), 1000).toStdString());
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
            // Memory by category at collective boundaries (node_agent's addMemory).
            for (const QJsonValue &v : m.json.value(QStringLiteral("memory")).toArray()) {
                const QJsonArray a = v.toArray();
                if (a.size() != 12)
                    continue;
                MemorySample sample;
                sample.tNs = a[0].toString().toLongLong() - offset;
                sample.node = rank;
                sample.step = std::int64_t(a[1].toDouble());
                const int kind = a[2].toInt();
                sample.collective = net::isValidCollectiveKind(std::uint8_t(kind)) ? net::CollectiveKind(kind)
                                                                                   : net::CollectiveKind::None;
                sample.seq = a[3].toString().toULongLong();
                sample.before = a[4].toBool();
                std::int64_t *fields[] = {&sample.params, &sample.grads, &sample.optimizer, &sample.activations,
                                          &sample.comm,   &sample.live,  &sample.peak};
                for (int f = 0; f < 7; ++f)
                    *fields[f] = std::max<std::int64_t>(0, a[5 + f].toString().toLongLong());
                eventSink->onMemory(sample);
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
            for (const std::string &line : refusals.flush(Clock::now()))
                log(line);
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

    // `--backend gloo`: the address `node`'s Gloo device binds to (under
    // mutex), the one its peers among `members` reach it at: what it
    // advertised; a node on this machine (joined over loopback) with peers
    // on other machines binds where those reach this coordinator; otherwise
    // the address it reached the coordinator from. Never all interfaces.
    std::string glooBindAddressFor(const Conn &node, const std::vector<int> &members) const
    {
        if (!node.info.advertise.empty())
            return node.info.advertise;
        if (net::sock::isLoopbackHost(node.info.host))
            for (int id : members)
                if (!net::sock::isLoopbackHost(conns[std::size_t(id)]->info.host))
                    return conns[std::size_t(id)]->coordinatorAddress;
        return node.info.host;
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

} // namespace smol::engine
