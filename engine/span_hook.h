// Collective spans for the session and the timeline: wraps a node's other
// collective hook (breakpoints, or none) and reports, per collective, a
// Collective span from entering it to leaving it, plus a Pause span for the
// time the inner hook held the node before it (a breakpoint: the hook says
// so with noteHeldAtCollective()). Called on the
// node's compute thread (edp's server: on several threads at once; each
// thread's start time is its own).
#pragma once

#include "engine/session/session_events.h"
#include "net/communicator.h"
#include "net/trace.h"

#include <atomic>
#include <functional>
#include <string_view>

namespace smol::engine {

namespace detail {
inline thread_local bool t_heldAtCollective = false;
}
// Called by a breakpoint hook on the node's thread when it held the node.
inline void noteHeldAtCollective()
{
    detail::t_heldAtCollective = true;
}

class SpanHook : public net::CollectiveHook {
public:
    using Emit = std::function<void(const SpanEvent &)>;
    // `inner` (not owned) may be null; `step` may be null (step -1).
    SpanHook(int node, const std::atomic<std::int64_t> *step, net::CollectiveHook *inner, Emit emit)
        : m_node(node), m_step(step), m_inner(inner), m_emit(std::move(emit)) {}

    void before(const net::CollectiveInfo &info) override
    {
        const std::int64_t t0 = net::monotonicNs();
        detail::t_heldAtCollective = false;
        if (m_inner)
            m_inner->before(info);
        const std::int64_t t1 = net::monotonicNs();
        if (detail::t_heldAtCollective)
            m_emit(span(info, SpanEvent::Kind::Pause, t0, t1));
        t_start = t1;
    }
    void after(const net::CollectiveInfo &info) override
    {
        const std::int64_t t1 = net::monotonicNs();
        m_emit(span(info, SpanEvent::Kind::Collective, t_start, t1));
        if (m_inner)
            m_inner->after(info);
    }

private:
    SpanEvent span(const net::CollectiveInfo &info, SpanEvent::Kind kind, std::int64_t start, std::int64_t end) const
    {
        SpanEvent s;
        s.node = m_node;
        s.kind = kind;
        s.name = info.axis.empty() ? info.name : info.axis + " \u00b7 " + info.name; // the timeline's label
        if (info.algorithm && std::string_view(info.algorithm) == "doubling")
            s.name += " (doubling)"; // the ring, the default, goes unsaid
        s.startNs = start;
        s.endNs = end;
        s.step = m_step ? m_step->load() : -1;
        s.collective = info.kind;
        s.seq = info.seq;
        s.bytes = info.buffer.bytes();
        return s;
    }

    static inline thread_local std::int64_t t_start = 0;
    int m_node;
    const std::atomic<std::int64_t> *m_step;
    net::CollectiveHook *m_inner;
    Emit m_emit;
};

} // namespace smol::engine
