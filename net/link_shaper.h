// Emulated slow links: a LinkShaper paces one direction of one link the way
// a real network would, so a class can put "a Raspberry Pi on Wi-Fi" next to
// a desktop on one machine and watch the stragglers.
//
// Model: bytes leave the sender no faster than `bitsPerSecond` (a token
// bucket kept as a virtual finish time: the link is busy until m_busyUntil),
// and every byte arrives `latency` after it left. Both transports apply it
// for real: TCP paces its socket writes in the I/O thread, inproc delays
// delivery into the receiver's mailbox (docs/protocol.md, "Emulated links").
//
// Does not emulate: loss, jitter, queueing in a shared medium.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace smol::net {

struct LinkLimit {
    double bitsPerSecond = 0;               // 0 = unlimited
    std::chrono::nanoseconds latency{0};    // one way
    bool isShaped() const { return bitsPerSecond > 0 || latency.count() > 0; }
    bool operator==(const LinkLimit &o) const { return bitsPerSecond == o.bitsPerSecond && latency == o.latency; }
    bool operator!=(const LinkLimit &o) const { return !(*this == o); }
};

class LinkShaper {
public:
    using Clock = std::chrono::steady_clock;

    // Changing the limit keeps the bytes already paced where they are.
    void setLimit(const LinkLimit &limit) { m_limit = limit; }
    const LinkLimit &limit() const { return m_limit; }
    bool isShaped() const { return m_limit.isShaped(); }
    bool limitsBandwidth() const { return m_limit.bitsPerSecond > 0; }

    // Streaming (TCP): bytes leave in bursts of about burstBytes() (2 ms of
    // the bandwidth; an idle link banks at most two), so the I/O thread wakes
    // a few hundred times a second, not per byte. allowance() may leave now; consume() records that
    // they did; whenAllowed(n) is when n (<= burst) bytes may leave.
    std::size_t burstBytes() const;
    std::size_t allowance(Clock::time_point now) const;
    void consume(std::size_t bytes, Clock::time_point now);
    Clock::time_point whenAllowed(std::size_t bytes, Clock::time_point now) const;

    // Whole frames (inproc): the link carries `bytes` after what it already
    // carries; returns when their last byte has left.
    Clock::time_point reserve(std::size_t bytes, Clock::time_point now);

    // Time `bytes` take at the configured bandwidth (0 when unlimited).
    std::chrono::nanoseconds transferTime(std::size_t bytes) const;

private:
    LinkLimit m_limit;
    Clock::time_point m_busyUntil{}; // virtual finish time of the last byte that left
};

} // namespace smol::net
