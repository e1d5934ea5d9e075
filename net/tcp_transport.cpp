#include "tcp_transport.h"

#include "auth.h"
#include "errors.h"
#include "frame.h"
#include "send_state.h"
#include "socket_util.h"
#include "trace.h"

#include <arpa/inet.h>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

namespace smol::net {

namespace {
// Bytes read from one link before the loop services the others: fairness
// between the ring's incoming and outgoing directions.
constexpr std::size_t kReadBudget = std::size_t(4) << 20;
// A shaped link with unlimited bandwidth but a latency holds at most this
// many bytes that have left but are not written yet.
constexpr std::uint64_t kMaxInFlightUnpaced = std::uint64_t(64) << 20;
// Who a descriptor of the poll set belongs to (PollSet::owner); a link's is
// its rank (>= 0), handshake i in progress kFirstPendingOwner - i.
constexpr int kWakeOwner = -1;
constexpr int kListenOwner = -2;
constexpr int kFirstPendingOwner = -3;
} // namespace

// The descriptors of one ppoll, whom each belongs to, and when to wake at
// the latest (none: when a descriptor is ready).
struct TcpTransport::PollSet {
    std::vector<pollfd> fds;
    std::vector<int> owner;
    sock::Clock::time_point now;
    std::optional<sock::Clock::time_point> wakeAt;
    void add(int fd, short events, int who)
    {
        fds.push_back({fd, events, 0});
        owner.push_back(who);
    }
    void wakeBy(sock::Clock::time_point t) { wakeAt = wakeAt ? std::min(*wakeAt, t) : t; }
};

struct TcpTransport::SendOp {
    char header[kHeaderBytes];
    const char *data = nullptr;
    std::size_t bytes = 0;
    std::size_t sent = 0; // over header + payload
    std::shared_ptr<SendTicket::State> state;
    FrameEvent event;
    // Emulated links: bytes released by the shaper (>= sent), and whether the
    // ticket already finished (all bytes left; data then points into owned).
    std::size_t departed = 0;
    bool finished = false;
    std::unique_ptr<char[]> owned;

    // One non-blocking sendmsg of the unsent rest (at most `room` bytes), counted in `sent`.
    ssize_t writeOnce(int fd, std::size_t room)
    {
        iovec iov[2];
        int n = 0;
        const std::size_t off = sent < kHeaderBytes ? 0 : sent - kHeaderBytes;
        if (sent < kHeaderBytes)
            iov[n++] = {header + sent, kHeaderBytes - sent};
        if (bytes > off)
            iov[n++] = {const_cast<char *>(data) + off, bytes - off};
        for (int i = 0; i < n; ++i) {
            iov[i].iov_len = std::min(iov[i].iov_len, room);
            room -= iov[i].iov_len;
        }
        msghdr msg{};
        msg.msg_iov = iov;
        msg.msg_iovlen = std::size_t(n);
        const ssize_t w = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0)
            sent += std::size_t(w);
        return w;
    }
    // Inline send: true when the whole frame went; false (EAGAIN) leaves the rest.
    bool writeNow(int fd)
    {
        while (sent < kHeaderBytes + bytes)
            if (writeOnce(fd, std::numeric_limits<std::size_t>::max()) < 0 && errno != EINTR)
                return false;
        return true;
    }
};

struct TcpTransport::Link {
    int fd = -1;
    FrameDecoder decoder{-1, -1, 0};
    std::deque<SendOp> queue;
    // Emulated link. Byte counts run over the link's whole stream: bytes that
    // left (departed), that may be written (their latency has passed), that
    // were written. delayLine: (when writable, departed count at that time).
    LinkShaper shaper;
    std::deque<std::pair<LinkShaper::Clock::time_point, std::uint64_t>> delayLine;
    std::uint64_t departed = 0;
    std::uint64_t writable = 0;
    std::uint64_t written = 0;
    void resetStream()
    {
        delayLine.clear();
        departed = writable = written = 0;
    }
};

struct TcpTransport::Pending {
    int fd = -1;
    std::string from; // "host:port" for log lines
    sock::Clock::time_point deadline;
    QByteArray nonceA;
    char proof[auth::kProofBytes];
    std::size_t fill = 0;
};

TcpTransport::TcpTransport(int rank, int worldSize, const std::string &token, TransportOptions options)
    : Transport(rank, worldSize, std::move(options))
    , m_token(QByteArray::fromStdString(token))
    , m_mailbox(worldSize, rank)
    , m_outbox(std::size_t(worldSize))
    , m_connected(std::size_t(worldSize), false)
    , m_linkError(std::size_t(worldSize))
    , m_sockFd(std::size_t(worldSize), -1)
    , m_ioQueued(std::size_t(worldSize), 0)
    , m_inlineWriter(std::size_t(worldSize), 0)
    , m_links(std::size_t(worldSize))
{
    if (rank < 0 || rank >= worldSize)
        SMOL_THROW(NetError, "rank " + std::to_string(rank) + " outside world of " + std::to_string(worldSize));
    m_listenFd = sock::listenTcp(m_options.bindAddress, 0, &m_listenPort);
    sock::setNonBlocking(m_listenFd, true);
    m_wakeFd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    for (int p = 0; p < worldSize; ++p)
        m_links[std::size_t(p)].shaper.setLimit(linkLimit(p));
    m_io = std::thread([this] { ioLoop(); });
}

TcpTransport::~TcpTransport()
{
    {
        std::lock_guard lock(m_mutex);
        m_stop = true;
    }
    wake();
    m_io.join();
    sock::closeFd(m_wakeFd);
}

void TcpTransport::wake()
{
    if (!m_wakePending.exchange(true)) {
        const std::uint64_t one = 1;
        [[maybe_unused]] auto rc = ::write(m_wakeFd, &one, sizeof one);
    }
}

// ---- compute side ------------------------------------------------------------

void TcpTransport::connectTo(int peer, const std::string &host, std::uint16_t port)
{
    if (peer < 0 || peer >= m_worldSize || peer == m_rank)
        SMOL_THROW(NetError, "rank " + std::to_string(m_rank) + ": cannot connect to rank " + std::to_string(peer));
    int fd = sock::connectTcp(host, port, m_options.handshakeTimeout);
    try {
        auth::clientHandshake(fd, m_token, m_rank, peer, m_worldSize, m_options.handshakeTimeout);
    } catch (...) {
        sock::closeFd(fd);
        throw;
    }
    sock::setNonBlocking(fd, true);
    std::unique_lock lock(m_mutex);
    m_newLinks.emplace_back(peer, fd);
    lock.unlock();
    wake();
    lock.lock();
    if (!m_changed.wait_for(lock, m_options.handshakeTimeout, [&] { return m_connected[std::size_t(peer)] || m_stop; }))
        SMOL_THROW(NetError, "rank " + std::to_string(m_rank) + ": link to rank " + std::to_string(peer) +
                                 " was not installed: " + m_linkError[std::size_t(peer)]);
}

void TcpTransport::waitForPeers(std::chrono::milliseconds timeout)
{
    std::unique_lock lock(m_mutex);
    auto allUp = [&] {
        for (int p = 0; p < m_worldSize; ++p)
            if (p != m_rank && !m_connected[std::size_t(p)])
                return false;
        return true;
    };
    if (m_changed.wait_for(lock, timeout, [&] { return allUp() || m_aborted || m_stop; }) && allUp())
        return;
    if (m_aborted || m_stop)
        SMOL_THROW(NetError, "rank " + std::to_string(m_rank) + ": aborted while waiting for its peers");
    std::string missing;
    for (int p = 0; p < m_worldSize; ++p)
        if (p != m_rank && !m_connected[std::size_t(p)])
            missing += (missing.empty() ? "" : ", ") + std::to_string(p);
    SMOL_THROW(NetError, "rank " + std::to_string(m_rank) + ": no link from rank(s) " + missing + " within " +
                             std::to_string(timeout.count()) + " ms");
}

bool TcpTransport::isConnected(int peer) const
{
    std::lock_guard lock(m_mutex);
    return peer >= 0 && peer < m_worldSize && m_connected[std::size_t(peer)];
}

SendTicket TcpTransport::send(int peer, const FrameMeta &meta, const void *data, std::size_t bytes)
{
    if (peer < 0 || peer >= m_worldSize || peer == m_rank)
        SMOL_THROW(NetError, "rank " + std::to_string(m_rank) + ": no peer " + std::to_string(peer));
    SendOp op;
    FrameHeader h;
    h.src = m_rank;
    h.dst = peer;
    h.meta = meta;
    h.sendStartNs = monotonicNs();
    h.payloadBytes = bytes;
    encodeHeader(h, op.header);
    op.data = static_cast<const char *>(data);
    op.bytes = bytes;
    op.state = SendTicket::State::make(peer, bytes, m_options.timeout);
    op.state->cancel = [this, peer] { dropPeer(peer, "send timed out"); };
    const LinkLimit limit = linkLimit(peer);
    {
        // A slow emulated link must not turn into a timeout by itself.
        LinkShaper pace;
        pace.setLimit(limit);
        op.state->timeout += std::chrono::duration_cast<std::chrono::milliseconds>(
            pace.transferTime(kHeaderBytes + bytes) + pace.limit().latency);
    }
    op.event = FrameEvent{FrameEvent::Side::Send, m_rank, peer, bytes, meta.kind, meta.seq, meta.tag,
                          h.sendStartNs, 0, 0};
    SendTicket ticket(op.state);
    std::unique_lock lock(m_mutex);
    if (m_aborted || m_stop) {
        op.state->finish("rank " + std::to_string(m_rank) + " was aborted");
        return ticket;
    }
    if (!m_connected[std::size_t(peer)] && !m_linkError[std::size_t(peer)].empty()) {
        op.state->finish(m_linkError[std::size_t(peer)]);
        return ticket;
    }
    const int fd = inlineSocket(peer);
    if (fd < 0 || limit.isShaped()) {
        m_outbox[std::size_t(peer)].push_back(std::move(op));
        lock.unlock();
        wake();
        return ticket;
    }
    m_inlineWriter[std::size_t(peer)] = true;
    lock.unlock();
    const bool done = op.writeNow(fd);
    lock.lock();
    m_inlineWriter[std::size_t(peer)] = false;
    m_changed.notify_all(); // failLink() may wait for the claim to end
    // Kernel buffer full: the I/O thread writes the rest before what others queued meanwhile.
    if (!done)
        m_outbox[std::size_t(peer)].push_front(std::move(op));
    const bool more = !m_outbox[std::size_t(peer)].empty();
    lock.unlock();
    if (done) {
        op.event.sendCompleteNs = monotonicNs();
        emitTrace(op.event);
        op.state->finish();
    }
    if (more)
        wake();
    return ticket;
}

int TcpTransport::inlineSocket(int peer) const
{
    const auto p = std::size_t(peer);
    const bool free = m_connected[p] && !m_ioQueued[p] && !m_inlineWriter[p] && m_outbox[p].empty();
    return free && !m_limitsChanged ? m_sockFd[p] : -1;
}

Message TcpTransport::recv(int peer, const FrameMeta &meta)
{
    return m_mailbox.take(peer, meta, m_options.timeout);
}

RecvHandle TcpTransport::postRecv(int peer, const FrameMeta &meta, void *dst, std::size_t bytes)
{
    if (peer < 0 || peer >= m_worldSize || peer == m_rank)
        SMOL_THROW(NetError, "rank " + std::to_string(m_rank) + ": no peer " + std::to_string(peer));
    RecvHandle h = Transport::postRecv(peer, meta, dst, bytes);
    h.posted = m_mailbox.post(peer, meta, dst, bytes);
    return h;
}

void TcpTransport::waitRecv(RecvHandle &h)
{
    if (h.done)
        return;
    h.done = true;
    m_mailbox.wait(h.peer, h.meta, h.posted, m_options.timeout,
                   [this](int p) { dropPeer(p, "receive timed out mid-frame"); });
}

void TcpTransport::cancelRecv(RecvHandle &h) noexcept
{
    if (h.done || !h.posted)
        return;
    h.done = true;
    m_mailbox.cancel(h.peer, h.meta, h.posted, [this](int p) { dropPeer(p, "receive abandoned mid-frame"); });
}

void TcpTransport::abort()
{
    {
        std::lock_guard lock(m_mutex);
        if (m_aborted)
            return;
        m_aborted = true;
    }
    wake();
    std::unique_lock lock(m_mutex);
    m_changed.wait(lock, [&] { return m_listenFd < 0 || m_stop; });
}

void TcpTransport::linkLimitChanged(int /*peer*/)
{
    {
        std::lock_guard lock(m_mutex);
        m_limitsChanged = true;
    }
    wake();
}

void TcpTransport::dropPeer(int peer, const std::string &reason)
{
    if (std::this_thread::get_id() == m_io.get_id())
        return;
    std::unique_lock lock(m_mutex);
    m_dropRequests.emplace_back(peer, reason);
    const std::uint64_t ticket = ++m_dropsRequested;
    lock.unlock();
    wake();
    lock.lock();
    m_changed.wait(lock, [&] { return m_dropsHandled >= ticket || m_stop || m_aborted; });
}

// ---- I/O thread ----------------------------------------------------------------

// One round of the I/O thread: take the compute side's requests, write what
// can be written (most sends complete right here), sleep until a socket, the
// wake eventfd or an emulated link's next release wants attention, then
// serve whatever woke it.
void TcpTransport::ioLoop()
{
    PollSet set;
    for (;;) {
        drainRequests();
        {
            std::lock_guard lock(m_mutex);
            if (m_stop)
                break;
        }
        for (int p = 0; p < m_worldSize; ++p)
            if (m_links[std::size_t(p)].fd >= 0 && !m_links[std::size_t(p)].queue.empty())
                writeLink(p);
        buildPollSet(set);
        if (!waitForEvents(set))
            break;
        servePollSet(set);
        m_pending.erase(std::remove_if(m_pending.begin(), m_pending.end(), [](const Pending &p) { return p.fd < 0; }),
                        m_pending.end());
    }
    shutdownAll("rank " + std::to_string(m_rank) + " shut down");
}

// What to watch: the wake eventfd, the listening socket, every handshake in
// progress (until its deadline) and every link (POLLOUT only with bytes that
// may be written now), and when an emulated link next releases bytes.
void TcpTransport::buildPollSet(PollSet &set)
{
    set.fds.clear();
    set.owner.clear();
    set.now = sock::Clock::now();
    set.wakeAt.reset();
    set.add(m_wakeFd, POLLIN, kWakeOwner);
    if (m_listenFd >= 0)
        set.add(m_listenFd, POLLIN, kListenOwner);
    for (std::size_t i = 0; i < m_pending.size(); ++i) {
        set.add(m_pending[i].fd, POLLIN, kFirstPendingOwner - int(i));
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(m_pending[i].deadline - set.now).count() + 1;
        set.wakeBy(set.now + std::chrono::milliseconds(std::max<long long>(left, 0)));
    }
    for (int p = 0; p < m_worldSize; ++p) {
        const Link &l = m_links[std::size_t(p)];
        if (l.fd < 0)
            continue;
        bool wantWrite = !l.queue.empty();
        if (wantWrite && l.shaper.isShaped()) {
            // Ask for POLLOUT only with bytes we may write now (else it would
            // spin); otherwise sleep until the shaper releases more.
            wantWrite = l.writable > l.written;
            if (!l.delayLine.empty())
                set.wakeBy(l.delayLine.front().first);
            for (const SendOp &op : l.queue)
                if (op.departed < kHeaderBytes + op.bytes) {
                    set.wakeBy(l.shaper.whenAllowed(kHeaderBytes + op.bytes - op.departed, set.now));
                    break;
                }
        }
        set.add(l.fd, short(POLLIN | (wantWrite ? POLLOUT : 0)), p);
    }
}

// Sleeps in ppoll until the set wants attention; false when polling itself failed.
bool TcpTransport::waitForEvents(PollSet &set)
{
    timespec ts{};
    if (set.wakeAt) {
        const auto ns = std::max<std::int64_t>(
            0, std::chrono::duration_cast<std::chrono::nanoseconds>(*set.wakeAt - set.now).count());
        ts.tv_sec = time_t(ns / 1000000000);
        ts.tv_nsec = long(ns % 1000000000);
    }
    const int rc = ::ppoll(set.fds.data(), nfds_t(set.fds.size()), set.wakeAt ? &ts : nullptr, nullptr);
    return rc >= 0 || errno == EINTR;
}

void TcpTransport::servePollSet(const PollSet &set)
{
    for (std::size_t i = 0; i < set.fds.size(); ++i) {
        const short ev = set.fds[i].revents;
        const int who = set.owner[i];
        if (who == kWakeOwner) {
            if (ev & POLLIN) {
                std::uint64_t v;
                [[maybe_unused]] auto r = ::read(m_wakeFd, &v, sizeof v);
            }
            m_wakePending = false;
        } else if (who == kListenOwner) {
            if (ev & POLLIN)
                acceptConnections();
        } else if (who <= kFirstPendingOwner) {
            Pending &p = m_pending[std::size_t(kFirstPendingOwner - who)];
            if (ev)
                serviceHandshake(p);
            else if (sock::Clock::now() >= p.deadline) {
                noteDropped("connection from " + p.from + ": handshake timed out");
                sock::closeFd(p.fd);
            }
        } else {
            if (m_links[std::size_t(who)].fd >= 0 && (ev & (POLLIN | POLLERR | POLLHUP)))
                readLink(who);
            if (m_links[std::size_t(who)].fd >= 0 && (ev & POLLOUT))
                writeLink(who);
        }
    }
}

void TcpTransport::drainRequests()
{
    std::vector<std::pair<int, int>> newLinks;
    std::vector<std::pair<int, std::string>> drops;
    bool abortNow = false;
    bool limitsChanged = false;
    {
        std::lock_guard lock(m_mutex);
        limitsChanged = std::exchange(m_limitsChanged, false);
        newLinks.swap(m_newLinks);
        drops.swap(m_dropRequests);
        abortNow = m_aborted && m_listenFd >= 0;
        for (int p = 0; p < m_worldSize; ++p) {
            auto &out = m_outbox[std::size_t(p)];
            if (out.empty() || m_links[std::size_t(p)].fd < 0 || m_inlineWriter[std::size_t(p)])
                continue; // a caller writing inline queues its rest in front, then wakes us
            for (auto &op : out)
                m_links[std::size_t(p)].queue.push_back(std::move(op));
            out.clear();
            m_ioQueued[std::size_t(p)] = 1;
        }
    }
    if (limitsChanged)
        for (int p = 0; p < m_worldSize; ++p)
            m_links[std::size_t(p)].shaper.setLimit(linkLimit(p));
    for (auto [peer, fd] : newLinks)
        installLink(peer, fd);
    for (auto &[peer, reason] : drops)
        if (m_links[std::size_t(peer)].fd >= 0)
            failLink(peer, reason, false);
    if (!drops.empty()) {
        std::lock_guard lock(m_mutex);
        m_dropsHandled += drops.size();
    }
    if (!drops.empty())
        m_changed.notify_all();
    if (abortNow)
        shutdownAll("rank " + std::to_string(m_rank) + " was aborted");
}

void TcpTransport::acceptConnections()
{
    for (;;) {
        sockaddr_in addr{};
        socklen_t len = sizeof addr;
        int fd = ::accept4(m_listenFd, reinterpret_cast<sockaddr *>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        char host[INET_ADDRSTRLEN] = "?";
        ::inet_ntop(AF_INET, &addr.sin_addr, host, sizeof host);
        Pending p;
        p.fd = fd;
        p.from = std::string(host) + ":" + std::to_string(ntohs(addr.sin_port));
        p.deadline = sock::Clock::now() + m_options.handshakeTimeout;
        p.nonceA = auth::freshNonce();
        const QByteArray hello = auth::encodeHello(m_rank, p.nonceA);
        if (::send(fd, hello.constData(), std::size_t(hello.size()), MSG_NOSIGNAL) != hello.size()) {
            ::close(fd);
            continue;
        }
        m_pending.push_back(std::move(p));
    }
}

void TcpTransport::serviceHandshake(Pending &p)
{
    const ssize_t r = ::recv(p.fd, p.proof + p.fill, auth::kProofBytes - p.fill, MSG_DONTWAIT);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
        noteDropped("connection from " + p.from + ": closed during the handshake");
        sock::closeFd(p.fd);
        return;
    }
    if (r < 0)
        return;
    p.fill += std::size_t(r);
    if (p.fill < auth::kProofBytes)
        return;
    int peer = -1;
    QByteArray nonceC;
    if (std::string err = auth::verifyProof(p.proof, m_token, m_rank, m_worldSize, p.nonceA, peer, nonceC);
        !err.empty()) {
        noteDropped("connection from " + p.from + ": " + err);
        sock::closeFd(p.fd);
        return;
    }
    if (m_links[std::size_t(peer)].fd >= 0) {
        noteDropped("connection from " + p.from + ": rank " + std::to_string(peer) + " is already connected");
        sock::closeFd(p.fd);
        return;
    }
    const QByteArray accept = auth::encodeAccept(m_token, m_rank, peer, p.nonceA, nonceC);
    if (::send(p.fd, accept.constData(), std::size_t(accept.size()), MSG_NOSIGNAL) != accept.size()) {
        noteDropped("connection from " + p.from + ": could not finish the handshake");
        sock::closeFd(p.fd);
        return;
    }
    sock::tuneDataSocket(p.fd);
    installLink(peer, p.fd);
    p.fd = -1;
}

void TcpTransport::installLink(int peer, int fd)
{
    Link &l = m_links[std::size_t(peer)];
    if (l.fd >= 0 || m_listenFd < 0) {
        ::close(fd);
        return;
    }
    l.fd = fd;
    l.resetStream();
    l.decoder = FrameDecoder(peer, m_rank, m_options.maxPayloadBytes);
    l.decoder.setBufferSource([this](std::size_t n) { return takeRecycled(n); });
    m_mailbox.revivePeer(peer);
    {
        std::lock_guard lock(m_mutex);
        m_connected[std::size_t(peer)] = true;
        m_linkError[std::size_t(peer)].clear();
        m_sockFd[std::size_t(peer)] = fd;
        for (auto &op : m_outbox[std::size_t(peer)])
            l.queue.push_back(std::move(op));
        m_outbox[std::size_t(peer)].clear();
        m_ioQueued[std::size_t(peer)] = !l.queue.empty();
    }
    m_changed.notify_all();
}

void TcpTransport::readLink(int peer)
{
    Link &l = m_links[std::size_t(peer)];
    std::size_t budget = kReadBudget;
    while (budget > 0) {
        auto [dst, room] = l.decoder.buffer();
        const ssize_t r = ::recv(l.fd, dst, room, MSG_DONTWAIT);
        if (r == 0) {
            failLink(peer, "connection closed by rank " + std::to_string(peer), false);
            return;
        }
        if (r < 0) {
            if (retryAfterIoError(peer))
                continue;
            return;
        }
        budget -= std::min(budget, std::size_t(r));
        switch (l.decoder.commit(std::size_t(r))) {
        case FrameDecoder::Event::Failed:
            failLink(peer, "malformed frame from rank " + std::to_string(peer) + ": " + l.decoder.error(), true);
            return;
        case FrameDecoder::Event::FrameReady: {
            const FrameHeader &h = l.decoder.header();
            if (h.type == FrameType::Heartbeat) {
                l.decoder.takeFrame();
                break;
            }
            FrameEvent ev{FrameEvent::Side::Receive, peer, m_rank, h.payloadBytes, h.meta.kind, h.meta.seq,
                          h.meta.tag, h.sendStartNs, 0, monotonicNs()};
            emitTrace(ev); // before delivery: a receiver never sees a frame its trace has not
            if (l.decoder.payloadRedirected()) {
                const FrameMeta meta = h.meta;
                l.decoder.takeFrame();
                m_mailbox.completeClaim(peer, meta);
            } else {
                m_mailbox.deliver(l.decoder.takeFrame());
            }
            break;
        }
        case FrameDecoder::Event::HeaderReady: {
            // A receive posted for this frame: read the payload straight into it.
            const FrameHeader &h = l.decoder.header();
            if (char *dst = m_mailbox.claim(peer, h.meta, h.payloadBytes))
                l.decoder.redirectPayload(dst);
            break;
        }
        case FrameDecoder::Event::NeedMore:
            break;
        }
    }
}

// Emulated link: let the shaper release the bytes that may leave now. A frame
// whose last byte left completes its send; with a latency its unwritten rest
// is copied first, since the caller may reuse its buffer from then on.
void TcpTransport::releaseBytes(Link &l)
{
    const auto now = LinkShaper::Clock::now();
    const LinkLimit &limit = l.shaper.limit();
    l.departed = std::max(l.departed, l.written);
    const std::uint64_t cap =
        l.shaper.limitsBandwidth()
            ? std::uint64_t(limit.bitsPerSecond / 8 * std::chrono::duration<double>(limit.latency).count()) +
                  4 * std::uint64_t(l.shaper.burstBytes())
            : kMaxInFlightUnpaced;
    const std::uint64_t inFlight = l.departed - l.written;
    std::size_t budget = inFlight >= cap ? 0 : std::size_t(std::min<std::uint64_t>(l.shaper.allowance(now), cap - inFlight));
    std::size_t released = 0;
    for (SendOp &op : l.queue) {
        const std::size_t total = kHeaderBytes + op.bytes;
        op.departed = std::max(op.departed, op.sent);
        if (op.departed == total)
            continue;
        if (budget == 0)
            break;
        const std::size_t take = std::min(budget, total - op.departed);
        op.departed += take;
        budget -= take;
        released += take;
        if (op.departed == total && limit.latency.count() > 0) {
            if (op.bytes) {
                op.owned.reset(new char[op.bytes]);
                std::memcpy(op.owned.get(), op.data, op.bytes);
                op.data = op.owned.get();
            }
            op.finished = true;
            op.event.sendCompleteNs = monotonicNs();
            emitTrace(op.event);
            op.state->finish();
        }
    }
    if (released > 0) {
        l.shaper.consume(released, now);
        l.departed += released;
        l.delayLine.emplace_back(now + std::chrono::duration_cast<LinkShaper::Clock::duration>(limit.latency),
                                 l.departed);
    }
    while (!l.delayLine.empty() && l.delayLine.front().first <= now) {
        l.writable = std::max(l.writable, l.delayLine.front().second);
        l.delayLine.pop_front();
    }
}

void TcpTransport::writeLink(int peer)
{
    Link &l = m_links[std::size_t(peer)];
    const bool shaped = l.shaper.isShaped();
    if (shaped)
        releaseBytes(l);
    while (!l.queue.empty()) {
        // Unshaped: everything queued; shaped: what has left and waited out the latency.
        std::size_t room = std::numeric_limits<std::size_t>::max();
        if (shaped) {
            if (l.writable <= l.written)
                return; // poll() wakes us when the shaper releases more
            room = std::size_t(l.writable - l.written);
        }
        SendOp &op = l.queue.front();
        const ssize_t w = op.writeOnce(l.fd, room);
        if (w < 0) {
            if (retryAfterIoError(peer))
                continue;
            return;
        }
        l.written += std::uint64_t(w);
        if (op.sent < kHeaderBytes + op.bytes)
            return; // kernel buffer full (poll for POLLOUT), or the shaper's share is written
        if (!op.finished) {
            op.event.sendCompleteNs = monotonicNs();
            emitTrace(op.event);
            op.state->finish();
        }
        l.queue.pop_front();
    }
    if (!shaped)
        l.resetStream(); // nothing queued: a limit set later starts from here
    std::lock_guard lock(m_mutex); // nothing held for peer: callers may write inline again
    m_ioQueued[std::size_t(peer)] = 0;
}

// After a failed recv or sendmsg on a link: true to try again at once (a
// signal interrupted it); otherwise false, and the link has failed unless
// the socket merely had nothing more to give or take right now.
bool TcpTransport::retryAfterIoError(int peer)
{
    if (errno == EINTR)
        return true;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
        failLink(peer, std::string("connection to rank ") + std::to_string(peer) + " broke: " + std::strerror(errno),
                 false);
    return false;
}

void TcpTransport::failLink(int peer, const std::string &reason, bool protocolViolation)
{
    Link &l = m_links[std::size_t(peer)];
    if (protocolViolation)
        noteDropped(reason);
    std::deque<SendOp> orphans;
    orphans.swap(l.queue);
    l.resetStream();
    {
        std::unique_lock lock(m_mutex);
        // An inline writer never blocks: let it finish before the fd is closed (and reused).
        m_changed.wait(lock, [&] { return !m_inlineWriter[std::size_t(peer)]; });
        sock::closeFd(l.fd);
        m_sockFd[std::size_t(peer)] = -1;
        m_ioQueued[std::size_t(peer)] = 0;
        m_connected[std::size_t(peer)] = false;
        m_linkError[std::size_t(peer)] = reason;
        for (auto &op : m_outbox[std::size_t(peer)])
            orphans.push_back(std::move(op));
        m_outbox[std::size_t(peer)].clear();
    }
    for (auto &op : orphans)
        op.state->finish(reason);
    m_mailbox.failPeer(peer, reason);
    m_changed.notify_all();
}

void TcpTransport::shutdownAll(const std::string &reason)
{
    for (int p = 0; p < m_worldSize; ++p)
        if (m_links[std::size_t(p)].fd >= 0)
            failLink(p, reason, false);
    for (auto &p : m_pending)
        sock::closeFd(p.fd);
    m_pending.clear();
    m_mailbox.failAll(reason);
    std::deque<SendOp> orphans;
    {
        std::lock_guard lock(m_mutex);
        sock::closeFd(m_listenFd);
        for (auto &out : m_outbox) {
            for (auto &op : out)
                orphans.push_back(std::move(op));
            out.clear();
        }
    }
    for (auto &op : orphans)
        op.state->finish(reason);
    m_changed.notify_all();
}

} // namespace smol::net
