// RunFeed: the one interface every view of a run is fed through. The live
// engine bridge (app/bridge/engine_controller.h) and a recorded session
// (app/replay/replay_controller.h) both implement it, and a students'
// viewer fed by a teacher's coordinator will be a third. The window connects
// its views to one feed; switching from the live cluster to a replay swaps
// the feed, never the code that draws (STYLE.md habit 15).
//
// What a feed says, all on the GUI thread:
//   1. runStarted: a run begins (views drop the previous run's picture).
//   2. stateChanged: the cluster as it is now, an immutable snapshot, at
//      most 30 a second; stepAvailable, testLossAvailable and
//      testAccuracyAvailable: the charts' points; timelineEvents: what the
//      timeline gained since the last snapshot.
//   3. pausedAt / pauseEnded: a collective held, with its tensors.
//   4. runFinished, runStopped or runFailed: the run is over (runReforming
//      and runWaitingForNodes say it goes on with fewer nodes).
//   cleared: what the views show no longer holds (a replay moved back);
//   logLine and errorOccurred: one line for the log, for the status bar.
// A feed emits only what it has: a replay starts no run and loads its whole
// timeline up front; the live bridge never clears.
//
// No LibTorch in this header.
#pragma once

#include "widgets/cluster_state.h"
#include "widgets/tensor_inspector.h"
#include "widgets/timeline/timeline_data.h"

#include <QObject>
#include <QString>
#include <QVector>

namespace smol::app {

using widgets::PausedTensor;
using widgets::PauseView;

class RunFeed : public QObject {
    Q_OBJECT

public:
    // Registers the types the signals carry across threads.
    explicit RunFeed(QObject *parent = nullptr);
    ~RunFeed() override;

    // The newest snapshot published (nullptr before the first): what a view
    // shows when it is switched to this feed.
    virtual widgets::ClusterStatePtr state() const = 0;
    // The run shown is going on now (live: training; a replay: playing).
    virtual bool isRunning() const = 0;
    // The run shown is held at a collective (live: a breakpoint; a replay:
    // the position lies in a recorded pause).
    virtual bool isPaused() const = 0;
    // The tensors a pause of this run took at collective (step, kind, seq)
    // (kind: net::CollectiveKind's value); an empty PauseView (id 0) when
    // none did.
    virtual PauseView pauseAt(qint64 step, int collectiveKind, quint64 seq) const = 0;

Q_SIGNALS:
    void stateChanged(smol::widgets::ClusterStatePtr state);
    void stepAvailable(const smol::widgets::StepPoint &point);
    void testAccuracyAvailable(qint64 step, double accuracy);
    void testLossAvailable(qint64 step, double loss);
    // The frame sides, spans and memory samples since the last snapshot, and
    // the feed's clock now (while a run goes on, also when there is nothing
    // new, so packets in flight keep moving).
    void timelineEvents(const QVector<smol::widgets::TimelineFrameSide> &frames,
                        const QVector<smol::widgets::TimelineSpan> &spans,
                        const QVector<smol::widgets::TimelineMemorySample> &memory, qint64 nowNs);
    void pausedAt(const smol::app::PauseView &pause);
    void pauseEnded(); // the pause shown is over
    void cleared();    // views must drop what they show (before the feed rebuilds them)
    void logLine(const QString &line);
    void errorOccurred(const QString &reason);
    void runStarted(const QString &description);
    void runFinished(const QString &summary);
    void runFailed(const QString &reason);
    // Ended by the user's Stop (not a failure): "stopped at step 41".
    void runStopped(const QString &summary);
    // A node was lost and the run re-forms without it:
    // "re-forming: attempt 2 of 8, 3 nodes from step 41: <reason>".
    void runReforming(const QString &what);
    // Every node of the run was lost; it waits for nodes to join again.
    void runWaitingForNodes(const QString &what);
};

} // namespace smol::app

Q_DECLARE_METATYPE(smol::app::PauseView)
Q_DECLARE_METATYPE(smol::widgets::ClusterStatePtr)
Q_DECLARE_METATYPE(smol::widgets::StepPoint)
