// Thin POSIX socket helpers for the TCP data path (see docs/protocol.md for
// why the data path uses POSIX sockets rather than QTcpSocket). Blocking
// helpers take a deadline and throw NetError; nothing waits forever.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace smol::net::sock {

using Clock = std::chrono::steady_clock;

// A listening socket bound to host:port (port 0 = any); returns the fd.
int listenTcp(const std::string &host, std::uint16_t port, std::uint16_t *boundPort);
// Connect to host:port within `timeout`; returns a blocking fd with TCP_NODELAY.
// receiveBuffer > 0: the socket's kernel receive buffer, set before the
// connection so its window starts that small.
int connectTcp(const std::string &host, std::uint16_t port, std::chrono::milliseconds timeout,
               int receiveBuffer = 0);
void readExact(int fd, char *out, std::size_t n, Clock::time_point deadline, const char *what);
void writeAll(int fd, const char *data, std::size_t n, Clock::time_point deadline, const char *what);
void setNonBlocking(int fd, bool on);
void tuneDataSocket(int fd); // TCP_NODELAY and large kernel buffers
void closeFd(int &fd);
// True when `host` could be an address to dial: an IPv4 literal or a DNS
// name (letters, digits, '-', '.', at most 253 characters). Text from the
// network (an advertised address) is checked with it before use.
bool isPlausibleHost(const std::string &host);
// True for 127.0.0.0/8 (and "localhost").
bool isLoopbackHost(const std::string &host);

} // namespace smol::net::sock
