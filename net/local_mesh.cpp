// makeLocalMesh: N ranks of one process wired together, the way the tests,
// the benchmark and the GUI's embedded cluster start.
#include "errors.h"
#include "inproc_transport.h"
#include "tcp_transport.h"

#include <dirent.h>
#include <sys/resource.h>

namespace smol::net {

namespace {

// Descriptors open now (/proc/self/fd), or 0 when it cannot be read.
std::size_t openDescriptors()
{
    DIR *dir = ::opendir("/proc/self/fd");
    if (!dir)
        return 0;
    std::size_t n = 0;
    while (::readdir(dir))
        ++n;
    ::closedir(dir);
    return n > 3 ? n - 3 : 0; // ".", ".." and the directory's own descriptor
}

} // namespace

void reserveFileDescriptors(std::size_t count)
{
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0)
        return; // nothing known: let socket() report it
    const rlim_t wanted =
        rlim_t(openDescriptors() + count + 64); // 64: headroom for files, logs, the recorder
    if (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= wanted)
        return;
    const std::string need = "this needs about " + std::to_string(wanted) + " open files";
    if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < wanted)
        SMOL_THROW(NetError, need + ", more than the hard limit " + std::to_string(limit.rlim_max) +
                                 " (ulimit -Hn): raise it, use fewer nodes, or --transport inproc");
    const rlim_t was = limit.rlim_cur;
    limit.rlim_cur = wanted;
    if (::setrlimit(RLIMIT_NOFILE, &limit) != 0)
        SMOL_THROW(NetError, need + "; raising the limit from " + std::to_string(was) + " failed");
}

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
    // Per rank: a listening socket, an eventfd, and one socket end per peer.
    reserveFileDescriptors(std::size_t(worldSize) * std::size_t(worldSize + 1));
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
