// A node's memory by category, in bytes: the one shape in which memory
// travels from the engine's accounting (engine/memory_tracker.h, each
// strategy's held tensors) through trace events and session files to every
// view that draws it (cluster view, memory bars, the timeline's memory lane).
//
// It lives in net/ although net/ never fills one: net/ is the one layer both
// engine/ (which measures memory) and widgets/ (which draws it) may include,
// and memory samples travel with the trace events beside net::FrameEvent.
// Plain C++ only (no Qt, no LibTorch), so any target may include it without
// linking anything.
//
// The categories are what a strategy holds (params, grads, optimizer state,
// comm buffers) plus activations, which the engine derives as live minus the
// rest; live also counts anything else the node allocated. A structure that
// places a sample in time or on a node (a session MemorySample, a timeline
// sample) contains one of these rather than repeating its fields.
#pragma once

#include <algorithm>
#include <cstdint>

namespace smol::net {

struct MemoryByCategory {
    // The categories in every view's stacking order (first = bottom / left):
    // params, grads, optimizer, activations, comm.
    static constexpr int kCategories = 5;

    std::int64_t params = 0;
    std::int64_t grads = 0;
    std::int64_t optimizer = 0;
    std::int64_t activations = 0; // live minus the rest (never negative)
    std::int64_t comm = 0;
    std::int64_t live = 0; // all of the above and anything else the node allocated
    std::int64_t peak = 0; // highest live so far

    // Category k in stacking order (0 = params ... 4 = comm).
    std::int64_t category(int k) const
    {
        const std::int64_t *in[kCategories] = {&params, &grads, &optimizer, &activations, &comm};
        return k >= 0 && k < kCategories ? *in[k] : 0;
    }
    // The stack's height, what a bar or lane draws (a negative category, which
    // the engine should never report, counts as 0).
    std::int64_t stacked() const
    {
        std::int64_t sum = 0;
        for (int k = 0; k < kCategories; ++k)
            sum += std::max<std::int64_t>(category(k), 0);
        return sum;
    }

    friend bool operator==(const MemoryByCategory &a, const MemoryByCategory &b)
    {
        return a.params == b.params && a.grads == b.grads && a.optimizer == b.optimizer &&
               a.activations == b.activations && a.comm == b.comm && a.live == b.live && a.peak == b.peak;
    }
    friend bool operator!=(const MemoryByCategory &a, const MemoryByCategory &b) { return !(a == b); }
};

} // namespace smol::net
