// Steps as the nodes of a cluster run report them (coord::StepAggregator):
// one StepReport per step to the run's observer once every rank of the epoch
// that ran it has reported (asynchronous strategies: once rank 0 has, with
// the others' latest memory), its loss the mean of the ranks' losses
// weighted by their rows (stepLoss, strategy.h). A re-formed epoch forgets
// the steps it will redo; a step before its first one that the lost epoch
// finished without every report (a node killed between its step's last
// collective and its report) is completed with the losses that came. Keeps
// the loss curve for the summary.
#include "coordinator_private.h"

#include "engine/strategy.h"

#include <cmath>

namespace smol::engine::coord {

StepAggregator::StepAggregator(std::int64_t steps, std::int64_t samplesPerStep, bool leaderPaced,
                               TrainObserver *observer)
    : m_curve(std::size_t(steps), std::nan(""))
    , m_samplesPerStep(samplesPerStep)
    , m_leaderPaced(leaderPaced)
    , m_observer(observer)
    , m_start(Clock::now())
{
}

void StepAggregator::beginEpoch(int world, std::int64_t firstStep, std::vector<std::int64_t> lossRows)
{
    for (auto &[step, p] : m_pending)
        if (step < firstStep && !p.losses.empty() && std::isnan(m_curve[std::size_t(step)]))
            complete(step, p); // the old epoch's rows weigh its losses
    m_world = world;
    m_lossRows = std::move(lossRows);
    m_pending.clear();
    m_latest.assign(std::size_t(world), net::MemoryByCategory{});
    m_firstStep = firstStep;
    for (std::size_t k = std::size_t(firstStep); k < m_curve.size(); ++k)
        m_curve[k] = std::nan("");
}

void StepAggregator::report(int rank, std::int64_t step, double loss, const net::MemoryByCategory &mem)
{
    if (rank < 0 || rank >= m_world || step < 0 || step >= std::int64_t(m_curve.size()))
        return;
    m_latest[std::size_t(rank)] = mem;
    m_lastMemory = m_latest;
    if (m_leaderPaced && rank != 0)
        return;
    Pending &p = m_pending[step];
    if (p.memory.empty())
        p.memory.assign(std::size_t(m_world), net::MemoryByCategory{});
    p.memory[std::size_t(rank)] = mem;
    if (!std::isnan(loss))
        p.losses.emplace_back(rank, loss);
    if (!m_leaderPaced && ++p.count < m_world)
        return;
    complete(step, p);
    m_pending.erase(step);
}

void StepAggregator::complete(std::int64_t step, const Pending &p)
{
    StepReport r;
    r.step = step;
    r.loss = stepLoss(p.losses, m_lossRows);
    r.seconds = std::chrono::duration<double>(Clock::now() - m_start).count();
    r.samplesPerS = r.seconds > 0 ? double((step + 1 - m_resumedAt) * m_samplesPerStep) / r.seconds : 0;
    r.memory = m_leaderPaced ? m_latest : p.memory;
    m_curve[std::size_t(step)] = r.loss;
    if (m_observer)
        m_observer->onStep(r);
}

} // namespace smol::engine::coord
