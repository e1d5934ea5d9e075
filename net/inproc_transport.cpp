#include "inproc_transport.h"

#include "errors.h"
#include "send_state.h"
#include "trace.h"

#include <algorithm>
#include <cstring>

namespace smol::net {

InprocFabric::InprocFabric(int worldSize)
    : m_ranks(std::size_t(worldSize), nullptr)
    , m_alive(new std::atomic<bool>[std::size_t(worldSize)])
{
    for (int i = 0; i < worldSize; ++i)
        m_alive[std::size_t(i)] = true;
}

InprocTransport::InprocTransport(std::shared_ptr<InprocFabric> fabric, int rank, TransportOptions options)
    : Transport(rank, fabric->worldSize(), std::move(options))
    , m_fabric(std::move(fabric))
    , m_mailbox(m_fabric->worldSize(), rank)
    , m_shapers(std::size_t(m_fabric->worldSize()))
    , m_lastDue(std::size_t(m_fabric->worldSize()))
{
    std::lock_guard lock(m_fabric->m_mutex);
    m_fabric->m_ranks[std::size_t(rank)] = this;
}

InprocTransport::~InprocTransport()
{
    abort();
    {
        // Frames still on their way are lost; their sends fail.
        std::lock_guard lock(m_shapeMutex);
        m_stopDelivery = true;
    }
    m_shapeWake.notify_all();
    if (m_delivery.joinable())
        m_delivery.join();
    std::lock_guard lock(m_fabric->m_mutex);
    m_fabric->m_ranks[std::size_t(m_rank)] = nullptr;
}

SendTicket InprocTransport::send(int peer, const FrameMeta &meta, const void *data, std::size_t bytes)
{
    if (peer < 0 || peer >= m_worldSize || peer == m_rank)
        SMOL_THROW(NetError, "rank " + std::to_string(m_rank) + ": no peer " + std::to_string(peer));
    auto state = SendTicket::State::make(peer, bytes, m_options.timeout);
    InprocTransport *dst = m_fabric->m_ranks[std::size_t(peer)];
    if (!m_fabric->m_alive[std::size_t(m_rank)]) {
        state->finish("this rank was aborted");
        return SendTicket(std::move(state));
    }
    if (!dst || !m_fabric->m_alive[std::size_t(peer)]) {
        state->finish("connection lost");
        return SendTicket(std::move(state));
    }
    FrameEvent ev;
    ev.src = m_rank;
    ev.dst = peer;
    ev.bytes = bytes;
    ev.kind = meta.kind;
    ev.seq = meta.seq;
    ev.tag = meta.tag;
    ev.sendStartNs = monotonicNs();
    Message m;
    m.src = m_rank;
    m.meta = meta;
    m.payload = Payload(bytes);
    if (bytes)
        std::memcpy(m.payload.data(), data, bytes);

    const LinkLimit limit = linkLimit(peer);
    const auto now = Clock::now();
    Clock::time_point leaves;
    Clock::time_point arrives;
    {
        std::lock_guard lock(m_shapeMutex);
        LinkShaper &shaper = m_shapers[std::size_t(peer)];
        shaper.setLimit(limit);
        Clock::time_point &lastDue = m_lastDue[std::size_t(peer)];
        if (!limit.isShaped() && lastDue <= now) {
            // Unlimited and nothing in flight: the original, immediate path.
            leaves = arrives = now;
        } else {
            leaves = shaper.reserve(bytes, now);
            arrives = std::max(leaves + std::chrono::duration_cast<Clock::duration>(limit.latency), lastDue);
            lastDue = arrives;
            state->timeout += std::chrono::duration_cast<std::chrono::milliseconds>(leaves - now);
        }
    }
    if (arrives <= now) {
        deliverNow(peer, std::move(m), ev, state);
        return SendTicket(std::move(state));
    }

    // The send completes when its last byte has left; the frame arrives later.
    auto onLeft = [this, ev, state]() mutable {
        if (!m_fabric->m_alive[std::size_t(m_rank)]) {
            state->finish("this rank was aborted");
            return;
        }
        ev.sendCompleteNs = monotonicNs();
        emitTrace(ev);
        state->finish();
    };
    if (leaves <= now)
        onLeft();
    else
        schedule(leaves, onLeft);
    auto message = std::make_shared<Message>(std::move(m));
    schedule(arrives, [this, peer, ev, message]() mutable {
        std::lock_guard lock(m_fabric->m_mutex);
        InprocTransport *to = m_fabric->m_ranks[std::size_t(peer)];
        if (!to || !m_fabric->m_alive[std::size_t(peer)] || !m_fabric->m_alive[std::size_t(m_rank)])
            return; // lost with the rank that died
        ev.side = FrameEvent::Side::Receive;
        ev.recvCompleteNs = monotonicNs();
        to->emitTrace(ev); // before delivery, as TCP does
        to->m_mailbox.deliver(std::move(*message));
    });
    return SendTicket(std::move(state));
}

void InprocTransport::deliverNow(int peer, Message &&m, FrameEvent ev, const std::shared_ptr<SendTicket::State> &state)
{
    InprocTransport *dst = m_fabric->m_ranks[std::size_t(peer)];
    dst->m_mailbox.deliver(std::move(m));
    ev.sendCompleteNs = ev.recvCompleteNs = monotonicNs();
    FrameEvent recvEv = ev;
    ev.recvCompleteNs = 0;
    emitTrace(ev);
    recvEv.side = FrameEvent::Side::Receive;
    recvEv.sendCompleteNs = 0;
    dst->emitTrace(recvEv);
    state->finish();
}

void InprocTransport::schedule(Clock::time_point at, std::function<void()> job)
{
    {
        std::lock_guard lock(m_shapeMutex);
        m_jobs.emplace(std::make_pair(at, m_jobCount++), std::move(job));
        if (!m_delivery.joinable() && !m_stopDelivery)
            m_delivery = std::thread([this] { deliveryLoop(); });
    }
    m_shapeWake.notify_all();
}

void InprocTransport::deliveryLoop()
{
    std::unique_lock lock(m_shapeMutex);
    for (;;) {
        if (m_jobs.empty()) {
            if (m_stopDelivery)
                return;
            m_shapeWake.wait(lock);
            continue;
        }
        auto next = m_jobs.begin();
        // On shutdown the remaining jobs run at once: the rank is dead, so
        // sends fail and frames are dropped instead of waiting for their time.
        if (!m_stopDelivery && next->first.first > Clock::now()) {
            m_shapeWake.wait_until(lock, next->first.first);
            continue;
        }
        std::function<void()> job = std::move(next->second);
        m_jobs.erase(next);
        lock.unlock();
        job();
        lock.lock();
    }
}

Message InprocTransport::recv(int peer, const FrameMeta &meta)
{
    return m_mailbox.take(peer, meta, m_options.timeout);
}

void InprocTransport::abort()
{
    if (!m_fabric->m_alive[std::size_t(m_rank)].exchange(false))
        return;
    m_mailbox.failAll("rank " + std::to_string(m_rank) + " was aborted");
    for (InprocTransport *other : m_fabric->m_ranks)
        if (other && other != this)
            other->m_mailbox.failPeer(m_rank, "connection lost");
}

} // namespace smol::net
