#include "run_plan.h"

#include "engine/models/model.h"
#include "engine/strategies/mesh_plan.h"
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

// A mesh: one cell per rank for each range it holds (dp and cp replicas
// hold the same ranges, each in its own column), each rank's bytes, and what
// its column says about its sequence block and optimizer shard.
RunPlan meshPlan(const engine::TrainConfig &c, engine::TrainModel &model)
{
    RunPlan plan;
    const engine::MeshPlan mesh = engine::planMesh(c, model);
    for (const engine::MeshRankPlan &r : mesh.ranks) {
        for (const engine::MeshParamHolding &h : r.params)
            for (const engine::MeshElementRange &range : h.ranges)
                plan.shards.append(widgets::ShardCell{QString::fromStdString(h.param),
                                                      QString::fromStdString(h.layer), range.begin, range.end,
                                                      r.rank, {}});
        plan.predicted.byRank.append(r.modelStateBytes());
        widgets::ShardColumn column;
        column.coords = QString::fromStdString(r.coords);
        column.sequenceBegin = r.sequenceBegin;
        column.sequenceEnd = r.sequenceEnd;
        column.blockSize = r.blockSize;
        column.optimizerBegin = r.optimizerBegin;
        column.optimizerEnd = r.optimizerEnd;
        column.localElements = r.localElements;
        column.sharedBy = c.strategy == "ddp" ? 1 : r.dataGroupSize;
        column.paramsShared = c.strategy == "zero3" && r.dataGroupSize > 1;
        plan.columns.append(column);
    }
    return plan;
}

} // namespace

RunPlan planRun(const engine::TrainConfig &c)
{
    RunPlan plan;
    try {
        engine::ModelConfig mc = c.model;
        mc.seed = c.seed;
        if (mc.kind == "gpt")
            mc.vocabSize = 96;
        const auto model = engine::makeModel(mc);
        if (!c.mesh.empty())
            return meshPlan(c, *model);
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
        closed.bf16 = c.model.precision == engine::Precision::Bf16; // 2-byte params and grads, fp32 master
        plan.predicted.everyNode = engine::describeStrategy(c.strategy)->modelStateBytes(closed);
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
