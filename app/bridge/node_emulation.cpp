#include "node_emulation.h"

#include "engine/trainer.h"

#include <algorithm>
#include <chrono>

namespace smol::app {

namespace {

bool limited(const std::pair<double, double> &link)
{
    return link.first > 0 || link.second > 0;
}

} // namespace

double NodeEmulation::slowdownOf(int id) const
{
    const auto it = slowdown.find(id);
    return it == slowdown.end() ? 1.0 : it->second;
}

bool NodeEmulation::limitsAnyLink() const
{
    return std::any_of(links.begin(), links.end(), [](const auto &l) { return limited(l.second); });
}

const std::pair<double, double> *NodeEmulation::linkLimitOf(int id) const
{
    const auto it = links.find(id);
    return it == links.end() || !limited(it->second) ? nullptr : &it->second;
}

void NodeEmulation::applyTo(engine::TrainConfig &c, const std::vector<int> &ranks, double slowMotion) const
{
    const int n = int(ranks.size());
    for (int r = 0; r < n; ++r) {
        engine::NodeBehaviour b;
        b.slowdown = slowdownOf(ranks[std::size_t(r)]) * std::max(1.0, slowMotion);
        c.behaviour.push_back(b);
    }
    if (c.backend == engine::TrainConfig::Backend::Gloo)
        return;
    for (int r = 0; r < n; ++r) {
        const std::pair<double, double> *limit = linkLimitOf(ranks[std::size_t(r)]);
        if (!limit)
            continue;
        for (int q = 0; q < n; ++q) {
            if (q == r)
                continue;
            engine::TrainConfig::Link link;
            link.a = r;
            link.b = q;
            link.limit.bitsPerSecond = limit->first * 1e6;
            link.limit.latency = std::chrono::nanoseconds(std::int64_t(limit->second * 1e6));
            c.links.push_back(link);
        }
    }
}

} // namespace smol::app
