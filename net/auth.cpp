#include "auth.h"

#include "errors.h"
#include "socket_util.h"

#include <QMessageAuthenticationCode>
#include <QRandomGenerator>
#include <QtEndian>

#include <cstring>

namespace smol::net::auth {

namespace {

constexpr char kHelloMagic[8] = {'S', 'M', 'O', 'L', 'H', 'E', 'L', 'O'};
constexpr char kProofMagic[8] = {'S', 'M', 'O', 'L', 'A', 'U', 'T', 'H'};
constexpr char kAcceptMagic[8] = {'S', 'M', 'O', 'L', 'O', 'K', 'A', 'Y'};
constexpr std::uint16_t kAuthVersion = 1;

void appendI32(QByteArray &out, std::int32_t v)
{
    char b[4];
    qToLittleEndian(v, b);
    out.append(b, 4);
}

QByteArray mac(const QByteArray &token, const QByteArray &message)
{
    return QMessageAuthenticationCode::hash(message, token, QCryptographicHash::Sha256);
}

bool constantTimeEqual(const char *a, const char *b, std::size_t n)
{
    unsigned char diff = 0;
    for (std::size_t i = 0; i < n; ++i)
        diff |= static_cast<unsigned char>(a[i] ^ b[i]);
    return diff == 0;
}

QByteArray clientMessage(int connectorRank, int acceptorRank, int worldSize, const QByteArray &nonceA,
                         const QByteArray &nonceC)
{
    QByteArray m("c");
    m += nonceA;
    m += nonceC;
    appendI32(m, connectorRank);
    appendI32(m, acceptorRank);
    appendI32(m, worldSize);
    return m;
}

QByteArray serverMessage(int acceptorRank, int connectorRank, const QByteArray &nonceA, const QByteArray &nonceC)
{
    QByteArray m("s");
    m += nonceC;
    m += nonceA;
    appendI32(m, acceptorRank);
    appendI32(m, connectorRank);
    return m;
}

// What a peer sent instead of a magic, as hex ("7e 4d 2e 60 ..."): the bytes
// are untrusted and never reach a log as text, and a reader sees at a
// glance whether it was HTTP ("47 45 54 20") or TLS ("16 03 01").
std::string hexPrefix(const char *in, std::size_t n)
{
    static const char kDigits[] = "0123456789abcdef";
    std::string s;
    for (std::size_t i = 0; i < n; ++i) {
        const auto b = static_cast<unsigned char>(in[i]);
        if (i > 0)
            s += ' ';
        s += kDigits[b >> 4];
        s += kDigits[b & 15];
    }
    return s;
}

} // namespace

QByteArray freshNonce()
{
    QByteArray n(int(kNonceBytes), Qt::Uninitialized);
    QRandomGenerator::system()->fillRange(reinterpret_cast<quint32 *>(n.data()), int(kNonceBytes / 4));
    return n;
}

QByteArray encodeHello(int acceptorRank, const QByteArray &nonceA)
{
    QByteArray out(kHelloMagic, 8);
    char v[2];
    qToLittleEndian(kAuthVersion, v);
    out.append(v, 2);
    appendI32(out, acceptorRank);
    out += nonceA;
    return out;
}

std::string parseHello(const char *in, int &acceptorRank, QByteArray &nonceA)
{
    if (std::memcmp(in, kHelloMagic, 8) != 0)
        return "expected SMOLHELO, got " + hexPrefix(in, 8);
    if (qFromLittleEndian<std::uint16_t>(in + 8) != kAuthVersion)
        return "unsupported handshake version";
    acceptorRank = qFromLittleEndian<std::int32_t>(in + 10);
    nonceA = QByteArray(in + 14, int(kNonceBytes));
    return {};
}

QByteArray encodeProof(const QByteArray &token, int connectorRank, int acceptorRank, int worldSize,
                       const QByteArray &nonceA, const QByteArray &nonceC)
{
    QByteArray out(kProofMagic, 8);
    char v[2];
    qToLittleEndian(kAuthVersion, v);
    out.append(v, 2);
    appendI32(out, connectorRank);
    appendI32(out, worldSize);
    out += nonceC;
    out += mac(token, clientMessage(connectorRank, acceptorRank, worldSize, nonceA, nonceC));
    return out;
}

std::string verifyProof(const char *in, const QByteArray &token, int acceptorRank, int worldSize,
                        const QByteArray &nonceA, int &connectorRank, QByteArray &nonceC)
{
    if (std::memcmp(in, kProofMagic, 8) != 0)
        return "expected SMOLAUTH first, got " + hexPrefix(in, 8);
    if (qFromLittleEndian<std::uint16_t>(in + 8) != kAuthVersion)
        return "unsupported handshake version";
    connectorRank = qFromLittleEndian<std::int32_t>(in + 10);
    const int world = qFromLittleEndian<std::int32_t>(in + 14);
    nonceC = QByteArray(in + 18, int(kNonceBytes));
    const QByteArray expected = mac(token, clientMessage(connectorRank, acceptorRank, world, nonceA, nonceC));
    if (!constantTimeEqual(expected.constData(), in + 18 + kNonceBytes, kMacBytes))
        return "wrong token (HMAC mismatch) from a peer claiming rank " + std::to_string(connectorRank);
    if (world != worldSize)
        return "peer rank " + std::to_string(connectorRank) + " expects world size " + std::to_string(world) +
               ", this cluster has " + std::to_string(worldSize);
    if (connectorRank < 0 || connectorRank >= worldSize || connectorRank == acceptorRank)
        return "invalid peer rank " + std::to_string(connectorRank);
    return {};
}

QByteArray encodeAccept(const QByteArray &token, int acceptorRank, int connectorRank, const QByteArray &nonceA,
                        const QByteArray &nonceC)
{
    QByteArray out(kAcceptMagic, 8);
    out += mac(token, serverMessage(acceptorRank, connectorRank, nonceA, nonceC));
    return out;
}

std::string verifyAccept(const char *in, const QByteArray &token, int acceptorRank, int connectorRank,
                         const QByteArray &nonceA, const QByteArray &nonceC)
{
    if (std::memcmp(in, kAcceptMagic, 8) != 0)
        return "expected SMOLOKAY, got " + hexPrefix(in, 8);
    const QByteArray expected = mac(token, serverMessage(acceptorRank, connectorRank, nonceA, nonceC));
    if (!constantTimeEqual(expected.constData(), in + 8, kMacBytes))
        return "peer failed to prove the token (HMAC mismatch)";
    return {};
}

void clientHandshake(int fd, const QByteArray &token, int myRank, int expectedPeer, int worldSize,
                     std::chrono::milliseconds timeout)
{
    const auto deadline = sock::Clock::now() + timeout;
    const std::string who = "rank " + std::to_string(expectedPeer);
    // A listener that closes before its hello never saw a proof: a plain
    // I/O error (a busy coordinator refusing handshakes), worth a retry.
    char hello[kHelloBytes];
    sock::readExact(fd, hello, sizeof hello, deadline, "handshake hello");
    try {
        int acceptorRank = -1;
        QByteArray nonceA;
        if (std::string err = parseHello(hello, acceptorRank, nonceA); !err.empty())
            SMOL_THROW(AuthError, who + ": " + err);
        if (acceptorRank != expectedPeer)
            SMOL_THROW(AuthError, who + ": the listener says it is rank " + std::to_string(acceptorRank));
        const QByteArray nonceC = freshNonce();
        const QByteArray proof = encodeProof(token, myRank, acceptorRank, worldSize, nonceA, nonceC);
        sock::writeAll(fd, proof.constData(), std::size_t(proof.size()), deadline, "handshake proof");
        char accept[kAcceptBytes];
        sock::readExact(fd, accept, sizeof accept, deadline, "handshake accept (wrong token?)");
        if (std::string err = verifyAccept(accept, token, acceptorRank, myRank, nonceA, nonceC); !err.empty())
            SMOL_THROW(AuthError, who + ": " + err);
    } catch (const AuthError &) {
        throw;
    } catch (const NetError &e) {
        SMOL_THROW(AuthError, who + ": handshake failed: " + e.what());
    }
}

} // namespace smol::net::auth
