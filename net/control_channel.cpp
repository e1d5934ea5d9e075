#include "control_channel.h"

#include "auth.h"
#include "errors.h"
#include "socket_util.h"

#include <QJsonDocument>
#include <QtEndian>

#include <algorithm>
#include <arpa/inet.h>
#include <cstring>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace smol::net {

namespace {

constexpr char kMagic[4] = {'S', 'M', 'C', 'T'};
constexpr std::size_t kHeaderBytes = 16;

QByteArray controlToken(const std::string &token)
{
    return QByteArray("control:") + QByteArray::fromStdString(token);
}

// A read that waits as long as it takes (liveness is the heartbeat's job);
// close() shuts the socket down, which ends it at once.
void readAll(int fd, char *out, std::size_t n, const char *what)
{
    const auto forever = sock::Clock::now() + std::chrono::hours(24 * 20); // poll() takes int ms
    sock::readExact(fd, out, n, forever, what);
}

} // namespace

ControlChannel::ControlChannel(int fd) : m_fd(fd) {}

ControlChannel::~ControlChannel()
{
    close();
    sock::closeFd(m_fd);
}

std::unique_ptr<ControlChannel> ControlChannel::connect(const std::string &host, std::uint16_t port,
                                                        const std::string &token, std::chrono::milliseconds timeout,
                                                        int receiveBuffer)
{
    int fd = sock::connectTcp(host, port, timeout, receiveBuffer);
    try {
        auth::clientHandshake(fd, controlToken(token), /*myRank=*/1, /*expectedPeer=*/0, /*worldSize=*/2, timeout);
    } catch (...) {
        sock::closeFd(fd);
        throw;
    }
    return std::make_unique<ControlChannel>(fd);
}

void ControlChannel::acceptHandshake(int fd, const std::string &token, std::chrono::milliseconds timeout)
{
    acceptHandshake(fd, token, std::string(), timeout);
}

int ControlChannel::acceptHandshake(int fd, const std::string &token, const std::string &other,
                                    std::chrono::milliseconds timeout)
{
    const auto deadline = sock::Clock::now() + timeout;
    try {
        const QByteArray nonceA = auth::freshNonce();
        const QByteArray hello = auth::encodeHello(0, nonceA);
        sock::writeAll(fd, hello.constData(), std::size_t(hello.size()), deadline, "handshake hello");
        char proof[auth::kProofBytes];
        sock::readExact(fd, proof, sizeof proof, deadline, "handshake proof");
        int connector = -1;
        QByteArray nonceC;
        QByteArray key = controlToken(token);
        int which = 0;
        std::string err = auth::verifyProof(proof, key, 0, 2, nonceA, connector, nonceC);
        if (!err.empty() && !other.empty()) {
            const QByteArray otherKey = controlToken(other);
            if (auth::verifyProof(proof, otherKey, 0, 2, nonceA, connector, nonceC).empty()) {
                key = otherKey;
                which = 1;
                err.clear();
            }
        }
        if (!err.empty())
            SMOL_THROW(AuthError, err);
        const QByteArray accept = auth::encodeAccept(key, 0, connector, nonceA, nonceC);
        sock::writeAll(fd, accept.constData(), std::size_t(accept.size()), deadline, "handshake accept");
        return which;
    } catch (const AuthError &) {
        throw;
    } catch (const NetError &e) {
        SMOL_THROW(AuthError, std::string("control handshake failed: ") + e.what());
    }
}

void ControlChannel::send(const QJsonObject &json, const QByteArray &blob, std::chrono::milliseconds timeout)
{
    sendEncoded(QJsonDocument(json).toJson(QJsonDocument::Compact), blob, timeout);
}

void ControlChannel::sendEncoded(const QByteArray &body, const QByteArray &blob, std::chrono::milliseconds timeout)
{
    // The header and the JSON in one write: one segment for a small message.
    QByteArray head(int(kHeaderBytes), Qt::Uninitialized);
    std::memcpy(head.data(), kMagic, 4);
    qToLittleEndian<std::uint32_t>(std::uint32_t(body.size()), head.data() + 4);
    qToLittleEndian<std::uint64_t>(std::uint64_t(blob.size()), head.data() + 8);
    head += body;
    std::lock_guard lock(m_sendMutex);
    if (!isOpen())
        SMOL_THROW(NetError, "control connection is closed");
    const auto deadline = sock::Clock::now() + timeout;
    try {
        sock::writeAll(m_fd, head.constData(), std::size_t(head.size()), deadline, "control message");
        if (!blob.isEmpty())
            sock::writeAll(m_fd, blob.constData(), std::size_t(blob.size()), deadline, "control blob");
    } catch (const NetError &) {
        close();
        throw;
    }
}

ControlMessage ControlChannel::receive()
{
    char header[kHeaderBytes];
    readAll(m_fd, header, kHeaderBytes, "control message");
    if (std::memcmp(header, kMagic, 4) != 0)
        SMOL_THROW(ProtocolError, "control message without the SMCT magic");
    const std::uint32_t jsonBytes = qFromLittleEndian<std::uint32_t>(header + 4);
    const std::uint64_t blobBytes = qFromLittleEndian<std::uint64_t>(header + 8);
    if (jsonBytes == 0 || jsonBytes > m_maxJson)
        SMOL_THROW(ProtocolError, "control message claims " + std::to_string(jsonBytes) + " bytes of JSON");
    if (blobBytes > m_maxBlob)
        SMOL_THROW(ProtocolError, "control message claims a blob of " + std::to_string(blobBytes) + " bytes");
    QByteArray body(int(jsonBytes), Qt::Uninitialized);
    readAll(m_fd, body.data(), jsonBytes, "control message");
    QJsonParseError perr{};
    const QJsonDocument doc = QJsonDocument::fromJson(body, &perr);
    if (perr.error != QJsonParseError::NoError || !doc.isObject())
        SMOL_THROW(ProtocolError, "control message is not a JSON object: " + perr.errorString().toStdString());
    ControlMessage m;
    m.json = doc.object();
    m.wireBytes = kHeaderBytes + jsonBytes + blobBytes;
    if (!m.json.value(QStringLiteral("type")).isString())
        SMOL_THROW(ProtocolError, "control message without a type");
    if (blobBytes > 0) {
        // Grow as bytes arrive, so a lying length costs at most what was sent.
        constexpr std::uint64_t kStep = 8u << 20;
        while (std::uint64_t(m.blob.size()) < blobBytes) {
            const std::uint64_t piece = std::min<std::uint64_t>(kStep, blobBytes - std::uint64_t(m.blob.size()));
            const qsizetype at = m.blob.size();
            m.blob.resize(at + qsizetype(piece));
            readAll(m_fd, m.blob.data() + at, piece, "control blob");
        }
    }
    return m;
}

void ControlChannel::setReceiveLimits(std::uint32_t maxJsonBytes, std::uint64_t maxBlobBytes)
{
    m_maxJson = std::min(maxJsonBytes, kMaxControlJsonBytes);
    m_maxBlob = std::min(maxBlobBytes, kMaxControlBlobBytes);
}

void ControlChannel::setKernelBuffer(bool send, int bytes)
{
    ::setsockopt(m_fd, SOL_SOCKET, send ? SO_SNDBUF : SO_RCVBUF, &bytes, sizeof bytes);
}

bool ControlChannel::waitReadable(std::chrono::milliseconds timeout) const
{
    pollfd p{m_fd, POLLIN, 0};
    return ::poll(&p, 1, int(timeout.count())) > 0;
}

void ControlChannel::close()
{
    std::lock_guard lock(m_stateMutex);
    if (m_closed)
        return;
    m_closed = true;
    if (m_fd >= 0)
        ::shutdown(m_fd, SHUT_RDWR);
}

bool ControlChannel::isOpen() const
{
    std::lock_guard lock(m_stateMutex);
    return !m_closed;
}

namespace {
std::string addressText(int fd, int (*get)(int, sockaddr *, socklen_t *))
{
    sockaddr_in addr{};
    socklen_t len = sizeof addr;
    if (get(fd, reinterpret_cast<sockaddr *>(&addr), &len) != 0)
        return "?";
    char text[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &addr.sin_addr, text, sizeof text);
    return text;
}
} // namespace

std::string ControlChannel::peerAddress() const { return addressText(m_fd, ::getpeername); }

std::string ControlChannel::localAddress() const { return addressText(m_fd, ::getsockname); }

} // namespace smol::net
