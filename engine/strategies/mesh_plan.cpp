// mesh_plan: each mesh node's holdings and model-state bytes, before the run
// (mesh_plan.h says what and why). The placement helpers here are the ones
// mesh.cpp places its stages with.
#include "mesh_plan.h"

#include "engine/models/gpt_model.h"
#include "engine/models/model.h"
#include "engine/strategies/gpt_parallel.h"
#include "engine/trainer.h"
#include "net/communicator.h"
#include "net/device_mesh.h"

#include <algorithm>
#include <map>
#include <stdexcept>

namespace smol::engine {

namespace mesh_plan {

std::vector<std::int64_t> layerSizes(TrainModel &model)
{
    std::map<std::string, std::int64_t> numel;
    for (const auto &[name, p] : model.namedParameters())
        numel[name] = p.numel();
    std::vector<std::int64_t> sizes;
    for (const auto &layer : model.layers()) {
        std::int64_t n = 0;
        for (const auto &name : layer.paramNames)
            n += numel.at(name);
        sizes.push_back(n);
    }
    return sizes;
}

Placement stagePlacement(const std::vector<std::int64_t> &sizes, const std::string &spec, int stages)
{
    try {
        if (spec.empty() || spec == "auto")
            return Placement::balanced(sizes, stages);
        return Placement::parse(spec, int(sizes.size()), stages);
    } catch (const PlacementError &e) {
        throw PlacementError("--mesh pp=" + std::to_string(stages) + ": " +
                             (spec.empty() || spec == "auto" ? "" : "--placement " + spec + ": ") + e.what());
    }
}

} // namespace mesh_plan

std::int64_t MeshParamHolding::held() const
{
    std::int64_t n = 0;
    for (const MeshElementRange &r : ranges)
        n += r.end - r.begin;
    return n;
}

namespace {

using net::MeshAxis;

// The elements of `p` that tp node `tpRank` of `tpNodes` holds, as
// contiguous ranges of the whole parameter: sliceOf (what mesh.cpp computes
// with) applied to the parameter's element indices.
std::vector<MeshElementRange> slicedRanges(const torch::Tensor &p, gpt_parallel::Split split, int tpRank,
                                           int tpNodes)
{
    const torch::Tensor index = torch::arange(p.numel(), torch::kLong).view(p.sizes());
    const torch::Tensor mine = gpt_parallel::sliceOf(index, split, tpRank, tpNodes).flatten();
    const auto *at = mine.data_ptr<std::int64_t>();
    std::vector<MeshElementRange> ranges;
    for (std::int64_t i = 0; i < mine.numel(); ++i) {
        if (!ranges.empty() && ranges.back().end == at[i])
            ++ranges.back().end;
        else
            ranges.push_back({at[i], at[i] + 1});
    }
    return ranges;
}

// The model-state bytes a node holds between steps (mesh_plan.h's table).
// bf16 (--precision): 2-byte parameters and gradients, and a 4-byte float32
// master per optimizer element.
void fillBytes(MeshRankPlan &r, const std::string &dpMode, bool adam, bool bf16)
{
    const std::int64_t S = r.localElements, chunk = r.optimizerEnd - r.optimizerBegin;
    const std::int64_t held = dpMode == "zero3" ? chunk : S;
    r.paramsBytes = (bf16 ? 2 : 4) * held;
    r.gradsBytes = (bf16 ? 2 : 4) * held;
    r.optimizerBytes = (adam ? 8 * chunk : 0) + (bf16 ? 4 * chunk : 0);
}

MeshRankPlan planRank(const net::DeviceMesh &mesh, int rank, const std::vector<PipelineStage> &stages,
                      const std::map<std::string, int> &layerOf, const std::vector<std::string> &layerNames,
                      TrainModel &model, const TrainConfig &c)
{
    MeshRankPlan r;
    const net::MeshCoords me = mesh.coordsOf(rank);
    r.rank = rank;
    r.coords = mesh.coordsLabel(rank);
    for (const PipelineStage &s : stages)
        if (s.node == me.pp)
            r.stage = s.node, r.firstLayer = s.firstLayer, r.lastLayer = s.lastLayer;
    const bool gpt = dynamic_cast<GptModel *>(&model) != nullptr; // mesh.cpp slices a gpt only
    const int tp = mesh.size(MeshAxis::Tp);
    for (const auto &[name, p] : model.namedParameters()) {
        MeshParamHolding h;
        h.param = name;
        const int l = layerOf.at(name);
        h.layer = layerNames[std::size_t(l)];
        h.numel = p.numel();
        if (l >= r.firstLayer && l <= r.lastLayer) {
            const gpt_parallel::Split split =
                gpt ? gpt_parallel::splitOf(name) : gpt_parallel::Split::Replicated;
            h.ranges = slicedRanges(p, split, me.tp, gpt ? tp : 1);
            r.localElements += h.held();
        }
        r.params.push_back(std::move(h));
    }
    const int cp = mesh.size(MeshAxis::Cp);
    r.blockSize = c.model.blockSize;
    r.sequenceBegin = me.cp * r.blockSize / cp;
    r.sequenceEnd = (me.cp + 1) * r.blockSize / cp;
    const std::vector<int> data = mesh.dataGroup(rank);
    r.dataGroupSize = int(data.size());
    r.optimizerEnd = r.localElements;
    if (c.strategy != "ddp" && data.size() > 1) {
        const int dataRank = int(std::find(data.begin(), data.end(), rank) - data.begin());
        const net::ChunkRange chunk =
            net::Communicator::chunk(std::size_t(r.localElements), int(data.size()), dataRank);
        r.optimizerBegin = std::int64_t(chunk.offset);
        r.optimizerEnd = std::int64_t(chunk.offset + chunk.count);
    }
    fillBytes(r, c.strategy, c.optimizer.kind == OptimizerConfig::Kind::Adam, c.model.precision == Precision::Bf16);
    return r;
}

} // namespace

MeshPlan planMesh(const TrainConfig &c, TrainModel &model)
{
    const net::DeviceMesh mesh = net::DeviceMesh::parse(c.mesh);
    if (c.strategy != "ddp" && c.strategy != "zero1" && c.strategy != "zero2" && c.strategy != "zero3")
        throw std::invalid_argument("--mesh: the dp axis runs ddp, zero1, zero2 or zero3, not " + c.strategy);
    MeshPlan plan;
    plan.mesh = mesh.spec();
    plan.dpMode = c.strategy;
    const std::vector<ModelLayer> layers = model.layers();
    std::map<std::string, int> layerOf;
    for (int l = 0; l < int(layers.size()); ++l) {
        plan.layers.push_back(layers[std::size_t(l)].name);
        for (const auto &name : layers[std::size_t(l)].paramNames)
            layerOf[name] = l;
    }
    const std::vector<PipelineStage> stages =
        mesh_plan::stagePlacement(mesh_plan::layerSizes(model), c.placement, mesh.size(MeshAxis::Pp))
            .stages();
    for (int rank = 0; rank < mesh.nodes(); ++rank)
        plan.ranks.push_back(planRank(mesh, rank, stages, layerOf, plan.layers, model, c));
    return plan;
}

} // namespace smol::engine
