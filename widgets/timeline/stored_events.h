// The timeline's events as TimelineData stores them, compact enough for a
// million of each: a packet (one frame, its send and receive paired), a span
// with its name interned, a memory sample, and a memory sample's stack
// squeezed into 8 bytes for drawing.
#pragma once

#include "net/memory_by_category.h"
#include "timeline_events.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace smol::widgets {

// A packet as stored: one frame from its sender's lane to its receiver's.
struct TimelinePacket {
    std::int64_t sendStartNs = 0;
    std::int64_t sendEndNs = 0;
    std::int64_t recvEndNs = 0; // 0: not received yet (in flight, or lost)
    std::uint64_t seq = 0;
    std::uint32_t bytes = 0;    // payload; frames are at most 4 GiB
    std::uint32_t tag = 0;
    std::uint16_t src = 0;
    std::uint16_t dst = 0;
    std::uint8_t collective = 0;
    bool received() const { return recvEndNs != 0; }
};

// A span as stored (names interned).
struct StoredSpan {
    std::int64_t startNs = 0;
    std::int64_t endNs = 0;
    std::int64_t step = -1;
    std::uint64_t seq = 0;
    std::uint64_t bytes = 0;
    std::uint32_t name = 0; // index into names()
    TimelineSpanKind kind = TimelineSpanKind::Forward;
    std::uint8_t collective = 0;
};

// A memory sample as stored (80 bytes; the lane is its node).
struct StoredMemory {
    static constexpr int kCategories = net::MemoryByCategory::kCategories;
    std::int64_t tNs = 0;
    net::MemoryByCategory memory;
    std::uint64_t seq = 0;
    std::int32_t step = -1;
    std::uint8_t collective = 0;
    bool before = false;
    // The stack's height, what the lane draws.
    std::int64_t total() const { return memory.stacked(); }
};
static_assert(sizeof(StoredMemory) == 80, "a lane holds a million of these");

// A sample's stack in 8 bytes, for drawing: where each category ends, as a
// share of the total in 1/65535 (params, + grads, + optimizer, +
// activations; comm fills it up to the total). Exact to a thousandth of a
// pixel on any strip.
struct MemoryShares {
    static constexpr int kSteps = 65535;
    std::uint16_t upTo[StoredMemory::kCategories - 1] = {0, 0, 0, 0};
    static MemoryShares of(const StoredMemory &m)
    {
        MemoryShares s;
        const std::int64_t total = m.total();
        std::int64_t cum = 0;
        for (int k = 0; k + 1 < StoredMemory::kCategories; ++k) {
            cum += std::max<std::int64_t>(m.memory.category(k), 0);
            s.upTo[k] = total > 0 ? std::uint16_t(std::llround(double(cum) / double(total) * kSteps)) : 0;
        }
        return s;
    }
    // Bytes from the foot of the stack to the top of category k.
    double bytesUpTo(int k, std::int64_t total) const
    {
        return k + 1 >= StoredMemory::kCategories ? double(total) : double(total) * upTo[k] / kSteps;
    }
};

} // namespace smol::widgets
