// In-memory transport: frames are copied into the destination rank's mailbox
// at send time, so a send completes at once. Same matching, timeouts, failure
// and tracing semantics as TCP, with no sockets: fast, deterministic tests.
#pragma once

#include "mailbox.h"
#include "transport.h"

#include <atomic>
#include <memory>
#include <vector>

namespace smol::net {

class InprocTransport;

// The shared medium of one in-process cluster.
class InprocFabric {
public:
    explicit InprocFabric(int worldSize);
    int worldSize() const { return int(m_ranks.size()); }

private:
    friend class InprocTransport;
    std::vector<InprocTransport *> m_ranks;
    std::unique_ptr<std::atomic<bool>[]> m_alive;
};

class InprocTransport final : public Transport {
public:
    InprocTransport(std::shared_ptr<InprocFabric> fabric, int rank, TransportOptions options = {});
    ~InprocTransport() override;

    TransportKind kind() const override { return TransportKind::Inproc; }
    SendTicket send(int peer, const FrameMeta &meta, const void *data, std::size_t bytes) override;
    Message recv(int peer, const FrameMeta &meta) override;
    void abort() override;

private:
    std::shared_ptr<InprocFabric> m_fabric;
    Mailbox m_mailbox;
};

} // namespace smol::net
