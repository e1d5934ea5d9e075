// Trace events for every frame, delivered to a pluggable sink. With no sink
// attached the cost is one relaxed atomic load per frame.
#pragma once

#include "dtype.h"

#include <cstdint>

namespace smol::net {

// Nanoseconds on this process's monotonic clock (std::chrono::steady_clock),
// plus the skew set below.
std::int64_t monotonicNs();
// Shift this process's clock by `ns` (`smolctl node --clock-skew`): a machine
// whose clock disagrees with the coordinator's, to watch the coordinator's
// offset estimate correct it. 0 by default.
void setClockSkewNs(std::int64_t ns);

// A backend whose frames we cannot see (engine/gloo_communicator.h) reports
// one Send event per collective instead: src == dst == its rank, bytes = the
// collective's buffer, sendStart/sendComplete = the collective's start/end.
struct FrameEvent {
    enum class Side : std::uint8_t { Send, Receive };
    Side side = Side::Send;
    int src = -1;
    int dst = -1;
    std::uint64_t bytes = 0; // payload bytes (the fixed header is not counted)
    CollectiveKind kind = CollectiveKind::None;
    std::uint64_t seq = 0;
    std::uint32_t tag = 0;
    // Send side: sendStart (frame handed to the transport) and sendComplete
    // (last byte accepted by the kernel or the in-memory queue); recvComplete 0.
    // Receive side: sendStart copied from the frame header (the sender's clock),
    // recvComplete (last payload byte arrived, receiver's clock); sendComplete 0.
    std::int64_t sendStartNs = 0;
    std::int64_t sendCompleteNs = 0;
    std::int64_t recvCompleteNs = 0;
};

// Called from transport I/O threads: implementations must be thread-safe and
// quick (copy the event and return).
class TraceSink {
public:
    virtual ~TraceSink() = default;
    virtual void onFrame(const FrameEvent &event) = 0;
};

} // namespace smol::net
