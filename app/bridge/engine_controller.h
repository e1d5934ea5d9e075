// The one bridge between the GUI and the engine (docs/architecture.md), and
// the live RunFeed (app/feed/run_feed.h) the window's views are fed by. It owns a coordinator and the local nodes (agent threads of this
// process, joined over the same authenticated TCP control plane a remote
// `smolctl node` uses), runs training on its own thread, and turns what the
// engine reports into immutable snapshots (widgets/cluster_state.h) that it
// publishes on the GUI thread at most 30 times a second. The GUI never waits
// on the engine: every command returns at once; results arrive as signals.
//
// No LibTorch in this header (pimpl), so the window's sources build fast.
#pragma once

#include "app/feed/run_feed.h"

#include <QJsonObject>
#include <QMap>
#include <QPointer>
#include <QString>
#include <QStringList>

#include <memory>
#include <optional>
#include <vector>

namespace smol::engine {
struct TrainConfig;
}

namespace smol::app {

struct PredictedBytes; // run_plan.h

struct RunSettings {
    QString strategy = QStringLiteral("ddp");
    QString model = QStringLiteral("mlp");
    int nodes = 4;
    qint64 steps = 300;
    qint64 globalBatch = 120;
    QString optimizer = QStringLiteral("sgd");
    double lr = 0.1;
    quint64 seed = 0;
    QString placement;  // pipeline; "" = balanced
    QString recordPath; // "" = do not record
    // Slow motion for teaching: every node computes this many times slower.
    double slowMotion = 1;
    // pipeline: micro-batches per step (dividing globalBatch) and their
    // schedule ("gpipe" or "1f1b").
    qint64 microBatches = 1;
    QString schedule = QStringLiteral("1f1b");
    // Who runs the collectives: "ours" (our transport: every packet on the
    // timeline, per-link traffic) or "gloo" (c10d's ProcessGroupGloo: each
    // collective one span per rank with its bytes, no packets, no links).
    QString backend = QStringLiteral("ours");
    // Held-out loss every K steps (rank 0; zero3 gathers the parameters for
    // it, which shows in the traffic); -1: about 25 times a run; 0: never.
    qint64 testEvery = -1;
    // A device mesh, "dp=2,tp=2,pp=2" (net/device_mesh.h); "" = none. Its
    // product is the node count; `strategy` says what its dp axis does.
    QString mesh;
    // ddp's gradient compression (alone or a mesh's dp axis): "none", "fp16",
    // "bf16" or "powersgd:R" (engine/compression_config.h); PowerSGD's plain
    // steps first; our all-reduce: "ring", "doubling", "auto", or "" for the
    // engine's default (the ring, or auto when compressing).
    QString compression = QStringLiteral("none");
    qint64 compressStart = 10;
    QString allReduce;
    // The memory levers: activation recomputation ("none", "selective" for
    // the gpt's attention, "full") and gradient accumulation (micro-steps of
    // globalBatch samples per optimizer step; 1: none).
    QString recompute = QStringLiteral("none");
    qint64 accumulate = 1;
    QString precision = QStringLiteral("fp32"); // or "bf16"
};

// What a finished run measured, by rank, for lessons (app/lesson_runner.h):
// the engine's own figures (bytes from its trace events, memory from its
// tracking allocator, compute from its spans), never computed from a formula.
struct NodeMeasurement {
    int rank = -1;
    int id = -1; // the cluster's node id
    QString name;
    qint64 bytesSent = 0;        // payload bytes over the run
    // Of those, the bytes sent inside its steps (the strategy's traffic; the
    // runtime's recovery gathers between steps are not in it).
    qint64 stepBytesSent = 0;
    QMap<QString, qint64> stepBytesByAxis; // a mesh's: the same by axis ("dp", "tp", "pp", "cp")
    net::MemoryByCategory memory; // at the end of the last step
    qint64 activationPeak = 0;   // the most activations seen at any collective boundary or step end
    double computeSeconds = 0;   // in forward, backward and optimizer spans, not in a collective or pause
                                 // (engine/session/span_time.h, as smolctl compare measures it)
    double wallSeconds = 0;      // its first step's start to its last step's end
    double idleShare = 0;        // 1 - compute / wall
};

struct RunMeasurement {
    RunSettings settings;
    QString strategy;
    int nodes = 0;
    qint64 steps = 0;
    double seconds = 0;
    double samplesPerSecond = 0;
    double finalLoss = 0;
    double testAccuracy = -1;
    qint64 paramCount = 0;
    double paramChecksum = 0;        // NaN once any parameter is NaN
    QMap<QString, double> extra;     // the strategy's figures: "bubble_fraction", ...
    qint64 asyncUpdates = 0;         // edp: updates the server applied
    qint64 maxStaleness = 0;         // edp: the stalest push applied
    QVector<NodeMeasurement> ranks;  // by rank
};

// How the window's cluster listens: `smolcluster --listen PORT --token T
// [--advertise ADDR]`, or the Remote nodes dialog's remembered settings.
struct ClusterOptions {
    int localNodes = 4;
    quint16 port = 0; // 0: any free port
    QString token;    // "": a random one
    // The address other machines reach this one at: the data-plane address
    // the local nodes advertise and the host in the join command ("": the
    // coordinator works it out per peer; the join command names the first
    // non-loopback IPv4 address).
    QString advertise;
    // Where the coordinator and the local nodes' data planes listen
    // ("0.0.0.0": every interface, so other machines reach them).
    QString bindAddress = QStringLiteral("0.0.0.0");
    // Students' windows and `smolctl watch` may also watch with this token,
    // which cannot join as a node ("": only with `token`).
    QString watchToken = QString();
};

// A viewer's answer to the teacher's lesson step (engine::Prediction, on the
// GUI thread): the last one per viewer and step counts.
struct ClassPrediction {
    int viewer = -1;
    QString name; // printable, bounded (the coordinator checked it)
    int node = -1; // the node its machine joined as, -1: none
    int step = -1; // the lesson step's index
    double value = 0;
};

class EngineController : public RunFeed {
    Q_OBJECT

public:
    // Starts the coordinator (listening on every interface, on the port and
    // with the token asked for) and the local node threads, which join it one
    // after another so that node id i is named "local-i". Throws
    // std::runtime_error (one line) when the port cannot be had.
    explicit EngineController(const ClusterOptions &options, QObject *parent = nullptr);
    // Any free port, a random token.
    explicit EngineController(int localNodes, QObject *parent = nullptr);
    ~EngineController() override;

    quint16 port() const;
    QString token() const;
    QString advertise() const;
    // What to run on another machine to add it to this cluster.
    QString joinCommand() const;
    int readyNodes() const; // connected and idle
    int viewerCount() const; // students' windows and `smolctl watch` connected now
    QStringList strategies() const;
    // The model's layer names (for the placement editor) and whether a
    // pipeline placement spec is valid for them on `nodes` nodes ("" = yes).
    QStringList layerNames(const QString &model) const;
    QString checkPlacement(const QString &model, const QString &spec, int nodes) const;
    // The engine's automatic placement (balanced by parameter count); "" when
    // the model has fewer layers than nodes.
    QString balancedPlacement(const QString &model, int nodes) const;

    // RunFeed: the newest snapshot, a run in progress, held at a breakpoint,
    // and the run's newest pause if it took that collective's tensors.
    widgets::ClusterStatePtr state() const override;
    bool isRunning() const override;
    bool isPaused() const override;
    PauseView pauseAt(qint64 step, int collectiveKind, quint64 seq) const override;

public Q_SLOTS:
    void start(const smol::app::RunSettings &settings);
    void pause();          // at the next collective boundary
    void resume();
    void stepCollective(); // run one collective, then pause again
    void stop();
    void killNode(int id);
    void addLocalNode();
    // Remove an idle node from the cluster (it exits cleanly).
    void removeNode(int id);
    // Emulated compute slowdown of a node (by id) for the next run.
    void setNodeSlowdown(int id, double factor);
    // Emulated links of a node (by id) to every other node, both directions,
    // for the next run: bandwidth in Mbit/s (0 = unlimited), one-way latency.
    void setNodeLink(int id, double mbitPerSecond, double latencyMs);
    void addBreakpoint(const QString &spec); // throws nothing: bad specs -> errorOccurred
    void clearBreakpoints();
    // Edit a held node's tensor before resuming: "scale", "zero" or "nan".
    void editTensor(int rank, const QString &op, double factor = 1);
    // The teacher's lesson step, to every viewer (an empty object: none).
    void publishLesson(const QJsonObject &lesson);

Q_SIGNALS:
    // Just before runFinished: what the run measured (the rest: RunFeed).
    void runMeasured(const smol::app::RunMeasurement &measurement);
    // A viewer answered the lesson step's question.
    void predictionReceived(const smol::app::ClassPrediction &prediction);

private:
    struct Private;
    struct RunEnd;
    // start()'s phases (engine_controller.cpp opens with a run's life).
    std::optional<std::vector<int>> idleNodesFor(const RunSettings &s);
    bool openRecorder(const RunSettings &s, const engine::TrainConfig &c);
    void resetForRun(const RunSettings &s);
    void runOnThread(const engine::TrainConfig &c, const QPointer<EngineController> &self);
    void endRun(const RunEnd &end);
    // The <=30 Hz timer: build and emit a snapshot, in these parts.
    void publish();
    void publishJoinFailures();
    void publishTimeline();
    void publishProgress(widgets::ClusterState &state, bool &dirty, PredictedBytes &predicted);

    std::unique_ptr<Private> d;
};

} // namespace smol::app

Q_DECLARE_METATYPE(smol::app::RunSettings)
Q_DECLARE_METATYPE(smol::app::RunMeasurement)
Q_DECLARE_METATYPE(smol::app::ClassPrediction)
