// Typed errors of the network layer. NetError and its children are
// recoverable I/O conditions (a peer left, a frame was malformed, a token was
// wrong): catch them at thread tops and turn them into a message. Each carries
// the file:line that raised it and, where one is involved, the peer's rank.
#pragma once

#include <stdexcept>
#include <string>

namespace smol::net {

class NetError : public std::runtime_error {
public:
    NetError(const std::string &what, const char *file, int line);
};

// A frame that violates docs/protocol.md.
class ProtocolError : public NetError {
public:
    using NetError::NetError;
};

// Handshake failed: wrong token, wrong magic, or a peer that spoke out of turn.
class AuthError : public NetError {
public:
    using NetError::NetError;
};

class PeerError : public NetError {
public:
    PeerError(int peer, const std::string &what, const char *file, int line);
    int peer() const { return m_peer; }

private:
    int m_peer;
};

// The connection to the peer closed or broke.
class PeerLostError : public PeerError {
public:
    using PeerError::PeerError;
};

// The peer stayed silent past the configured timeout.
class PeerTimeoutError : public PeerError {
public:
    using PeerError::PeerError;
};

} // namespace smol::net

#define SMOL_THROW(Type, ...) throw Type(__VA_ARGS__, __FILE__, __LINE__)
