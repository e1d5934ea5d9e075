#include "link_shaper.h"

#include <algorithm>
#include <limits>

namespace smol::net {

namespace {
constexpr std::chrono::nanoseconds kBurstTime = std::chrono::milliseconds(2);
constexpr std::size_t kMinBurstBytes = 1500; // one Ethernet frame
// The I/O thread wakes for one burst but may send two: a wake-up that comes
// late (poll's timer slack, a busy core) does not lose bandwidth.
constexpr std::size_t kBankedBursts = 2;
} // namespace

std::chrono::nanoseconds LinkShaper::transferTime(std::size_t bytes) const
{
    if (!limitsBandwidth())
        return std::chrono::nanoseconds(0);
    return std::chrono::nanoseconds(std::int64_t(double(bytes) * 8e9 / m_limit.bitsPerSecond));
}

std::size_t LinkShaper::burstBytes() const
{
    if (!limitsBandwidth())
        return std::numeric_limits<std::size_t>::max();
    const double perBurst = m_limit.bitsPerSecond / 8 * std::chrono::duration<double>(kBurstTime).count();
    return std::max(kMinBurstBytes, std::size_t(perBurst));
}

std::size_t LinkShaper::allowance(Clock::time_point now) const
{
    if (!limitsBandwidth())
        return std::numeric_limits<std::size_t>::max();
    if (now <= m_busyUntil)
        return 0;
    const double idle = std::chrono::duration<double>(now - m_busyUntil).count();
    return std::min(kBankedBursts * burstBytes(), std::size_t(idle * m_limit.bitsPerSecond / 8));
}

void LinkShaper::consume(std::size_t bytes, Clock::time_point now)
{
    if (!limitsBandwidth())
        return;
    // An idle link banks at most kBankedBursts bursts of credit.
    const auto floor = now - std::chrono::duration_cast<Clock::duration>(transferTime(kBankedBursts * burstBytes()));
    m_busyUntil = std::max(m_busyUntil, floor) + std::chrono::duration_cast<Clock::duration>(transferTime(bytes));
}

LinkShaper::Clock::time_point LinkShaper::whenAllowed(std::size_t bytes, Clock::time_point now) const
{
    if (!limitsBandwidth())
        return now;
    const auto t = m_busyUntil + std::chrono::duration_cast<Clock::duration>(
                                     transferTime(std::min(bytes, burstBytes())));
    return std::max(t, now);
}

LinkShaper::Clock::time_point LinkShaper::reserve(std::size_t bytes, Clock::time_point now)
{
    if (!limitsBandwidth())
        return now;
    m_busyUntil = std::max(m_busyUntil, now) + std::chrono::duration_cast<Clock::duration>(transferTime(bytes));
    return m_busyUntil;
}

} // namespace smol::net
