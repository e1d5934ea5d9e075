// The collective hooks of one node's communicator: node_hooks.h.
#include "node_hooks.h"

#include "span_hook.h"
#include "trainer.h"

namespace smol::engine {

NodeHooks::NodeHooks() = default;
NodeHooks::~NodeHooks() = default;

void NodeHooks::install(net::Communicator &comm, NodeHookPlan plan)
{
    if (plan.onMemory) {
        m_memory = makeMemoryHook(plan.memorySlot, plan.step, std::move(plan.onMemory));
        m_chain.add(m_memory.get());
    }
    if (plan.breakpoints) {
        m_breakpoints = std::move(plan.breakpoints);
        m_chain.add(m_breakpoints.get());
    }
    if (plan.onSpan) {
        m_spans = std::make_unique<SpanHook>(plan.rank, plan.step, m_chain.empty() ? nullptr : &m_chain,
                                             std::move(plan.onSpan));
        comm.setHook(m_spans.get());
    } else if (!m_chain.empty()) {
        comm.setHook(&m_chain);
    }
}

} // namespace smol::engine
