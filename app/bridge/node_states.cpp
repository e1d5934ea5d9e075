#include "node_states.h"

#include "engine/cluster/config_json.h"

namespace smol::app {

using engine::ClusterNode;

QString roleOf(const QString &strategy, int rank)
{
    if (rank < 0)
        return QStringLiteral("idle");
    return QString::fromStdString(engine::nodeRole(strategy.toStdString(), rank));
}

namespace {

widgets::NodeRunState runStateOf(const ClusterNode &n, bool failed, bool paused, double slowdown)
{
    if (n.state == ClusterNode::State::Lost)
        return widgets::NodeRunState::Lost;
    if (failed)
        return widgets::NodeRunState::Failed;
    if (n.state != ClusterNode::State::Running)
        return widgets::NodeRunState::Idle;
    return paused ? widgets::NodeRunState::Paused
           : slowdown > 1 ? widgets::NodeRunState::Slow
                          : widgets::NodeRunState::Running;
}

} // namespace

widgets::NodeState nodeStateOf(const ClusterNode &n, const QString &strategy, const NodeFacts &f)
{
    widgets::NodeState ns;
    ns.id = n.id;
    // A node keeps showing its rank (and memory) from the newest run it was in.
    ns.rank = n.state == ClusterNode::State::Lost ? -1 : n.rank;
    ns.name = QString::fromStdString(n.name);
    ns.host = QString::fromStdString(n.host);
    ns.role = roleOf(strategy, ns.rank);
    ns.slowdown = f.emulation.slowdownOf(n.id);
    // Failed until its next epoch starts: the box says why at once. Not
    // after the user's Stop: then a node's "connection closed by rank 0"
    // is the stop reaching it through its peers, not a failure.
    const bool failed = !n.lastError.empty() && !f.stopRequested;
    ns.state = runStateOf(n, failed, f.paused, ns.slowdown);
    if (ns.rank >= 0) {
        const auto it = f.memory.find(ns.rank);
        if (it != f.memory.end())
            ns.memory = it->second.memory;
        if (const auto peak = f.stepPeaks.find(ns.rank); peak != f.stepPeaks.end())
            ns.stepPeak = peak->second;
        ns.predictedBytes = f.predicted.of(ns.rank);
        if (f.gloo) { // links unknown: what this node handed to Gloo's collectives over the last second
            const auto sent = f.traffic.sentPerSecond.find(ns.rank);
            ns.collectiveBytesPerSecond = sent == f.traffic.sentPerSecond.end() ? 0.0 : sent->second;
        }
    }
    if (n.state == ClusterNode::State::Lost) {
        ns.lastLog = QString::fromStdString(n.lostReason);
        ns.reason = ns.lastLog;
    } else if (failed) {
        ns.reason = QString::fromStdString(n.lastError);
        ns.lastLog = ns.reason;
    }
    return ns;
}

QVector<widgets::LinkState> linkStatesOf(const LiveSink::Traffic &traffic, const QVector<widgets::NodeState> &nodes,
                                         const NodeEmulation &emulation)
{
    std::map<int, int> idOfRank;
    for (const widgets::NodeState &n : nodes)
        if (n.rank >= 0)
            idOfRank[n.rank] = n.id;
    QVector<widgets::LinkState> out;
    for (const auto &[link, bytes] : traffic.linkBytesPerSecond) {
        widgets::LinkState ls{link.first, link.second, bytes, 0, 0};
        for (int end : {link.first, link.second}) {
            const auto id = idOfRank.find(end);
            if (const auto *limit = id == idOfRank.end() ? nullptr : emulation.linkLimitOf(id->second)) {
                ls.limitBitsPerSecond = limit->first * 1e6;
                ls.latencyMs = limit->second;
            }
        }
        out.append(ls);
    }
    return out;
}

} // namespace smol::app
