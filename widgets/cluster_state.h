// The plain snapshots the GUI's views draw: published by the engine bridge
// (app/engine_controller) on the GUI thread, at most 30 times a second, as
// std::shared_ptr<const ClusterState>. Every number in them was measured by
// the engine (memory from its tracking allocator, bytes from trace events);
// views compute nothing but layout. No LibTorch, no engine includes.
#pragma once

#include "net/memory_by_category.h"

#include <QString>
#include <QVector>

#include <cstdint>
#include <memory>
#include <optional>

namespace smol::widgets {

enum class Topology { Ring, Star, Chain }; // ddp/zero*/tensor: ring; syncps/edp: star (rank 0 centre); pipeline: chain

// Failed: the node's last epoch ended with its own error (NodeState::reason);
// Lost: it stopped answering or was killed.
enum class NodeRunState { Idle, Running, Paused, Slow, Lost, Failed };
inline constexpr int kNodeRunStateCount = 6;

struct NodeState {
    int id = -1;   // stable across runs (join order)
    int rank = -1; // in the current run; -1 when not in it
    QString name;
    QString host;
    QString role;  // "worker", "server", "stage 2", ...
    NodeRunState state = NodeRunState::Idle;
    double slowdown = 1;     // emulated compute slowdown (1 = none)
    net::MemoryByCategory memory; // as the engine's memory accounting reports it
    // Each category at its largest during the node's newest step (its peak:
    // the allocator's high-water mark in it); all zero when not measured.
    net::MemoryByCategory stepPeak;
    // What the ZeRO formulas predict for this node's params+grads+optimizer
    // under the chosen strategy (bytes); empty when no formula applies.
    std::optional<std::int64_t> predictedBytes;
    // --backend gloo (links unknown): the bytes this node handed to
    // collectives over the last second; empty under our transport.
    std::optional<double> collectiveBytesPerSecond;
    QString lastLog; // newest log line
    QString reason;  // Failed: why its last epoch failed; Lost: why it was lost
    // A student's window (smolcluster --join): the node this machine is,
    // framed and tagged "you: rank N" in the cluster view.
    bool you = false;
};

// The one name a node goes by on screen, in every view (cluster, charts,
// timeline lanes, inspector, memory table, logs): its rank first, so that
// "node zero" on a projector is the box the class looks at. A local node
// whose name already ends in its rank ("local-2", "node 2" at rank 2) keeps it;
// any other ("pi-1" at rank 0, or "local-3" after a re-form made it rank
// 2) reads "0 · pi-1". Not in the run: the name alone.
inline QString displayName(int rank, const QString &name, int id = -1)
{
    const QString n = !name.isEmpty() ? name : id >= 0 ? QStringLiteral("node %1").arg(id) : QString();
    if (rank < 0)
        return n;
    if (n.isEmpty())
        return QStringLiteral("%1").arg(rank);
    const QString number = QString::number(rank);
    if (n.endsWith(number) && n.size() > number.size()) { // "local-2", "node 2", "pi_2": already says it
        const QChar before = n.at(n.size() - number.size() - 1);
        if (before == QLatin1Char('-') || before == QLatin1Char(' ') || before == QLatin1Char('_'))
            return n;
    }
    return QStringLiteral("%1 · %2").arg(rank).arg(n);
}
inline QString displayName(const NodeState &node) { return displayName(node.rank, node.name, node.id); }

// Traffic on a directed link over the last second, from trace events.
struct LinkState {
    int src = -1; // ranks
    int dst = -1;
    double bytesPerSecond = 0;
    // Emulated limits (0 = none).
    double limitBitsPerSecond = 0;
    double latencyMs = 0;
};

// One contiguous range of one parameter and who owns it (Strategy::shards()).
struct ShardCell {
    QString param;       // parameter name ("fc1.weight")
    QString layer;       // its layer ("fc1")
    std::int64_t begin = 0;
    std::int64_t end = 0; // elements [begin, end) of the parameter
    int owner = -1;       // rank; -1 replicated on every node
    QVector<int> materialisedOn; // ranks holding it in full right now (zero3 mid-step)
};

// A device mesh node's column of the shard map, planned before the run
// (engine/strategies/mesh_plan.h): its coordinates, its block of every
// sequence (cp) and its shard of its stage's optimizer state (dp).
struct ShardColumn {
    QString coords;                 // "dp1 · pp0 · tp1"
    std::int64_t sequenceBegin = 0; // positions [begin, end) of blockSize
    std::int64_t sequenceEnd = 0;
    std::int64_t blockSize = 0;
    std::int64_t optimizerBegin = 0; // elements [begin, end) of its localElements
    std::int64_t optimizerEnd = 0;
    std::int64_t localElements = 0;
    int sharedBy = 1; // the nodes its stage's optimizer state is split over (1: ddp)
    bool paramsShared = false; // zero3: its params and grads too, between steps
};

struct ClusterState {
    QString strategy;
    Topology topology = Topology::Ring;
    std::int64_t step = -1; // newest completed step
    std::int64_t steps = 0; // planned
    // The step the cluster is in when the feed knows it better than step + 1:
    // at a pause the held collective's (-1: step + 1; widgets/step_number.h).
    std::int64_t current = -1;
    QVector<NodeState> nodes; // by id
    QVector<LinkState> links;
    // false under --backend gloo: Gloo's pairs are invisible, so there is no
    // per-link traffic; each node shows its collective bytes instead.
    bool linksKnown = true;
    QVector<ShardCell> shards;
    QVector<ShardColumn> shardColumns; // by rank; empty without a mesh
    // The run's device mesh, "dp=2,pp=2,tp=2" (net/device_mesh.h); "" without
    // one. With one, the cluster view lays the nodes out as its grid.
    QString mesh;
};

using ClusterStatePtr = std::shared_ptr<const ClusterState>;

// One completed step's figures, for the charts.
struct StepPoint {
    std::int64_t step = 0;
    double seconds = 0;         // since the run started
    double loss = 0;            // NaN when none
    double samplesPerSecond = 0;
    QVector<double> bytesPerSecondPerNode; // sent, by rank
};

} // namespace smol::widgets
