#include "transport.h"

#include "errors.h"
#include "send_state.h"
#include "trace.h"

#include <QDebug>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

namespace smol::net {

// ---- Payload ---------------------------------------------------------------

Payload::Payload(std::size_t size)
    : m_data(size ? new char[size] : nullptr)
    , m_size(size)
    , m_capacity(size)
{
}

void Payload::reserve(std::size_t n)
{
    if (n <= m_capacity)
        return;
    std::unique_ptr<char[]> grown(new char[n]);
    if (m_size)
        std::memcpy(grown.get(), m_data.get(), m_size);
    m_data = std::move(grown);
    m_capacity = n;
}

void Payload::resize(std::size_t n)
{
    m_size = std::min(n, m_capacity);
}

// ---- SendTicket ------------------------------------------------------------

void SendTicket::wait() const
{
    if (!m_state)
        return;
    State &s = *m_state;
    std::unique_lock lock(s.mutex);
    if (!s.cv.wait_for(lock, s.timeout, [&] { return s.done; })) {
        lock.unlock();
        if (s.cancel)
            s.cancel();
        SMOL_THROW(PeerTimeoutError, s.peer,
                   "did not take " + std::to_string(s.bytes) + " bytes within " +
                       std::to_string(s.timeout.count()) + " ms");
    }
    if (!s.error.empty())
        SMOL_THROW(PeerLostError, s.peer, s.error);
}

std::shared_ptr<SendTicket::State> SendTicket::State::make(int peer, std::size_t bytes,
                                                           std::chrono::milliseconds timeout)
{
    auto s = std::make_shared<State>();
    s->peer = peer;
    s->bytes = bytes;
    s->timeout = timeout;
    return s;
}

void SendTicket::State::finish(const std::string &err)
{
    {
        std::lock_guard lock(mutex);
        if (done)
            return;
        done = true;
        error = err;
    }
    cv.notify_all();
}

// ---- Transport -------------------------------------------------------------

struct Transport::Private {
    std::atomic<TraceSink *> sink{nullptr};
    std::atomic<int> emitting{0}; // emitTrace calls inside the sink right now
    mutable std::mutex droppedMutex;
    std::vector<std::string> dropped;
    std::mutex poolMutex;
    std::vector<Payload> pool;
    mutable std::mutex limitMutex;
    std::vector<LinkLimit> limits; // by peer
};

namespace {
constexpr std::size_t kPoolEntries = 32;
constexpr std::size_t kPoolMaxBytes = std::size_t(16) << 20;
} // namespace

void Transport::recycle(Payload &&payload)
{
    if (payload.capacity() == 0 || payload.capacity() > kPoolMaxBytes)
        return;
    payload.resize(0);
    std::lock_guard lock(d->poolMutex);
    if (d->pool.size() < kPoolEntries)
        d->pool.push_back(std::move(payload));
}

Payload Transport::takeRecycled(std::size_t minCapacity)
{
    {
        std::lock_guard lock(d->poolMutex);
        for (std::size_t i = d->pool.size(); i-- > 0;)
            if (d->pool[i].capacity() >= minCapacity) {
                Payload p = std::move(d->pool[i]);
                d->pool.erase(d->pool.begin() + std::ptrdiff_t(i));
                return p;
            }
    }
    Payload p;
    p.reserve(minCapacity);
    return p;
}

Transport::Transport(int rank, int worldSize, TransportOptions options)
    : m_rank(rank)
    , m_worldSize(worldSize)
    , m_options(std::move(options))
    , d(std::make_unique<Private>())
{
    d->limits = m_options.links;
    d->limits.resize(std::size_t(std::max(worldSize, 0)));
}

void Transport::setLinkLimit(int peer, const LinkLimit &limit)
{
    if (peer < 0 || peer >= m_worldSize || peer == m_rank)
        SMOL_THROW(NetError, "rank " + std::to_string(m_rank) + ": no peer " + std::to_string(peer));
    if (!(limit.bitsPerSecond >= 0) || limit.latency.count() < 0)
        SMOL_THROW(NetError, "rank " + std::to_string(m_rank) + ": negative link limit for peer " +
                                 std::to_string(peer));
    {
        std::lock_guard lock(d->limitMutex);
        d->limits[std::size_t(peer)] = limit;
    }
    linkLimitChanged(peer);
}

LinkLimit Transport::linkLimit(int peer) const
{
    std::lock_guard lock(d->limitMutex);
    return peer >= 0 && std::size_t(peer) < d->limits.size() ? d->limits[std::size_t(peer)] : LinkLimit{};
}

Transport::~Transport() = default;

void Transport::recvInto(int peer, const FrameMeta &meta, void *dst, std::size_t bytes)
{
    Message m = recv(peer, meta);
    if (m.payload.size() != bytes)
        SMOL_THROW(ProtocolError, "rank " + std::to_string(m_rank) + ": expected " + std::to_string(bytes) +
                                      " bytes from rank " + std::to_string(peer) + " for " +
                                      collectiveName(meta.kind) + " #" + std::to_string(meta.seq) + ", got " +
                                      std::to_string(m.payload.size()));
    if (bytes)
        std::memcpy(dst, m.payload.data(), bytes);
}

RecvHandle Transport::postRecv(int peer, const FrameMeta &meta, void *dst, std::size_t bytes)
{
    RecvHandle h;
    h.peer = peer;
    h.meta = meta;
    h.dst = dst;
    h.bytes = bytes;
    return h;
}

void Transport::waitRecv(RecvHandle &h)
{
    if (h.done)
        return;
    h.done = true;
    recvInto(h.peer, h.meta, h.dst, h.bytes);
}

void Transport::cancelRecv(RecvHandle &h) noexcept
{
    h.done = true;
}

void Transport::setTraceSink(TraceSink *sink)
{
    d->sink.store(sink);
    // After this returns, no call into the previous sink is still running.
    while (d->emitting.load() != 0)
        std::this_thread::yield();
}

TraceSink *Transport::traceSink() const
{
    return d->sink.load(std::memory_order_acquire);
}

void Transport::emitTrace(const FrameEvent &event) const
{
    if (!d->sink.load(std::memory_order_relaxed))
        return; // the common, detached case: one load
    d->emitting.fetch_add(1);
    if (TraceSink *sink = d->sink.load())
        sink->onFrame(event);
    d->emitting.fetch_sub(1);
}

void Transport::noteDropped(const std::string &reason)
{
    qWarning("smolcluster rank %d: dropped connection: %s", m_rank, reason.c_str());
    std::lock_guard lock(d->droppedMutex);
    d->dropped.push_back(reason);
}

std::vector<std::string> Transport::droppedReasons() const
{
    std::lock_guard lock(d->droppedMutex);
    return d->dropped;
}

const char *transportName(TransportKind kind)
{
    return kind == TransportKind::Tcp ? "tcp" : "inproc";
}

namespace {
std::atomic<std::int64_t> g_clockSkewNs{0};
}

std::int64_t monotonicNs()
{
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
               .count() +
           g_clockSkewNs.load(std::memory_order_relaxed);
}

void setClockSkewNs(std::int64_t ns)
{
    g_clockSkewNs.store(ns, std::memory_order_relaxed);
}

} // namespace smol::net
