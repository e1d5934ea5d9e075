// TCP transport: real sockets, one I/O thread per node that owns every socket
// of that node. The compute thread hands sends to the I/O thread (zero copy:
// the frame is written from the caller's memory) and waits on mailboxes that
// the I/O thread fills, so sends and receives run full duplex and a ring can
// never deadlock on full kernel buffers.
//
// Each rank listens; for a pair (i, j) with i > j, rank i connects to rank j.
// Every connection is authenticated (auth.h) before its first frame. A link
// that breaks, times out or carries a malformed frame is closed, its waiters
// fail with an error naming the peer, and the peer may reconnect.
//
// The data path uses POSIX sockets and poll(); docs/protocol.md says why.
//
// Inline sends: when nothing is queued for a peer and its link is not
// emulated, send() writes the frame to the socket itself (non-blocking) and
// hands only what the kernel did not take to the I/O thread. On a loaded
// machine this saves the eventfd write and the I/O thread's wakeup per frame
// (docs/protocol.md, "Performance"). At most one thread writes a socket at a
// time: the caller claims it under m_mutex (m_inlineWriter) only while the
// I/O thread holds nothing for that peer, and the I/O thread neither takes
// that peer's outbox nor closes its socket while the claim lasts.
//
// Emulated links (setLinkLimit): the I/O thread releases a shaped link's bytes
// at its bandwidth (LinkShaper) and writes them to the socket `latency` after
// they left; the send completes when the last byte has left (the rest of the
// frame is copied then, so the caller's buffer is free). poll() sleeps until
// the shaper allows the next burst.
#pragma once

#include "mailbox.h"
#include "transport.h"

#include <QByteArray>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace smol::net {

class TcpTransport final : public Transport {
public:
    TcpTransport(int rank, int worldSize, const std::string &token, TransportOptions options = {});
    ~TcpTransport() override;

    TransportKind kind() const override { return TransportKind::Tcp; }
    std::uint16_t listenPort() const { return m_listenPort; }

    // Connect to and authenticate with `peer` listening at host:port; returns
    // once the link is up. Throws AuthError or NetError.
    void connectTo(int peer, const std::string &host, std::uint16_t port);
    // Wait until every other rank has an authenticated link to this one.
    void waitForPeers(std::chrono::milliseconds timeout);
    bool isConnected(int peer) const;

    SendTicket send(int peer, const FrameMeta &meta, const void *data, std::size_t bytes) override;
    Message recv(int peer, const FrameMeta &meta) override;
    RecvHandle postRecv(int peer, const FrameMeta &meta, void *dst, std::size_t bytes) override;
    void waitRecv(RecvHandle &handle) override;
    void cancelRecv(RecvHandle &handle) noexcept override;
    void abort() override;
    void holdWaits(bool held) override { m_mailbox.setHeld(held); }

protected:
    void linkLimitChanged(int peer) override;

public:
    // Close the link to `peer` (from any thread but the I/O thread) and wait
    // until the I/O thread no longer touches any buffer queued for it.
    void dropPeer(int peer, const std::string &reason);

private:
    struct SendOp;
    struct Link;
    struct Pending;
    struct PollSet;

    void wake();
    // Under m_mutex: the socket a caller may write `peer`'s frame to right now, else -1.
    int inlineSocket(int peer) const;
    void ioLoop();
    void buildPollSet(PollSet &set);
    bool waitForEvents(PollSet &set);
    void servePollSet(const PollSet &set);
    void drainRequests();
    void acceptConnections();
    void serviceHandshake(Pending &p);
    void installLink(int peer, int fd);
    void readLink(int peer);
    void writeLink(int peer);
    void releaseBytes(Link &l);
    bool retryAfterIoError(int peer);
    void failLink(int peer, const std::string &reason, bool protocolViolation);
    void shutdownAll(const std::string &reason);

    const QByteArray m_token;
    int m_listenFd = -1;
    int m_wakeFd = -1;
    std::uint16_t m_listenPort = 0;
    Mailbox m_mailbox;

    // Shared between the compute side and the I/O thread.
    mutable std::mutex m_mutex;
    std::condition_variable m_changed;
    std::vector<std::deque<SendOp>> m_outbox;   // per peer, not yet seen by the I/O thread
    std::vector<std::pair<int, int>> m_newLinks; // (peer, fd) from connectTo()
    std::vector<std::pair<int, std::string>> m_dropRequests;
    std::vector<bool> m_connected;
    std::vector<std::string> m_linkError;
    std::uint64_t m_dropsHandled = 0;
    std::uint64_t m_dropsRequested = 0;
    bool m_stop = false;
    bool m_aborted = false;
    bool m_limitsChanged = false;
    std::atomic<bool> m_wakePending{false};
    // Inline sends (see the top of this file), by peer.
    std::vector<int> m_sockFd;        // the link's socket while it is up, else -1
    std::vector<char> m_ioQueued;     // the I/O thread holds unsent frames for the peer
    std::vector<char> m_inlineWriter; // a caller is writing to the peer's socket now

    // I/O thread only.
    std::vector<Link> m_links;
    std::vector<Pending> m_pending;
    std::thread m_io;
};

} // namespace smol::net
