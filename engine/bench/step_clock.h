// What the benches share: the median of rounds, and a run's steady-state
// samples/s timed from its step reports. LibTorch-free.
#pragma once

#include "engine/trainer.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <vector>

namespace smol::engine::bench {

inline double median(std::vector<double> v)
{
    if (v.empty())
        return 0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Times the step reports of one run (onStep: once per completed step), from
// the end of step `from` - 1 on (0: from the first report), so the steps
// timed are `from` onwards: e.g. after PowerSGD's plain start.
class StepClock : public TrainObserver {
public:
    explicit StepClock(std::int64_t from = 0) : m_from(from) {}
    void onStep(const StepReport &r) override
    {
        if (r.step + 1 < m_from)
            return;
        std::lock_guard lock(m_mutex);
        const auto now = std::chrono::steady_clock::now();
        if (m_steps++ == 0) {
            m_first = now;
            m_firstStep = r.step;
        }
        m_last = now;
        m_lastStep = r.step;
    }
    // Steady-state samples/s: steps after the first over the time they took.
    double samplesPerS(std::int64_t samplesPerStep) const
    {
        const double s = std::chrono::duration<double>(m_last - m_first).count();
        return s > 0 ? double((m_lastStep - m_firstStep) * samplesPerStep) / s : 0;
    }

private:
    std::int64_t m_from;
    std::mutex m_mutex;
    int m_steps = 0;
    std::int64_t m_firstStep = 0, m_lastStep = 0;
    std::chrono::steady_clock::time_point m_first, m_last;
};

} // namespace smol::engine::bench
