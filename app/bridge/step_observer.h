// The live run's TrainObserver, called from the engine's threads: each
// step's point for the charts (loss, samples/s, and the bytes each rank sent
// over the last second), the held-out losses, and a run that re-forms or
// waits for nodes said at once (in the status bar and the log: never silent).
// Points wait in RunProgress for the next snapshot; what is said goes out as
// the feed's signals on the GUI thread.
#pragma once

#include "app/feed/run_feed.h"
#include "engine/trainer.h"

#include <QPointer>

namespace smol::app {

class LiveSink;
struct RunProgress;

class StepObserver : public engine::TrainObserver {
public:
    StepObserver(LiveSink &sink, RunProgress &progress, QPointer<RunFeed> feed);

    void onStep(const engine::StepReport &r) override;
    void onTestLoss(std::int64_t step, double loss) override;
    void onReform(int attempt, int maxAttempts, int nodes, std::int64_t fromStep,
                  const std::string &reason) override;
    void onWaitingForNodes(double seconds) override;

private:
    LiveSink &m_sink;
    RunProgress &m_progress;
    QPointer<RunFeed> m_feed;
};

} // namespace smol::app
