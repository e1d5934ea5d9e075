// In-memory transport: frames are copied into the destination rank's mailbox
// at send time, so a send completes at once. Same matching, timeouts, failure
// and tracing semantics as TCP, with no sockets: fast, deterministic tests.
//
// Emulated links (setLinkLimit): the payload is still copied at send time,
// but a small delivery thread completes the send when its last byte has left
// at the link's bandwidth, and puts it into the receiver's mailbox `latency`
// later. Frames on one link stay in order.
#pragma once

#include "mailbox.h"
#include "trace.h"
#include "transport.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace smol::net {

class InprocTransport;

// The shared medium of one in-process cluster.
class InprocFabric {
public:
    explicit InprocFabric(int worldSize);
    int worldSize() const { return int(m_ranks.size()); }

private:
    friend class InprocTransport;
    std::mutex m_mutex; // delayed deliveries vs. a rank going away
    std::vector<InprocTransport *> m_ranks;
    std::unique_ptr<std::atomic<bool>[]> m_alive;
};

class InprocTransport final : public Transport {
public:
    InprocTransport(std::shared_ptr<InprocFabric> fabric, int rank, TransportOptions options = {});
    ~InprocTransport() override;

    TransportKind kind() const override { return TransportKind::Inproc; }
    SendTicket send(int peer, const FrameMeta &meta, const void *data, std::size_t bytes) override;
    Message recv(int peer, const FrameMeta &meta) override;
    void abort() override;
    void holdWaits(bool held) override { m_mailbox.setHeld(held); }

private:
    using Clock = std::chrono::steady_clock;
    void deliverNow(int peer, Message &&message, FrameEvent ev, const std::shared_ptr<SendTicket::State> &state);
    // Runs `job` on the delivery thread at `at` (jobs with equal times in order).
    void schedule(Clock::time_point at, std::function<void()> job);
    void deliveryLoop();

    std::shared_ptr<InprocFabric> m_fabric;
    Mailbox m_mailbox;

    // Emulated links; guarded by m_shapeMutex.
    std::mutex m_shapeMutex;
    std::condition_variable m_shapeWake;
    std::vector<LinkShaper> m_shapers;       // by peer
    std::vector<Clock::time_point> m_lastDue; // by peer: the last frame's arrival
    std::multimap<std::pair<Clock::time_point, std::uint64_t>, std::function<void()>> m_jobs;
    std::uint64_t m_jobCount = 0;
    bool m_stopDelivery = false;
    std::thread m_delivery; // started by the first shaped send
};

} // namespace smol::net
