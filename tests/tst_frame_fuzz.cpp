// Malformed input, seeded: 100k random and mutated frames through the decoder,
// then streams of mutated frames thrown at a real listening TCP node, both
// after a valid handshake and without one. Nothing may crash, hang or
// allocate what a frame merely claims; bad connections are closed with a
// reason that names the peer.
#include "net/auth.h"
#include "net/frame.h"
#include "net/socket_util.h"
#include "net/tcp_transport.h"

#include <QtTest>

#include <QRandomGenerator>

#include <cstring>
#include <fstream>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

using namespace smol::net;

class TestFrameFuzz : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void decoderSurvivesMutations();
    void listeningNodeSurvivesMutatedStreams();
    void unauthenticatedGarbageIsDropped();
    void hugeClaimDoesNotAllocate();
};

namespace {

constexpr std::uint64_t kCap = std::uint64_t(1) << 30;

QByteArray validFrame(QRandomGenerator &rng, int src, int dst)
{
    FrameHeader h;
    h.src = src;
    h.dst = dst;
    h.meta.kind = CollectiveKind(rng.bounded(0, 11));
    h.meta.seq = rng.generate64() % 1000;
    h.meta.tag = rng.generate();
    h.meta.dtype = DType(rng.bounded(1, 6));
    const std::size_t elems = rng.bounded(0, 64);
    if (rng.bounded(2)) {
        h.meta.shape = Shape::vector(std::int64_t(elems));
    }
    h.payloadBytes = elems * dtypeSize(h.meta.dtype);
    QByteArray out(int(kHeaderBytes), '\0');
    encodeHeader(h, out.data());
    for (std::size_t i = 0; i < h.payloadBytes; ++i)
        out.append(char(rng.generate()));
    return out;
}

// One of: a valid frame, a valid frame with flipped bits, with random bytes
// written over a header field, truncated, with a random length, pure noise.
QByteArray mutatedFrame(QRandomGenerator &rng, int src, int dst)
{
    QByteArray f = validFrame(rng, src, dst);
    switch (rng.bounded(6)) {
    case 0:
        break;
    case 1:
        for (int k = 0, n = rng.bounded(1, 4); k < n; ++k)
            f[rng.bounded(f.size())] = char(f[rng.bounded(f.size())] ^ (1 << rng.bounded(8)));
        break;
    case 2: {
        const int at = rng.bounded(int(kHeaderBytes) - 8);
        for (int k = 0; k < 8; ++k)
            f[at + k] = char(rng.generate());
        break;
    }
    case 3:
        f.truncate(rng.bounded(f.size() + 1));
        break;
    case 4: {
        const std::uint64_t claimed = rng.generate64() % (kCap * 4);
        qToLittleEndian(claimed, f.data() + 104);
        break;
    }
    default:
        f = QByteArray(rng.bounded(1, 400), '\0');
        for (auto &c : f)
            c = char(rng.generate());
        break;
    }
    return f;
}

long residentBytes()
{
    std::ifstream statm("/proc/self/statm");
    long pages = 0, resident = 0;
    statm >> pages >> resident;
    return resident * sysconf(_SC_PAGESIZE);
}

// True when the server closed the connection within `ms`.
bool closedByPeer(int fd, int ms)
{
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    char buf[256];
    while (std::chrono::steady_clock::now() < deadline) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 50) > 0) {
            const ssize_t r = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
            if (r == 0 || (r < 0 && errno == ECONNRESET))
                return true;
        }
    }
    return false;
}

} // namespace

void TestFrameFuzz::decoderSurvivesMutations()
{
    QRandomGenerator rng(20261130);
    int decoded = 0, rejected = 0;
    for (int i = 0; i < 100000; ++i) {
        FrameDecoder dec(1, 0, kCap);
        const QByteArray f = mutatedFrame(rng, 1, 0);
        const bool ok = dec.feed(f.constData(), std::size_t(f.size()), [&](Message &&) { ++decoded; });
        if (!ok) {
            ++rejected;
            QVERIFY(!dec.error().empty());
        }
        // Never more than the initial buffer for what is at most a few KiB.
        QVERIFY(dec.bufferedCapacity() <= (std::size_t(1) << 20));
    }
    qInfo("100000 frames: %d decoded, %d rejected", decoded, rejected);
    QVERIFY(decoded > 10000);
    QVERIFY(rejected > 10000);
}

void TestFrameFuzz::listeningNodeSurvivesMutatedStreams()
{
    TransportOptions opts;
    opts.handshakeTimeout = std::chrono::milliseconds(2000);
    TcpTransport node(0, 2, "fuzz-token", opts);
    QRandomGenerator rng(99);
    const QByteArray token("fuzz-token");
    int frames = 0, closedConnections = 0;
    const int connections = 300;
    for (int c = 0; c < connections; ++c) {
        int fd = sock::connectTcp("127.0.0.1", node.listenPort(), std::chrono::milliseconds(2000));
        auth::clientHandshake(fd, token, 1, 0, 2, std::chrono::milliseconds(2000));
        QTRY_VERIFY_WITH_TIMEOUT(node.isConnected(1), 2000);
        // Keep writing frames until the node hangs up (or 400 frames pass).
        QByteArray stream;
        for (int k = 0; k < 400; ++k) {
            stream += mutatedFrame(rng, 1, 0);
            ++frames;
        }
        sock::setNonBlocking(fd, true);
        for (int at = 0; at < stream.size();) {
            const ssize_t w = ::send(fd, stream.constData() + at, std::size_t(stream.size() - at), MSG_NOSIGNAL);
            if (w <= 0)
                break;
            at += int(w);
        }
        ::shutdown(fd, SHUT_WR);
        if (closedByPeer(fd, 3000))
            ++closedConnections;
        ::close(fd);
        QTRY_VERIFY_WITH_TIMEOUT(!node.isConnected(1), 3000);
    }
    qInfo("%d frames offered over %d connections; %d reasons logged", frames, connections,
          int(node.droppedReasons().size()));
    QCOMPARE(closedConnections, connections);
    const auto reasons = node.droppedReasons();
    QVERIFY(reasons.size() > std::size_t(connections / 2));
    for (const auto &r : reasons)
        QVERIFY2(r.find("rank 1") != std::string::npos, r.c_str());
}

void TestFrameFuzz::unauthenticatedGarbageIsDropped()
{
    TransportOptions opts;
    opts.handshakeTimeout = std::chrono::milliseconds(500);
    TcpTransport node(0, 2, "fuzz-token", opts);
    QRandomGenerator rng(5);
    for (int c = 0; c < 200; ++c) {
        int fd = sock::connectTcp("127.0.0.1", node.listenPort(), std::chrono::milliseconds(2000));
        const QByteArray f = mutatedFrame(rng, 1, 0) + QByteArray(100, '\x01');
        ::send(fd, f.constData(), std::size_t(f.size()), MSG_NOSIGNAL);
        QVERIFY2(closedByPeer(fd, 3000), "the node kept an unauthenticated connection open");
        ::close(fd);
    }
    QVERIFY(!node.isConnected(1));
    QVERIFY(node.droppedReasons().size() >= 200);
}

void TestFrameFuzz::hugeClaimDoesNotAllocate()
{
    TcpTransport node(0, 2, "fuzz-token");
    const long before = residentBytes();
    std::vector<int> fds;
    for (int c = 0; c < 8; ++c) {
        int fd = sock::connectTcp("127.0.0.1", node.listenPort(), std::chrono::milliseconds(2000));
        auth::clientHandshake(fd, "fuzz-token", 1, 0, 2, std::chrono::milliseconds(2000));
        FrameHeader h;
        h.src = 1;
        h.dst = 0;
        h.meta.dtype = DType::UInt8;
        h.payloadBytes = kCap; // the largest legal claim, then silence
        char hdr[kHeaderBytes];
        encodeHeader(h, hdr);
        ::send(fd, hdr, sizeof hdr, MSG_NOSIGNAL);
        ::send(fd, "abcdefgh", 8, MSG_NOSIGNAL);
        QTest::qWait(50);
        const long grown = residentBytes() - before;
        QVERIFY2(grown < 64L << 20, qPrintable(QString("resident memory grew by %1 bytes").arg(grown)));
        ::close(fd);
        QTRY_VERIFY_WITH_TIMEOUT(!node.isConnected(1), 3000);
    }
}

QTEST_GUILESS_MAIN(TestFrameFuzz)
#include "tst_frame_fuzz.moc"
