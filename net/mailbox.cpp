#include "mailbox.h"

#include "errors.h"

#include <cstring>

namespace smol::net {

namespace {

bool isWorldCollective(CollectiveKind kind)
{
    switch (kind) {
    case CollectiveKind::None:
    case CollectiveKind::SendRecv:
    case CollectiveKind::Push:
    case CollectiveKind::Pull:
        return false;
    default:
        return true;
    }
}

std::string during(const FrameMeta &meta)
{
    return std::string(collectiveName(meta.kind)) + " #" + std::to_string(meta.seq);
}

} // namespace

Mailbox::Mailbox(int worldSize, int myRank)
    : m_myRank(myRank)
    , m_peerError(std::size_t(worldSize))
{
}

std::string Mailbox::failureFor(int src, const FrameMeta &meta, int &culprit) const
{
    culprit = src;
    if (!m_allError.empty())
        return m_allError;
    if (!m_peerError[std::size_t(src)].empty())
        return m_peerError[std::size_t(src)] + " (during " + during(meta) + ")";
    // A world collective cannot finish once any rank is gone, so waiting on a
    // healthy neighbour would only end in a timeout naming the wrong rank.
    if (isWorldCollective(meta.kind))
        for (std::size_t p = 0; p < m_peerError.size(); ++p)
            if (!m_peerError[p].empty()) {
                culprit = int(p);
                return m_peerError[p] + " (during " + during(meta) + ")";
            }
    return {};
}

void Mailbox::deliver(Message &&message)
{
    {
        std::lock_guard lock(m_mutex);
        const Key key{message.src, message.meta.kind, message.meta.seq, message.meta.tag};
        auto posted = m_posted.find(key);
        if (posted != m_posted.end() && posted->second->state == PostedRecv::State::Waiting &&
            posted->second->bytes == message.payload.size()) {
            // Posted after its header went by: copy now, still no queueing.
            if (message.payload.size())
                std::memcpy(posted->second->dst, message.payload.data(), message.payload.size());
            posted->second->state = PostedRecv::State::Done;
            m_posted.erase(posted);
        } else {
            m_queues[key].push_back(std::move(message));
        }
    }
    m_arrived.notify_all();
}

void Mailbox::setHeld(bool held)
{
    std::lock_guard lock(m_mutex);
    if (m_held == held)
        return;
    m_held = held;
    ++m_holds;
    m_arrived.notify_all();
}

// Under m_mutex: true while the cluster is held. A wait that missed a hold
// (or its release) starts a whole timeout again from now.
bool Mailbox::holdsChanged(std::uint64_t &seen, std::chrono::steady_clock::time_point &deadline,
                           std::chrono::milliseconds timeout) const
{
    if (seen != m_holds) {
        seen = m_holds;
        deadline = std::chrono::steady_clock::now() + timeout;
    }
    return m_held;
}

Message Mailbox::take(int src, const FrameMeta &meta, std::chrono::milliseconds timeout)
{
    if (src < 0 || src >= int(m_peerError.size()) || src == m_myRank)
        SMOL_THROW(NetError, "rank " + std::to_string(m_myRank) + ": no peer " + std::to_string(src));
    const Key key{src, meta.kind, meta.seq, meta.tag};
    auto deadline = std::chrono::steady_clock::now() + timeout;
    std::unique_lock lock(m_mutex);
    std::uint64_t holds = m_holds;
    for (;;) {
        if (auto it = m_queues.find(key); it != m_queues.end()) {
            Message m = std::move(it->second.front());
            it->second.pop_front();
            if (it->second.empty())
                m_queues.erase(it);
            return m;
        }
        int culprit = src;
        if (std::string err = failureFor(src, meta, culprit); !err.empty())
            SMOL_THROW(PeerLostError, culprit, err);
        if (holdsChanged(holds, deadline, timeout)) {
            m_arrived.wait(lock); // held: no timeout until released
            continue;
        }
        if (m_arrived.wait_until(lock, deadline) == std::cv_status::timeout &&
            std::chrono::steady_clock::now() >= deadline && !m_held && holds == m_holds)
            SMOL_THROW(PeerTimeoutError, src,
                       "silent for " + std::to_string(timeout.count()) + " ms during " + during(meta) + " (tag " +
                           std::to_string(meta.tag) + ")");
    }
}

std::shared_ptr<PostedRecv> Mailbox::post(int src, const FrameMeta &meta, void *dst, std::size_t bytes)
{
    auto p = std::make_shared<PostedRecv>();
    p->dst = static_cast<char *>(dst);
    p->bytes = bytes;
    const Key key{src, meta.kind, meta.seq, meta.tag};
    std::lock_guard lock(m_mutex);
    if (auto it = m_queues.find(key); it != m_queues.end() && it->second.front().payload.size() == bytes) {
        if (bytes)
            std::memcpy(dst, it->second.front().payload.data(), bytes);
        it->second.pop_front();
        if (it->second.empty())
            m_queues.erase(it);
        p->state = PostedRecv::State::Done;
        return p;
    }
    m_posted[key] = p;
    return p;
}

char *Mailbox::claim(int src, const FrameMeta &meta, std::uint64_t payloadBytes)
{
    std::lock_guard lock(m_mutex);
    auto it = m_posted.find(Key{src, meta.kind, meta.seq, meta.tag});
    if (it == m_posted.end() || it->second->state != PostedRecv::State::Waiting || it->second->bytes != payloadBytes)
        return nullptr;
    it->second->state = PostedRecv::State::Claimed;
    return it->second->dst;
}

void Mailbox::completeClaim(int src, const FrameMeta &meta)
{
    {
        std::lock_guard lock(m_mutex);
        auto it = m_posted.find(Key{src, meta.kind, meta.seq, meta.tag});
        if (it == m_posted.end())
            return;
        it->second->state = PostedRecv::State::Done;
        m_posted.erase(it);
    }
    m_arrived.notify_all();
}

void Mailbox::wait(int src, const FrameMeta &meta, const std::shared_ptr<PostedRecv> &posted,
                   std::chrono::milliseconds timeout, const std::function<void(int)> &dropLink)
{
    const Key key{src, meta.kind, meta.seq, meta.tag};
    auto deadline = std::chrono::steady_clock::now() + timeout;
    std::unique_lock lock(m_mutex);
    std::uint64_t holds = m_holds;
    for (;;) {
        if (posted->state == PostedRecv::State::Done)
            return;
        if (auto it = m_queues.find(key); it != m_queues.end()) {
            const std::size_t got = it->second.front().payload.size();
            m_posted.erase(key);
            SMOL_THROW(ProtocolError, "rank " + std::to_string(m_myRank) + ": expected " +
                                          std::to_string(posted->bytes) + " bytes from rank " + std::to_string(src) +
                                          " for " + during(meta) + ", got " + std::to_string(got));
        }
        int culprit = src;
        std::string err = failureFor(src, meta, culprit);
        // While claimed, src's I/O thread is writing into dst: only src's own
        // failure (which stops that thread first) ends the wait early.
        if (!err.empty() && (posted->state == PostedRecv::State::Waiting || culprit == src || !m_allError.empty())) {
            m_posted.erase(key);
            SMOL_THROW(PeerLostError, culprit, err);
        }
        if (holdsChanged(holds, deadline, timeout)) {
            m_arrived.wait(lock); // held: no timeout until released
            continue;
        }
        if (m_arrived.wait_until(lock, deadline) == std::cv_status::timeout &&
            std::chrono::steady_clock::now() >= deadline && !m_held && holds == m_holds &&
            posted->state != PostedRecv::State::Done) {
            if (posted->state == PostedRecv::State::Claimed) {
                lock.unlock();
                dropLink(src);
                lock.lock();
            }
            m_posted.erase(key);
            SMOL_THROW(PeerTimeoutError, src,
                       "silent for " + std::to_string(timeout.count()) + " ms during " + during(meta) + " (tag " +
                           std::to_string(meta.tag) + ")");
        }
    }
}

void Mailbox::cancel(int src, const FrameMeta &meta, const std::shared_ptr<PostedRecv> &posted,
                     const std::function<void(int)> &dropLink) noexcept
{
    const Key key{src, meta.kind, meta.seq, meta.tag};
    std::unique_lock lock(m_mutex);
    if (posted->state == PostedRecv::State::Claimed) {
        lock.unlock();
        dropLink(src);
        lock.lock();
    }
    auto it = m_posted.find(key);
    if (it != m_posted.end() && it->second == posted)
        m_posted.erase(it);
}

void Mailbox::failPeer(int src, const std::string &reason)
{
    {
        std::lock_guard lock(m_mutex);
        if (src >= 0 && src < int(m_peerError.size()) && m_peerError[std::size_t(src)].empty())
            m_peerError[std::size_t(src)] = reason;
    }
    m_arrived.notify_all();
}

void Mailbox::revivePeer(int src)
{
    std::lock_guard lock(m_mutex);
    if (src >= 0 && src < int(m_peerError.size()))
        m_peerError[std::size_t(src)].clear();
}

void Mailbox::failAll(const std::string &reason)
{
    {
        std::lock_guard lock(m_mutex);
        m_allError = reason;
    }
    m_arrived.notify_all();
}

} // namespace smol::net
