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
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

namespace smol::net {

// A receive whose payload the I/O thread may write straight into dst.
// Waiting -> Claimed (header arrived, payload being written) -> Done.
struct PostedRecv {
    enum class State { Waiting, Claimed, Done };
    char *dst = nullptr;
    std::size_t bytes = 0;
    State state = State::Waiting;
};

class Mailbox {
public:
    Mailbox(int worldSize, int myRank);

    void deliver(Message &&message);
    Message take(int src, const FrameMeta &meta, std::chrono::milliseconds timeout);

    // Posted receives. dropLink(src) must close the link to src and return
    // only when its I/O thread no longer writes into a claimed buffer.
    std::shared_ptr<PostedRecv> post(int src, const FrameMeta &meta, void *dst, std::size_t bytes);
    void wait(int src, const FrameMeta &meta, const std::shared_ptr<PostedRecv> &posted,
              std::chrono::milliseconds timeout, const std::function<void(int)> &dropLink);
    void cancel(int src, const FrameMeta &meta, const std::shared_ptr<PostedRecv> &posted,
                const std::function<void(int)> &dropLink) noexcept;
    // I/O thread: a header arrived. Returns where its payload goes if a
    // matching receive is posted, else nullptr (the frame will be delivered).
    char *claim(int src, const FrameMeta &meta, std::uint64_t payloadBytes);
    void completeClaim(int src, const FrameMeta &meta);

    // A pause holds the cluster (engine/breakpoints): while held, no wait
    // here times out, whoever it waits for (that peer may be held, or
    // waiting for one that is); when released, every wait gets a whole
    // timeout again. A lost peer still ends its waits at once.
    void setHeld(bool held);

    void failPeer(int src, const std::string &reason);
    void revivePeer(int src);
    void failAll(const std::string &reason);

private:
    using Key = std::tuple<int, CollectiveKind, std::uint64_t, std::uint32_t>;
    // The first error that ends a wait on src for this kind of call, or "".
    std::string failureFor(int src, const FrameMeta &meta, int &culprit) const;
    bool holdsChanged(std::uint64_t &seen, std::chrono::steady_clock::time_point &deadline,
                      std::chrono::milliseconds timeout) const;

    const int m_myRank;
    std::mutex m_mutex;
    std::condition_variable m_arrived;
    std::map<Key, std::deque<Message>> m_queues;
    std::map<Key, std::shared_ptr<PostedRecv>> m_posted; // Waiting or Claimed

    std::vector<std::string> m_peerError; // empty while the peer is healthy
    std::string m_allError;               // set by abort()
    bool m_held = false;                  // setHeld()
    std::uint64_t m_holds = 0;            // setHeld() changes: a wait that saw one starts its timeout again
};

} // namespace smol::net
