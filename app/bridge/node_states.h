// A node's box and a link's line as the cluster view draws them, from the
// coordinator's record of the node and what the run's events said (memory,
// step peaks, traffic over the last second). One definition for the live
// bridge (EngineController) and a student's viewer (ViewerFeed), which gets
// the same records over the teacher's stream.
//
// No LibTorch in this header.
#pragma once

#include "live_sink.h"
#include "node_emulation.h"
#include "run_plan.h"

#include "engine/cluster/coordinator.h"
#include "widgets/cluster_state.h"

#include <map>

namespace smol::app {

// What a node's box shows besides the coordinator's record of it.
struct NodeFacts {
    std::map<int, engine::MemorySample> memory;     // by rank
    std::map<int, net::MemoryByCategory> stepPeaks; // by rank
    const LiveSink::Traffic &traffic;
    const NodeEmulation &emulation;
    PredictedBytes predicted; // by rank (a mesh) or one for every node
    bool gloo = false;
    bool paused = false;
    bool stopRequested = false;
};

// "worker", "server", "stage 2" (the strategy's), "idle" for rank -1.
QString roleOf(const QString &strategy, int rank);
widgets::NodeState nodeStateOf(const engine::ClusterNode &n, const QString &strategy, const NodeFacts &f);
// Bytes per link over the last second, with the emulated limit the
// sender's (or receiver's) node was given.
QVector<widgets::LinkState> linkStatesOf(const LiveSink::Traffic &traffic, const QVector<widgets::NodeState> &nodes,
                                         const NodeEmulation &emulation);

} // namespace smol::app
