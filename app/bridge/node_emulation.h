// What the user set per node (by id) for the next live run: an emulated
// compute slowdown, and emulated links to every other node (bandwidth and
// one-way latency, both directions). A run's ranks go to nodes in join
// order; applyTo turns the settings of the nodes taking ranks 0..n-1 into
// the configuration's per-rank behaviour and per-link limits.
//
// No LibTorch in this header.
#pragma once

#include <map>
#include <utility>
#include <vector>

namespace smol::engine {
struct TrainConfig;
}

namespace smol::app {

struct NodeEmulation {
    std::map<int, double> slowdown;                 // node id -> factor (>= 1)
    std::map<int, std::pair<double, double>> links; // node id -> (Mbit/s, one-way ms); 0 = no limit

    double slowdownOf(int id) const;
    bool limitsAnyLink() const;
    // The node's links' limit (Mbit/s, one-way ms); nullptr when unlimited.
    const std::pair<double, double> *linkLimitOf(int id) const;
    // ranks[r]: the node id taking rank r. Every node computes `slowMotion`
    // times slower on top of its own slowdown. Links shape our transport
    // only: on Gloo none are added.
    void applyTo(engine::TrainConfig &c, const std::vector<int> &ranks, double slowMotion) const;
};

} // namespace smol::app
