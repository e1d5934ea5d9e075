// Connection authentication: HMAC-SHA256 challenge/response over fresh
// nonces, both directions, so the cluster token never travels and neither
// side can be impersonated by a peer that does not know it.
//
//   acceptor  -> connector : HELLO  "SMOLHELO" ver acceptorRank nonceA          (46 B)
//   connector -> acceptor  : PROOF  "SMOLAUTH" ver connectorRank world nonceC
//                                   HMAC(token, "c" nonceA nonceC ranks world)   (82 B)
//   acceptor  -> connector : ACCEPT "SMOLOKAY" HMAC(token, "s" nonceC nonceA ranks) (40 B)
//
// The acceptor sends nothing else and reads exactly 82 bytes before deciding:
// a peer that sends anything else first (or too slowly) is dropped. A
// refusal names what came instead of a magic by its first 8 bytes in hex
// ("expected SMOLAUTH first, got 47 45 54 20 2f 20 48 54"), never as text.
#pragma once

#include <QByteArray>

#include <chrono>
#include <cstddef>
#include <string>

namespace smol::net::auth {

constexpr std::size_t kNonceBytes = 32;
constexpr std::size_t kMacBytes = 32;
constexpr std::size_t kHelloBytes = 8 + 2 + 4 + kNonceBytes;
constexpr std::size_t kProofBytes = 8 + 2 + 4 + 4 + kNonceBytes + kMacBytes;
constexpr std::size_t kAcceptBytes = 8 + kMacBytes;

QByteArray freshNonce();

QByteArray encodeHello(int acceptorRank, const QByteArray &nonceA);
std::string parseHello(const char *in, int &acceptorRank, QByteArray &nonceA);

QByteArray encodeProof(const QByteArray &token, int connectorRank, int acceptorRank, int worldSize,
                       const QByteArray &nonceA, const QByteArray &nonceC);
// Empty string if the proof is valid; fills connectorRank.
std::string verifyProof(const char *in, const QByteArray &token, int acceptorRank, int worldSize,
                        const QByteArray &nonceA, int &connectorRank, QByteArray &nonceC);

QByteArray encodeAccept(const QByteArray &token, int acceptorRank, int connectorRank, const QByteArray &nonceA,
                        const QByteArray &nonceC);
std::string verifyAccept(const char *in, const QByteArray &token, int acceptorRank, int connectorRank,
                         const QByteArray &nonceA, const QByteArray &nonceC);

// The connector's side on a connected blocking fd. Throws AuthError.
void clientHandshake(int fd, const QByteArray &token, int myRank, int expectedPeer, int worldSize,
                     std::chrono::milliseconds timeout);

} // namespace smol::net::auth
