// The `--break` spec: parse KIND[@AXIS][@step=N][,rank=R][,name=SUBSTR] or
// "next" into a Breakpoint, and match it against a collective at a given step.
// Plain data, no LibTorch.
#pragma once

#include "net/communicator.h"

#include <cstdint>
#include <string>

namespace smol::engine {

// KIND[@AXIS][@step=N][,rank=R][,name=SUBSTR] or "next" (the conditions
// after the kind separated by @ or ,). KIND: allreduce, reducescatter,
// allgather, broadcast, barrier, gather, scatter, sendrecv (also send, recv),
// push, pull, any. AXIS (a device mesh's, net/device_mesh.h): dp, tp, pp or
// cp; the gradients' dp x cp group counts as dp and as cp.
struct Breakpoint {
    bool next = false;                                    // the next collective any node enters
    net::CollectiveKind kind = net::CollectiveKind::None; // None: any kind
    std::int64_t step = -1;                               // -1: any step
    int rank = -1; // -1: any rank (point-to-point kinds only); a node's rank, not its rank in a group
    std::string name;                                     // substring of CollectiveInfo::name
    std::string axis;                                     // a mesh axis; empty: any group or none
    std::string text;                                     // the spec as given

    // `node`: the calling node's rank (rank=R picks a point-to-point call by it).
    bool matches(const net::CollectiveInfo &info, std::int64_t step, int node) const;
};

// Throws std::invalid_argument with a one-line reason.
Breakpoint parseBreakpoint(const std::string &spec);
bool isPointToPoint(net::CollectiveKind kind);

} // namespace smol::engine
