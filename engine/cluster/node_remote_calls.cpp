// Calls a node makes to its coordinator over the control connection and
// waits on: at every collective when the coordinator holds the breakpoints
// (RemoteHook: `coll`, answered `coll_go` or `coll_hold`; a held node sends
// its buffer and gets it back with the user's edits; a stepped collective's
// result goes up as `coll_after`), and Gloo's rendezvous (ControlRendezvous:
// the epoch's key-value store kept by the coordinator, rendezvous_board.h).
// Each waits for its answer by call id, or for the epoch's abort, which
// fails the call like a lost peer.
#include "node_agent_private.h"

#include "engine/breakpoints/tensor_snapshot.h"
#include "engine/span_hook.h"

#include <cstring>

namespace smol::engine::node {

namespace {

thread_local std::uint64_t t_steppedCall = 0; // the call whose result goes up in after()

constexpr std::chrono::milliseconds kStoreCallTimeout{30000}; // set, add, check: answered at once

// Which thread of the node calls: the coordinator keeps a proxy per caller.
std::uint64_t callerKey()
{
    return std::hash<std::thread::id>{}(std::this_thread::get_id());
}

// A collective call: which collective (as Private::infoFrom reads it back
// in coordinator_breakpoints.cpp), and whose call it is.
QJsonObject callJson(const char *type, int epoch, std::uint64_t call, std::int64_t step,
                     const net::CollectiveInfo &info)
{
    QJsonArray shape;
    for (int d = 0; d < info.buffer.shape.ndim; ++d)
        shape.append(double(info.buffer.shape.dims[std::size_t(d)]));
    // A mesh group's collective: "rank" stays the node's own (the caller),
    // its rank in the group goes beside, with the group's members.
    QJsonArray members;
    if (info.members)
        for (int m : *info.members)
            members.append(m);
    const int node = info.members && info.rank >= 0 && std::size_t(info.rank) < info.members->size()
                         ? (*info.members)[std::size_t(info.rank)]
                         : info.rank;
    return QJsonObject{{"type", type},
                       {"group", double(info.group)},
                       {"axis", QString::fromStdString(info.axis)},
                       {"members", members},
                       {"group_rank", info.rank},
                       {"epoch", epoch},
                       {"call", QString::number(call)},
                       {"caller", QString::number(callerKey())},
                       {"step", double(step)},
                       {"kind", int(info.kind)},
                       {"seq", QString::number(info.seq)},
                       {"name", QString::fromStdString(info.name)},
                       {"rank", node},
                       {"world", info.worldSize},
                       {"peer", info.peer},
                       {"dtype", int(info.buffer.dtype)},
                       {"count", double(info.buffer.count)},
                       {"receiving", info.receiving},
                       {"shape", shape}};
}

} // namespace

std::uint64_t Agent::nextCallId()
{
    std::lock_guard lock(m_mutex);
    return m_nextCall++;
}

// A collective RPC: send, then wait for the coordinator's answer (or the
// epoch's end, which throws so the collective fails like a lost peer).
Agent::CallReply Agent::call(std::uint64_t id, const QJsonObject &json, const QByteArray &blob)
{
    {
        std::lock_guard lock(m_mutex);
        m_replies.erase(id);
    }
    m_channel->send(json, blob);
    std::unique_lock lock(m_mutex);
    m_cv.wait(lock, [&] { return m_aborted || m_replies.count(id); });
    if (m_aborted)
        throw std::runtime_error("aborted by the coordinator while paused");
    CallReply r = std::move(m_replies[id]);
    m_replies.erase(id);
    return r;
}

void Agent::remoteBefore(int epoch, std::int64_t step, const net::CollectiveInfo &info)
{
    t_steppedCall = 0;
    const std::uint64_t id = nextCallId();
    CallReply r = call(id, callJson("coll", epoch, id, step, info));
    if (r.type == "coll_hold") {
        noteHeldAtCollective();
        const QByteArray buffer(info.buffer.bytePtr(), qsizetype(info.buffer.bytes()));
        QJsonArray gathered; // what this node holds in full right now (zero3)
        for (const std::string &p : gatheredParamsNow())
            gathered.append(QString::fromStdString(p));
        QJsonObject held{{"type", "coll_buffer"},
                         {"epoch", epoch},
                         {"call", QString::number(id)},
                         {"caller", QString::number(callerKey())},
                         {"gathered", gathered}};
        // What rides with the buffer (PowerSGD's Q and error buffer), as
        // snapshots: bounded (kMaxRelatedTensors, curves), read-only.
        if (!info.related.empty())
            held.insert("related", relatedToJson(takeRelatedSnapshots(info, SnapshotOptions{})));
        r = call(id, held, buffer);
        if (r.blob.size() == qsizetype(info.buffer.bytes()) && !r.blob.isEmpty())
            std::memcpy(info.buffer.data, r.blob.constData(), std::size_t(r.blob.size())); // the user's edits
    }
    if (r.stepped)
        t_steppedCall = id;
}

void Agent::remoteAfter(int epoch, std::int64_t step, const net::CollectiveInfo &info)
{
    if (t_steppedCall == 0)
        return;
    const QJsonObject json = callJson("coll_after", epoch, t_steppedCall, step, info);
    t_steppedCall = 0;
    m_channel->send(json, QByteArray(info.buffer.bytePtr(), qsizetype(info.buffer.bytes())));
}

// One rendezvous operation on the coordinator's board for this epoch
// (rendezvous_board.h); throws on a refusal, the timeout or an abort.
net::ControlMessage Agent::storeCall(int epoch, const QString &op, const std::vector<std::string> &keys,
                                     const QByteArray &blob, std::int64_t delta,
                                     std::chrono::milliseconds timeout)
{
    const std::uint64_t id = nextCallId();
    QJsonArray k;
    for (const std::string &key : keys)
        k.append(QString::fromStdString(key));
    m_channel->send(QJsonObject{{"type", "store"},
                                {"epoch", epoch},
                                {"call", QString::number(id)},
                                {"op", op},
                                {"keys", k},
                                {"delta", double(delta)}},
                    blob);
    std::unique_lock lock(m_mutex);
    const auto until = std::chrono::steady_clock::now() +
                       (timeout.count() > 0 ? timeout : std::chrono::milliseconds(std::chrono::hours(1)));
    if (!m_cv.wait_until(lock, until, [&] { return m_aborted || m_storeReplies.count(id); }))
        throw std::runtime_error("gloo rendezvous: no answer to '" + op.toStdString() + "' within " +
                                 std::to_string(timeout.count() / 1000) + " s");
    if (m_aborted)
        throw std::runtime_error("aborted by the coordinator");
    net::ControlMessage r = std::move(m_storeReplies[id]);
    m_storeReplies.erase(id);
    if (!r.json.value(QStringLiteral("ok")).toBool())
        throw std::runtime_error("gloo rendezvous: the coordinator refused '" + op.toStdString() +
                                 "': " + r.json.value(QStringLiteral("error")).toString().toStdString());
    return r;
}

void ControlRendezvous::set(const std::string &key, const std::vector<std::uint8_t> &value)
{
    m_agent.storeCall(m_epoch, "set", {key},
                      QByteArray(reinterpret_cast<const char *>(value.data()), qsizetype(value.size())), 0,
                      kStoreCallTimeout);
}

std::vector<std::uint8_t> ControlRendezvous::get(const std::string &key, std::chrono::milliseconds timeout)
{
    const net::ControlMessage r = m_agent.storeCall(m_epoch, "get", {key}, {}, 0, timeout);
    return std::vector<std::uint8_t>(r.blob.begin(), r.blob.end());
}

std::int64_t ControlRendezvous::add(const std::string &key, std::int64_t delta)
{
    return std::int64_t(m_agent.storeCall(m_epoch, "add", {key}, {}, delta, kStoreCallTimeout)
                            .json.value("value")
                            .toDouble());
}

bool ControlRendezvous::check(const std::vector<std::string> &keys)
{
    return m_agent.storeCall(m_epoch, "check", keys, {}, 0, kStoreCallTimeout).json.value("value").toBool();
}

void ControlRendezvous::wait(const std::vector<std::string> &keys, std::chrono::milliseconds timeout)
{
    m_agent.storeCall(m_epoch, "wait", keys, {}, 0, timeout);
}

bool ControlRendezvous::deleteKey(const std::string &key)
{
    return m_agent.storeCall(m_epoch, "delete", {key}, {}, 0, kStoreCallTimeout).json.value("value").toBool();
}

std::int64_t ControlRendezvous::numKeys()
{
    return std::int64_t(
        m_agent.storeCall(m_epoch, "num", {}, {}, 0, kStoreCallTimeout).json.value("value").toDouble());
}

void RemoteHook::before(const net::CollectiveInfo &info)
{
    m_agent.remoteBefore(m_epoch, m_step ? m_step->load() : 0, info);
}

void RemoteHook::after(const net::CollectiveInfo &info)
{
    m_agent.remoteAfter(m_epoch, m_step ? m_step->load() : 0, info);
}

} // namespace smol::engine::node
