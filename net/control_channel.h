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
    std::size_t wireBytes = 0; // as received: header, JSON and blob
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
    // receiveBuffer > 0: the kernel's receive buffer, from the start.
    static std::unique_ptr<ControlChannel> connect(const std::string &host, std::uint16_t port,
                                                   const std::string &token, std::chrono::milliseconds timeout,
                                                   int receiveBuffer = 0);
    // Coordinator side, on a freshly accepted fd (blocking): throws AuthError
    // (the caller closes the fd) when the peer does not prove the token.
    static void acceptHandshake(int fd, const std::string &token, std::chrono::milliseconds timeout);
    // The same with a second token a peer may prove instead ("" = none):
    // returns 0 when the peer proved `token`, 1 when it proved `other`.
    static int acceptHandshake(int fd, const std::string &token, const std::string &other,
                               std::chrono::milliseconds timeout);

    // Thread-safe; a send that cannot finish within `timeout` closes the
    // channel and throws NetError.
    void send(const QJsonObject &json, const QByteArray &blob = {},
              std::chrono::milliseconds timeout = std::chrono::seconds(30));
    // The same with the JSON already encoded (compact, one object): a
    // message sent to many peers is encoded once.
    void sendEncoded(const QByteArray &json, const QByteArray &blob, std::chrono::milliseconds timeout);
    // One reader thread at a time. Blocks until a message arrives or the
    // channel closes (NetError / ProtocolError, with the reason).
    ControlMessage receive();
    // What receive() accepts from this peer (a viewer's channel takes small
    // messages only); a message over either is a ProtocolError.
    void setReceiveLimits(std::uint32_t maxJsonBytes, std::uint64_t maxBlobBytes);
    // The kernel's send or receive buffer for this socket, in bytes (a
    // viewer's stream: a reader that stalls shows within seconds).
    void setKernelBuffer(bool send, int bytes);
    // Whether a message can be read within `timeout` (false at the timeout).
    bool waitReadable(std::chrono::milliseconds timeout) const;
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
    std::uint32_t m_maxJson = kMaxControlJsonBytes;
    std::uint64_t m_maxBlob = kMaxControlBlobBytes;
};

} // namespace smol::net
