// ddp: distributed data parallel.
//
// Every node holds the whole model. Per step, node r computes gradients on
// its share of the B samples (B/N; when N does not divide B, the first B % N
// nodes take one more, and each loss is weighted by rows x N / B so the
// average stays the global mean: batchWeight); gradients are averaged across
// nodes with ring all-reduce in buckets of about `bucketBytes`. Buckets follow
// the parameters in reverse order (the order backward produces them). As in
// PyTorch's reducer, the autograd hook that completes a bucket hands its
// all-reduce to the node's communication thread (engine/comm_queue.h) and
// backward goes on with the earlier layers while the bucket travels; buckets
// launch strictly in order, so every node issues the same collectives. The
// last bucket, complete only when backward is, runs on the compute thread
// once backward has returned, after the others. The optimizer waits for it;
// then every node applies the same update to the same averaged gradients, so
// the replicas stay identical (bit-for-bit what the synchronous version
// computed: the same reductions in the same order).
//
// A pause at a bucket's all-reduce holds the communication thread; backward
// runs on until it has nothing left but to wait for that bucket.
//
// With --accumulate K, each step runs K micro-steps of B/N samples each (the
// node's shares of a K x B batch: forwardBackward); as PyTorch's no_sync,
// the hooks count nothing during the first K - 1 backwards, whose gradients
// just add up in the flat buffer, and the buckets launch during the last
// one's as above: the same all-reduces per step, for K times the samples.
//
// Holds: all parameters, all gradients, all optimizer state (Adam: 2x params).
// Bytes on the wire per node per step: 2(N-1)/N x 4P sent and the same
// received (P = parameter count), in ceil(4P / bucketBytes) all-reduces.
// --precision bf16: 2P in place of 4P on the wire; holds 2P + 2P + 12P
// (Adam's moments and the fp32 master: docs/strategies.md).
#include "ddp.h"

#include "flat_state.h"

#include "engine/comm_queue.h"
#include "engine/grad_compressor.h"
#include "engine/memory_tracker.h"
#include "engine/tensor_bridge.h"
#include "net/communicator.h"
#include "net/transport.h"

#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

namespace smol::engine {

namespace {

class DdpStrategy : public ReplicatedFlatState {
public:
    std::string name() const override { return strategies::kDdp.name; }

    // The hooks point at this strategy: they go with it, whoever else still
    // holds the parameters' accumulators (a graph kept alive, a model that
    // outlives the run).
    ~DdpStrategy() override
    {
        m_queue.reset(); // a bucket still in flight (backward threw) fails first
        for (std::size_t i = 0; i < m_accumulators.size(); ++i)
            m_accumulators[i]->del_post_hook(m_hookKeys[i]);
    }

    void setup(NodeContext &ctx) override
    {
        holdEverything(ctx);

        // Buckets: consecutive parameters from the last one backwards.
        const auto &slots = m_flat->slots();
        m_bucketOf.assign(slots.size(), 0);
        for (std::size_t i = slots.size(); i-- > 0;) {
            if (m_buckets.empty() || m_buckets.back().bytes >= ctx.bucketBytes)
                m_buckets.push_back(Bucket{slots[i].offset, 0, 0, 0});
            Bucket &b = m_buckets.back();
            b.begin = slots[i].offset;
            b.numel += slots[i].numel;
            b.bytes += slots[i].numel * std::int64_t(m_flat->values().element_size());
            ++b.params;
            m_bucketOf[i] = m_buckets.size() - 1;
        }
        // Compression sees each bucket's parameters with their shapes.
        m_compressor = makeGradCompressor(ctx.compression);
        m_pieces.assign(m_buckets.size(), {});
        for (std::size_t i = 0; i < slots.size(); ++i) {
            auto &pieces = m_pieces[m_bucketOf[i]];
            pieces.insert(pieces.begin(), BucketPiece{slots[i].name, slots[i].offset - m_buckets[m_bucketOf[i]].begin,
                                                      slots[i].shape});
        }
        m_slotReady.assign(slots.size(), false);
        net::Communicator *comm = ctx.comm;
        m_queue = std::make_unique<CommQueue>(memory::currentNode(), [comm] {
            try {
                comm->transport().abort();
            } catch (const std::exception &) { // another backend: its own timeouts end the call
            }
        });
        for (std::size_t i = 0; i < slots.size(); ++i) {
            auto acc = torch::autograd::impl::grad_accumulator(slots[i].param);
            m_hookKeys.push_back(acc->add_post_hook(std::make_unique<ReadyHook>(this, i)));
            m_accumulators.push_back(std::move(acc));
        }
    }

    // Compression's state between steps (PowerSGD's error buffers and
    // warm-start Qs) is held like optimizer state.
    net::MemoryByCategory memory() const override
    {
        net::MemoryByCategory m = ReplicatedFlatState::memory();
        if (m_compressor)
            m.optimizer += m_compressor->stateBytes();
        return m;
    }

    double step(std::int64_t step) override
    {
        m_flat->grads().zero_();
        for (auto &b : m_buckets)
            b.ready = 0;
        m_slotReady.assign(m_slotReady.size(), false);
        m_launched = 0;
        // no_sync: the micro-steps before the last only add up gradients.
        const std::int64_t last = m_ctx.accumulate - 1;
        const double loss = forwardBackward(
            m_ctx, step, MicroSteps{{m_ctx.rank, m_ctx.nodes}, [&](std::int64_t j) { m_noSync = j < last; }, {}});
        launchReady(/*all=*/true); // parameters that got no gradient still take part
        m_queue->drain();          // the optimizer waits for the last bucket
        timed(m_ctx, SpanEvent::Kind::Optimizer, step, [&] { m_opt->step(m_flat->values(), m_flat->grads()); });
        return loss;
    }

private:
    struct Bucket {
        std::int64_t begin;  // flat offset of its first element
        std::int64_t numel;
        std::int64_t bytes;
        int params;
        int ready = 0;
    };

    // Runs after AccumulateGrad has added a parameter's gradient to .grad.
    struct ReadyHook : torch::autograd::FunctionPostHook {
        ReadyHook(DdpStrategy *self, std::size_t slot) : m_self(self), m_slot(slot) {}
        torch::autograd::variable_list operator()(const torch::autograd::variable_list &outputs,
                                                  const torch::autograd::variable_list &) override
        {
            if (m_self->m_noSync)
                return outputs; // an earlier micro-step: no bucket is ready before the last one's backward
            if (m_self->m_slotReady[m_slot])
                return outputs; // accumulated twice: the bucket was counted already
            m_self->m_slotReady[m_slot] = true;
            Bucket &b = m_self->m_buckets[m_self->m_bucketOf[m_slot]];
            ++b.ready;
            m_self->launchReady(/*all=*/false);
            return outputs;
        }
        DdpStrategy *m_self;
        std::size_t m_slot;
    };

    // Hand buckets to the communication thread strictly in order, so every
    // node issues the same sequence of collectives whatever order its hooks
    // fire in. The last bucket has nothing left to hide under (backward is
    // over when it is complete, and the optimizer waits for it): once
    // backward has returned (`all`), the compute thread runs it itself after
    // the others, without a hand-over.
    void launchReady(bool all)
    {
        while (m_launched < m_buckets.size() &&
               (all || m_buckets[m_launched].ready == m_buckets[m_launched].params)) {
            const bool last = m_launched + 1 == m_buckets.size();
            if (last && !all)
                return;
            const Bucket &b = m_buckets[m_launched];
            const torch::Tensor grads = m_flat->grads().narrow(0, b.begin, b.numel);
            net::Communicator *comm = m_ctx.comm;
            GradCompressor *compressor = m_compressor.get();
            const std::vector<BucketPiece> *pieces = &m_pieces[m_launched];
            const std::size_t index = m_launched;
            std::string name = "grads.bucket" + std::to_string(m_launched);
            ++m_launched;
            auto reduce = [comm, compressor, pieces, index, grads, name = std::move(name)] {
                if (compressor)
                    compressor->allReduceMean(*comm, grads, index, *pieces, name);
                else
                    comm->allReduce(viewOf(grads), net::ReduceOp::Average, name);
            };
            if (last) {
                m_queue->drain();
                reduce();
            } else {
                m_queue->submit(std::move(reduce));
            }
        }
    }

    std::vector<Bucket> m_buckets;
    std::vector<std::size_t> m_bucketOf;
    std::vector<bool> m_slotReady; // this step's gradient has been accumulated, by slot
    std::vector<std::shared_ptr<torch::autograd::Node>> m_accumulators;
    std::vector<std::uintptr_t> m_hookKeys; // by accumulator: its ReadyHook
    std::size_t m_launched = 0;
    bool m_noSync = false; // a micro-step before the step's last is running (--accumulate)
    std::unique_ptr<GradCompressor> m_compressor; // null: plain all-reduces
    std::vector<std::vector<BucketPiece>> m_pieces; // by bucket, in flat order
    std::unique_ptr<CommQueue> m_queue; // last member: its thread goes first
};

} // namespace

std::unique_ptr<Strategy> strategies::makeDdp() { return std::make_unique<DdpStrategy>(); }

} // namespace smol::engine
