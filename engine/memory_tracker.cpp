// Per-node memory accounting: a c10::Allocator in front of LibTorch's CPU
// allocator charges each allocation to the allocating thread's node
// (NodeScope), and each free back to that node, whichever thread frees.
//
// Why the owner lives in a table keyed by address and not in a record on the
// DataPtr's context: c10::Allocator::raw_allocate asserts data == context, and
// LibTorch's oneDNN glue (on in Debian's build) allocates through
// GetAllocator(CPU)->raw_allocate, e.g. in every mkldnn conv2d. The table has
// 64 mutex-guarded shards; the per-node counters are lock-free atomics. A
// pointer missing from it was never charged (no NodeScope, zero bytes, made
// before install()) and goes back to the wrapped allocator as is.
//
// Not seen: memory that bypasses c10's CPU allocator (BLAS/oneDNN scratch,
// from_blob, Gloo, std containers); threads without a NodeScope, e.g. intra-op
// workers (run nodes with torch::set_num_threads(1)); storages made before
// install(), which keep the default allocator even when resized.
#include "engine/memory_tracker.h"

#include <c10/core/CPUAllocator.h>

#include <array>
#include <atomic>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>

namespace smol::engine::memory {
namespace {

// SetAllocator takes any priority >= the current one and the default has 0:
// above it, a later priority-0 registration cannot silently unhook us.
constexpr std::uint8_t kPriority = 100;
constexpr int kShardBits = 6;

struct Counters {
    std::atomic<std::int64_t> live{0};
    std::atomic<std::int64_t> peak{0};
    std::atomic<std::int64_t> windowPeak{0};
    std::atomic<std::int64_t> allocations{0};
    std::atomic<std::uint32_t> epoch{0}; // resetNode bumps it: older allocations are forgotten
};
// Constant-initialised and trivially destructible: safe for frees during exit.
Counters g_counters[kMaxNodes];

thread_local int t_node = -1;

void checkNode(int node, int lowest)
{
    if (node < lowest || node >= kMaxNodes)
        throw std::out_of_range("memory: node " + std::to_string(node) + " outside [" +
                                std::to_string(lowest) + ", " + std::to_string(kMaxNodes) + ")");
}

struct Owner {
    void *context; // the wrapped allocator's context and deleter
    c10::DeleterFnPtr deleter;
    std::int64_t bytes;
    int node;
    std::uint32_t epoch;
};

struct Shard {
    std::mutex mutex;
    std::unordered_map<void *, Owner> owners;
};

void deleteTracked(void *data);

class Tracker final : public c10::Allocator {
public:
    explicit Tracker(c10::Allocator *wrapped)
        : m_wrapped(wrapped)
    {
    }

    c10::DataPtr allocate(size_t n) const override
    {
        c10::DataPtr inner = m_wrapped->allocate(n);
        const int node = t_node;
        void *data = inner.get();
        if (node < 0 || data == nullptr)
            return inner; // not charged; its own deleter frees it
        Counters &c = g_counters[node];
        const auto bytes = static_cast<std::int64_t>(n);
        {
            Shard &shard = shardOf(data);
            std::lock_guard lock(shard.mutex);
            shard.owners.emplace(data, Owner{inner.get_context(), inner.get_deleter(), bytes, node,
                                             c.epoch.load(std::memory_order_relaxed)});
        }
        inner.release_context(); // the table owns it now
        const std::int64_t live = c.live.fetch_add(bytes, std::memory_order_relaxed) + bytes;
        c.allocations.fetch_add(1, std::memory_order_relaxed);
        raiseTo(c.peak, live);
        raiseTo(c.windowPeak, live);
        return {data, data, &deleteTracked, inner.device()};
    }

    // raw_allocate/raw_deallocate work iff the wrapped allocator supports them:
    // uncharged pointers are handed to its raw deleter.
    c10::DeleterFnPtr raw_deleter() const override
    {
        return m_wrapped->raw_deleter() ? &deleteTracked : nullptr;
    }

    void free(void *data) const
    {
        std::optional<Owner> owner;
        {
            Shard &shard = shardOf(data);
            std::lock_guard lock(shard.mutex);
            if (auto it = shard.owners.find(data); it != shard.owners.end()) {
                owner = it->second;
                shard.owners.erase(it); // before the free: the address may be reused at once
            }
        }
        if (!owner) {
            m_wrapped->raw_deleter()(data);
            return;
        }
        Counters &c = g_counters[owner->node];
        if (owner->epoch == c.epoch.load(std::memory_order_relaxed))
            c.live.fetch_sub(owner->bytes, std::memory_order_relaxed);
        if (owner->context != nullptr && owner->deleter != nullptr)
            owner->deleter(owner->context);
    }

private:
    Shard &shardOf(void *data) const
    {
        const auto key = reinterpret_cast<std::uintptr_t>(data) >> 6; // allocations are 64-aligned
        return m_shards[(key * 0x9E3779B97F4A7C15ull) >> (64 - kShardBits)];
    }

    c10::Allocator *m_wrapped;
    mutable std::array<Shard, 1 << kShardBits> m_shards;
};

std::atomic<Tracker *> g_tracker{nullptr};

// Only ever attached (or returned by raw_deleter) after install().
void deleteTracked(void *data)
{
    g_tracker.load(std::memory_order_acquire)->free(data);
}

} // namespace

void install()
{
    // Leaked on purpose: every storage made from now on points at it, up to exit.
    static Tracker *const tracker = [] {
        auto *t = new Tracker(c10::GetCPUAllocator());
        g_tracker.store(t, std::memory_order_release);
        c10::SetCPUAllocator(t, kPriority);
        return t;
    }();
    if (c10::GetCPUAllocator() != tracker)
        throw std::runtime_error(
            "memory::install: a CPU allocator with a higher priority is already installed");
}

bool installed()
{
    Tracker *t = g_tracker.load(std::memory_order_acquire);
    return t != nullptr && c10::GetCPUAllocator() == t;
}

NodeScope::NodeScope(int node)
    : m_previous(t_node)
{
    checkNode(node, -1);
    t_node = node;
}

NodeScope::~NodeScope()
{
    t_node = m_previous;
}

int currentNode()
{
    return t_node;
}

Usage usage(int node)
{
    checkNode(node, 0);
    const Counters &c = g_counters[node];
    return {c.live.load(std::memory_order_relaxed), c.peak.load(std::memory_order_relaxed),
            c.allocations.load(std::memory_order_relaxed), c.windowPeak.load(std::memory_order_relaxed)};
}

void raiseTo(std::atomic<std::int64_t> &counter, std::int64_t value)
{
    std::int64_t seen = counter.load(std::memory_order_relaxed);
    while (value > seen && !counter.compare_exchange_weak(seen, value, std::memory_order_relaxed)) { }
}

void resetWindowPeak(int node)
{
    checkNode(node, 0);
    g_counters[node].windowPeak.store(g_counters[node].live.load(std::memory_order_relaxed),
                                      std::memory_order_relaxed);
}

void resetPeak(int node)
{
    checkNode(node, 0);
    g_counters[node].peak.store(g_counters[node].live.load(std::memory_order_relaxed),
                                std::memory_order_relaxed);
}

void resetNode(int node)
{
    checkNode(node, 0);
    Counters &c = g_counters[node];
    c.epoch.fetch_add(1, std::memory_order_relaxed);
    c.live.store(0, std::memory_order_relaxed);
    c.peak.store(0, std::memory_order_relaxed);
    c.windowPeak.store(0, std::memory_order_relaxed);
    c.allocations.store(0, std::memory_order_relaxed);
}

std::int64_t storageBytes(const std::vector<torch::Tensor> &tensors)
{
    std::unordered_set<const c10::StorageImpl *> seen;
    std::int64_t total = 0;
    for (const torch::Tensor &t : tensors) {
        if (!t.defined() || !t.has_storage()) // sparse and mkldnn tensors have none
            continue;
        if (seen.insert(t.storage().unsafeGetStorageImpl()).second)
            total += static_cast<std::int64_t>(t.storage().nbytes());
    }
    return total;
}

} // namespace smol::engine::memory
