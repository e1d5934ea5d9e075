// mesh: every axis of a device mesh at once (mesh.h says who sends what).
// One node's step: its replica's share of the global batch (dp), its block
// of each sequence (cp), through its pipeline stage's layers (pp), each
// layer cut across its tp group; the stage's micro-batches in the pipeline
// schedule's order (with --accumulate K: K micro-steps of that, each on the
// replica's share of 1/K of a K x B batch); then its gradients reduced over
// its dp x cp group, once, and the update.
#include "mesh.h"

#include "engine/strategy.h"

#include "engine/flat_params.h"
#include "engine/grad_compressor.h"
#include "engine/models/gpt_model.h"
#include "engine/placement.h"
#include "engine/strategies/gpt_parallel.h"
#include "engine/strategies/mesh_plan.h"
#include "engine/strategies/stage_link.h"
#include "engine/tensor_bridge.h"
#include "net/communicator.h"
#include "net/device_mesh.h"

#include <ATen/native/Resize.h>

#include <atomic>
#include <cmath>
#include <map>
#include <stdexcept>

namespace smol::engine {

namespace {

using net::MeshAxis;
using gpt_parallel::Split;

// One process group of the mesh (Communicator::makeGroup: over our links or
// Gloo's), hooked like the world's (breakpoints, memory, spans).
struct Group {
    std::unique_ptr<net::Communicator> comm;
};

Group makeGroup(net::Communicator &world, std::vector<int> members, std::uint32_t id, const std::string &axis)
{
    return Group{world.makeGroup(std::move(members), id, axis)};
}

// The stages' layers, as the run's plan (mesh_plan.h) places them too.
using mesh_plan::layerSizes;
using mesh_plan::stagePlacement;

class MeshStrategy : public Strategy {
public:
    MeshStrategy(std::string dp, net::DeviceMesh mesh) : m_dpMode(std::move(dp)), m_mesh(mesh) {}

    std::string name() const override { return "mesh"; }
    bool isDataParallel() const override { return false; }
    int batchShares(int) const override { return m_mesh.size(MeshAxis::Dp); }

    void checkContext(const ModelConfig &model, const NodeContext &ctx) const override
    {
        const std::string where = "--mesh " + m_mesh.spec() + ": ";
        if (m_mesh.nodes() != ctx.nodes)
            throw std::invalid_argument(where + "the axes multiply to " + std::to_string(m_mesh.nodes()) +
                                        " nodes, not the run's " + std::to_string(ctx.nodes));
        const int tp = m_mesh.size(MeshAxis::Tp), pp = m_mesh.size(MeshAxis::Pp), cp = m_mesh.size(MeshAxis::Cp),
                  dp = m_mesh.size(MeshAxis::Dp);
        const bool gpt = model.kind == "gpt", mlp = model.kind == "mlp";
        if (!gpt && !mlp && tp * pp * cp > 1)
            throw std::invalid_argument(where + "a TorchScript model is one opaque layer: tp, pp and cp cannot "
                                                "split it (dp alone can run it)");
        if (tp > 1) {
            if (!gpt)
                throw std::invalid_argument(where + "tp splits gpt's attention heads and MLP; --model " +
                                            model.kind + " is not gpt");
            if (model.nHead % tp != 0)
                throw std::invalid_argument(where + "tp=" + std::to_string(tp) + " does not divide n_head " +
                                            std::to_string(model.nHead));
        }
        if (cp > 1) {
            if (!gpt)
                throw std::invalid_argument(where + "cp splits the sequence of gpt's attention; --model " +
                                            model.kind + " has no attention");
            if (model.blockSize % cp != 0)
                throw std::invalid_argument(where + "cp=" + std::to_string(cp) + " does not divide the block size " +
                                            std::to_string(model.blockSize));
        }
        if (m_mesh.sequenceParallel() && model.blockSize % (std::int64_t(cp) * tp) != 0)
            throw std::invalid_argument(where + "sp cuts each cp block of the sequence over tp: cp x tp = " +
                                        std::to_string(cp * tp) + " does not divide the block size " +
                                        std::to_string(model.blockSize));
        if (ctx.microBatches < 1 || ctx.globalBatch % (std::int64_t(dp) * ctx.microBatches) != 0)
            throw std::invalid_argument(where + "--global-batch " + std::to_string(ctx.globalBatch) +
                                        " does not split into " + std::to_string(dp) + " replica(s) of " +
                                        std::to_string(ctx.microBatches) + " micro-batch(es)");
        if (pp == 1 && !ctx.placement.empty() && ctx.placement != "auto")
            throw std::invalid_argument(where + "--placement places layers on pp stages; this mesh has no pp axis");
        if (pp > 1) {
            const std::unique_ptr<TrainModel> replica = makeModel(model);
            const std::vector<std::int64_t> sizes = layerSizes(*replica);
            if (pp > int(sizes.size()))
                throw std::invalid_argument(where + "pp=" + std::to_string(pp) + " is more stages than the model's " +
                                            std::to_string(sizes.size()) + " layers");
            stagePlacement(sizes, ctx.placement, pp);
        }
    }

    void setup(NodeContext &ctx) override
    {
        m_ctx = ctx;
        m_me = m_mesh.coordsOf(ctx.rank);
        makeGroups(*ctx.comm);
        const std::vector<std::int64_t> sizes = layerSizes(*ctx.model);
        m_stages = stagePlacement(sizes, ctx.placement, m_mesh.size(MeshAxis::Pp)).stages();
        for (std::size_t s = 0; s < m_stages.size(); ++s)
            if (m_stages[s].node == m_me.pp)
                m_stage = int(s);
        m_layerBegin = {0};
        for (std::int64_t n : sizes)
            m_layerBegin.push_back(m_layerBegin.back() + n);
        holdStage();
        m_flat->attachGrads();
        const std::int64_t n = m_flat->numel();
        if (m_dpMode == "ddp" || !m_data.comm) {
            m_opt = std::make_unique<FlatOptimizer>(ctx.optimizer, n);
            if (m_data.comm) // the dp axis's all-reduce, compressed as --compress asks
                m_compressor = makeGradCompressor(ctx.compression);
            for (const auto &slot : m_flat->slots())
                m_pieces.push_back(BucketPiece{slot.name, slot.offset, slot.shape});
        } else {
            m_shard = net::Communicator::chunk(std::size_t(n), m_data.comm->worldSize(), m_data.comm->rank());
            m_opt = std::make_unique<FlatOptimizer>(ctx.optimizer, std::int64_t(m_shard.count));
        }
        if (zero3()) { // from here on only the shard stays between steps
            m_shardValues = mine(m_flat->values()).clone();
            m_shardGrads = torch::zeros_like(m_shardValues);
            release();
        }
    }

    // With --accumulate K, K micro-steps (each the pipeline's M micro-batches
    // of the replica's share) before the one reduction over the dp group.
    double step(std::int64_t step) override
    {
        if (zero3())
            materialise("params");
        m_flat->grads().zero_();
        m_lossSum = 0;
        m_step = step;
        for (std::int64_t a = 0; a < m_ctx.accumulate; ++a)
            microStep(a);
        timed(m_ctx, SpanEvent::Kind::Optimizer, step, [&] { reduceAndUpdate(); });
        return isLast() ? m_lossSum / double(m_ctx.microBatches * m_ctx.accumulate) : std::nan("");
    }

    net::MemoryByCategory memory() const override
    {
        if (!zero3()) {
            net::MemoryByCategory m = heldBytes(m_flat->values(), m_flat->grads(), m_opt.get());
            m.optimizer += m_compressor ? m_compressor->stateBytes() : 0; // PowerSGD's error buffers and Qs
            return m;
        }
        net::MemoryByCategory m = heldBytes(m_shardValues, m_shardGrads, m_opt.get());
        if (m_held) { // the stage in full beside the chunk
            const net::MemoryByCategory full = heldBytes(m_flat->values(), m_flat->grads(), nullptr);
            m.params += full.params;
            m.grads += full.grads;
        }
        return m;
    }

    // Each stage's parameters made whole across its tp group, then every
    // stage broadcasts them along the pp group, in stage order.
    torch::Tensor fullParameters() override
    {
        torch::NoGradGuard noGrad;
        if (zero3())
            materialise("params.full");
        std::vector<torch::Tensor> slices;
        for (const auto &slot : m_flat->slots())
            slices.push_back(slot.param);
        const torch::Tensor mine = gpt_parallel::assembleFull(slices, m_splits, m_tp.comm.get(), m_me.tp,
                                                              m_mesh.size(MeshAxis::Tp))
                                       .clone(); // zero3 frees the slices below
        if (zero3())
            release();
        torch::Tensor full = torch::empty({m_layerBegin.back()}, m_flat->dtype());
        for (std::size_t s = 0; s < m_stages.size(); ++s) {
            const std::int64_t begin = m_layerBegin[std::size_t(m_stages[s].firstLayer)];
            torch::Tensor slice =
                full.narrow(0, begin, m_layerBegin[std::size_t(m_stages[s].lastLayer) + 1] - begin);
            if (int(s) == m_stage)
                slice.copy_(mine);
            if (m_pp.comm)
                m_pp.comm->broadcast(viewOf(slice), m_stages[s].node, "params.stage" + std::to_string(s));
        }
        return full;
    }

    std::vector<ShardRange> shards() const override;

private:
    struct InFlight {
        torch::Tensor input;  // the stage's input (the received activation, a leaf requiring grad)
        torch::Tensor output; // the activation sent on, or (last stage) the micro-batch's loss
    };

    bool isFirst() const { return m_stage == 0; }
    bool isLast() const { return m_stage + 1 == int(m_stages.size()); }
    StageLink &link() // the neighbouring stages, by pp group rank
    {
        if (!m_link)
            m_link = std::make_unique<StageLink>(m_pp.comm.get(), isFirst() ? -1 : m_stages[std::size_t(m_stage) - 1].node,
                                                 isLast() ? -1 : m_stages[std::size_t(m_stage) + 1].node,
                                                 m_flat->dtype());
        return *m_link;
    }

    void makeGroups(net::Communicator &world)
    {
        auto axisGroup = [&](MeshAxis axis) {
            if (m_mesh.size(axis) == 1)
                return Group{};
            return makeGroup(world, m_mesh.group(m_ctx.rank, axis), net::DeviceMesh::groupId(axis),
                             net::meshAxisName(axis));
        };
        m_tp = axisGroup(MeshAxis::Tp);
        m_cp = axisGroup(MeshAxis::Cp);
        m_pp = axisGroup(MeshAxis::Pp);
        const int dp = m_mesh.size(MeshAxis::Dp), cp = m_mesh.size(MeshAxis::Cp);
        if (dp * cp > 1)
            m_data = makeGroup(world, m_mesh.dataGroup(m_ctx.rank), net::DeviceMesh::kDataGroupId,
                               cp == 1 ? "dp" : dp == 1 ? "cp" : "dp+cp");
    }

    // This node's stage: its layers and their parameters (tp: its slices)
    // in one flat vector; every other parameter of the model freed.
    void holdStage()
    {
        const PipelineStage &stage = m_stages[std::size_t(m_stage)];
        const std::vector<ModelLayer> all = m_ctx.model->layers();
        const auto named = m_ctx.model->namedParameters();
        std::map<std::string, int> layerOf;
        for (int l = 0; l < int(all.size()); ++l)
            for (const auto &name : all[std::size_t(l)].paramNames)
                layerOf[name] = l;
        auto inStage = [&](const std::string &name) {
            const int l = layerOf.at(name);
            return l >= stage.firstLayer && l <= stage.lastLayer;
        };
        for (const auto &[name, p] : named)
            m_fullNumel[name] = p.numel();
        std::vector<std::pair<std::string, torch::Tensor>> mine;
        std::vector<ModelLayer> layers = all;
        if (auto *gpt = dynamic_cast<GptModel *>(m_ctx.model)) {
            torch::NoGradGuard noGrad;
            const int tp = m_mesh.size(MeshAxis::Tp);
            std::map<std::string, torch::Tensor> local;
            for (const auto &[name, p] : named) {
                const Split split = gpt_parallel::splitOf(name);
                local[name] = inStage(name) ? gpt_parallel::sliceOf(p, split, m_me.tp, tp).requires_grad_(true)
                                            : torch::empty({0}, p.options());
                if (inStage(name)) {
                    mine.emplace_back(name, local[name]);
                    m_splits.push_back(split);
                }
            }
            gpt_parallel::NodeCut cut;
            cut.tp = m_tp.comm.get();
            cut.tpRank = m_me.tp;
            cut.tpNodes = tp;
            cut.cp = m_cp.comm.get();
            cut.cpRank = m_me.cp;
            cut.cpNodes = m_mesh.size(MeshAxis::Cp);
            cut.sequenceParallel = m_mesh.sequenceParallel();
            layers = gpt_parallel::layers(*gpt, local, cut);
        } else {
            for (const auto &[name, p] : named)
                if (inStage(name)) {
                    mine.emplace_back(name, p);
                    m_splits.push_back(Split::Replicated);
                }
        }
        m_layers.assign(layers.begin() + stage.firstLayer, layers.begin() + stage.lastLayer + 1);
        m_flat = std::make_unique<FlatParams>(mine);
        // The model's own tensors that this node does not compute with go.
        torch::NoGradGuard noGrad;
        const bool sliced = dynamic_cast<GptModel *>(m_ctx.model) != nullptr;
        for (const auto &[name, p] : named)
            if (sliced || !inStage(name))
                p.set_data(torch::empty({0}, p.options()));
    }

    // Micro-step a of the step: this replica's share of it (shareBatch: share
    // a x D + dp of K x D of the step's K x B rows), through the stage's
    // layers in the schedule's order, its M micro-batches numbered from a x M
    // on the wire.
    void microStep(std::int64_t a)
    {
        const std::int64_t M = m_ctx.microBatches;
        Batch batch;
        if (isFirst() || isLast()) {
            batch = shareBatch(m_ctx, m_step, {m_me.dp, m_mesh.size(MeshAxis::Dp)}, a);
            const int cp = m_mesh.size(MeshAxis::Cp);
            if (cp > 1) { // this node's block of every sequence
                const std::int64_t t = batch.input.size(1) / cp;
                batch.input = batch.input.narrow(1, m_me.cp * t, t);
                batch.target = batch.target.narrow(1, m_me.cp * t, t);
            }
            if (spShares() > 1) { // the head's loss is over this node's tp share of the positions
                const std::int64_t t = batch.target.size(1) / spShares();
                batch.target = batch.target.narrow(1, m_me.tp * t, t);
            }
        }
        m_inputs = isFirst() ? batch.input.chunk(M, 0) : std::vector<torch::Tensor>{};
        m_targets = isLast() ? batch.target.chunk(M, 0) : std::vector<torch::Tensor>{};
        m_inFlight.assign(std::size_t(M), {});
        m_firstMicroBatch = a * M;
        for (const PipelineOp &op : pipelineOrder(m_ctx.schedule, int(m_stages.size()), m_stage, M))
            op.forward ? forward(op.microBatch) : backward(op.microBatch);
    }

    void forward(std::int64_t j)
    {
        InFlight &f = m_inFlight[std::size_t(j)];
        if (isFirst()) {
            f.input = m_inputs[std::size_t(j)];
        } else {
            f.input = link().receiveActivation(m_firstMicroBatch + j);
        }
        torch::Tensor x = timed(m_ctx, SpanEvent::Kind::Forward, m_step, [&] {
            torch::Tensor y = f.input;
            for (const auto &layer : m_layers)
                y = layer.forward(y);
            if (isLast())
                y = m_ctx.model->lossFromOutput(y, Batch{torch::Tensor(), m_targets[std::size_t(j)]});
            return y;
        });
        f.output = x;
        if (isLast()) {
            m_lossSum += x.item<double>();
            return;
        }
        link().sendActivation(x, m_firstMicroBatch + j, m_stage);
    }

    void backward(std::int64_t j)
    {
        InFlight &f = m_inFlight[std::size_t(j)];
        torch::Tensor gradOut;
        if (!isLast())
            gradOut = link().receiveGradient(f.output, m_firstMicroBatch + j);
        timed(m_ctx, SpanEvent::Kind::Backward, m_step, [&] {
            if (isLast()) // the mean over the micro-batches and micro-steps (SP: and the tp group's shares)
                (f.output / double(m_ctx.microBatches * spShares() * m_ctx.accumulate)).backward();
            else
                f.output.backward(gradOut);
        });
        if (!isFirst())
            link().sendGradient(f.input.grad(), m_firstMicroBatch + j);
        f = {};
    }

    // The mean gradient over the dp x cp group, then the update: ddp
    // all-reduces and updates everything; zero1/zero2 reduce-scatter, update
    // this node's chunk and all-gather the parameters; zero3 reduce-scatters,
    // updates its chunk and frees the stage (the next step gathers it).
    void reduceAndUpdate()
    {
        torch::Tensor values = m_flat->values(), grads = m_flat->grads();
        if (spShares() > 1)
            sumReplicatedOverTp();
        if (!m_data.comm) {
            m_opt->step(values, grads);
            return;
        }
        if (m_dpMode == "ddp") {
            if (m_compressor)
                m_compressor->allReduceMean(*m_data.comm, grads, 0, m_pieces, "grads");
            else
                m_data.comm->allReduce(viewOf(grads), net::ReduceOp::Average, "grads");
            m_opt->step(values, grads);
            return;
        }
        m_data.comm->reduceScatter(viewOf(grads), net::ReduceOp::Average, "grads");
        if (zero3()) { // the shard updated; the stage's full parameters freed until the next step
            m_shardGrads.copy_(mine(grads));
            m_opt->step(m_shardValues, m_shardGrads);
            release();
            return;
        }
        m_opt->step(mine(values), mine(grads));
        m_data.comm->allGather(viewOf(values), "params");
    }

    // zero3 on the dp axis, at the grain of a pipeline stage: between steps a
    // node keeps its 1/(D C) chunk of its stage's parameters, gradients and
    // optimizer state; each step all-gathers the stage's parameters over the
    // dp x cp group once, for all its micro-batches (the stage's layers run
    // forward and backward interleaved under 1F1B, so a per-layer gather
    // would repeat M times), and frees them after the reduce-scatter.
    bool zero3() const { return m_dpMode == "zero3" && m_data.comm; }
    torch::Tensor mine(const torch::Tensor &flat) const
    {
        return flat.narrow(0, std::int64_t(m_shard.offset), std::int64_t(m_shard.count));
    }
    void materialise(const char *why)
    {
        torch::NoGradGuard noGrad;
        resizeStorage(m_flat->values(), m_flat->values().element_size() * m_flat->numel());
        resizeStorage(m_flat->grads(), m_flat->grads().element_size() * m_flat->numel());
        mine(m_flat->values()).copy_(m_shardValues);
        m_held = true;
        m_data.comm->allGather(viewOf(m_flat->values()), why);
    }
    // FSDP's trick (zero3.cpp): emptying the storage frees the stage, while
    // every parameter and gradient view of it stays valid for the next
    // gather to refill.
    void release()
    {
        m_held = false;
        resizeStorage(m_flat->values(), 0);
        resizeStorage(m_flat->grads(), 0);
    }
    static void resizeStorage(const torch::Tensor &t, std::int64_t bytes)
    {
        at::native::resize_bytes_cpu(t.storage().unsafeGetStorageImpl(), std::size_t(bytes));
    }

    // SP: the tp group's nodes each compute on their share of the positions
    // (1 without SP).
    int spShares() const { return m_mesh.sequenceParallel() ? m_mesh.size(MeshAxis::Tp) : 1; }

    // SP: a replicated parameter's gradient on each tp node is its positions'
    // share; their sum over the tp group is the whole sequence's.
    void sumReplicatedOverTp()
    {
        torch::NoGradGuard noGrad;
        const auto &slots = m_flat->slots();
        std::vector<torch::Tensor> parts;
        for (std::size_t i = 0; i < slots.size(); ++i)
            if (m_splits[i] == Split::Replicated)
                parts.push_back(m_flat->grads().narrow(0, slots[i].offset, slots[i].numel));
        if (parts.empty())
            return;
        torch::Tensor packed = torch::cat(parts);
        m_tp.comm->allReduce(viewOf(packed), net::ReduceOp::Sum, "sp.replicated.grads");
        std::int64_t at = 0;
        for (torch::Tensor &p : parts) {
            p.copy_(packed.narrow(0, at, p.numel()));
            at += p.numel();
        }
    }

    const std::string m_dpMode;
    const net::DeviceMesh m_mesh;
    NodeContext m_ctx;
    net::MeshCoords m_me;
    Group m_tp, m_cp, m_pp, m_data;
    std::vector<PipelineStage> m_stages;
    int m_stage = 0;
    std::vector<std::int64_t> m_layerBegin; // full model: flat offset of each layer, then the total
    std::vector<ModelLayer> m_layers;       // this stage's, computing with this node's slices
    std::vector<Split> m_splits;            // by slot of m_flat
    std::map<std::string, std::int64_t> m_fullNumel; // every parameter's, before any cut
    std::unique_ptr<FlatParams> m_flat;
    std::unique_ptr<FlatOptimizer> m_opt;
    std::unique_ptr<GradCompressor> m_compressor; // dp=ddp with --compress
    std::vector<BucketPiece> m_pieces;            // this stage's parameters, for it
    net::ChunkRange m_shard; // zero1/2/3: this node's chunk of the flat vector
    torch::Tensor m_shardValues, m_shardGrads; // zero3: the chunk kept between steps
    std::atomic<bool> m_held{false};           // zero3: the stage's full parameters are materialised

    std::int64_t m_step = 0;
    std::vector<torch::Tensor> m_inputs, m_targets;
    std::vector<InFlight> m_inFlight;
    std::int64_t m_firstMicroBatch = 0; // the current micro-step's first micro-batch number (a x M)
    std::unique_ptr<StageLink> m_link; // along the pp group, made at the first use
    double m_lossSum = 0;
};

// The shard map from this node's seat: every parameter of its stage, split
// or not across its tp group (owner: the tp node holding each piece), and
// the other stages' parameters held by the nodes at its own dp, cp and tp
// coordinates.
std::vector<ShardRange> MeshStrategy::shards() const
{
    std::vector<ShardRange> out;
    const std::vector<ModelLayer> all = m_ctx.model->layers();
    std::map<std::string, std::size_t> slotOf;
    for (std::size_t i = 0; i < m_flat->slots().size(); ++i)
        slotOf[m_flat->slots()[i].name] = i;
    const int tp = m_mesh.size(MeshAxis::Tp);
    for (int l = 0; l < int(all.size()); ++l) {
        for (const auto &name : all[std::size_t(l)].paramNames) {
            const auto slot = slotOf.find(name);
            if (slot == slotOf.end()) { // another stage's
                int stage = 0;
                for (std::size_t s = 0; s < m_stages.size(); ++s)
                    if (l >= m_stages[s].firstLayer && l <= m_stages[s].lastLayer)
                        stage = m_stages[s].node;
                net::MeshCoords c = m_me;
                c.pp = stage;
                out.push_back({name, 0, m_fullNumel.at(name), m_mesh.rankOf(c), false});
                continue;
            }
            const ParamSlot &p = m_flat->slots()[slot->second];
            const Split split = m_splits[slot->second];
            const std::int64_t numel = m_fullNumel.at(name);
            auto ownerOf = [&](int r) {
                net::MeshCoords c = m_me;
                c.tp = r;
                return m_mesh.rankOf(c);
            };
            if (split == Split::Replicated)
                out.push_back({name, 0, numel, m_ctx.rank, true});
            else if (split == Split::Output)
                for (int r = 0; r < tp; ++r)
                    out.push_back({name, r * numel / tp, (r + 1) * numel / tp, ownerOf(r), r == m_me.tp});
            else {
                const std::int64_t rows = p.shape[0], w = p.shape[1], cols = w * tp;
                for (std::int64_t row = 0; row < rows; ++row)
                    for (int r = 0; r < tp; ++r)
                        out.push_back({name, row * cols + r * w, row * cols + (r + 1) * w, ownerOf(r), r == m_me.tp});
            }
        }
    }
    return out;
}

} // namespace

std::unique_ptr<Strategy> strategies::makeMesh(const std::string &dp, const std::string &mesh)
{
    if (dp != "ddp" && dp != "zero1" && dp != "zero2" && dp != "zero3")
        throw std::invalid_argument("--mesh: the dp axis runs ddp, zero1, zero2 or zero3, not " + dp);
    return std::make_unique<MeshStrategy>(dp, net::DeviceMesh::parse(mesh));
}

} // namespace smol::engine
