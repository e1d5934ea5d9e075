#include "mailbox.h"

#include "errors.h"

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
} // namespace

Mailbox::Mailbox(int worldSize, int myRank)
    : m_myRank(myRank)
    , m_peerError(std::size_t(worldSize))
{
}

void Mailbox::deliver(Message &&message)
{
    {
        std::lock_guard lock(m_mutex);
        m_queues[Key{message.src, message.meta.kind, message.meta.seq, message.meta.tag}].push_back(std::move(message));
    }
    m_arrived.notify_all();
}

Message Mailbox::take(int src, const FrameMeta &meta, std::chrono::milliseconds timeout)
{
    if (src < 0 || src >= int(m_peerError.size()) || src == m_myRank)
        SMOL_THROW(NetError, "rank " + std::to_string(m_myRank) + ": no peer " + std::to_string(src));
    const Key key{src, meta.kind, meta.seq, meta.tag};
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::unique_lock lock(m_mutex);
    for (;;) {
        if (auto it = m_queues.find(key); it != m_queues.end()) {
            Message m = std::move(it->second.front());
            it->second.pop_front();
            if (it->second.empty())
                m_queues.erase(it);
            if (m.meta.kind != meta.kind)
                SMOL_THROW(ProtocolError, "rank " + std::to_string(m_myRank) + ": expected " +
                                              collectiveName(meta.kind) + " #" + std::to_string(meta.seq) +
                                              " from rank " + std::to_string(src) + ", got " +
                                              collectiveName(m.meta.kind));
            return m;
        }
        if (!m_allError.empty())
            SMOL_THROW(PeerLostError, src, m_allError);
        // A world collective cannot finish once any rank is gone, so waiting on
        // a healthy neighbour would only end in a timeout naming the wrong rank.
        if (isWorldCollective(meta.kind))
            for (std::size_t p = 0; p < m_peerError.size(); ++p)
                if (!m_peerError[p].empty())
                    SMOL_THROW(PeerLostError, int(p),
                               m_peerError[p] + " (during " + collectiveName(meta.kind) + " #" +
                                   std::to_string(meta.seq) + ")");
        if (!m_peerError[std::size_t(src)].empty())
            SMOL_THROW(PeerLostError, src,
                       m_peerError[std::size_t(src)] + " (during " + collectiveName(meta.kind) + " #" +
                           std::to_string(meta.seq) + ")");
        if (m_arrived.wait_until(lock, deadline) == std::cv_status::timeout && std::chrono::steady_clock::now() >= deadline)
            SMOL_THROW(PeerTimeoutError, src,
                       std::string("silent for ") + std::to_string(timeout.count()) + " ms during " +
                           collectiveName(meta.kind) + " #" + std::to_string(meta.seq) + " (tag " +
                           std::to_string(meta.tag) + ")");
    }
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
