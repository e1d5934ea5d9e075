// The collective hooks of one node's communicator, wired in one order
// wherever a node trains: runTraining()'s node threads and a cluster node
// (engine/cluster/node_agent). Inside out:
//
//   memory       a MemorySnapshot before and after every collective
//                (makeMemoryHook); first, so a pause's last sample is the
//                state the node holds while it waits
//   breakpoints  may hold the node at a collective (a local
//                BreakpointController's hook, or a node agent's remote one)
//   spans        outermost: a Collective span per collective and a Pause
//                span for the time the breakpoints held it (span_hook.h)
//
// Each is optional; the communicator gets the outermost one there is, or
// none. The hooks live as long as this object: keep it beside the
// communicator and destroy it after the communicator's last collective.
#pragma once

#include "hook_chain.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

namespace smol::net {
class Communicator;
}

namespace smol::engine {

struct MemorySnapshot;
struct SpanEvent;
class SpanHook;

struct NodeHookPlan {
    int rank = 0;
    int memorySlot = 0;                                   // memory_tracker slot the snapshots read
    const std::atomic<std::int64_t> *step = nullptr;      // the node's current step
    std::function<void(const MemorySnapshot &)> onMemory; // unset: no memory hook
    std::unique_ptr<net::CollectiveHook> breakpoints;     // null: none
    std::function<void(const SpanEvent &)> onSpan;        // unset: no span hook
};

class NodeHooks {
public:
    NodeHooks();
    ~NodeHooks();
    NodeHooks(const NodeHooks &) = delete;
    NodeHooks &operator=(const NodeHooks &) = delete;

    // Builds the plan's hooks and sets the outermost on `comm`. Once.
    void install(net::Communicator &comm, NodeHookPlan plan);

private:
    std::unique_ptr<net::CollectiveHook> m_memory;
    std::unique_ptr<net::CollectiveHook> m_breakpoints;
    HookChain m_chain;
    std::unique_ptr<SpanHook> m_spans;
};

} // namespace smol::engine
