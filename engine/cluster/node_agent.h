// A cluster node: joins a coordinator over an authenticated control
// connection, then runs whatever the coordinator assigns (rank, world size,
// config, first step, starting parameters): builds its data-plane TCP
// transport, connects to its peers, trains with runNode() (engine/trainer.h:
// the same code as runTraining()'s node threads) and reports every step,
// its memory, its frame events and its result. The same agent runs as a
// `smolctl node` process on any machine or as a thread in the coordinator's
// process.
//
// Threads: the control reader (this function's caller: answers pings at
// once, obeys abort/kill/shutdown), a heartbeat thread (heartbeat every
// interval, trace batches every 100 ms) and one epoch thread per assignment.
// See docs/runtime.md for the message list.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace smol::engine {

struct NodeAgentOptions {
    std::string host = "127.0.0.1"; // the coordinator
    std::uint16_t port = 0;
    std::string token;
    std::string name;                    // "" = host name and pid
    std::string bindAddress = "0.0.0.0"; // data-plane listen address
    // The data-plane address peers should dial ("" = the coordinator works
    // it out: the address it sees this node connect from, or, for a node on
    // the coordinator's own machine, the address each peer reaches the
    // coordinator at). For multi-homed or NAT'd machines.
    std::string advertise;
    std::chrono::milliseconds heartbeatInterval{1000};
    std::chrono::milliseconds connectTimeout{10000};
    int memorySlot = 0;      // memory_tracker node id this node's allocations are charged to
    bool inProcess = false;  // a thread of the coordinator's process: "kill" ends the agent, not the process
    // Called with the node id the coordinator gave (its welcome), from the
    // agent's thread (a student's window highlights that node).
    std::function<void(int nodeId)> joined;
};

// Returns 0 when the coordinator said shutdown, 1 when the coordinator went
// away or killed an in-process node. Throws net::NetError / net::AuthError
// (one line) when it cannot join.
int runNodeAgent(const NodeAgentOptions &options, const std::function<void(const std::string &)> &log);

} // namespace smol::engine
