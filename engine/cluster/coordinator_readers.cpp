// What joined nodes say, and when they are lost. One reader thread per node
// takes its messages: pongs and heartbeats update its clock estimate and
// liveness, trace batches, rendezvous and breakpoint calls are answered on
// the spot, log lines are passed on, and everything else becomes an Event
// for run(). The monitor thread loses a node silent for heartbeatTimeout
// and pings the others every pingInterval. A lost node is lost once: its
// channel closed, an Event queued, one log line.
#include "coordinator_private.h"

namespace smol::engine {

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
                log("node " + std::to_string(c->info.id) + " '" + c->info.name + "': " +
                    printableText(m.json.value(QStringLiteral("text")).toString(), 1000).toStdString());
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
