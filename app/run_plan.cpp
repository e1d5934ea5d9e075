#include "run_plan.h"

#include "engine/flat_params.h"
#include "engine/model.h"
#include "engine/placement.h"
#include "engine/strategy.h"
#include "engine/trainer.h"

#include <map>
#include <string>
#include <vector>

namespace smol::app {

RunPlan planRun(const engine::TrainConfig &c)
{
    RunPlan plan;
    QVector<widgets::ShardCell> &cells = plan.shards;
    std::optional<std::int64_t> &formula = plan.predicted;
    try {
        engine::ModelConfig mc = c.model;
        mc.seed = c.seed;
        if (mc.kind == "gpt")
            mc.vocabSize = 96;
        const auto model = engine::makeModel(mc);
        std::map<std::string, std::string> layerOf;
        std::vector<std::vector<std::pair<std::string, torch::Tensor>>> layerParams;
        std::map<std::string, torch::Tensor> byName;
        for (auto &[name, p] : model->namedParameters())
            byName[name] = p;
        for (const auto &layer : model->layers()) {
            layerParams.emplace_back();
            for (const auto &n : layer.paramNames) {
                layerOf[n] = layer.name;
                layerParams.back().emplace_back(n, byName.at(n));
            }
        }
        auto add = [&](const std::vector<engine::ShardRange> &ranges) {
            for (const auto &r : ranges)
                cells.append(widgets::ShardCell{QString::fromStdString(r.param),
                                                QString::fromStdString(layerOf[r.param]),
                                                r.begin,
                                                r.end,
                                                r.owner,
                                                {}});
        };
        const std::string &s = c.strategy;
        std::int64_t P = 0;
        for (auto &[name, p] : byName)
            P += p.numel();
        if (s == "zero1" || s == "zero2") {
            engine::FlatParams flat(model->namedParameters());
            add(engine::chunkedShardMap(flat.slots(), flat.numel(), c.nodes, -1));
        } else if (s == "zero3") {
            for (const auto &named : layerParams) {
                engine::FlatParams flat(named);
                add(engine::chunkedShardMap(flat.slots(), flat.numel(), c.nodes, -1));
            }
        } else if (s == "pipeline") {
            const int layers = int(layerParams.size());
            std::vector<std::int64_t> sizes;
            for (const auto &named : layerParams) {
                std::int64_t n = 0;
                for (const auto &np : named)
                    n += np.second.numel();
                sizes.push_back(n);
            }
            const engine::Placement placement = c.placement.empty() || c.placement == "auto"
                                                    ? engine::Placement::balanced(sizes, c.nodes)
                                                    : engine::Placement::parse(c.placement, layers, c.nodes);
            for (int l = 0; l < layers; ++l)
                for (const auto &[name, p] : layerParams[std::size_t(l)])
                    cells.append(widgets::ShardCell{QString::fromStdString(name),
                                                    QString::fromStdString(layerOf[name]),
                                                    0,
                                                    p.numel(),
                                                    placement.nodeOf(l),
                                                    {}});
        } else if (s != "tensor") { // tensor cuts inside weights; its map is not drawn yet
            engine::FlatParams flat(model->namedParameters());
            add(engine::replicatedShardMap(flat.slots()));
        }
        const std::int64_t opt = c.optimizer.kind == engine::OptimizerConfig::Kind::Adam ? 8 * P : 0;
        const std::int64_t n = c.nodes;
        if (s == "ddp" || s == "single")
            formula = 4 * P + 4 * P + opt;
        else if (s == "zero1")
            formula = 4 * P + 4 * P + opt / n;
        else if (s == "zero2")
            formula = 4 * P + 4 * P / n + opt / n;
        else if (s == "zero3")
            formula = (8 * P + opt) / n;
    } catch (const std::exception &) {
        return {};
    }
    return plan;
}

widgets::Topology topologyOf(const QString &strategy)
{
    if (strategy == "syncps" || strategy == "edp")
        return widgets::Topology::Star;
    if (strategy == "pipeline")
        return widgets::Topology::Chain;
    return widgets::Topology::Ring;
}

} // namespace smol::app
