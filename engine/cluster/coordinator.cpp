// The coordinator's public calls (coordinator.h), and what every one of its
// threads uses: send (a failed send loses the node), log, the event queue
// run() waits on, and which address a node is reached at. The threads
// themselves live beside it (coordinator_private.h lists them).
#include "coordinator.h"
#include "coordinator_private.h"

#include "net/socket_util.h"

#include <algorithm>

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

Coordinator::Coordinator(const CoordinatorOptions &options) : d(std::make_unique<Private>())
{
    if (options.token.empty())
        throw std::invalid_argument("the cluster needs a token");
    d->options = options;
    if (!options.watchToken.empty() && options.watchToken == options.token)
        throw std::invalid_argument("the watch token must differ from the cluster's token (it may not join as a node)");
    d->listenFd = net::sock::listenTcp(options.bindAddress, options.port, &d->port);
    d->viewers = std::make_unique<ViewerHub>([this](const std::string &line) { d->log(line); },
                                             [this] { return nodes(); });
    d->viewers->setBudget(options.viewerBudgetBytesPerSecond);
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
    d->reapHandshakes(/*all=*/true); // the accept thread has ended: nothing adds more
    d->viewers.reset();
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

void Coordinator::setPredictionSink(std::function<void(const Prediction &)> sink)
{
    d->viewers->setPredictionSink(std::move(sink));
}

void Coordinator::publishLesson(const QJsonObject &lesson) { d->viewers->publishLesson(lesson); }
SessionEventSink *Coordinator::viewerEvents() { return d->viewers.get(); }
int Coordinator::viewerCount() const { return d->viewers->count(); }
std::vector<std::pair<int, std::uint64_t>> Coordinator::viewerBytesSent() const { return d->viewers->bytesSent(); }

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
        d->events.push_back(coord::Event{-1, true, false, {}, {}});
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

void Coordinator::Private::log(const std::string &text)
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

bool Coordinator::Private::send(int id, const QJsonObject &json, const QByteArray &blob)
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
std::optional<coord::Event> Coordinator::Private::nextEvent(Clock::time_point deadline)
{
    std::unique_lock lock(mutex);
    if (!changed.wait_until(lock, deadline, [&] { return !events.empty(); }))
        return std::nullopt;
    Event e = std::move(events.front());
    events.pop_front();
    return e;
}

// The data-plane address `recipient` dials to reach `peer` (under
// mutex). docs/runtime.md, "Which address a node advertises":
//   1. the address the peer advertised (--advertise), if any;
//   2. a peer on this machine (it joined over loopback, like the
//      window's own nodes) is reached where the recipient reaches this
//      coordinator, when the recipient is on another machine;
//   3. otherwise the address the peer connected from.
std::string Coordinator::Private::dataAddressFor(const Conn &peer, const Conn &recipient) const
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
std::string Coordinator::Private::glooBindAddressFor(const Conn &node, const std::vector<int> &members) const
{
    if (!node.info.advertise.empty())
        return node.info.advertise;
    if (net::sock::isLoopbackHost(node.info.host))
        for (int id : members)
            if (!net::sock::isLoopbackHost(conns[std::size_t(id)]->info.host))
                return conns[std::size_t(id)]->coordinatorAddress;
    return node.info.host;
}

} // namespace smol::engine
