// makeLocalMesh: N ranks of one process wired together, the way the tests,
// the benchmark and the GUI's embedded cluster start.
#include "inproc_transport.h"
#include "tcp_transport.h"

namespace smol::net {

std::vector<std::unique_ptr<Transport>> makeLocalMesh(TransportKind kind, int worldSize, const std::string &token,
                                                       TransportOptions options)
{
    std::vector<std::unique_ptr<Transport>> ranks;
    if (kind == TransportKind::Inproc) {
        auto fabric = std::make_shared<InprocFabric>(worldSize);
        for (int r = 0; r < worldSize; ++r)
            ranks.push_back(std::make_unique<InprocTransport>(fabric, r, options));
        return ranks;
    }
    std::vector<TcpTransport *> tcp;
    for (int r = 0; r < worldSize; ++r) {
        auto t = std::make_unique<TcpTransport>(r, worldSize, token, options);
        tcp.push_back(t.get());
        ranks.push_back(std::move(t));
    }
    // Rank i dials every lower rank; the lower rank's I/O thread answers.
    for (int i = 0; i < worldSize; ++i)
        for (int j = 0; j < i; ++j)
            tcp[std::size_t(i)]->connectTo(j, "127.0.0.1", tcp[std::size_t(j)]->listenPort());
    for (TcpTransport *t : tcp)
        t->waitForPeers(options.handshakeTimeout);
    return ranks;
}

} // namespace smol::net
