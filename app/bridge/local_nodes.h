// The window's own nodes: agent threads of this process, each joined to the
// coordinator over TCP as a remote `smolctl node` is. Their data planes
// listen where the coordinator does (every interface: the window takes
// remote nodes, and the data plane is token-authenticated), so other
// machines' nodes reach them, at the advertised address if one is set.
//
// They join one after another, each named after the id the coordinator is
// about to give it, so node i is "local-i": started together they raced,
// and ids (join order, which ranks follow) came out of name order (local-0,
// local-3, local-15, local-2, ... on the screen). A remote node joining in
// the same instant can still take an id first. A refused handshake (the
// coordinator bounds handshakes in progress per address, and every local
// node comes from 127.0.0.1) is tried again a few times before the node
// gives up; the reason waits in takeFailures() for the log.
//
// No LibTorch in this header.
#pragma once

#include "engine/cluster/node_agent.h"

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace smol::engine {
class Coordinator;
}

namespace smol::app {

class LocalNodes {
public:
    // `agent`: where the coordinator listens and how a node joins it (its
    // port, name and memory slot are filled in per node).
    LocalNodes(engine::Coordinator &coordinator, const engine::NodeAgentOptions &agent);
    ~LocalNodes(); // stop() then join()

    int count() const { return int(m_threads.size()); }
    void add();
    std::vector<std::string> takeFailures(); // "local-3: <why>", since the last call
    // No more joins; the join under way ends (joining or failing) first, so
    // a shutdown of the coordinator's nodes reaches it too.
    void stop();
    void join(); // after the coordinator has shut its nodes down

private:
    void runAgent(engine::NodeAgentOptions o);
    static constexpr int kJoinAttempts = 10;

    engine::Coordinator &m_coordinator;
    engine::NodeAgentOptions m_agent;
    std::vector<std::thread> m_threads;
    std::mutex m_mutex;
    std::condition_variable m_cv;
    bool m_joining = false; // one node is joining; the others wait
    bool m_closing = false; // turns away the ones still waiting
    std::vector<std::string> m_failures;
};

} // namespace smol::app
