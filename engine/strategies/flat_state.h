// What two families of strategies hold and how they report it, written once;
// each strategy's own file keeps its setup and its step.
//
//   ReplicatedFlatState (single, ddp): the whole flat parameter vector, its
//       gradients and the optimizer state for all P elements, on every node.
//   ShardedOptimizerState (zero1, zero2): the whole flat parameter vector,
//       and optimizer state for this node's chunk of it only
//       (net::Communicator::chunk: node r owns chunk r of N).
// The data-parallel forward and backward of a step, with its micro-steps
// (forwardBackward), is strategy.h's.
#pragma once

#include "engine/flat_params.h"
#include "engine/strategy.h"
#include "net/communicator.h"

namespace smol::engine {

class ReplicatedFlatState : public Strategy {
public:
    net::MemoryByCategory memory() const override
    {
        return heldBytes(m_flat->values(), m_flat->grads(), m_opt.get());
    }

    OptimizerMoments fullOptimizerState() override { return copiedMoments(*m_opt); }
    bool loadOptimizerState(const OptimizerMoments &m, std::int64_t steps) override
    {
        // The whole vector is this node's (and bf16's master weights with it).
        loadMomentsChunk(*m_opt, m, net::ChunkRange{0, std::size_t(m_flat->numel())}, steps);
        return true;
    }

    torch::Tensor fullParameters() override { return m_flat->values().clone(); }

    std::vector<ShardRange> shards() const override { return replicatedShardMap(m_flat->slots()); }

protected:
    // The flat parameters with gradients attached, and their optimizer.
    void holdEverything(NodeContext &ctx)
    {
        m_ctx = ctx;
        m_flat = std::make_unique<FlatParams>(ctx.model->namedParameters());
        m_flat->attachGrads();
        m_opt = std::make_unique<FlatOptimizer>(ctx.optimizer, m_flat->numel());
    }

    NodeContext m_ctx;
    std::unique_ptr<FlatParams> m_flat;
    std::unique_ptr<FlatOptimizer> m_opt;
};

class ShardedOptimizerState : public Strategy {
public:
    // Every node holds its chunk of the moments.
    OptimizerMoments fullOptimizerState() override
    {
        return gatheredMoments(*m_opt, m_flat->numel(), m_shard, *m_ctx.comm);
    }
    bool loadOptimizerState(const OptimizerMoments &m, std::int64_t steps) override
    {
        loadMomentsChunk(*m_opt, m, m_shard, steps);
        return true;
    }

    torch::Tensor fullParameters() override { return m_flat->values().clone(); }

    std::vector<ShardRange> shards() const override
    {
        return chunkedShardMap(m_flat->slots(), m_flat->numel(), m_ctx.nodes, /*materialisedOwner=*/-1);
    }

protected:
    // The flat parameters (no gradients yet), this node's chunk, and an
    // optimizer for that chunk only.
    void holdOptimizerChunk(NodeContext &ctx)
    {
        m_ctx = ctx;
        m_flat = std::make_unique<FlatParams>(ctx.model->namedParameters());
        m_shard = net::Communicator::chunk(std::size_t(m_flat->numel()), ctx.nodes, ctx.rank);
        m_opt = std::make_unique<FlatOptimizer>(ctx.optimizer, std::int64_t(m_shard.count));
    }

    // This node's chunk of a flat vector (a view).
    torch::Tensor mine(const torch::Tensor &flat) const
    {
        return flat.narrow(0, std::int64_t(m_shard.offset), std::int64_t(m_shard.count));
    }

    NodeContext m_ctx;
    std::unique_ptr<FlatParams> m_flat;
    std::unique_ptr<FlatOptimizer> m_opt;
    net::ChunkRange m_shard;
};

} // namespace smol::engine
