#include "coordinator.h"
#include "coordinator_private.h"

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
    d->reapHandshakes(/*all=*/true); // the accept thread has ended: nothing adds more
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

} // namespace smol::engine
