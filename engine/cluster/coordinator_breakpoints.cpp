// Breakpoints for remote nodes. A node with remote breakpoints asks at every
// collective (`coll`); the reader hands the call to the proxy thread of
// (node, calling thread), which asks the run's BreakpointController as a
// node thread would in one process: `coll_go` to carry on, or `coll_hold`,
// then the node's buffer (`coll_buffer`) is held until the user steps or
// continues, and goes back with the user's edits. A stepped collective's
// result comes back as `coll_after`. Calls of an ended epoch go through.
#include "coordinator_private.h"

#include <algorithm>

namespace smol::engine {

namespace {

// `members` keeps a group's member list for info.members (bounded: at most
// kMaxNodes ranks, each a rank of the run, or none at all).
net::CollectiveInfo infoFrom(const QJsonObject &o, void *data, std::vector<int> &members)
{
    net::CollectiveInfo info;
    members.clear();
    const QJsonArray given = o.value(QStringLiteral("members")).toArray();
    for (const QJsonValue &v : given) {
        const int m = v.toInt(-1);
        if (m < 0 || m >= kMaxNodes || given.size() > kMaxNodes) {
            members.clear();
            break;
        }
        members.push_back(m);
    }
    if (!members.empty())
        info.members = &members;
    info.group = std::uint32_t(std::clamp(o.value(QStringLiteral("group")).toInt(), 0, int(net::kMaxGroupId)));
    info.axis = o.value(QStringLiteral("axis")).toString().left(8).toStdString();
    const int kind = o.value(QStringLiteral("kind")).toInt();
    info.kind = net::isValidCollectiveKind(std::uint8_t(kind)) ? net::CollectiveKind(kind)
                                                               : net::CollectiveKind::None;
    info.seq = o.value(QStringLiteral("seq")).toString().toULongLong();
    info.name = o.value(QStringLiteral("name")).toString().toStdString();
    info.rank = o.value(members.empty() ? QLatin1String("rank") : QLatin1String("group_rank")).toInt();
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

} // namespace

void Coordinator::Private::dispatchToProxy(int node, net::ControlMessage m)
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
        send(node, QJsonObject{{"type", "coll_go"},
                               {"epoch", m.json.value(QStringLiteral("epoch"))},
                               {"call", m.json.value(QStringLiteral("call"))}});
}

// The next message for this proxy; nullopt when proxies are stopping.
std::optional<net::ControlMessage> Coordinator::Private::proxyNext(Proxy *p)
{
    std::unique_lock lock(mutex);
    p->cv.wait(lock, [&] { return proxiesStopping || !p->queue.empty(); });
    if (p->queue.empty())
        return std::nullopt;
    net::ControlMessage m = std::move(p->queue.front());
    p->queue.pop_front();
    return m;
}

void Coordinator::Private::proxyLoop(int node, Proxy *p)
{
    BreakpointController *ctl = nullptr;
    int rank = -1;
    std::vector<int> members, probeMembers; // a group's, for the infos below
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
            net::CollectiveInfo info = infoFrom(m->json, m->blob.data(), members);
            if (m->blob.size() == qsizetype(info.buffer.bytes()))
                ctl->afterRemote(rank, step, info);
            continue;
        }
        if (m->type() != "coll")
            continue;
        const net::CollectiveInfo probe = infoFrom(m->json, nullptr, probeMembers);
        const std::uint64_t pauseId = ctl->decide(rank, step, probe);
        if (pauseId == 0) {
            send(node, QJsonObject{{"type", "coll_go"}, {"epoch", epoch}, {"call", call}});
            continue;
        }
        send(node, QJsonObject{{"type", "coll_hold"}, {"epoch", epoch}, {"call", call}});
        std::optional<net::ControlMessage> buffer = proxyNext(p);
        if (!buffer)
            break;
        net::CollectiveInfo info = infoFrom(m->json, buffer->blob.data(), members);
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
            stepped = ctl->holdFor(pauseId, rank, step, info, // the user's edits land in buffer->blob
                                   relatedFromJson(buffer->json.value(QStringLiteral("related")).toArray()));
        send(node, QJsonObject{{"type", "coll_go"}, {"epoch", epoch}, {"call", call}, {"stepped", stepped}},
             buffer->blob);
    }
}

// End of a run's epoch: release held proxies and join them.
void Coordinator::Private::stopProxies()
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

void Coordinator::Private::holdWaits(bool held)
{
    std::vector<int> nodes;
    int epoch = -1;
    {
        std::lock_guard lock(mutex);
        nodes = epochNodeOfRank;
        epoch = breakpointEpoch;
    }
    for (int node : nodes)
        send(node, QJsonObject{{"type", "hold_waits"}, {"epoch", epoch}, {"held", held}});
    viewers->setHeld(held);
}

} // namespace smol::engine
