// The connection handshake: the right token gets a working link, a wrong
// token or anything else first gets dropped with a logged reason (naming
// the garbage in hex only), the token never travels, and a listener that
// does not know the token is refused too.
#include "net/auth.h"
#include "net/communicator.h"
#include "net/errors.h"
#include "net/socket_util.h"
#include "net/tcp_transport.h"

#include <QtTest>

#include <poll.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

using namespace smol::net;

class TestAuth : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void correctTokenConnects();
    void wrongTokenIsRejected();
    void garbageFirstIsDropped_data();
    void garbageFirstIsDropped();
    void garbageIsNamedInHex();
    void silentConnectorTimesOut();
    void replayedProofIsRejected();
    void impostorListenerIsRefused();
};

namespace {

bool closedByPeer(int fd, int ms)
{
    pollfd p{fd, POLLIN, 0};
    char b[64];
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < deadline) {
        if (::poll(&p, 1, 20) > 0) {
            const ssize_t r = ::recv(fd, b, sizeof b, MSG_DONTWAIT);
            if (r == 0 || (r < 0 && errno == ECONNRESET))
                return true;
        }
    }
    return false;
}

bool anyReasonContains(const Transport &t, const std::string &needle)
{
    for (const auto &r : t.droppedReasons())
        if (r.find(needle) != std::string::npos)
            return true;
    return false;
}

} // namespace

void TestAuth::correctTokenConnects()
{
    TcpTransport a(0, 2, "s3cret"), b(1, 2, "s3cret");
    b.connectTo(0, "127.0.0.1", a.listenPort());
    a.waitForPeers(std::chrono::milliseconds(2000));
    QVERIFY(a.isConnected(1));
    QVERIFY(b.isConnected(0));
    float x = 0, y = 0;
    std::thread t([&] {
        Communicator c(b);
        x = 2;
        c.allReduce(viewOf(&x, 1), ReduceOp::Sum);
    });
    Communicator c(a);
    y = 3;
    c.allReduce(viewOf(&y, 1), ReduceOp::Sum);
    t.join();
    QCOMPARE(x, 5.f);
    QCOMPARE(y, 5.f);
    QVERIFY(a.droppedReasons().empty());
}

void TestAuth::wrongTokenIsRejected()
{
    TcpTransport a(0, 2, "right-token"), b(1, 2, "wrong-token");
    QVERIFY_THROWS_EXCEPTION(AuthError, b.connectTo(0, "127.0.0.1", a.listenPort()));
    QTRY_VERIFY_WITH_TIMEOUT(anyReasonContains(a, "wrong token"), 2000);
    QVERIFY(!a.isConnected(1));
    QVERIFY(!b.isConnected(0));
}

void TestAuth::garbageFirstIsDropped_data()
{
    QTest::addColumn<QByteArray>("first");
    QTest::newRow("http request") << QByteArray("GET / HTTP/1.1\r\nHost: x\r\n\r\n").leftJustified(200, ' ');
    QTest::newRow("a data frame before auth") << QByteArray("SMOL\x01\x00\x01\x01", 8).leftJustified(200, '\0');
    QTest::newRow("zeros") << QByteArray(200, '\0');
}

void TestAuth::garbageFirstIsDropped()
{
    QFETCH(QByteArray, first);
    TcpTransport a(0, 2, "tok");
    int fd = sock::connectTcp("127.0.0.1", a.listenPort(), std::chrono::milliseconds(2000));
    ::send(fd, first.constData(), std::size_t(first.size()), MSG_NOSIGNAL);
    QVERIFY(closedByPeer(fd, 3000));
    ::close(fd);
    QTRY_VERIFY_WITH_TIMEOUT(anyReasonContains(a, "expected SMOLAUTH first"), 2000);
    QVERIFY(!a.isConnected(1));
}

// What came instead of a magic reaches a log as its first 8 bytes in hex,
// never as text (an escape sequence or a newline stays on the wire).
void TestAuth::garbageIsNamedInHex()
{
    QByteArray first("GET /\x1b[2J\n", 12);
    first = first.leftJustified(int(auth::kProofBytes), '\0');
    int rank = -1;
    QByteArray nonce;
    const std::string err = auth::verifyProof(first.constData(), "tok", 0, 2, auth::freshNonce(), rank, nonce);
    QCOMPARE(QString::fromStdString(err), QString("expected SMOLAUTH first, got 47 45 54 20 2f 1b 5b 32"));
    const std::string hello = auth::parseHello(first.constData(), rank, nonce);
    QCOMPARE(QString::fromStdString(hello), QString("expected SMOLHELO, got 47 45 54 20 2f 1b 5b 32"));
}

void TestAuth::silentConnectorTimesOut()
{
    TransportOptions opts;
    opts.handshakeTimeout = std::chrono::milliseconds(300);
    TcpTransport a(0, 2, "tok", opts);
    int fd = sock::connectTcp("127.0.0.1", a.listenPort(), std::chrono::milliseconds(2000));
    QVERIFY(closedByPeer(fd, 3000));
    ::close(fd);
    QVERIFY(anyReasonContains(a, "handshake timed out"));
}

void TestAuth::replayedProofIsRejected()
{
    // Record a legitimate connector's proof, then replay it on a new
    // connection: the listener's fresh nonce makes it worthless.
    TcpTransport a(0, 2, "tok");
    int fd = sock::connectTcp("127.0.0.1", a.listenPort(), std::chrono::milliseconds(2000));
    char hello[auth::kHelloBytes];
    sock::readExact(fd, hello, sizeof hello, sock::Clock::now() + std::chrono::seconds(2), "hello");
    int acceptor = -1;
    QByteArray nonceA;
    QVERIFY(auth::parseHello(hello, acceptor, nonceA).empty());
    const QByteArray proof = auth::encodeProof("tok", 1, 0, 2, nonceA, auth::freshNonce());
    ::close(fd); // never sent: captured "off the wire"

    int fd2 = sock::connectTcp("127.0.0.1", a.listenPort(), std::chrono::milliseconds(2000));
    sock::readExact(fd2, hello, sizeof hello, sock::Clock::now() + std::chrono::seconds(2), "hello");
    ::send(fd2, proof.constData(), std::size_t(proof.size()), MSG_NOSIGNAL);
    QVERIFY(closedByPeer(fd2, 3000));
    ::close(fd2);
    QTRY_VERIFY_WITH_TIMEOUT(anyReasonContains(a, "wrong token"), 2000);
    QVERIFY(!a.isConnected(1));
}

void TestAuth::impostorListenerIsRefused()
{
    // A listener that does not know the token answers with a made-up accept;
    // it also records what the connector sent, which must not contain the token.
    std::uint16_t port = 0;
    int lfd = sock::listenTcp("127.0.0.1", 0, &port);
    QByteArray received;
    std::thread impostor([&] {
        int c = ::accept(lfd, nullptr, nullptr);
        const QByteArray hello = auth::encodeHello(0, auth::freshNonce());
        ::send(c, hello.constData(), std::size_t(hello.size()), MSG_NOSIGNAL);
        char proof[auth::kProofBytes];
        sock::readExact(c, proof, sizeof proof, sock::Clock::now() + std::chrono::seconds(2), "proof");
        received = QByteArray(proof, int(sizeof proof));
        const QByteArray fake = auth::encodeAccept("guessed", 0, 1, QByteArray(32, 'n'), QByteArray(32, 'm'));
        ::send(c, fake.constData(), std::size_t(fake.size()), MSG_NOSIGNAL);
        QTest::qWait(200);
        ::close(c);
    });
    TcpTransport b(1, 2, "the-real-cluster-token");
    bool refused = false;
    try {
        b.connectTo(0, "127.0.0.1", port);
    } catch (const AuthError &e) {
        refused = std::string(e.what()).find("failed to prove the token") != std::string::npos;
    }
    impostor.join();
    ::close(lfd);
    QVERIFY(refused);
    QVERIFY(!b.isConnected(0));
    QCOMPARE(received.size(), int(auth::kProofBytes));
    QVERIFY(!received.contains("the-real-cluster-token"));
}

QTEST_GUILESS_MAIN(TestAuth)
#include "tst_auth.moc"
