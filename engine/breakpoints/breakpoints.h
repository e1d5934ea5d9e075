// Pause the whole cluster at a collective, look at the tensors every node is
// about to exchange, edit one, and resume or step one collective at a time.
//
// One BreakpointController is shared by all nodes of a run; each node's
// Communicator gets a hook from makeHook(). The hook holds a node in
// CollectiveHook::before(), which runs on the node's compute thread outside
// any transport wait, so a held node never trips a peer's receive timeout
// (see "Why pausing in before() is safe" in docs/breakpoints.md).
//
// Consistency: every node pauses at the same collective. For collectives all
// ranks enter (all-reduce, reduce-scatter, all-gather, broadcast, barrier,
// gather, scatter: one shared sequence number), whether sequence number S
// pauses is decided once, by the first node to reach S, and every node
// follows that decision. So no node runs ahead, and a node never pauses while
// a peer is already inside the same collective waiting for it. Point-to-point
// kinds (send/recv, push/pull) pause at each node's next boundary instead
// (documented caveat: a peer already blocked in a receive from a held node
// fails after the transport timeout, 10 s by default).
//
// Public types are plain data (no LibTorch), so a coordinator can later ship
// them over the network; commands are thread-safe and never block for long.
#pragma once

#include "breakpoint_spec.h"
#include "tensor_snapshot.h"

#include "net/communicator.h"
#include "engine/session/session_events.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace smol::engine {

// The cluster, held. Published once every running node has joined, or after
// the settle timeout with those that did (complete = false: a node is stuck
// elsewhere, e.g. in a point-to-point receive).
struct PauseState {
    std::uint64_t id = 0; // 1, 2, ... per controller
    std::string reason;   // the breakpoint's text, "next", "step" or "pause"
    int hitNode = -1;     // the node whose collective matched
    bool complete = false;
    std::vector<TensorSnapshot> inputs;  // per held node (thread), node order
    std::vector<TensorSnapshot> results; // after a step(): the stepped collective's results
};

// A pause's tensors as session records (one per input and result, their
// snapshots as JSON), handed to `sink` at time `nowNs`: what a recording
// keeps of a pause, whoever paused (smolctl train --break, the GUI).
void recordPause(const PauseState &pause, SessionEventSink &sink, std::int64_t nowNs);

class BreakpointController {
public:
    using PausedCallback = std::function<void(std::shared_ptr<const PauseState>)>;
    using HoldCallback = std::function<void(bool held)>;

    explicit BreakpointController(SnapshotOptions options = {});
    ~BreakpointController();
    BreakpointController(const BreakpointController &) = delete;
    BreakpointController &operator=(const BreakpointController &) = delete;

    void addBreakpoint(const Breakpoint &breakpoint);
    void clearBreakpoints();
    std::vector<Breakpoint> breakpoints() const;
    // Called on a node thread when a pause is published; keep it quick.
    void setPausedCallback(PausedCallback callback);
    void setSettleTimeout(std::chrono::milliseconds timeout);
    // Told true when a pause begins and false when it ends, outside the
    // controller's lock, in order: the run holds its transports' waits
    // (net::Transport::holdWaits), so a node waiting in a receive for a held
    // neighbour (a pipeline stage, a mesh's other groups) waits as long as
    // the pause lasts instead of failing after the transport's timeout.
    void setHoldCallback(HoldCallback callback);

    // Run lifecycle, driven by the trainer.
    void beginRun(int nodes);
    std::unique_ptr<net::CollectiveHook> makeHook(int node, const std::atomic<std::int64_t> *step);
    void nodeFinished(int node);
    // Release every held node and pause no more in this run (a node failed,
    // or a watchdog gave up). beginRun() re-arms.
    void abort();

    // Commands, from any thread.
    void pauseAtNext();        // pause at the next collective boundary
    bool isPaused() const;
    // The first published pause with id > afterId, or nullptr on timeout.
    std::shared_ptr<const PauseState> waitForPause(std::chrono::milliseconds timeout, std::uint64_t afterId = 0);
    bool resume(); // run to the next breakpoint; false when not paused
    bool step();   // run one collective, then pause again (results in the next pause)
    // Queue an edit of `node`'s held input, applied before the collective
    // runs. False when the node is not held; std::invalid_argument for NaN
    // into an integer buffer or an index out of range.
    bool edit(int node, const TensorEdit &edit);
    // Nodes in other processes (engine/cluster/): the coordinator's proxy
    // thread for a node's calling thread runs before() in two halves, so it
    // fetches the node's buffer only when the node is held. decide() returns
    // the pause the node must hold for (0: run through); holdFor() holds a
    // copy of the node's buffer (the user's edits land in it) until that
    // pause ends, and returns whether it ended with step() (then after() on
    // the same thread reports the result). `related`: the snapshots the
    // node took of its info.related (a copy has no views of them).
    std::uint64_t decide(int node, std::int64_t step, const net::CollectiveInfo &info);
    bool holdFor(std::uint64_t pauseId, int node, std::int64_t step, const net::CollectiveInfo &info,
                 std::vector<TensorSnapshot> related = {});
    void afterRemote(int node, std::int64_t step, const net::CollectiveInfo &info) { after(node, step, info); }

    // The results of the collective the last step() released, once every
    // stepped node has them; nullptr on timeout.
    std::shared_ptr<const std::vector<TensorSnapshot>> waitForStepResults(std::chrono::milliseconds timeout);

private:
    class Hook;
    struct Held;
    using Lock = std::unique_lock<std::mutex>;

    void before(int node, std::int64_t step, const net::CollectiveInfo &info);
    void after(int node, std::int64_t step, const net::CollectiveInfo &info);
    bool matchesAny(const net::CollectiveInfo &info, std::int64_t step, int node, std::string *reason) const;
    void startPause(const std::string &reason, int hitNode);
    std::uint64_t decideHeld(int node, std::int64_t step, const net::CollectiveInfo &info, bool &began);
    void announceHold(); // m_paused to the hold callback, if it changed; without m_mutex
    void hold(Lock &lock, int node, std::int64_t step, const net::CollectiveInfo &info,
              std::vector<TensorSnapshot> related);
    std::shared_ptr<const PauseState> publishIfReady();
    void notify(Lock &lock, const std::shared_ptr<const PauseState> &state);
    void release(bool stepping);

    struct Decision {
        std::uint64_t pauseId = 0; // 0: run through
        int arrivals = 0;
    };

    const SnapshotOptions m_options;
    mutable std::mutex m_mutex;
    std::condition_variable m_changed;
    std::vector<Breakpoint> m_breakpoints;
    PausedCallback m_callback;
    std::mutex m_holdMutex; // announceHold(): one at a time, so the last told is the state
    HoldCallback m_holdCallback;
    bool m_announcedHeld = false;
    std::chrono::milliseconds m_settleTimeout{3000};

    int m_nodes = 0;
    std::set<int> m_finished;
    bool m_aborted = false;
    bool m_pendingPause = false;
    std::string m_pendingReason;
    // (collective seq, its group's leader) -> decision: one per collective of
    // one group (CollectiveInfo::leader; the world's leader is 0).
    std::map<std::pair<std::uint64_t, int>, Decision> m_decisions;

    // The current pause.
    bool m_paused = false;
    std::uint64_t m_pauseId = 0;
    std::uint64_t m_generation = 0; // bumped at every release
    std::string m_reason;
    int m_hitNode = -1;
    std::chrono::steady_clock::time_point m_pauseStart;
    std::vector<Held *> m_held;        // on the held threads' stacks
    std::shared_ptr<const PauseState> m_published;

    // The last step().
    std::uint64_t m_stepId = 0;
    std::size_t m_stepExpected = 0;
    std::vector<TensorSnapshot> m_stepResults;
    bool m_resultsInNextPause = false;
};

} // namespace smol::engine
