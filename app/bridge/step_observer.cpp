#include "step_observer.h"

#include "live_sink.h"
#include "queued_emit.h"
#include "run_progress.h"

namespace smol::app {

StepObserver::StepObserver(LiveSink &sink, RunProgress &progress, QPointer<RunFeed> feed)
    : m_sink(sink)
    , m_progress(progress)
    , m_feed(std::move(feed))
{
}

void StepObserver::onStep(const engine::StepReport &r)
{
    widgets::StepPoint pt;
    pt.step = r.step;
    pt.seconds = r.seconds;
    pt.loss = r.loss;
    pt.samplesPerSecond = r.samplesPerS;
    const auto traffic = m_sink.traffic();
    for (std::size_t i = 0; i < r.memory.size(); ++i) {
        const auto it = traffic.sentPerSecond.find(int(i));
        pt.bytesPerSecondPerNode.append(it == traffic.sentPerSecond.end() ? 0.0 : it->second);
    }
    std::lock_guard lock(m_progress.mutex);
    m_progress.steps.push_back(pt);
    m_progress.lastStep = r.step;
    m_progress.dirty = true;
}

void StepObserver::onTestLoss(std::int64_t step, double loss)
{
    std::lock_guard lock(m_progress.mutex);
    m_progress.testLoss.emplace_back(step, loss);
}

void StepObserver::onReform(int attempt, int maxAttempts, int nodes, std::int64_t fromStep,
                            const std::string &reason)
{
    const QString what = RunFeed::tr("re-forming: attempt %1 of %2, %3 nodes from step %4: %5")
                             .arg(attempt)
                             .arg(maxAttempts)
                             .arg(nodes)
                             .arg(fromStep)
                             .arg(QString::fromStdString(reason));
    emitQueued(m_feed, &RunFeed::runReforming, what);
}

void StepObserver::onWaitingForNodes(double seconds)
{
    const QString what = RunFeed::tr("every node is lost: waiting up to %1 s for nodes to join again "
                                     "(Cluster > Remote nodes shows the command)")
                             .arg(seconds, 0, 'f', 0);
    emitQueued(m_feed, &RunFeed::runWaitingForNodes, what);
}

} // namespace smol::app
