#include "run_measurement.h"

#include "engine/cluster/coordinator.h"
#include "engine/trainer.h"

#include <algorithm>

namespace smol::app {

namespace {

NodeMeasurement measureRank(const engine::TrainSummary &s, int r,
                            const std::map<int, LiveSink::RankFigures> &figures,
                            const std::vector<engine::ClusterNode> &nodes)
{
    NodeMeasurement n;
    n.rank = r;
    for (const engine::ClusterNode &cn : nodes)
        if (cn.rank == r) {
            n.id = cn.id;
            n.name = QString::fromStdString(cn.name);
        }
    if (std::size_t(r) < s.bytesSentPerNode.size())
        n.bytesSent = qint64(s.bytesSentPerNode[std::size_t(r)]);
    const auto inSteps = s.extra.find("bytes_in_steps@" + std::to_string(r));
    n.stepBytesSent = inSteps != s.extra.end() ? qint64(inSteps->second) : n.bytesSent;
    if (std::size_t(r) < s.bytesInStepsByAxis.size())
        for (const auto &[axis, bytes] : s.bytesInStepsByAxis[std::size_t(r)])
            n.stepBytesByAxis.insert(QString::fromStdString(axis), qint64(bytes));
    if (std::size_t(r) < s.memoryPerNode.size())
        n.memory = s.memoryPerNode[std::size_t(r)];
    const auto f = figures.find(r);
    if (f != figures.end()) {
        n.activationPeak = f->second.activationPeak;
        n.computeSeconds = double(f->second.computeNs) * 1e-9;
        n.wallSeconds = double(f->second.wallNs) * 1e-9;
        n.idleShare = n.wallSeconds > 0 ? std::clamp(1 - n.computeSeconds / n.wallSeconds, 0.0, 1.0) : 0;
    }
    n.activationPeak = std::max<qint64>(n.activationPeak, n.memory.activations);
    return n;
}

} // namespace

RunMeasurement measureRun(const engine::TrainSummary &s, const RunSettings &settings,
                          const std::map<int, LiveSink::RankFigures> &figures,
                          const std::vector<engine::ClusterNode> &nodes)
{
    RunMeasurement m;
    m.settings = settings;
    m.strategy = QString::fromStdString(s.strategy);
    m.nodes = s.nodes;
    m.steps = s.steps;
    m.seconds = s.seconds;
    m.samplesPerSecond = s.samplesPerS;
    m.finalLoss = s.finalLoss;
    m.testAccuracy = s.testAccuracy;
    m.paramCount = s.paramCount;
    m.paramChecksum = s.paramChecksum;
    for (const auto &[k, v] : s.extra)
        m.extra.insert(QString::fromStdString(k), v);
    m.asyncUpdates = s.async.updates;
    m.maxStaleness = s.async.maxStaleness;
    for (int r = 0; r < s.nodes; ++r)
        m.ranks.push_back(measureRank(s, r, figures, nodes));
    return m;
}

} // namespace smol::app
