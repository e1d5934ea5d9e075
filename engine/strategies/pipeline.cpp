// pipeline: model parallelism. The layers are cut into stages, one per node,
// and micro-batches flow through them (GPipe or 1F1B).
//
// The model is the sequence model.layers(); the placement (engine/placement.h;
// --placement, default: balanced by parameter count) groups it into p = N
// contiguous stages, stage i on the node holding the i-th range. Every node
// works on the whole global batch B (the first stage reads the inputs, the
// last the targets), cut into M micro-batches of B/M. Per step:
//   forward of micro-batch j:  stage 0 runs its layers on the inputs and
//       sends the activation to stage 1, which runs its layers and sends on,
//       ..., the last stage computes the micro-batch's mean loss;
//   backward of micro-batch j: the last stage back-propagates loss/M and
//       sends the gradient of its input activation to stage p-2, ..., down
//       to stage 0; parameter gradients accumulate over the M micro-batches,
//       so they equal one step's on the whole batch;
//   update: every stage applies the optimizer to its own parameters.
// The order of forwards (F) and backwards (B) on stage i:
//   gpipe: F0 .. F(M-1), then B0 .. B(M-1): M micro-batches' activations held;
//   1f1b:  min(p-1-i, M) forwards to fill the pipe, then F, B alternately,
//          then the remaining Bs: at most p-i micro-batches' activations held.
// With equal stages and free communication either leaves each stage idle
// (p-1)/(M+p-1) of a step (the bubble); stats() reports the measured idle.
//
// Holds: its stage's parameters, gradients and optimizer state only (the
// other layers' parameters are freed in setup), plus the activations of the
// micro-batches in flight.
// Bytes on the wire per node per step: a stage other than the last sends M
// activations of (B/M x its output size) forward, e.g. gpt: B x T x C x 4
// bytes in all; a stage other than the first sends as many bytes of
// activation gradients backward. Once per run, 9 int64 (the activation's
// shape) per boundary; fullParameters() broadcasts each stage's parameters.
#include "pipeline.h"

#include "engine/strategy.h"

#include "engine/flat_params.h"
#include "engine/placement.h"
#include "engine/strategies/mesh_plan.h"
#include "engine/strategies/stage_link.h"
#include "engine/tensor_bridge.h"
#include "net/communicator.h"

#include <cmath>
#include <map>
#include <stdexcept>

namespace smol::engine {

namespace {

using Clock = std::chrono::steady_clock;

using mesh_plan::layerSizes; // parameter count of each layer, in layers() order

Placement placementFor(TrainModel &model, const NodeContext &ctx)
{
    if (ctx.microBatches < 1 || ctx.globalBatch % ctx.microBatches != 0)
        throw std::invalid_argument("--micro-batches " + std::to_string(ctx.microBatches) +
                                    " does not divide --global-batch " + std::to_string(ctx.globalBatch));
    const std::vector<std::int64_t> sizes = layerSizes(model);
    if (ctx.placement.empty() || ctx.placement == "auto") {
        try {
            return Placement::balanced(sizes, ctx.nodes);
        } catch (const PlacementError &e) {
            throw PlacementError("pipeline: " + std::string(e.what()));
        }
    }
    try {
        return Placement::parse(ctx.placement, int(sizes.size()), ctx.nodes);
    } catch (const PlacementError &e) {
        throw PlacementError("--placement " + ctx.placement + ": " + e.what());
    }
}

class PipelineStrategy : public Strategy {
public:
    std::string name() const override { return strategies::kPipeline.name; }
    bool isDataParallel() const override { return false; }
    int batchShares(int /*nodes*/) const override { return 1; }

    void checkContext(const ModelConfig &model, const NodeContext &ctx) const override
    {
        refuseAccumulation(ctx, "the pipeline already accumulates gradients over its micro-batches; "
                                "use --micro-batches and a larger --global-batch instead");
        const std::unique_ptr<TrainModel> replica = makeModel(model);
        placementFor(*replica, ctx);
    }

    void setup(NodeContext &ctx) override
    {
        m_ctx = ctx;
        m_stages = placementFor(*ctx.model, ctx).stages();
        for (std::size_t s = 0; s < m_stages.size(); ++s)
            if (m_stages[s].node == ctx.rank)
                m_stage = int(s);
        const PipelineStage &me = m_stages[std::size_t(m_stage)];

        // Each layer's range of the flat vector (layers are consecutive in
        // namedParameters() order and cover it).
        const auto named = ctx.model->namedParameters();
        std::map<std::string, std::size_t> index;
        for (std::size_t i = 0; i < named.size(); ++i)
            index[named[i].first] = i;
        std::vector<ModelLayer> layers = ctx.model->layers();
        std::vector<std::pair<std::string, torch::Tensor>> mine;
        std::size_t next = 0;
        for (int l = 0; l < int(layers.size()); ++l) {
            m_layerBegin.push_back(m_total);
            for (const auto &name : layers[std::size_t(l)].paramNames) {
                if (index.at(name) != next++)
                    throw std::logic_error("pipeline: layer " + layers[std::size_t(l)].name +
                                           " does not follow namedParameters() order");
                const torch::Tensor &p = named[index.at(name)].second;
                m_paramSizes.emplace_back(name, p.numel());
                m_paramOwner.push_back(m_stages[std::size_t(stageOfLayer(l))].node);
                m_total += p.numel();
                if (l >= me.firstLayer && l <= me.lastLayer)
                    mine.emplace_back(name, p);
            }
            if (l >= me.firstLayer && l <= me.lastLayer)
                m_layers.push_back(layers[std::size_t(l)]);
        }
        m_layerBegin.push_back(m_total);
        if (next != named.size())
            throw std::logic_error("pipeline: the model's layers do not cover all its parameters");

        m_flat = std::make_unique<FlatParams>(mine);
        m_flat->attachGrads();
        m_opt = std::make_unique<FlatOptimizer>(ctx.optimizer, m_flat->numel());
        // Free the other stages' layers: this node never runs them.
        torch::NoGradGuard noGrad;
        for (std::size_t i = 0; i < named.size(); ++i)
            if (m_paramOwner[i] != ctx.rank)
                named[i].second.set_data(torch::empty({0}, named[i].second.options()));
    }

    double step(std::int64_t step) override
    {
        const auto start = Clock::now();
        m_busy = Clock::duration::zero();
        m_flat->grads().zero_();
        const std::int64_t M = m_ctx.microBatches;
        Batch batch;
        if (isFirst() || isLast())
            batch = m_ctx.data->trainBatch(step, m_ctx.globalBatch, /*rank=*/0, /*nodes=*/1);
        m_inputs = isFirst() ? batch.input.chunk(M, 0) : std::vector<torch::Tensor>{};
        m_targets = isLast() ? batch.target.chunk(M, 0) : std::vector<torch::Tensor>{};
        m_inFlight.assign(std::size_t(M), {});
        m_lossSum = 0;

        for (const PipelineOp &op : pipelineOrder(m_ctx.schedule, int(m_stages.size()), m_stage, M))
            op.forward ? forward(op.microBatch) : backward(op.microBatch);
        // The bubble: the share of the step this stage spent not computing
        // (waiting for a neighbour). Step 0 also warms up allocator and pipe.
        const double wall = std::chrono::duration<double>(Clock::now() - start).count();
        if ((step > 0 || m_ctx.steps == 1) && wall > 0) {
            m_idleSum += 1 - std::chrono::duration<double>(m_busy).count() / wall;
            ++m_idleSteps;
        }
        timed(m_ctx, SpanEvent::Kind::Optimizer, step, [&] { m_opt->step(m_flat->values(), m_flat->grads()); });
        return isLast() ? m_lossSum / double(M) : std::nan("");
    }

    net::MemoryByCategory memory() const override
    {
        return heldBytes(m_flat->values(), m_flat->grads(), m_opt.get());
    }

    // Every stage broadcasts its slice of the flat vector, in stage order.
    torch::Tensor fullParameters() override
    {
        torch::Tensor full = torch::empty({m_total}, m_flat->dtype());
        for (std::size_t s = 0; s < m_stages.size(); ++s) {
            const std::int64_t begin = m_layerBegin[std::size_t(m_stages[s].firstLayer)];
            torch::Tensor slice =
                full.narrow(0, begin, m_layerBegin[std::size_t(m_stages[s].lastLayer) + 1] - begin);
            if (int(s) == m_stage)
                slice.copy_(m_flat->values());
            if (m_ctx.comm)
                m_ctx.comm->broadcast(viewOf(slice), m_stages[s].node, "params.stage" + std::to_string(s));
        }
        return full;
    }

    std::vector<ShardRange> shards() const override
    {
        std::vector<ShardRange> out;
        for (std::size_t i = 0; i < m_paramSizes.size(); ++i)
            out.push_back({m_paramSizes[i].first, 0, m_paramSizes[i].second, m_paramOwner[i],
                           m_paramOwner[i] == m_ctx.rank});
        return out;
    }

    std::map<std::string, double> stats() const override
    {
        const double p = double(m_stages.size()), M = double(m_ctx.microBatches);
        return {{"bubble_fraction", m_idleSteps ? m_idleSum / double(m_idleSteps) : 0.0},
                {"bubble_fraction_formula", (p - 1) / (M + p - 1)}};
    }

private:
    struct InFlight {
        torch::Tensor input;  // the stage's input (the received activation, a leaf requiring grad)
        torch::Tensor output; // the activation sent on, or (last stage) the micro-batch's loss
    };

    bool isFirst() const { return m_stage == 0; }
    bool isLast() const { return m_stage + 1 == int(m_stages.size()); }
    StageLink &link()
    {
        if (!m_link)
            m_link = std::make_unique<StageLink>(m_ctx.comm, isFirst() ? -1 : m_stages[std::size_t(m_stage) - 1].node,
                                                 isLast() ? -1 : m_stages[std::size_t(m_stage) + 1].node,
                                                 m_flat->dtype());
        return *m_link;
    }
    int stageOfLayer(int layer) const
    {
        for (std::size_t s = 0; s < m_stages.size(); ++s)
            if (layer <= m_stages[s].lastLayer)
                return int(s);
        return -1;
    }

    void forward(std::int64_t j)
    {
        InFlight &f = m_inFlight[std::size_t(j)];
        if (isFirst()) {
            f.input = m_inputs[std::size_t(j)];
        } else {
            f.input = link().receiveActivation(j);
        }
        const auto start = Clock::now();
        torch::Tensor x = f.input;
        for (const auto &layer : m_layers)
            x = layer.forward(x);
        if (isLast()) {
            x = m_ctx.model->lossFromOutput(x, Batch{torch::Tensor(), m_targets[std::size_t(j)]});
            m_lossSum += x.item<double>();
        }
        m_busy += Clock::now() - start;
        f.output = x;
        if (isLast())
            return;
        link().sendActivation(x, j, m_stage);
    }

    void backward(std::int64_t j)
    {
        InFlight &f = m_inFlight[std::size_t(j)];
        torch::Tensor gradOut;
        if (!isLast())
            gradOut = link().receiveGradient(f.output, j);
        const auto start = Clock::now();
        if (isLast())
            (f.output / double(m_ctx.microBatches)).backward(); // sum over j of loss_j / M: the batch's mean
        else
            f.output.backward(gradOut);
        m_busy += Clock::now() - start;
        if (!isFirst())
            link().sendGradient(f.input.grad(), j);
        f = {}; // this micro-batch's activations are freed here
    }

    NodeContext m_ctx;
    std::vector<PipelineStage> m_stages;
    int m_stage = 0;
    std::vector<ModelLayer> m_layers;       // this stage's, in order
    std::vector<std::int64_t> m_layerBegin; // flat offset of each layer, then the total
    std::vector<std::pair<std::string, std::int64_t>> m_paramSizes; // every parameter, in order
    std::vector<int> m_paramOwner;                                  // node holding each parameter
    std::int64_t m_total = 0;
    std::unique_ptr<FlatParams> m_flat; // this stage's parameters
    std::unique_ptr<FlatOptimizer> m_opt;

    std::vector<torch::Tensor> m_inputs;  // first stage: the micro-batches' inputs
    std::vector<torch::Tensor> m_targets; // last stage: their targets
    std::vector<InFlight> m_inFlight;
    std::unique_ptr<StageLink> m_link; // to the neighbouring stages, made at the first use
    double m_lossSum = 0;

    Clock::duration m_busy{};
    double m_idleSum = 0;
    std::int64_t m_idleSteps = 0;
};

} // namespace

std::unique_ptr<Strategy> strategies::makePipeline() { return std::make_unique<PipelineStrategy>(); }

} // namespace smol::engine
