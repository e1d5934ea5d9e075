// The viewers' messages as JSON (viewer_protocol.h). Reading checks every
// field's type and bound and makes text printable: a coordinator's bytes are
// as untrusted to a viewer as a viewer's are to the coordinator.
#include "viewer_protocol.h"

#include "admission.h"
#include "coordinator.h"
#include "viewer_client.h"

#include <QJsonDocument>

#include <cmath>
#include <stdexcept>

namespace smol::engine::viewer {

namespace {

constexpr int kMaxTextChars = 256;
constexpr qsizetype kMaxConfigBytes = 64 * 1024;

std::string text(const QJsonObject &o, const char *key)
{
    const QJsonValue v = o.value(QLatin1String(key));
    if (!v.isUndefined() && !v.isString())
        throw std::runtime_error(std::string("'") + key + "' is not a string");
    return printableText(v.toString().toStdString(), kMaxTextChars);
}

// An integer field within [lo, hi] (missing: `dflt`).
std::int64_t integer(const QJsonObject &o, const char *key, std::int64_t lo, std::int64_t hi, std::int64_t dflt)
{
    const QJsonValue v = o.value(QLatin1String(key));
    if (v.isUndefined())
        return dflt;
    const double d = v.toDouble(std::nan(""));
    if (!v.isDouble() || !std::isfinite(d) || d != std::floor(d) || d < double(lo) || d > double(hi))
        throw std::runtime_error(std::string("'") + key + "' is not an integer in range");
    return std::int64_t(d);
}

QByteArray jsonBytes(const QJsonValue &v, const char *what)
{
    if (v.isUndefined() || v.isNull())
        return {};
    if (!v.isObject() && !v.isArray())
        throw std::runtime_error(std::string("'") + what + "' is not JSON");
    const QByteArray b = v.isObject() ? QJsonDocument(v.toObject()).toJson(QJsonDocument::Compact)
                                      : QJsonDocument(v.toArray()).toJson(QJsonDocument::Compact);
    if (b.size() > kMaxConfigBytes)
        throw std::runtime_error(std::string("'") + what + "' is too large");
    return b;
}

QJsonValue jsonValue(const QByteArray &bytes)
{
    const QJsonDocument doc = QJsonDocument::fromJson(bytes);
    return doc.isObject() ? QJsonValue(doc.object()) : doc.isArray() ? QJsonValue(doc.array()) : QJsonValue();
}

} // namespace

QJsonObject headerToJson(const SessionHeader &h)
{
    QJsonArray nodes;
    for (const SessionNode &n : h.nodeList)
        nodes.append(QJsonObject{{"rank", n.rank},
                                 {"name", QString::fromStdString(n.name)},
                                 {"host", QString::fromStdString(n.host)},
                                 {"role", QString::fromStdString(n.role)}});
    return QJsonObject{{"config", jsonValue(h.configJson)},
                       {"strategy", QString::fromStdString(h.strategy)},
                       {"model", QString::fromStdString(h.model)},
                       {"nodes", h.nodes},
                       {"steps", double(h.steps)},
                       {"node_list", nodes},
                       {"placement", jsonValue(h.placementJson)},
                       {"start_ns", QString::number(h.startNs)}};
}

SessionHeader headerFromJson(const QJsonObject &o)
{
    SessionHeader h;
    h.configJson = jsonBytes(o.value(QStringLiteral("config")), "config");
    h.strategy = text(o, "strategy");
    h.model = text(o, "model");
    h.nodes = int(integer(o, "nodes", 0, kMaxClusterNodes, 0));
    h.steps = integer(o, "steps", 0, std::int64_t(1) << 40, 0);
    const QJsonValue list = o.value(QStringLiteral("node_list"));
    if (!list.isUndefined() && (!list.isArray() || list.toArray().size() > kMaxClusterNodes))
        throw std::runtime_error("'node_list' is not a list of nodes");
    for (const QJsonValue &v : list.toArray()) {
        const QJsonObject n = v.toObject();
        h.nodeList.push_back(SessionNode{int(integer(n, "rank", -1, kMaxClusterNodes, -1)), text(n, "name"),
                                         text(n, "host"), text(n, "role")});
    }
    h.placementJson = jsonBytes(o.value(QStringLiteral("placement")), "placement");
    bool ok = false;
    h.startNs = o.value(QStringLiteral("start_ns")).toString().toLongLong(&ok);
    if (!ok)
        h.startNs = 0;
    return h;
}

QJsonArray nodesToJson(const std::vector<ClusterNode> &nodes)
{
    QJsonArray out;
    for (const ClusterNode &n : nodes) {
        const std::string &reason = n.state == ClusterNode::State::Lost ? n.lostReason : n.lastError;
        out.append(QJsonObject{{"id", n.id},
                               {"name", QString::fromStdString(n.name)},
                               {"host", QString::fromStdString(n.host)},
                               {"state", QString::fromLatin1(clusterNodeStateName(n.state))},
                               {"rank", n.rank},
                               {"reason", QString::fromStdString(reason)}});
    }
    return out;
}

std::vector<ViewerNode> nodesFromJson(const QJsonArray &nodes)
{
    if (nodes.size() > kMaxClusterNodes)
        throw std::runtime_error("more nodes than a cluster has");
    std::vector<ViewerNode> out;
    for (const QJsonValue &v : nodes) {
        if (!v.isObject())
            throw std::runtime_error("a node that is not an object");
        const QJsonObject o = v.toObject();
        ViewerNode n;
        n.id = int(integer(o, "id", 0, 1 << 20, -1));
        n.name = text(o, "name");
        n.host = text(o, "host");
        n.state = text(o, "state");
        if (n.state != "idle" && n.state != "running" && n.state != "lost")
            throw std::runtime_error("a node state '" + n.state + "'");
        n.rank = int(integer(o, "rank", -1, kMaxClusterNodes, -1));
        n.reason = text(o, "reason");
        out.push_back(std::move(n));
    }
    return out;
}

QJsonArray linksToJson(const std::vector<LinkAggregate> &links)
{
    QJsonArray out;
    for (const LinkAggregate &l : links)
        out.append(QJsonObject{{"src", l.src}, {"dst", l.dst}, {"bytes", double(l.bytes)}, {"frames", double(l.frames)}});
    return out;
}

std::vector<LinkAggregate> linksFromJson(const QJsonArray &links)
{
    if (links.size() > kMaxClusterNodes * kMaxClusterNodes)
        throw std::runtime_error("more links than a cluster has");
    std::vector<LinkAggregate> out;
    for (const QJsonValue &v : links) {
        const QJsonObject o = v.toObject();
        out.push_back(LinkAggregate{int(integer(o, "src", 0, kMaxClusterNodes, -1)),
                                    int(integer(o, "dst", 0, kMaxClusterNodes, -1)),
                                    std::uint64_t(integer(o, "bytes", 0, std::int64_t(1) << 50, 0)),
                                    std::uint64_t(integer(o, "frames", 0, std::int64_t(1) << 40, 0))});
    }
    return out;
}

} // namespace smol::engine::viewer
