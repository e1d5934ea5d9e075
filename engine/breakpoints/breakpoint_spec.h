// The `--break` spec: parse KIND[@step=N][,rank=R][,name=SUBSTR] or "next"
// into a Breakpoint, and match it against a collective at a given step.
// Plain data, no LibTorch.
#pragma once

#include "net/communicator.h"

#include <cstdint>
#include <string>

namespace smol::engine {

// KIND[@step=N][,rank=R][,name=SUBSTR] or "next". KIND: allreduce,
// reducescatter, allgather, broadcast, barrier, gather, scatter, sendrecv
// (also send, recv), push, pull, any.
struct Breakpoint {
    bool next = false;                                    // the next collective any node enters
    net::CollectiveKind kind = net::CollectiveKind::None; // None: any kind
    std::int64_t step = -1;                               // -1: any step
    int rank = -1;                                        // -1: any rank (point-to-point kinds only)
    std::string name;                                     // substring of CollectiveInfo::name
    std::string text;                                     // the spec as given

    bool matches(const net::CollectiveInfo &info, std::int64_t step) const;
};

// Throws std::invalid_argument with a one-line reason.
Breakpoint parseBreakpoint(const std::string &spec);
bool isPointToPoint(net::CollectiveKind kind);

} // namespace smol::engine
