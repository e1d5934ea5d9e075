// Exact per-node memory accounting, even when nodes are threads of one
// process: a tracking c10 CPU allocator (installed over the default one with
// c10::SetCPUAllocator) charges every allocation to the node id of the
// allocating thread and remembers that owner with the allocation, so the free
// is charged back to the same node whichever thread frees it.
#pragma once

#include <torch/torch.h>

#include <atomic>
#include <cstdint>
#include <vector>

namespace smol::engine::memory {

constexpr int kMaxNodes = 64;

// Idempotent; call before nodes allocate. Allocations made before it, or on
// threads without a NodeScope, are not charged to any node.
void install();
bool installed();

// Charges allocations on this thread to `node` while alive (nests); -1
// charges nothing. Throws std::out_of_range outside [-1, kMaxNodes).
class NodeScope {
public:
    explicit NodeScope(int node);
    ~NodeScope();
    NodeScope(const NodeScope &) = delete;
    NodeScope &operator=(const NodeScope &) = delete;

private:
    int m_previous;
};
int currentNode(); // -1 when none

struct Usage {
    std::int64_t live = 0; // bytes allocated by the node and not yet freed
    std::int64_t peak = 0; // highest `live` since the last resetPeak
    std::int64_t allocations = 0;
    // Highest `live` since the last resetWindowPeak: a step's high-water mark,
    // kept apart from `peak` (the run's) so a step can be measured on its own.
    std::int64_t windowPeak = 0;
};
// These throw std::out_of_range outside [0, kMaxNodes). A Usage's fields are
// read one by one, not as one snapshot.
Usage usage(int node);
void resetPeak(int node);
// Starts a new window: windowPeak = live now.
void resetWindowPeak(int node);
// Forget everything charged to node, including what it still holds: those
// frees are not charged back. Call between runs, not while it allocates.
void resetNode(int node);

// counter = max(counter, value), lock-free: a high-water mark several
// threads raise (the allocator's peaks, a node's step peaks).
void raiseTo(std::atomic<std::int64_t> &counter, std::int64_t value);

// Sum of nbytes over the distinct storages of `tensors` (views of one
// storage count once). What strategies report per category.
std::int64_t storageBytes(const std::vector<torch::Tensor> &tensors);

} // namespace smol::engine::memory
