#include "inproc_transport.h"

#include "errors.h"
#include "send_state.h"
#include "trace.h"

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
{
    m_fabric->m_ranks[std::size_t(rank)] = this;
}

InprocTransport::~InprocTransport()
{
    abort();
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
    } else if (!dst || !m_fabric->m_alive[std::size_t(peer)]) {
        state->finish("connection lost");
    } else {
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
    return SendTicket(std::move(state));
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
