// Per-rank mailboxes: the I/O side delivers received frames, keyed by
// (source rank, kind, seq, tag); the compute thread takes them, waiting at most the
// transport's timeout. A failed peer wakes every waiter on it with
// PeerLostError (and every waiter in a world collective, which can no longer
// finish), but frames it delivered before failing can still be taken.
#pragma once

#include "transport.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

namespace smol::net {

class Mailbox {
public:
    Mailbox(int worldSize, int myRank);

    void deliver(Message &&message);
    Message take(int src, const FrameMeta &meta, std::chrono::milliseconds timeout);

    void failPeer(int src, const std::string &reason);
    void revivePeer(int src);
    void failAll(const std::string &reason);

private:
    using Key = std::tuple<int, CollectiveKind, std::uint64_t, std::uint32_t>;

    const int m_myRank;
    std::mutex m_mutex;
    std::condition_variable m_arrived;
    std::map<Key, std::deque<Message>> m_queues;
    std::vector<std::string> m_peerError; // empty while the peer is healthy
    std::string m_allError;               // set by abort()
};

} // namespace smol::net
