// zero3: ZeRO stage 3 / FSDP, parameters, gradients and optimizer state all
// sharded.
//
// Each layer's parameters (model.layers()) form a flat vector of L elements
// cut into N shards; node r keeps shard r only. Node r computes on its share
// of the B samples (B/N; uneven B: the first B % N nodes take one more, losses
// weighted by rows: batchWeight). Per step, layer by layer:
//   forward:  all-gather the layer's shards into the full parameters, run the
//             layer, free the full parameters (keep the shard);
//   backward: all-gather again, recompute the layer's forward and take the
//             gradients of its parameters and input, reduce-scatter (average)
//             the parameter gradients so node r receives its shard's, and free
//             the full parameters again;
//   update:   node r applies the optimizer to its shards.
// So at most one layer is ever materialised in full on a node.
//
// Holds between steps: P/N parameters, P/N gradients, optimizer state for
// P/N. Bytes on the wire per node per step: (N-1)/N x 4P (forward gather) +
// (N-1)/N x 4P (backward gather) + (N-1)/N x 4P (reduce-scatter) =
// 3(N-1)/N x 4P sent, the same received: 1.5x ddp's traffic for 1/N of its
// memory.
#include "strategies.h"

#include "engine/flat_params.h"
#include "engine/tensor_bridge.h"
#include "net/communicator.h"

#include <map>

namespace smol::engine {

namespace {

class Zero3Strategy;

// One layer as an autograd node: forward and backward each gather the
// layer's parameters and free them afterwards.
struct GatheredLayer : torch::autograd::Function<GatheredLayer> {
    static torch::Tensor forward(torch::autograd::AutogradContext *ctx, torch::Tensor input, torch::Tensor anchor,
                                 Zero3Strategy *self, std::int64_t layer);
    static torch::autograd::variable_list backward(torch::autograd::AutogradContext *ctx,
                                                   torch::autograd::variable_list gradOutputs);
};

class Zero3Strategy : public Strategy {
public:
    std::string name() const override { return "zero3"; }

    void setup(NodeContext &ctx) override
    {
        m_ctx = ctx;
        std::map<std::string, torch::Tensor> byName;
        for (auto &[name, p] : ctx.model->namedParameters())
            byName[name] = p;
        m_layers = ctx.model->layers();
        for (const auto &layer : m_layers) {
            std::vector<std::pair<std::string, torch::Tensor>> named;
            for (const auto &n : layer.paramNames)
                named.emplace_back(n, byName.at(n));
            Shard s;
            s.flat = std::make_unique<FlatParams>(named);
            s.range = net::Communicator::chunk(std::size_t(s.flat->numel()), ctx.nodes, ctx.rank);
            s.values = mine(s, s.flat->values()).clone();
            s.grads = torch::zeros_like(s.values);
            s.opt = std::make_unique<FlatOptimizer>(ctx.optimizer, s.values.numel());
            s.flat->releaseValues(); // from here on only the shard stays
            m_shards.push_back(std::move(s));
        }
        m_anchor = torch::zeros({1}, torch::requires_grad());
    }

    double step(std::int64_t step) override
    {
        for (auto &s : m_shards)
            s.grads.zero_();
        const Batch batch = localBatch(m_ctx, step);
        const torch::Tensor loss = timed(m_ctx, SpanEvent::Kind::Forward, step, [&] {
            torch::Tensor x = batch.input;
            for (std::size_t k = 0; k < m_layers.size(); ++k)
                x = GatheredLayer::apply(x, m_anchor, this, std::int64_t(k));
            return m_ctx.model->lossFromOutput(x, batch);
        });
        // Runs GatheredLayer::backward from the last layer to the first.
        timed(m_ctx, SpanEvent::Kind::Backward, step,
              [&] { weightedLoss(loss, batchWeight(m_ctx)).backward(); });
        timed(m_ctx, SpanEvent::Kind::Optimizer, step, [&] {
            for (auto &s : m_shards)
                s.opt->step(s.values, s.grads);
        });
        return loss.item<double>();
    }

    // Materialise layer k: every node contributes its shard.
    void gather(std::size_t k, const char *why)
    {
        Shard &s = m_shards[k];
        torch::Tensor full = torch::empty({s.flat->numel()}, torch::kFloat32);
        mine(s, full).copy_(s.values);
        m_gathering = std::int64_t(k);
        m_ctx.comm->allGather(viewOf(full), std::string(why) + "." + m_layers[k].name);
        m_gathering = -1;
        s.flat->adoptValues(full);
        s.materialised = true;
    }

    void release(std::size_t k)
    {
        m_shards[k].flat->releaseValues();
        m_shards[k].materialised = false;
    }

    // Backward of layer k, with its parameters materialised.
    torch::Tensor layerBackward(std::size_t k, const torch::Tensor &input, const torch::Tensor &gradOut)
    {
        Shard &s = m_shards[k];
        torch::AutoGradMode enable(true);
        torch::Tensor x = input.detach();
        const bool wantInputGrad = x.is_floating_point();
        if (wantInputGrad)
            x.requires_grad_(true);
        const torch::Tensor out = m_layers[k].forward(x);
        std::vector<torch::Tensor> wrt;
        for (const auto &slot : s.flat->slots())
            wrt.push_back(slot.param);
        if (wantInputGrad)
            wrt.push_back(x);
        const auto grads = torch::autograd::grad({out}, wrt, {gradOut}, /*retain_graph=*/false,
                                                 /*create_graph=*/false, /*allow_unused=*/true);
        torch::Tensor flatGrad = torch::zeros({s.flat->numel()}, torch::kFloat32);
        for (std::size_t i = 0; i < s.flat->slots().size(); ++i)
            if (grads[i].defined())
                flatGrad.narrow(0, s.flat->slots()[i].offset, s.flat->slots()[i].numel).copy_(grads[i].reshape({-1}));
        m_scatterBytes = std::int64_t(flatGrad.nbytes());
        m_ctx.comm->reduceScatter(viewOf(flatGrad), net::ReduceOp::Average, "grads." + m_layers[k].name);
        m_scatterBytes = 0;
        s.grads.add_(mine(s, flatGrad));
        return wantInputGrad ? grads.back() : torch::Tensor();
    }

    const ModelLayer &layer(std::size_t k) const { return m_layers[k]; }

    // Exact at any collective boundary: a layer held in full counts in
    // params (its full size, of which the shard is a part); the buffer an
    // all-gather is filling counts in comm until the gather has ended (then
    // it is the layer, in params), and so does the full gradient buffer a
    // reduce-scatter averages.
    MemoryBreakdown memory() const override
    {
        MemoryBreakdown m;
        for (std::size_t k = 0; k < m_shards.size(); ++k) {
            const Shard &s = m_shards[k];
            m.params += s.values.nbytes();
            m.grads += s.grads.nbytes();
            for (const auto &t : s.opt->state())
                m.optimizer += t.nbytes();
            const std::int64_t beyondShard = 4 * s.flat->numel() - std::int64_t(s.values.nbytes());
            if (s.materialised)
                m.params += beyondShard;
            else if (m_gathering == std::int64_t(k) && atCollectiveResult())
                m.params += beyondShard; // gathered: the layer is held now
            else if (m_gathering == std::int64_t(k))
                m.comm += 4 * s.flat->numel();
        }
        m.comm += m_scatterBytes;
        return m;
    }

    torch::Tensor fullParameters() override
    {
        std::vector<torch::Tensor> parts;
        for (std::size_t k = 0; k < m_shards.size(); ++k) {
            gather(k, "params");
            parts.push_back(m_shards[k].flat->values().clone());
            release(k);
        }
        return torch::cat(parts);
    }

    // Each layer's moments are cut like its parameters: all-gather them
    // layer by layer, in the order fullParameters() concatenates.
    OptimizerMoments fullOptimizerState() override
    {
        if (m_shards.empty() || !m_shards.front().opt->exp().defined())
            return {};
        std::vector<torch::Tensor> exp, expSq;
        for (const Shard &s : m_shards) {
            OptimizerMoments layer = gatheredMoments(*s.opt, s.flat->numel(), s.range, *m_ctx.comm);
            exp.push_back(layer.exp);
            expSq.push_back(layer.expSq);
        }
        return {torch::cat(exp), torch::cat(expSq)};
    }
    bool loadOptimizerState(const OptimizerMoments &m, std::int64_t steps) override
    {
        std::int64_t at = 0;
        for (Shard &s : m_shards) {
            const OptimizerMoments layer =
                m.defined() ? OptimizerMoments{m.exp.narrow(0, at, s.flat->numel()), m.expSq.narrow(0, at, s.flat->numel())}
                            : OptimizerMoments{};
            loadMomentsChunk(*s.opt, layer, s.range, steps);
            at += s.flat->numel();
        }
        return true;
    }

    std::vector<ShardRange> shards() const override
    {
        std::vector<ShardRange> out;
        for (const auto &s : m_shards)
            for (auto r : chunkedShardMap(s.flat->slots(), s.flat->numel(), m_ctx.nodes,
                                          s.materialised ? -1 : m_ctx.rank))
                out.push_back(r);
        return out;
    }

private:
    struct Shard {
        std::unique_ptr<FlatParams> flat; // the layer's parameters; values only while gathered
        net::ChunkRange range;            // this node's part of the layer's flat vector
        torch::Tensor values;             // the shard this node owns
        torch::Tensor grads;
        std::unique_ptr<FlatOptimizer> opt;
        bool materialised = false;
    };

    static torch::Tensor mine(const Shard &s, const torch::Tensor &flat)
    {
        return flat.narrow(0, std::int64_t(s.range.offset), std::int64_t(s.range.count));
    }

    NodeContext m_ctx;
    std::vector<ModelLayer> m_layers;
    std::vector<Shard> m_shards;
    torch::Tensor m_anchor; // requires grad, so every layer's output does and backward reaches each
    std::int64_t m_gathering = -1;  // the layer whose all-gather is in progress (memory())
    std::int64_t m_scatterBytes = 0; // the gradient buffer a reduce-scatter is averaging
};

torch::Tensor GatheredLayer::forward(torch::autograd::AutogradContext *ctx, torch::Tensor input, torch::Tensor,
                                     Zero3Strategy *self, std::int64_t layer)
{
    self->gather(std::size_t(layer), "params");
    torch::Tensor out = self->layer(std::size_t(layer)).forward(input);
    self->release(std::size_t(layer));
    ctx->save_for_backward({input});
    ctx->saved_data["layer"] = layer;
    ctx->saved_data["self"] = reinterpret_cast<std::int64_t>(self);
    return out;
}

torch::autograd::variable_list GatheredLayer::backward(torch::autograd::AutogradContext *ctx,
                                                       torch::autograd::variable_list gradOutputs)
{
    auto *self = reinterpret_cast<Zero3Strategy *>(ctx->saved_data["self"].toInt());
    const auto layer = std::size_t(ctx->saved_data["layer"].toInt());
    const torch::Tensor input = ctx->get_saved_variables()[0];
    self->gather(layer, "params.backward");
    torch::Tensor gradInput = self->layerBackward(layer, input, gradOutputs[0]);
    self->release(layer);
    return {gradInput, torch::Tensor(), torch::Tensor(), torch::Tensor()};
}

} // namespace

std::unique_ptr<Strategy> makeZero3Strategy()
{
    return std::make_unique<Zero3Strategy>();
}

} // namespace smol::engine
