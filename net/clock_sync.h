// NTP-style clock offset estimation between the coordinator and a node.
//
// The coordinator stamps t0 (its clock) and sends a ping; the node answers
// with tn (its clock) at once; the coordinator stamps t1 on arrival. If the
// two legs took equally long, the node's clock read tn when the coordinator's
// read (t0 + t1) / 2, so
//     offset = tn - (t0 + t1) / 2          (node clock minus coordinator clock)
// and whatever the legs really took, the true offset lies within
//     +- (t1 - t0) / 2                     (half the round trip)
// of that. The sample with the smallest round trip has the tightest bound,
// so it is the one kept (Cristian's algorithm / NTP's clock filter).
#pragma once

#include <cstdint>
#include <limits>

namespace smol::net {

class ClockEstimator {
public:
    // All in nanoseconds. Samples with t1 < t0 are ignored.
    void addSample(std::int64_t t0, std::int64_t nodeTime, std::int64_t t1)
    {
        if (t1 < t0)
            return;
        const std::int64_t rtt = t1 - t0;
        if (rtt >= m_bestRtt)
            return;
        m_bestRtt = rtt;
        m_offset = nodeTime - (t0 + rtt / 2);
        ++m_kept;
    }
    bool valid() const { return m_bestRtt != std::numeric_limits<std::int64_t>::max(); }
    std::int64_t offsetNs() const { return m_offset; }
    // Bound on |estimated - true offset| (half the best round trip).
    std::int64_t errorNs() const { return valid() ? (m_bestRtt + 1) / 2 : 0; }
    // A node timestamp on the coordinator's timeline.
    std::int64_t toCoordinator(std::int64_t nodeTime) const { return nodeTime - m_offset; }

private:
    std::int64_t m_bestRtt = std::numeric_limits<std::int64_t>::max();
    std::int64_t m_offset = 0;
    int m_kept = 0;
};

} // namespace smol::net
