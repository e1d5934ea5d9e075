// ViewerFeed: a teacher's live run, watched from a student's window
// (`smolcluster --watch` / `--join`), as a RunFeed. It owns the viewer's end
// of the coordinator's stream (engine/cluster/viewer_client.h), whose
// handlers run on the client's reader thread; each message is queued to the
// GUI thread, where it becomes what the live bridge would have made of the
// same events (STYLE.md habit 15: the same views, no second drawing path):
//
//   run     the previous picture goes; the run's plan (shard map, the ZeRO
//           formulas) from its configuration, as the replay plans it; runStarted
//   nodes   the coordinator's record of each node (node_states.h: the same
//           boxes the teacher sees), this viewer's own marked "you"
//   events  frames, spans and memory into a LiveSink (traffic, memory, step
//           peaks, the timeline); the cluster-wide "loss" and
//           "samples_per_s" metrics into the charts' points; test loss;
//           a pause's tensors into a PauseView (pausedAt). A batch over the
//           viewer's budget brings per-link totals instead of its frames
//   pause   held / resumed (pauseEnded)
//   lesson  the teacher's lesson step (lessonChanged)
//   end     runFinished or runFailed; closed: errorOccurred and a log line
//
// A snapshot goes out at most 30 times a second, as the live bridge's.
//
// No LibTorch in this header.
#pragma once

#include "app/feed/run_feed.h"

#include <QJsonObject>
#include <QString>

#include <memory>
#include <string>
#include <vector>

namespace smol::engine {
struct SessionHeader;
struct ViewerBatch;
struct ViewerClientOptions;
struct ViewerNode;
} // namespace smol::engine

namespace smol::app {

class ViewerFeed : public RunFeed {
    Q_OBJECT

public:
    explicit ViewerFeed(QObject *parent = nullptr);
    ~ViewerFeed() override;

    // Connects to the teacher's coordinator and starts the stream; blocks up
    // to options.timeout. False, with the one-line reason, when it cannot
    // (bad address, a refused token).
    bool connectTo(const engine::ViewerClientOptions &options, QString *error = nullptr);
    void close();
    bool isOpen() const;
    // "192.168.1.20:7080"
    QString address() const;
    // The node this machine joined as (-1: none): its box reads "you: rank N".
    int ownNode() const;
    // The teacher's newest lesson step (empty: no lesson).
    QJsonObject lesson() const;
    // The answer to the teacher's lesson step `step` (its "index"); false
    // when the stream has closed.
    bool sendPrediction(int step, double value);
    // A batch of this run was over this viewer's budget: the links show
    // per-link totals and the timeline lacks those single packets.
    bool isAggregated() const;
    std::int64_t budgetBytesPerSecond() const; // this viewer's, as the coordinator said
    std::uint64_t bytesReceived() const;

    widgets::ClusterStatePtr state() const override;
    bool isRunning() const override;
    bool isPaused() const override;
    PauseView pauseAt(qint64 step, int collectiveKind, quint64 seq) const override;

Q_SIGNALS:
    void lessonChanged(const QJsonObject &lesson);
    void aggregatedChanged(bool aggregated);
    // The stream ended (the teacher's window closed, this viewer was dropped).
    void closed(const QString &reason);

private:
    struct Private;
    // The handlers' work, on the GUI thread.
    void onRun(const engine::SessionHeader &header, const QJsonObject &config);
    void onNodes(const std::vector<engine::ViewerNode> &nodes);
    void onEvents(const engine::ViewerBatch &batch);
    void onMetrics(const engine::ViewerBatch &batch);
    void onTensors(const engine::ViewerBatch &batch);
    void onPause(bool held);
    void onEnd(bool ok, const QString &summary);
    void onClosed(const QString &reason);
    void publish();
    void publishTimeline(std::int64_t nowNs);

    std::unique_ptr<Private> d;
};

} // namespace smol::app
