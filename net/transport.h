// The small interface every transport implements (Gloo's Device -> Pair ->
// Buffer, flattened): a rank sends frames to peers and waits for frames from
// peers. Two implementations: TcpTransport (real sockets, one I/O thread per
// node) and InprocTransport (in-memory queues, for fast deterministic tests).
// Collectives (communicator.h) are written once against this interface.
#pragma once

#include "dtype.h"
#include "link_shaper.h"
#include "tensor_view.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace smol::net {

class TraceSink;

// Identifies one frame within the stream between two ranks. Receivers match
// on (source rank, seq, tag); kind is checked.
struct FrameMeta {
    CollectiveKind kind = CollectiveKind::None;
    std::uint64_t seq = 0;
    std::uint32_t tag = 0;
    DType dtype = DType::UInt8;
    Shape shape; // empty = 1-D of (bytes / dtypeSize)
};

// An owned, uninitialised byte buffer (received payloads).
class Payload {
public:
    Payload() = default;
    explicit Payload(std::size_t size);
    char *data() { return m_data.get(); }
    const char *data() const { return m_data.get(); }
    std::size_t size() const { return m_size; }
    std::size_t capacity() const { return m_capacity; }
    // Grow capacity (keeping contents) to at least n, at most `limit`.
    void reserve(std::size_t n);
    void resize(std::size_t n); // n <= capacity()

private:
    std::unique_ptr<char[]> m_data;
    std::size_t m_size = 0;
    std::size_t m_capacity = 0;
};

struct Message {
    int src = -1;
    FrameMeta meta;
    Payload payload;
};

struct PostedRecv; // a transport's state for a posted receive (mailbox.h)

// A receive posted before its frame arrives: the transport may read the
// payload straight into dst. Finish it with waitRecv(); if the caller gives
// up (an exception), cancelRecv() guarantees dst is no longer written.
struct RecvHandle {
    int peer = -1;
    FrameMeta meta;
    void *dst = nullptr;
    std::size_t bytes = 0;
    std::shared_ptr<PostedRecv> posted; // null: waitRecv() does a plain recvInto()
    bool done = false;
};

// Completion of one asynchronous send. wait() throws PeerLostError or
// PeerTimeoutError naming the peer.
class SendTicket {
public:
    struct State;
    SendTicket() = default;
    explicit SendTicket(std::shared_ptr<State> state) : m_state(std::move(state)) {}
    bool valid() const { return bool(m_state); }
    void wait() const;

private:
    std::shared_ptr<State> m_state;
};

struct TransportOptions {
    // A peer that is silent this long while we wait for it fails the wait.
    std::chrono::milliseconds timeout{10000};
    // Frames claiming a larger payload close the connection.
    std::uint64_t maxPayloadBytes = std::uint64_t(1) << 30;
    // TCP only: the handshake must finish within this time.
    std::chrono::milliseconds handshakeTimeout{5000};
    // TCP only: address to listen on ("127.0.0.1" or "0.0.0.0").
    std::string bindAddress = "127.0.0.1";
    // Emulated slow links (link_shaper.h): this rank's sends to peer p are
    // paced by links[p]; missing entries are unlimited. See setLinkLimit().
    std::vector<LinkLimit> links;
};

enum class TransportKind { Inproc, Tcp };
const char *transportName(TransportKind kind);

class Transport {
public:
    virtual ~Transport();

    virtual TransportKind kind() const = 0;
    int rank() const { return m_rank; }
    int worldSize() const { return m_worldSize; }

    // Queue one frame for `peer`. Zero copy: [data, data + bytes) must stay
    // valid and unchanged until the ticket's wait() returns.
    virtual SendTicket send(int peer, const FrameMeta &meta, const void *data, std::size_t bytes) = 0;

    // The frame from `peer` with (meta.seq, meta.tag); waits at most
    // timeout(). Throws PeerLostError / PeerTimeoutError / ProtocolError.
    virtual Message recv(int peer, const FrameMeta &meta) = 0;

    // Like recv(), but the payload lands in [dst, dst + bytes); a frame of
    // another size is a ProtocolError. Transports may read straight into dst.
    virtual void recvInto(int peer, const FrameMeta &meta, void *dst, std::size_t bytes);

    // Post a receive ahead of its frame (zero copy where the transport can).
    virtual RecvHandle postRecv(int peer, const FrameMeta &meta, void *dst, std::size_t bytes);
    virtual void waitRecv(RecvHandle &handle);
    virtual void cancelRecv(RecvHandle &handle) noexcept;

    // Drop every connection at once, as if the process died. Peers waiting on
    // this rank fail with PeerLostError; this rank's waits fail too.
    virtual void abort() = 0;

    // The cluster is held by a pause (engine/breakpoints): while held, this
    // rank's receives wait without a timeout, since the peer they wait for
    // may be held, or waiting for one that is; released, each gets a whole
    // timeout again. A transport without waits of its own ignores it.
    virtual void holdWaits(bool held) { (void)held; }

    // Pace this rank's sends to `peer` (one direction; set both ranks for a
    // symmetric link). Any thread, any time: frames already on their way keep
    // the pace they left with, new bytes follow the new limit.
    void setLinkLimit(int peer, const LinkLimit &limit);
    LinkLimit linkLimit(int peer) const;

    // Not owned; nullptr detaches. When it returns, no I/O thread is still
    // inside the previous sink, so the caller may destroy it.
    void setTraceSink(TraceSink *sink);

    // Received payloads are recycled: a collective hands a payload back when
    // it has consumed it, and the I/O side reuses its memory for the next
    // frame instead of faulting in fresh pages (a few % of ring bandwidth).
    void recycle(Payload &&payload);
    Payload takeRecycled(std::size_t minCapacity);
    TraceSink *traceSink() const;
    const TransportOptions &options() const { return m_options; }

    // Human-readable reasons for connections this rank dropped (auth failures,
    // malformed frames), oldest first. Also logged through qWarning.
    std::vector<std::string> droppedReasons() const;

protected:
    Transport(int rank, int worldSize, TransportOptions options);
    void emitTrace(const struct FrameEvent &event) const;
    void noteDropped(const std::string &reason);
    // Called by setLinkLimit() after the new limit is stored.
    virtual void linkLimitChanged(int /*peer*/) {}

    const int m_rank;
    const int m_worldSize;
    const TransportOptions m_options;

private:
    struct Private;
    std::unique_ptr<Private> d;
};

// N connected transports in this process (ranks as threads): inproc queues,
// or TCP over loopback with the authentication handshake on every link.
std::vector<std::unique_ptr<Transport>> makeLocalMesh(TransportKind kind, int worldSize,
                                                       const std::string &token,
                                                       TransportOptions options = {});

// Makes room for `count` more open files in this process: raises the soft
// RLIMIT_NOFILE towards the hard limit when the current one is short (a
// desktop's default soft limit is often 1024; ranks as threads over TCP hold
// N(N-1) socket ends plus 2 per rank: 4160 for 64 ranks). Throws NetError
// naming both limits when even the hard limit is too low. makeLocalMesh
// calls it for TCP.
void reserveFileDescriptors(std::size_t count);

} // namespace smol::net
