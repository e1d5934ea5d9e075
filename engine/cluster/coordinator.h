// The coordinator of a cluster: accepts nodes on an authenticated control
// port (net/control_channel.h), keeps each one's clock offset (NTP-style,
// net/clock_sync.h) and liveness (heartbeats; a node silent for
// heartbeatTimeout is lost), and drives training runs in epochs:
//
//   assign (rank, world, config, first step, parameters) -> each node listens
//   on a data port -> peers (every rank's address) -> nodes connect the mesh
//   -> ready -> start -> step reports ... -> done (results, final parameters)
//
// When a node is lost mid-run: edp (asynchronous) trains on without the lost
// worker; the lock-step strategies abort the epoch on every survivor, take
// the newest in-memory checkpoint a survivor holds (nodes keep the full
// parameters after every step), and start a new epoch with the survivors and
// any node that joined meanwhile (world size, shards and placement
// recomputed), redoing at most the interrupted step.
//
// Threads: an accept thread (handshakes), one reader per node, a monitor
// (heartbeat deadlines, clock pings); run() owns the run's state machine.
#pragma once

#include "engine/trainer.h"
#include "net/trace.h"

#include <QJsonObject>
#include <QString>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace smol::engine {

// A class's cluster: 30 students and spares, local or remote.
constexpr int kMaxClusterNodes = kMaxNodes;

struct CoordinatorOptions {
    std::string bindAddress = "0.0.0.0";
    std::uint16_t port = 0; // 0: any free port (see port())
    std::string token;
    std::chrono::milliseconds heartbeatTimeout{5000};
    std::chrono::milliseconds pingInterval{1000};
    // Viewers (viewer_protocol.h): students' windows and `smolctl watch`
    // connect with `token` or with this one, which may watch but never join
    // as a node ("": only the run's token). Must differ from `token`.
    std::string watchToken;
    // Stream runs to viewers even when the run has no event sink of its own
    // (`smolctl train --viewers`): nodes then send their frame events.
    bool streamToViewers = false;
    std::int64_t viewerBudgetBytesPerSecond = 256 * 1024; // per viewer
};

// A viewer's answer to the teacher's lesson step (the last per viewer counts).
struct Prediction {
    int viewer = -1;
    std::string name; // printable, bounded
    std::string host;
    int node = -1;    // the node its machine joined as, -1: none
    int step = -1;    // the lesson step index
    double value = 0; // finite
};

struct ClusterNode {
    enum class State { Idle, Running, Lost };
    int id = -1;             // join order, 0, 1, ...
    std::string name;
    std::string host;        // the address it connected from
    // The data-plane address it asked to be reached at (smolctl node
    // --advertise); "" = worked out by the coordinator (docs/runtime.md).
    std::string advertise;
    std::int64_t pid = 0;
    State state = State::Idle;
    int rank = -1;           // in the current or last epoch
    bool clockValid = false;
    std::int64_t clockOffsetNs = 0; // node clock minus coordinator clock
    std::int64_t clockErrorNs = 0;  // |estimate - truth| is at most this
    std::string lostReason;
    // Why this node's last epoch failed (its own error, not an abort it was
    // told to make); "" once a new epoch starts or when it did not fail.
    std::string lastError;
};
const char *clusterNodeStateName(ClusterNode::State state);

class BreakpointController;
class SessionEventSink;

struct ClusterRunOptions {
    int nodes = 0;                    // members at the start (0: every idle node)
    std::int64_t checkpointEvery = 0; // write a checkpoint every K steps (needs checkpointDir)
    QString checkpointDir;
    QString resumeDir;                // start from this checkpoint ("" = from the seed)
    // Nodes keep the full parameters every K steps in memory, to re-form
    // from when a node is lost (K = 1: at most the interrupted step is
    // redone). Sharded strategies (zero*, tensor, pipeline) gather them, an
    // extra all-gather per K steps on the wire. 0: keep none (a lost node
    // re-forms from the run's starting parameters).
    std::int64_t recoveryEvery = 1;
    // The coordinator keeps the newest full state (kept_checkpoint.h), sent
    // by rank 0 every keepEvery steps or keepInterval, whichever comes
    // first (checked at the nodes' recovery points), so a run whose nodes
    // are all lost resumes from it: at most about 100 steps or 10 s are
    // redone. Up to keepBudgetBytes in memory, then in a temporary
    // directory. keepEvery 0: none kept.
    std::int64_t keepEvery = 100;
    std::chrono::milliseconds keepInterval{10000};
    std::int64_t keepBudgetBytes = std::int64_t(256) << 20;
    int maxReforms = 8;
    // Every node lost: how long to wait for nodes to join again before the
    // run ends (a laptop lid, a Wi-Fi drop); whoever came resumes it.
    std::chrono::milliseconds rejoinTimeout{120000};
    // Pause at collectives (not owned): every node asks it at each
    // collective, through a proxy thread here (one round trip per collective
    // while set). nullptr: nodes never stop.
    BreakpointController *breakpoints = nullptr;
    // Everything the run does as events on this process's clock: frames,
    // collective, pause and step spans, memory per step, metrics, log lines
    // (not owned; called from reader threads and run()). nullptr: none.
    SessionEventSink *events = nullptr;
    std::chrono::milliseconds setupTimeout{60000}; // per phase of an epoch's set-up
};

class Coordinator {
public:
    // Listens at once; throws net::NetError when the port is taken.
    explicit Coordinator(const CoordinatorOptions &options);
    ~Coordinator();
    Coordinator(const Coordinator &) = delete;
    Coordinator &operator=(const Coordinator &) = delete;

    std::uint16_t port() const;
    // Log lines (joins, refusals, losses, re-forms, and what nodes log,
    // prefixed with their name), from any thread.
    void setLogSink(std::function<void(const std::string &)> sink);
    // At a pause: the parameters each held node holds in full beyond its own
    // shard (zero3's gathered layers), by rank. From a proxy thread.
    void setGatheredSink(std::function<void(int rank, const std::vector<std::string> &params)> sink);
    // Every frame event of the nodes, moved onto this process's clock
    // (net::monotonicNs()); ranks are those of the current epoch. Not owned;
    // set before run().
    void setTraceSink(net::TraceSink *sink);

    // True once n nodes are connected and alive.
    bool waitForNodes(int n, std::chrono::milliseconds timeout);
    std::vector<ClusterNode> nodes() const;
    // Viewers: a prediction as it arrives (from a viewer's reader thread).
    void setPredictionSink(std::function<void(const Prediction &)> sink);
    // The teacher's lesson step, to every viewer now and to each that
    // arrives later (an empty object: no lesson).
    void publishLesson(const QJsonObject &lesson);
    // Where a pause's tensors go so viewers see them (recordPause); the
    // run's own events reach viewers without it.
    SessionEventSink *viewerEvents();
    int viewerCount() const;
    // Bytes each viewer was sent so far, by viewer id (for `smolctl bench watch`).
    std::vector<std::pair<int, std::uint64_t>> viewerBytesSent() const;

    // Tell a node to die at once (an in-process node ends its agent; a
    // process exits as if killed -9). The run treats it as lost.
    void kill(int nodeId);
    // Tell every node to exit cleanly.
    void shutdownNodes();
    // Tell one idle node to exit cleanly (it leaves the cluster, not lost).
    // False when it is in a run or already gone.
    bool shutdownNode(int nodeId);
    // End the current run (from any thread): every node aborts its epoch and
    // run() throws std::runtime_error("stopped by the user").
    void stop();

    // Blocking. Throws std::invalid_argument for a config the cluster cannot
    // run (one line), std::runtime_error naming the node otherwise.
    // summary.extra["reforms"] counts re-formations.
    TrainSummary run(const TrainConfig &config, const ClusterRunOptions &options, TrainObserver *observer = nullptr);

private:
    TrainSummary runStreamed(const TrainConfig &config, const ClusterRunOptions &options, TrainObserver *observer);
    struct Private; // coordinator_private.h
    class Run;      // one run's state machine: coordinator_run.cpp
    std::unique_ptr<Private> d;
};

} // namespace smol::engine
