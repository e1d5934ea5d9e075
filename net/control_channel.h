// The control plane between the coordinator and each node: one authenticated
// TCP connection per node carrying small JSON messages, each optionally
// followed by a binary blob (parameters for a checkpoint, packed trace
// events). The data plane (node <-> node collectives) is TcpTransport.
//
// Handshake: the same HMAC challenge/response as the data plane (auth.h),
// keyed with a separate derivation of the cluster token ("control:" + token),
// acceptor rank 0 (the coordinator), connector rank 1, world 2; so a data
// plane proof can never be replayed on the control port and vice versa.
//
// Message on the wire (little-endian):
//   0   4  magic "SMCT"
//   4   4  u32 JSON length (1 .. 16 MiB)
//   8   8  u64 blob length (0 .. 1 GiB)
//   16     JSON object (UTF-8), then the blob
// Anything else closes the connection with a one-line reason.
#pragma once

#include <QByteArray>
#include <QJsonObject>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace smol::net {

struct ControlMessage {
    QJsonObject json;
    QByteArray blob;
    std::string type() const { return json.value(QStringLiteral("type")).toString().toStdString(); }
};

constexpr std::uint32_t kMaxControlJsonBytes = 16u << 20;
constexpr std::uint64_t kMaxControlBlobBytes = std::uint64_t(1) << 30;

class ControlChannel {
public:
    // Takes ownership of a connected, authenticated fd.
    explicit ControlChannel(int fd);
    ~ControlChannel();
    ControlChannel(const ControlChannel &) = delete;
    ControlChannel &operator=(const ControlChannel &) = delete;

    // Node side: connect to host:port and authenticate. Throws AuthError /
    // NetError with a one-line reason.
    static std::unique_ptr<ControlChannel> connect(const std::string &host, std::uint16_t port,
                                                   const std::string &token, std::chrono::milliseconds timeout);
    // Coordinator side, on a freshly accepted fd (blocking): throws AuthError
    // (the caller closes the fd) when the peer does not prove the token.
    static void acceptHandshake(int fd, const std::string &token, std::chrono::milliseconds timeout);

    // Thread-safe; a send that cannot finish within `timeout` closes the
    // channel and throws NetError.
    void send(const QJsonObject &json, const QByteArray &blob = {},
              std::chrono::milliseconds timeout = std::chrono::seconds(30));
    // One reader thread at a time. Blocks until a message arrives or the
    // channel closes (NetError / ProtocolError, with the reason).
    ControlMessage receive();
    // Wake a blocked receive() and refuse further traffic (any thread).
    void close();
    // The peer's IPv4 address as text ("127.0.0.1").
    std::string peerAddress() const;
    // This end's IPv4 address as text: the address the peer reached us at.
    std::string localAddress() const;
    bool isOpen() const;
    int fdForTesting() const { return m_fd; } // tests write raw bytes past the framing

private:
    int m_fd = -1;
    std::mutex m_sendMutex;
    mutable std::mutex m_stateMutex;
    bool m_closed = false;
};

} // namespace smol::net
