#include "run_plan.h"

#include "engine/models/model.h"
#include "engine/strategy.h"
#include "engine/trainer.h"

#include <map>
#include <string>
#include <vector>

namespace smol::app {

namespace {

// The model's parameters and layers by name and size: all a shard plan needs.
engine::ShardPlanInput planInput(const engine::TrainConfig &c, engine::TrainModel &model)
{
    engine::ShardPlanInput in;
    in.nodes = c.nodes;
    in.placement = c.placement;
    std::map<std::string, std::int64_t> numel;
    for (auto &[name, p] : model.namedParameters()) {
        in.params.push_back({name, p.numel()});
        numel[name] = p.numel();
    }
    for (const auto &layer : model.layers()) {
        in.layers.push_back({layer.name, {}});
        for (const auto &n : layer.paramNames)
            in.layers.back().params.push_back({n, numel.at(n)});
    }
    return in;
}

} // namespace

RunPlan planRun(const engine::TrainConfig &c)
{
    RunPlan plan;
    // A mesh's shards and memory are not its dp strategy's: no plan and no
    // formula (the shard map is the run's own, from its first report).
    if (!c.mesh.empty())
        return plan;
    try {
        engine::ModelConfig mc = c.model;
        mc.seed = c.seed;
        if (mc.kind == "gpt")
            mc.vocabSize = 96;
        const auto model = engine::makeModel(mc);
        const engine::ShardPlanInput in = planInput(c, *model);
        std::map<std::string, std::string> layerOf;
        for (const engine::PlannedLayer &layer : in.layers)
            for (const engine::PlannedParam &p : layer.params)
                layerOf[p.name] = layer.name;
        for (const engine::ShardRange &r : engine::planShards(c.strategy, in))
            plan.shards.append(widgets::ShardCell{QString::fromStdString(r.param),
                                                  QString::fromStdString(layerOf[r.param]), r.begin, r.end,
                                                  r.owner, {}});
        engine::ClosedFormInput closed;
        for (const engine::PlannedParam &p : in.params)
            closed.params += p.numel;
        closed.nodes = c.nodes;
        closed.adam = c.optimizer.kind == engine::OptimizerConfig::Kind::Adam;
        plan.predicted = engine::describeStrategy(c.strategy)->modelStateBytes(closed);
    } catch (const std::exception &) {
        return {};
    }
    return plan;
}

widgets::Topology topologyOf(const QString &strategy)
{
    const engine::StrategyDescription *d = engine::describeStrategy(strategy.toStdString());
    switch (d ? d->topology : engine::StrategyTopology::Ring) {
    case engine::StrategyTopology::Star:
        return widgets::Topology::Star;
    case engine::StrategyTopology::Chain:
        return widgets::Topology::Chain;
    case engine::StrategyTopology::Ring:
        break;
    }
    return widgets::Topology::Ring;
}

} // namespace smol::app
