#include "errors.h"

#include <cstring>

namespace smol::net {

static std::string located(const std::string &what, const char *file, int line)
{
    const char *base = std::strrchr(file, '/');
    return what + " [" + (base ? base + 1 : file) + ":" + std::to_string(line) + "]";
}

NetError::NetError(const std::string &what, const char *file, int line)
    : std::runtime_error(located(what, file, line))
{
}

PeerError::PeerError(int peer, const std::string &what, const char *file, int line)
    : NetError("peer " + std::to_string(peer) + ": " + what, file, line)
    , m_peer(peer)
{
}

} // namespace smol::net
