// zero3: ZeRO stage 3 / FSDP, parameters, gradients and optimizer state all
// sharded.
//
// Each layer's parameters (model.layers()) form a flat vector of L elements
// cut into N shards; node r keeps shard r only. Node r computes on its share
// of the B samples (B/N; uneven B: the first B % N nodes take one more, losses
// weighted by rows: batchWeight). Per step, layer by layer:
//   forward:  all-gather the layer's shards into the full parameters, run the
//             layer, free the full parameters (keep the shard);
//   backward: all-gather again, take the gradients of its parameters and
//             input from the graph the forward pass kept (no recompute, as
//             FSDP: the layer's parameters are views of one flat buffer whose
//             storage is emptied when freed and refilled by the gather, so
//             the saved graph sees the gathered values again), reduce-scatter
//             (average) the parameter gradients so node r receives its
//             shard's, and free the full parameters again;
//   update:   node r applies the optimizer to its shards.
//
// Prefetch, as FSDP's forward and backward prefetch: the collectives run on
// the node's communication thread (engine/comm_queue.h), and while layer k
// computes, the all-gather of the next layer (k+1 in forward, k-1 in
// backward) is already in flight; the backward pass's first gather starts
// as soon as the forward pass has freed the last layer, under the loss. A
// layer is freed only once the next one has arrived, so, exactly at every
// collective boundary:
//   forward gather of k:       layer k-1 held in full (k > 0), k's buffer in
//                              comm until it has arrived, then held too;
//   backward gather of k:      layer k+1 held (k < last), k as above;
//   reduce-scatter of k:       layer k-1 held (k > 0; k itself is freed), the
//                              gradient buffer of k in comm.
// So at most two layers are materialised in full on a node at once: the one
// computing and the one arriving.
//
// Holds between steps: P/N parameters, P/N gradients, optimizer state for
// P/N. Bytes on the wire per node per step: (N-1)/N x 4P (forward gather) +
// (N-1)/N x 4P (backward gather) + (N-1)/N x 4P (reduce-scatter) =
// 3(N-1)/N x 4P sent, the same received: 1.5x ddp's traffic for 1/N of its
// memory. --precision bf16: 2P in place of 4P on the wire, and 16P/N held
// (2P/N + 2P/N + 12P/N: docs/strategies.md).
//
// With --accumulate K (as FSDP's no_sync): K micro-steps of B/N samples
// each; every micro-step gathers each layer for its forward and its backward
// as above, but the backwards before the last keep each layer's full
// gradient (P more floats held until the last micro-step, in grads) instead
// of reduce-scattering it; the last backward adds what was kept and
// reduce-scatters once. Per step: (2K + 1)(N-1)/N x 4P sent, the
// reduce-scatters unchanged.
#include "zero3.h"

#include "engine/strategy.h"

#include "engine/comm_queue.h"
#include "engine/flat_params.h"
#include "engine/memory_tracker.h"
#include "engine/tensor_bridge.h"
#include "net/communicator.h"
#include "net/transport.h"

#include <ATen/native/Resize.h>

#include <atomic>
#include <deque>
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
    std::string name() const override { return strategies::kZero3.name; }

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
            Shard &s = m_shards.emplace_back();
            s.flat = std::make_unique<FlatParams>(named);
            s.range = net::Communicator::chunk(std::size_t(s.flat->numel()), ctx.nodes, ctx.rank);
            s.values = mine(s, s.flat->values()).clone();
            s.full = s.flat->values(); // the parameters stay views of it for the whole run
            s.grads = torch::zeros_like(s.values);
            s.opt = std::make_unique<FlatOptimizer>(ctx.optimizer, s.values.numel());
            resizeStorage(s.full, 0); // from here on only the shard stays
        }
        m_anchor = torch::zeros({1}, torch::requires_grad());
        m_forwardTicket.assign(m_layers.size(), 0);
        m_backwardTicket.assign(m_layers.size(), 0);
        net::Communicator *comm = ctx.comm;
        m_queue = std::make_unique<CommQueue>(memory::currentNode(), [comm] {
            try {
                comm->transport().abort();
            } catch (const std::exception &) { // another backend: its own timeouts end the call
            }
        });
    }

    ~Zero3Strategy() override { m_queue.reset(); } // a collective still in flight fails first

    double step(std::int64_t step) override
    {
        for (auto &s : m_shards)
            s.grads.zero_();
        // Each micro-step gathers every layer again; only the last one's
        // backward reduce-scatters (no_sync before it).
        auto before = [this](std::int64_t j) {
            m_noSync = j + 1 < m_ctx.accumulate;
            std::fill(m_forwardTicket.begin(), m_forwardTicket.end(), 0);
            std::fill(m_backwardTicket.begin(), m_backwardTicket.end(), 0);
        };
        auto loss = [this](const Batch &batch) {
            torch::Tensor x = batch.input;
            for (std::size_t k = 0; k < m_layers.size(); ++k)
                x = GatheredLayer::apply(x, m_anchor, this, std::int64_t(k));
            return m_ctx.model->lossFromOutput(x, batch);
        };
        // Backward runs GatheredLayer::backward from the last layer to the first.
        const double mean = forwardBackward(m_ctx, step, MicroSteps{{m_ctx.rank, m_ctx.nodes}, before, loss});
        m_queue->drain(); // the last reduce-scatter
        timed(m_ctx, SpanEvent::Kind::Optimizer, step, [&] {
            for (auto &s : m_shards)
                s.opt->step(s.values, s.grads);
        });
        return mean;
    }

    // Materialise layer k: every node contributes its shard. Runs on the
    // communication thread (prefetch), or on the compute thread between steps.
    void gather(std::size_t k, const std::string &why)
    {
        Shard &s = m_shards[k];
        resizeStorage(s.full, s.full.element_size() * s.flat->numel());
        mine(s, s.full).copy_(s.values);
        m_gathering = std::int64_t(k);
        m_ctx.comm->allGather(viewOf(s.full), why + "." + m_layers[k].name);
        s.materialised = true;
        m_gathering = -1;
    }

    // Queue layer k's all-gather on the communication thread.
    std::uint64_t prefetch(std::size_t k, const char *why)
    {
        return m_queue->submit([this, k, why = std::string(why)] { gather(k, why); });
    }

    void release(std::size_t k)
    {
        resizeStorage(m_shards[k].full, 0);
        m_shards[k].materialised = false;
    }

    // GatheredLayer::forward of layer k: its parameters (gathered while the
    // previous layer computed), then the next layer's gather in flight; k is
    // freed once that one has arrived, and after the last layer the backward
    // pass's first gather starts.
    // Returns the output, and in `saved` the layer's own graph (input, output)
    // for backwardLayer.
    torch::Tensor forwardLayer(std::size_t k, const torch::Tensor &input, std::vector<torch::Tensor> *saved)
    {
        if (m_forwardTicket[k] == 0)
            m_forwardTicket[k] = prefetch(k, "params");
        m_queue->wait(m_forwardTicket[k]);
        const bool next = k + 1 < m_layers.size();
        if (next)
            m_forwardTicket[k + 1] = prefetch(k + 1, "params");
        torch::Tensor out;
        {
            torch::AutoGradMode enable(true);
            torch::Tensor x = input.detach();
            if (x.is_floating_point())
                x.requires_grad_(true);
            out = m_layers[k].forward(x);
            *saved = {x, out};
        }
        if (next)
            m_queue->wait(m_forwardTicket[k + 1]);
        release(k);
        if (!next)
            m_backwardTicket[k] = prefetch(k, "params.backward");
        return out.detach();
    }

    // GatheredLayer::backward of layer k, the same way round: the layer
    // before it is gathered while k's gradients are taken.
    torch::Tensor backwardLayer(std::size_t k, const std::vector<torch::Tensor> &saved, const torch::Tensor &gradOut)
    {
        if (m_backwardTicket[k] == 0)
            m_backwardTicket[k] = prefetch(k, "params.backward");
        m_queue->wait(m_backwardTicket[k]);
        if (k > 0)
            m_backwardTicket[k - 1] = prefetch(k - 1, "params.backward");
        torch::Tensor flatGrad;
        torch::Tensor gradInput = layerBackward(k, saved, gradOut, &flatGrad);
        // Freed once the next collective has begun (the gather of k-1, or
        // for the first layer the reduce-scatter before its own).
        m_queue->wait(k > 0 ? m_backwardTicket[k - 1] : m_lastScatter);
        release(k);
        if (!keepForLastMicroStep(k, &flatGrad))
            return gradInput;
        // Averaged on the communication thread; the optimizer waits for it.
        m_lastScatter = m_queue->submit([this, k, flatGrad] {
            Shard &s = m_shards[k];
            m_scatterBytes = std::int64_t(flatGrad.nbytes());
            m_ctx.comm->reduceScatter(viewOf(flatGrad), net::ReduceOp::Average, "grads." + m_layers[k].name);
            m_scatterBytes = 0;
            s.grads.add_(mine(s, flatGrad));
        });
        return gradInput;
    }

    // Gradient accumulation, as FSDP's no_sync: before the step's last
    // micro-step, layer k's full gradient is kept (false: nothing to send
    // yet); in the last, what was kept is added to it and it goes out.
    bool keepForLastMicroStep(std::size_t k, torch::Tensor *flatGrad)
    {
        torch::Tensor &kept = m_shards[k].kept;
        if (m_noSync) {
            if (kept.defined()) {
                kept.add_(*flatGrad);
            } else {
                kept = *flatGrad;
                m_keptBytes += std::int64_t(kept.nbytes());
            }
            return false;
        }
        if (kept.defined()) {
            flatGrad->add_(kept);
            m_keptBytes -= std::int64_t(kept.nbytes());
            kept = torch::Tensor();
        }
        return true;
    }

    // Gradients of layer k, with its parameters materialised: the input's,
    // returned, and the parameters' as one flat buffer.
    torch::Tensor layerBackward(std::size_t k, const std::vector<torch::Tensor> &saved, const torch::Tensor &gradOut,
                                torch::Tensor *flatGradOut)
    {
        Shard &s = m_shards[k];
        torch::AutoGradMode enable(true);
        const torch::Tensor &x = saved[0], &out = saved[1];
        const bool wantInputGrad = x.requires_grad();
        std::vector<torch::Tensor> wrt;
        for (const auto &slot : s.flat->slots())
            wrt.push_back(slot.param);
        if (wantInputGrad)
            wrt.push_back(x);
        const auto grads = torch::autograd::grad({out}, wrt, {gradOut}, /*retain_graph=*/false,
                                                 /*create_graph=*/false, /*allow_unused=*/true);
        torch::Tensor flatGrad = torch::zeros({s.flat->numel()}, s.flat->dtype());
        for (std::size_t i = 0; i < s.flat->slots().size(); ++i)
            if (grads[i].defined())
                flatGrad.narrow(0, s.flat->slots()[i].offset, s.flat->slots()[i].numel).copy_(grads[i].reshape({-1}));
        *flatGradOut = flatGrad;
        return wantInputGrad ? grads.back() : torch::Tensor();
    }

    // Exact at any collective boundary: a layer held in full counts in
    // params (its full size, of which the shard is a part); the buffer an
    // all-gather is filling counts in comm until the gather has ended (then
    // it is the layer, in params), and so does the full gradient buffer a
    // reduce-scatter averages.
    net::MemoryByCategory memory() const override
    {
        net::MemoryByCategory m;
        for (std::size_t k = 0; k < m_shards.size(); ++k) {
            const Shard &s = m_shards[k];
            m.params += s.values.nbytes();
            m.grads += s.grads.nbytes();
            for (const auto &t : s.opt->state())
                m.optimizer += t.nbytes();
            const std::int64_t layerBytes = std::int64_t(s.full.element_size()) * s.flat->numel();
            const std::int64_t beyondShard = layerBytes - std::int64_t(s.values.nbytes());
            if (s.materialised)
                m.params += beyondShard;
            else if (m_gathering == std::int64_t(k) && atCollectiveResult())
                m.params += beyondShard; // gathered: the layer is held now
            else if (m_gathering == std::int64_t(k))
                m.comm += layerBytes;
        }
        m.comm += m_scatterBytes;
        m.grads += m_keptBytes; // --accumulate: full gradients kept for the last micro-step
        return m;
    }

    torch::Tensor fullParameters() override
    {
        std::vector<torch::Tensor> parts;
        for (std::size_t k = 0; k < m_shards.size(); ++k) {
            gather(k, "params");
            parts.push_back(m_shards[k].full.clone());
            release(k);
        }
        return torch::cat(parts);
    }

    // Each layer's moments are cut like its parameters: all-gather them
    // layer by layer, in the order fullParameters() concatenates.
    OptimizerMoments fullOptimizerState() override
    {
        std::vector<torch::Tensor> exp, expSq, master; // --precision bf16: the master weights too
        for (const Shard &s : m_shards) {
            OptimizerMoments layer = gatheredMoments(*s.opt, s.flat->numel(), s.range, *m_ctx.comm);
            for (auto [part, all] :
                 {std::pair{&layer.exp, &exp}, std::pair{&layer.expSq, &expSq}, std::pair{&layer.master, &master}})
                if (part->defined())
                    all->push_back(*part);
        }
        auto joined = [](const std::vector<torch::Tensor> &parts) {
            return parts.empty() ? torch::Tensor() : torch::cat(parts);
        };
        return {joined(exp), joined(expSq), joined(master)};
    }
    bool loadOptimizerState(const OptimizerMoments &m, std::int64_t steps) override
    {
        std::int64_t at = 0;
        for (Shard &s : m_shards) {
            auto part = [&](const torch::Tensor &whole) {
                return whole.defined() ? whole.narrow(0, at, s.flat->numel()) : torch::Tensor();
            };
            const OptimizerMoments layer = m.defined() ? OptimizerMoments{part(m.exp), part(m.expSq), part(m.master)}
                                                       : OptimizerMoments{{}, {}, part(m.master)};
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
        std::unique_ptr<FlatParams> flat; // the layer's parameters, views of `full`
        torch::Tensor full;               // the layer's flat buffer: its storage is empty unless gathered
        net::ChunkRange range;            // this node's part of the layer's flat vector
        torch::Tensor values;             // the shard this node owns
        torch::Tensor grads;
        torch::Tensor kept; // --accumulate: the full gradient of the micro-steps so far (no_sync)
        std::unique_ptr<FlatOptimizer> opt;
        std::atomic<bool> materialised{false}; // read by the hooks on the communication thread
    };

    // FSDP's trick: emptying the storage frees the full layer, yet every view
    // of it (the parameters, and those the saved graph holds) stays valid
    // for the next gather to refill.
    static void resizeStorage(const torch::Tensor &t, std::int64_t bytes)
    {
        at::native::resize_bytes_cpu(t.storage().unsafeGetStorageImpl(), std::size_t(bytes));
    }

    static torch::Tensor mine(const Shard &s, const torch::Tensor &flat)
    {
        return flat.narrow(0, std::int64_t(s.range.offset), std::int64_t(s.range.count));
    }

    NodeContext m_ctx;
    std::vector<ModelLayer> m_layers;
    std::deque<Shard> m_shards;
    torch::Tensor m_anchor; // requires grad, so every layer's output does and backward reaches each
    std::atomic<std::int64_t> m_gathering{-1};  // the layer whose all-gather is in progress (memory())
    std::atomic<std::int64_t> m_scatterBytes{0}; // the gradient buffer a reduce-scatter is averaging
    std::atomic<std::int64_t> m_keptBytes{0};    // the layers' kept full gradients (memory())
    bool m_noSync = false; // a micro-step before the step's last is running (--accumulate)
    std::vector<std::uint64_t> m_forwardTicket, m_backwardTicket; // this micro-step's gathers, by layer
    std::uint64_t m_lastScatter = 0;                               // the latest reduce-scatter's ticket
    std::unique_ptr<CommQueue> m_queue; // last member: its thread goes first
};

torch::Tensor GatheredLayer::forward(torch::autograd::AutogradContext *ctx, torch::Tensor input, torch::Tensor,
                                     Zero3Strategy *self, std::int64_t layer)
{
    std::vector<torch::Tensor> saved;
    torch::Tensor out = self->forwardLayer(std::size_t(layer), input, &saved);
    ctx->saved_data["x"] = saved[0];
    ctx->saved_data["out"] = saved[1];
    ctx->saved_data["layer"] = layer;
    ctx->saved_data["self"] = reinterpret_cast<std::int64_t>(self);
    return out;
}

torch::autograd::variable_list GatheredLayer::backward(torch::autograd::AutogradContext *ctx,
                                                       torch::autograd::variable_list gradOutputs)
{
    auto *self = reinterpret_cast<Zero3Strategy *>(ctx->saved_data["self"].toInt());
    const auto layer = std::size_t(ctx->saved_data["layer"].toInt());
    const std::vector<torch::Tensor> saved{ctx->saved_data["x"].toTensor(), ctx->saved_data["out"].toTensor()};
    torch::Tensor gradInput = self->backwardLayer(layer, saved, gradOutputs[0]);
    ctx->saved_data.erase("x"); // the layer's graph is spent
    ctx->saved_data.erase("out");
    return {gradInput, torch::Tensor(), torch::Tensor(), torch::Tensor()};
}

} // namespace

std::unique_ptr<Strategy> strategies::makeZero3() { return std::make_unique<Zero3Strategy>(); }

} // namespace smol::engine
