// A node agent's insides (node_agent.h), declared here and defined one
// concept per file:
//
//   node_agent.cpp         joining, the control loop, heartbeats, trace batches
//   node_epoch.cpp         the life of one epoch, as named phases
//   node_remote_calls.cpp  calls answered by the coordinator: remote
//                          breakpoints at collectives, Gloo's rendezvous
//
// Not part of the engine's interface.
#pragma once

#include "node_agent.h"
#include "state_blob.h"
#include "telemetry.h"

#include "engine/gloo/gloo_communicator.h"
#include "engine/node_hooks.h"
#include "engine/trainer.h"
#include "net/communicator.h"
#include "net/control_channel.h"
#include "net/tcp_transport.h"

#include <QJsonArray>
#include <QJsonObject>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

namespace smol::engine::node {

// What the coordinator's `assign` says.
struct Assignment {
    int epoch = 0;
    int rank = 0;
    int world = 1;
    TrainConfig config;
    std::int64_t firstStep = 0;
    std::int64_t diskEvery = 0;     // rank 0 sends a checkpoint every K steps
    std::int64_t recoveryEvery = 1; // keep the full parameters every K steps
    // Rank 0 sends the coordinator its full state every keepEvery steps or
    // keepInterval, whichever comes first (0: never; kept_checkpoint.h).
    std::int64_t keepEvery = 0;
    std::chrono::milliseconds keepInterval{10000};
    bool remoteBreakpoints = false; // ask the coordinator at every collective
    bool record = false;            // send collective and pause spans
    std::string glooBind;           // --backend gloo: where this node's Gloo device binds
    TrainingState initial;          // parameters and moments to start from (undefined: the seed's)
};

// What an epoch holds from its start to its report (the epoch thread's).
struct Epoch {
    Assignment a;
    std::unique_ptr<net::TcpTransport> transport;
    // A 1-node world still gets a transport and a communicator (its
    // collectives return at once), so no strategy ever runs without one.
    std::vector<std::unique_ptr<net::Transport>> alone;
    TelemetryBuffer telemetry;
    TrainingState ckpt; // the newest full parameters, sent up when the epoch fails
    std::int64_t ckptSteps = 0;
    std::int64_t keptSteps = 0;                   // the state last sent to the coordinator to keep
    std::chrono::steady_clock::time_point keptAt; // and when
    QJsonObject outcome; // done or failed
    QByteArray outcomeBlob;
};

// What an epoch holds while it trains; gone before the epoch reports.
struct EpochTraining {
    TrainConfig config;
    std::shared_ptr<const DataSource> data;
    bool gloo = false; // Gloo brings its own data plane: no transport of ours
    std::unique_ptr<GlooStore> glooStore;
    std::unique_ptr<net::Communicator> comm;
    std::atomic<std::int64_t> currentStep{0};
    NodeHooks hooks;
    // Bytes sent inside steps (the strategy's traffic), not the recovery and
    // held-out-loss gathers the runtime adds between them.
    std::uint64_t bytesInSteps = 0;
    std::uint64_t bytesMark = 0;
    std::vector<std::uint64_t> bytesInStepsByGroup, bytesMarkByGroup; // the same by process group
};

class Agent;

// Pause at collectives when the coordinator holds the breakpoints: every
// collective asks the coordinator's BreakpointController (through a proxy
// thread there) whether to hold; only a held node ships its buffer, and gets
// it back with the user's edits. docs/runtime.md, "Pausing node processes".
class RemoteHook : public net::CollectiveHook {
public:
    RemoteHook(Agent &agent, int epoch, const std::atomic<std::int64_t> *step)
        : m_agent(agent)
        , m_epoch(epoch)
        , m_step(step)
    {
    }
    void before(const net::CollectiveInfo &info) override;
    void after(const net::CollectiveInfo &info) override;

private:
    Agent &m_agent;
    int m_epoch;
    const std::atomic<std::int64_t> *m_step;
};

// `--backend gloo`: the epoch's rendezvous, kept by the coordinator and
// reached over this node's authenticated control connection.
class ControlRendezvous : public RendezvousClient {
public:
    ControlRendezvous(Agent &agent, int epoch)
        : m_agent(agent)
        , m_epoch(epoch)
    {
    }
    void set(const std::string &key, const std::vector<std::uint8_t> &value) override;
    std::vector<std::uint8_t> get(const std::string &key, std::chrono::milliseconds timeout) override;
    std::int64_t add(const std::string &key, std::int64_t delta) override;
    bool check(const std::vector<std::string> &keys) override;
    void wait(const std::vector<std::string> &keys, std::chrono::milliseconds timeout) override;
    bool deleteKey(const std::string &key) override;
    std::int64_t numKeys() override;

private:
    Agent &m_agent;
    int m_epoch;
};

class Agent {
public:
    Agent(const NodeAgentOptions &options, const std::function<void(const std::string &)> &log)
        : m_opts(options)
        , m_log(log)
    {
    }
    int run();

    // node_remote_calls.cpp: collective RPCs, answered by the coordinator.
    void remoteBefore(int epoch, std::int64_t step, const net::CollectiveInfo &info);
    void remoteAfter(int epoch, std::int64_t step, const net::CollectiveInfo &info);
    net::ControlMessage storeCall(int epoch, const QString &op, const std::vector<std::string> &keys,
                                  const QByteArray &blob, std::int64_t delta,
                                  std::chrono::milliseconds timeout);

private:
    struct CallReply {
        std::string type;
        bool stepped = false;
        QByteArray blob;
    };

    // node_agent.cpp
    std::unique_ptr<net::ControlChannel> connectToCoordinator();
    void log(const std::string &text);
    void sendQuietly(const QJsonObject &json, const QByteArray &blob = {});
    int controlLoop();
    void startEpoch(const net::ControlMessage &m);
    void abortEpoch(int epoch);
    void heartbeatLoop();
    void flushTrace();
    void addMemory(const MemorySnapshot &m);
    void addSpan(const SpanEvent &s);
    std::shared_ptr<const DataSource> dataFor(TrainConfig &config);
    void waitFor(const std::function<bool()> &pred, const char *what);

    // node_remote_calls.cpp
    CallReply call(std::uint64_t id, const QJsonObject &json, const QByteArray &blob = {});
    std::uint64_t nextCallId();

    // node_epoch.cpp: the life of one epoch.
    void epochMain(Assignment a);
    void setUpEpoch(Epoch &e, EpochTraining &t);
    void openDataPlane(Epoch &e, EpochTraining &t);
    void meetPeers(Epoch &e, EpochTraining &t);
    void connectTcpPeers(Epoch &e);
    void connectToPeer(net::TcpTransport &transport, int peer,
                       const std::pair<std::string, std::uint16_t> &address);
    void connectGloo(Epoch &e, EpochTraining &t);
    void wireCommunicator(Epoch &e, EpochTraining &t);
    NodeResult train(Epoch &e, EpochTraining &t);
    NodeRun nodeRunOf(Epoch &e, EpochTraining &t);
    void onCheckpoint(Epoch &e, EpochTraining &t, bool lockStep, std::int64_t stepsDone, const torch::Tensor &params,
                      const OptimizerMoments &moments);
    void reportDone(Epoch &e, const EpochTraining &t, const NodeResult &result);
    void reportFailed(Epoch &e, const std::exception &error);
    void closeEpoch(Epoch &e);

    const NodeAgentOptions m_opts;
    std::function<void(const std::string &)> m_log;
    std::unique_ptr<net::ControlChannel> m_channel;
    std::thread m_heartbeat;
    std::thread m_epochThread;
    std::atomic<bool> m_stop{false};
    std::mutex m_stopMutex;
    std::condition_variable m_stopCv;
    std::map<std::string, std::pair<std::shared_ptr<const DataSource>, std::int64_t>> m_data;

    std::mutex m_mutex; // guards everything below
    std::condition_variable m_cv;
    int m_epoch = 0;
    int m_rank = -1;
    QJsonArray m_spans;  // collective and pause spans since the last trace batch
    QJsonArray m_memory; // memory samples at collective boundaries since the last trace batch
    bool m_aborted = false;
    bool m_started = false;
    std::optional<std::vector<std::pair<std::string, std::uint16_t>>> m_peers;
    std::map<std::uint64_t, CallReply> m_replies;                // collective RPC answers, by call id
    std::map<std::uint64_t, net::ControlMessage> m_storeReplies; // rendezvous answers, by call id
    std::uint64_t m_nextCall = 1;
    net::Transport *m_transport = nullptr;
    TelemetryBuffer *m_telemetry = nullptr;
    std::unique_ptr<net::TcpTransport> m_finishedTransport; // the last epoch's, kept open (see closeEpoch)
};

} // namespace smol::engine::node
