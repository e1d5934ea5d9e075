// predictRun: a run's figures before it runs (run_prediction.h says which
// and from what). The strategies' closed forms are their descriptions'
// (strategies/*.h); a mesh's model states are mesh_plan's; the activations
// activation_forms'. What is written here: which rows and layers each node
// computes, and the bytes of a mesh's axes.
#include "run_prediction.h"

#include "activation_forms.h"

#include "engine/models/model.h"
#include "engine/strategies/mesh_plan.h"
#include "engine/strategies/strategy_registry.h"
#include "engine/strategy.h"
#include "engine/trainer.h"
#include "net/device_mesh.h"

#include <algorithm>
#include <iterator>
#include <set>

namespace smol::engine::plan {

namespace {

using net::MeshAxis;

ClosedFormInput closedFormInput(const TrainConfig &c, std::int64_t params)
{
    ClosedFormInput in;
    in.params = params;
    in.nodes = c.nodes;
    in.adam = c.optimizer.kind == OptimizerConfig::Kind::Adam;
    in.accumulate = c.accumulate;
    in.bf16 = c.model.precision == Precision::Bf16;
    return in;
}

// The most micro-batches a stage holds activations for at once in its
// schedule's order (pipelineOrder: what the strategies run).
std::int64_t inFlight(const TrainConfig &c, int stages, int stage)
{
    std::int64_t held = 0, most = 0;
    for (const PipelineOp &op : pipelineOrder(c.schedule, stages, stage, c.microBatches))
        most = std::max(most, held += op.forward ? 1 : -1);
    return std::max<std::int64_t>(most, 1);
}

// The largest rows any micro-step of share `share` of `shares` takes.
std::int64_t microStepRows(const TrainConfig &c, int share, int shares)
{
    std::int64_t rows = 0;
    for (std::int64_t j = 0; j < c.accumulate; ++j)
        rows = std::max(rows, batchRows(c.accumulate * c.globalBatch, int(j) * shares + share,
                                        int(c.accumulate) * shares)
                                  .count);
    return rows;
}

// A strategy alone: its description's closed forms, the same for every node
// (a server's link the busiest: rank 0 of a star).
void predictStrategy(const TrainConfig &c, RunPrediction &p)
{
    const StrategyDescription &d = *describeStrategy(c.strategy);
    const ClosedFormInput in = closedFormInput(c, p.params);
    const std::optional<HeldBytes> held = d.heldByCategory ? d.heldByCategory(in) : std::nullopt;
    if (!c.compression.isOn())
        p.bytes = d.bytesPerStep(in);
    p.formulas.push_back(c.strategy + ": " + (d.formulas ? d.formulas : "no closed form written") +
                         "; P = " + std::to_string(p.params) + ", N = " + std::to_string(c.nodes) +
                         ", K = " + std::to_string(c.accumulate));
    if (c.compression.isOn())
        p.formulas.push_back("bytes: no closed form with --compress " + c.compression.text());
    const std::unique_ptr<Strategy> kind = makeStrategy(c.strategy);
    const int shares = kind->batchShares(c.nodes);
    for (int r = 0; r < c.nodes; ++r) {
        NodePrediction n;
        n.rank = r;
        n.label = "rank " + std::to_string(r);
        n.held = held;
        if (p.bytes)
            n.bytesPerStep = d.topology != StrategyTopology::Star || c.nodes < 2 ? p.bytes->mean
                             : r == 0 ? p.bytes->busiest
                                      : (c.nodes * p.bytes->mean - p.bytes->busiest) / (c.nodes - 1);
        if (kind->isDataParallel()) {
            ActivationInput a;
            a.model = c.model;
            a.rows = a.batchRows = microStepRows(c, r, shares);
            a.positions = c.model.blockSize;
            a.elementBytes = int(in.elementBytes());
            const ActivationForm form = activationBytes(a);
            n.activations = form.bytes;
            if (r == 0)
                p.formulas.push_back("activations (rank 0): " + form.formula);
        }
        p.ranks.push_back(n);
    }
    if (!kind->isDataParallel())
        p.formulas.push_back("activations: no closed form for " + c.strategy);
}

// A mesh node's stage as the activation and pp forms see it.
struct StageSeat {
    bool first = true, last = true;
    int index = 0;       // its stage's order in the pipeline
    int stages = 1;
    std::int64_t blocks = 0; // gpt blocks among its layers
};

StageSeat seatOf(const MeshPlan &plan, const MeshRankPlan &r, const ModelConfig &m)
{
    StageSeat s;
    std::set<int> firsts;
    for (const MeshRankPlan &other : plan.ranks)
        firsts.insert(other.firstLayer);
    s.stages = int(firsts.size());
    s.index = int(std::distance(firsts.begin(), firsts.find(r.firstLayer)));
    s.first = r.firstLayer == 0;
    s.last = r.lastLayer + 1 == int(plan.layers.size());
    if (m.kind == "gpt")
        s.blocks = std::max<std::int64_t>(0, std::min<std::int64_t>(r.lastLayer, m.nLayer) -
                                                 std::max(r.firstLayer, 1) + 1);
    return s;
}

// Features of the activation after layer `layer` (what pp sends on).
std::int64_t widthAfter(const ModelConfig &m, int layer)
{
    if (m.kind == "gpt")
        return m.nEmbd;
    const std::int64_t mlp[] = {256, 128, 10};
    return layer >= 0 && layer < 3 ? mlp[layer] : 784;
}

// run_prediction.h's table of a mesh's axes, for one node.
std::map<std::string, double> meshAxisBytes(const TrainConfig &c, const net::DeviceMesh &mesh,
                                            const MeshRankPlan &r, const StageSeat &seat, std::int64_t e)
{
    const ModelConfig &m = c.model;
    const int dp = mesh.size(MeshAxis::Dp), tp = mesh.size(MeshAxis::Tp), pp = mesh.size(MeshAxis::Pp),
              cp = mesh.size(MeshAxis::Cp);
    const bool gpt = m.kind == "gpt", sp = mesh.sequenceParallel();
    const double K = double(c.accumulate), b = double(c.globalBatch / dp);
    const double s = gpt ? double(m.blockSize / cp) : 1, h = double(m.nEmbd), t = tp;
    const double ring = 2.0 * (t - 1) / t;
    std::map<std::string, double> axes;
    const int G = r.dataGroupSize;
    if (G > 1)
        axes[dp > 1 ? "dp" : "cp"] += 2.0 * (G - 1) / G * double(e) * double(r.localElements);
    if (tp > 1) {
        std::int64_t replicated = 0;
        for (const MeshParamHolding &param : r.params)
            if (!param.ranges.empty() && param.held() == param.numel)
                replicated += param.numel;
        axes["tp"] = K * double(seat.blocks) * 4 * ring * double(e) * b * s * h +
                     (sp ? ring * double(e) * double(replicated) : 0);
    }
    if (pp > 1) {
        const double sent = sp ? s / t : s;
        axes["pp"] = K * double(e) * b * sent *
                     double((seat.last ? 0 : widthAfter(m, r.lastLayer)) +
                            (seat.first ? 0 : widthAfter(m, r.firstLayer - 1)));
    }
    if (cp > 1)
        axes["cp"] += K * double(seat.blocks) * 2 * (cp - 1) * double(e) * b * s * 2 * h / t;
    return axes;
}

ActivationForm meshActivations(const TrainConfig &c, const net::DeviceMesh &mesh, const MeshRankPlan &r,
                               const StageSeat &seat, std::int64_t e)
{
    const int dp = mesh.size(MeshAxis::Dp);
    ActivationInput a;
    a.model = c.model;
    a.batchRows = c.globalBatch / dp;
    a.rows = a.batchRows / c.microBatches;
    a.positions = c.model.kind == "gpt" ? c.model.blockSize / mesh.size(MeshAxis::Cp) : 1;
    a.tp = mesh.size(MeshAxis::Tp);
    a.sequenceParallel = mesh.sequenceParallel();
    a.firstLayer = r.firstLayer;
    a.lastLayer = r.lastLayer;
    a.holdsInput = a.holdsTargets = seat.first || seat.last; // the step's batch, for its inputs or targets
    a.inFlight = inFlight(c, seat.stages, seat.index);
    a.keepsOutput = !seat.last;
    a.elementBytes = int(e);
    return activationBytes(a);
}

void predictMesh(const TrainConfig &c, TrainModel &model, RunPrediction &p)
{
    const net::DeviceMesh mesh = net::DeviceMesh::parse(c.mesh);
    const MeshPlan plan = planMesh(c, model);
    const std::int64_t e = closedFormInput(c, p.params).elementBytes();
    p.mesh = plan.mesh;
    p.formulas.push_back("model states (mesh_plan, " + c.strategy +
                         " on dp x cp; S its stage's parameters tp-sliced): ddp 4S params + 4S grads + opt(S); "
                         "zero1, zero2 4S + 4S + opt(chunk); zero3 4 chunk + 4 chunk + opt(chunk)");
    p.formulas.push_back("bytes (a step): dp 2(G-1)/G x eS; tp K x L x 4 x 2(t-1)/t x e b s h (+ SP: 2(t-1)/t x e "
                         "R replicated); pp K x e b s' h each way; cp K x L x 2(C-1) x e b s 2h/t");
    if (c.compression.isOn())
        p.formulas.push_back("bytes: no closed form with --compress " + c.compression.text());
    double sum = 0, most = 0;
    std::set<int> stagesTold; // one activation formula per stage
    for (const MeshRankPlan &r : plan.ranks) {
        const StageSeat seat = seatOf(plan, r, c.model);
        NodePrediction n;
        n.rank = r.rank;
        n.label = "rank " + std::to_string(r.rank) + " (" + r.coords + ")";
        n.held = HeldBytes{r.paramsBytes, r.gradsBytes, r.optimizerBytes};
        if (!c.compression.isOn()) {
            n.bytesByAxis = meshAxisBytes(c, mesh, r, seat, e);
            double total = 0;
            for (const auto &[axis, bytes] : n.bytesByAxis)
                total += bytes;
            n.bytesPerStep = total;
            sum += total;
            most = std::max(most, total);
        }
        const ActivationForm form = meshActivations(c, mesh, r, seat, e);
        n.activations = form.bytes;
        if (stagesTold.insert(r.firstLayer).second)
            p.formulas.push_back("activations (" + n.label + "): " + form.formula);
        p.ranks.push_back(n);
    }
    if (!c.compression.isOn())
        p.bytes = WireBytes{sum / double(plan.ranks.size()), most};
}

} // namespace

RunPrediction predictRun(const TrainConfig &config)
{
    validateConfig(config);
    TrainConfig c = config;
    c.model.seed = c.seed;
    if (c.model.kind == "gpt")
        loadTrainingData(c); // the corpus's vocabulary sizes the head
    const std::unique_ptr<Strategy> kind = makeStrategy(c.strategy, c.mesh);
    checkBatchSplit(*kind, c.globalBatch, c.nodes);
    kind->checkContext(c.model, nodeContextOf(c, 0)); // as runTraining checks before it starts
    const std::unique_ptr<TrainModel> model = makeModel(c.model);
    RunPrediction p;
    p.strategy = c.strategy;
    p.model = c.model.kind;
    p.nodes = c.nodes;
    for (const auto &[name, t] : model->namedParameters())
        p.params += t.numel();
    p.samplesPerStep = kind->samplesPerStep(c.accumulate * c.globalBatch, c.nodes);
    if (c.mesh.empty())
        predictStrategy(c, p);
    else
        predictMesh(c, *model, p);
    return p;
}

} // namespace smol::engine::plan
