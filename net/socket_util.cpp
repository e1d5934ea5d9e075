#include "socket_util.h"

#include "errors.h"

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace smol::net::sock {

namespace {

std::string errnoText(const std::string &what)
{
    return what + ": " + std::strerror(errno);
}

int msUntil(Clock::time_point deadline)
{
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return left < 0 ? 0 : int(left);
}

bool resolve(const std::string &host, std::uint16_t port, sockaddr_in &addr)
{
    std::memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) == 1)
        return true;
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo *res = nullptr;
    if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || !res)
        return false;
    addr.sin_addr = reinterpret_cast<sockaddr_in *>(res->ai_addr)->sin_addr;
    freeaddrinfo(res);
    return true;
}

// A new TCP socket (close-on-exec) and host:port resolved into addr; a host
// that does not resolve throws `unresolved` + host.
int openTcpSocket(const std::string &host, std::uint16_t port, sockaddr_in &addr, const char *unresolved)
{
    if (!resolve(host, port, addr))
        SMOL_THROW(NetError, unresolved + host);
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        SMOL_THROW(NetError, errnoText("socket"));
    return fd;
}

} // namespace

int listenTcp(const std::string &host, std::uint16_t port, std::uint16_t *boundPort)
{
    sockaddr_in addr;
    const int fd = openTcpSocket(host, port, addr, "cannot resolve listen address ");
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) < 0 || ::listen(fd, 128) < 0) {
        const std::string err = errnoText("listen on " + host + ":" + std::to_string(port));
        ::close(fd);
        SMOL_THROW(NetError, err);
    }
    socklen_t len = sizeof addr;
    ::getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len);
    if (boundPort)
        *boundPort = ntohs(addr.sin_port);
    return fd;
}

int connectTcp(const std::string &host, std::uint16_t port, std::chrono::milliseconds timeout, int receiveBuffer)
{
    sockaddr_in addr;
    const int fd = openTcpSocket(host, port, addr, "cannot resolve ");
    if (receiveBuffer > 0)
        ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receiveBuffer, sizeof receiveBuffer);
    setNonBlocking(fd, true);
    const std::string where = host + ":" + std::to_string(port);
    if (::connect(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) < 0 && errno != EINPROGRESS) {
        const std::string err = errnoText("connect to " + where);
        ::close(fd);
        SMOL_THROW(NetError, err);
    }
    pollfd p{fd, POLLOUT, 0};
    const int rc = ::poll(&p, 1, int(timeout.count()));
    int soerr = 0;
    socklen_t len = sizeof soerr;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len);
    if (rc <= 0 || soerr != 0) {
        ::close(fd);
        SMOL_THROW(NetError, "connect to " + where + ": " +
                                 (rc <= 0 ? std::string("timed out") : std::string(std::strerror(soerr))));
    }
    setNonBlocking(fd, false);
    tuneDataSocket(fd);
    return fd;
}

void readExact(int fd, char *out, std::size_t n, Clock::time_point deadline, const char *what)
{
    std::size_t got = 0;
    while (got < n) {
        pollfd p{fd, POLLIN, 0};
        const int rc = ::poll(&p, 1, msUntil(deadline));
        if (rc == 0)
            SMOL_THROW(NetError, std::string("timed out reading ") + what);
        if (rc < 0 && errno != EINTR)
            SMOL_THROW(NetError, errnoText(std::string("poll while reading ") + what));
        if (rc < 0)
            continue;
        const ssize_t r = ::recv(fd, out + got, n - got, MSG_DONTWAIT);
        if (r == 0)
            SMOL_THROW(NetError, std::string("connection closed while reading ") + what);
        if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            SMOL_THROW(NetError, errnoText(std::string("reading ") + what));
        if (r > 0)
            got += std::size_t(r);
    }
}

void writeAll(int fd, const char *data, std::size_t n, Clock::time_point deadline, const char *what)
{
    std::size_t put = 0;
    while (put < n) {
        pollfd p{fd, POLLOUT, 0};
        const int rc = ::poll(&p, 1, msUntil(deadline));
        if (rc == 0)
            SMOL_THROW(NetError, std::string("timed out writing ") + what);
        if (rc < 0)
            continue;
        const ssize_t w = ::send(fd, data + put, n - put, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            SMOL_THROW(NetError, errnoText(std::string("writing ") + what));
        if (w > 0)
            put += std::size_t(w);
    }
}

void setNonBlocking(int fd, bool on)
{
    const int flags = ::fcntl(fd, F_GETFL, 0);
    ::fcntl(fd, F_SETFL, on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK));
}

void tuneDataSocket(int fd)
{
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void closeFd(int &fd)
{
    if (fd >= 0)
        ::close(fd);
    fd = -1;
}

bool isPlausibleHost(const std::string &host)
{
    if (host.empty() || host.size() > 253 || host.front() == '-' || host.front() == '.')
        return false;
    for (const char ch : host)
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-' ||
              ch == '.'))
            return false;
    return true;
}

bool isLoopbackHost(const std::string &host)
{
    return host == "localhost" || host.rfind("127.", 0) == 0;
}

} // namespace smol::net::sock
