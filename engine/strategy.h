// The interface every training strategy implements (engine/strategies/, one
// file each, each opening with who sends what to whom per step, what each
// node holds, and the bytes on the wire). A strategy object lives on one
// node's compute thread; the trainer calls setup() once, then step() per step.
#pragma once

#include "data_source.h"
#include "flat_optimizer.h"
#include "model.h"

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

namespace smol::net {
class Communicator;
}

namespace smol::engine {

struct NodeContext {
    int rank = 0;
    int nodes = 1;
    net::Communicator *comm = nullptr; // null for `single`
    std::shared_ptr<const DataSource> data;
    TrainModel *model = nullptr;       // built by the trainer with the run's seed
    OptimizerConfig optimizer;
    std::int64_t globalBatch = 64;
    std::int64_t bucketBytes = 256 * 1024; // ddp gradient buckets
};

// Bytes of the tensors a node holds, by role (what memory_tracker charges is
// the total; activations are the total minus these).
struct MemoryBreakdown {
    std::int64_t params = 0;
    std::int64_t grads = 0;
    std::int64_t optimizer = 0;
    std::int64_t comm = 0;
};

// One contiguous range of the flat parameter vector and its owner: what the
// GUI's shard map draws.
struct ShardRange {
    std::string param;   // parameter name
    std::int64_t begin;  // element offset within that parameter
    std::int64_t end;
    int owner;           // rank that owns (updates) it; -1 = replicated on all
    bool materialised;   // held in full on this node right now
};

class Strategy {
public:
    virtual ~Strategy() = default;
    virtual std::string name() const = 0;
    virtual void setup(NodeContext &ctx) = 0;
    // One optimisation step on this node's share of the global batch; returns
    // this node's mean loss. All nodes call it for the same step.
    virtual double step(std::int64_t step) = 0;
    virtual MemoryBreakdown memory() const = 0;
    // Every parameter, flattened in namedParameters() order. A collective for
    // sharded strategies: every node must call it.
    virtual torch::Tensor fullParameters() = 0;
    virtual std::vector<ShardRange> shards() const = 0;
    // Data-parallel strategies take global batch / nodes samples per node.
    virtual bool isDataParallel() const { return true; }
};

// "single", "ddp", "zero1", "zero2", "zero3", "syncps", "edp".
std::unique_ptr<Strategy> makeStrategy(const std::string &name);
std::vector<std::string> strategyNames();

// Shared by the data-parallel strategies: this node's share of the batch.
Batch localBatch(const NodeContext &ctx, std::int64_t step);

struct ParamSlot;
// Shard maps for the GUI: every parameter held whole by every node, or cut
// by net::Communicator::chunk over the flat vector. materialisedOwner: the
// rank whose shards alone are held (zero3), -1 when every node holds all.
std::vector<ShardRange> replicatedShardMap(const std::vector<ParamSlot> &slots);
std::vector<ShardRange> chunkedShardMap(const std::vector<ParamSlot> &slots, std::int64_t numel, int nodes,
                                        int materialisedOwner);

} // namespace smol::engine
