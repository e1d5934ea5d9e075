// What a finished live run measured, by rank (RunMeasurement, for lessons):
// the summary's own figures (bytes from its trace events, memory from its
// tracking allocator) and each rank's busy time from its spans, named after
// the node that held the rank. Never computed from a formula.
//
// No LibTorch in this header.
#pragma once

#include "engine_controller.h"
#include "live_sink.h"

#include <map>
#include <vector>

namespace smol::engine {
struct TrainSummary;
struct ClusterNode;
} // namespace smol::engine

namespace smol::app {

RunMeasurement measureRun(const engine::TrainSummary &summary, const RunSettings &settings,
                          const std::map<int, LiveSink::RankFigures> &figures,
                          const std::vector<engine::ClusterNode> &nodes);

} // namespace smol::app
