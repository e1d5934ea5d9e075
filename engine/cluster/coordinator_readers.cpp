// What joined nodes say, and when they are lost. One reader thread per node
// takes its messages: pongs and heartbeats update its clock estimate and
// liveness, trace batches, rendezvous and breakpoint calls are answered on
// the spot, log lines are passed on, and everything else becomes an Event
// for run() when it is about the epoch in progress (anything else is
// dropped on arrival: nothing would ever take it from the queue). The
// monitor thread loses a node silent for heartbeatTimeout and pings the
// others every pingInterval. A lost node is lost once: its channel closed,
// an Event queued, one log line.
#include "coordinator_private.h"

#include <algorithm>

namespace smol::engine {

namespace {

// Whether run() could take node `node`'s message: superviseEpoch takes
// only messages naming the epoch in progress from its members. Queued,
// anything else would stay until a run began (a node's bogus reports
// while the coordinator waits for nodes: megabytes nobody frees).
bool forEpochInProgress(const net::ControlMessage &m, int node, int epoch, const std::vector<int> &members)
{
    const QJsonValue e = m.json.value(QStringLiteral("epoch"));
    return e.isDouble() && e.toInt(-1) == epoch && std::find(members.begin(), members.end(), node) != members.end();
}

} // namespace

std::int64_t coord::bigInt(const QJsonValue &v)
{
    return v.isString() ? v.toString().toLongLong() : std::int64_t(v.toDouble());
}

void Coordinator::Private::readLoop(Conn *c)
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
                forwardTrace(*c, m);
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
                log("node " + std::to_string(c->info.id) + " '" + c->info.name + "': " +
                    printableText(m.json.value(QStringLiteral("text")).toString(), kMaxLogLineChars).toStdString());
                continue;
            }
            std::lock_guard lock(mutex);
            if (!forEpochInProgress(m, c->info.id, traceEpoch, epochNodeOfRank))
                continue;
            events.push_back(Event{c->info.id, false, false, {}, std::move(m)});
            changed.notify_all();
        }
    } catch (const std::exception &e) {
        markLost(*c, e.what());
    }
}

void Coordinator::Private::ping(Conn &c)
{
    c.channel->send(QJsonObject{{"type", "ping"}, {"t0", QString::number(net::monotonicNs())}}, {},
                    std::chrono::seconds(2));
}

void Coordinator::Private::markLost(Conn &c, const std::string &reason)
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

void Coordinator::Private::monitorLoop()
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

} // namespace smol::engine
