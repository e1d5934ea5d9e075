// A quick end-to-end check of a mesh whose ranks are transports in this
// process: every rank, on its own thread, runs a barrier and an
// all-reduce(Sum) of a small float buffer filled with rank + 1, and compares
// each element with the closed form N(N+1)/2. Payload bytes are measured with
// a TraceSink attached to every transport for the duration of the check.
//
// It does not check throughput or clocks, and it does not work across
// processes: every rank must be in `ranks`, in rank order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace smol::net {

class Transport;

struct RankHealth {
    int rank = -1;
    bool ok = false;
    std::string error;               // empty when ok
    std::uint64_t bytesSent = 0;     // payload bytes this rank sent
    std::uint64_t bytesReceived = 0; // payload bytes this rank received
};

// Blocks until every rank has finished (at most about the transports'
// timeout when a peer is lost). One result per rank, in rank order. A rank
// that fails aborts its transport so its peers fail fast instead of waiting.
std::vector<RankHealth> runMeshHealthCheck(std::vector<Transport *> ranks);

} // namespace smol::net
