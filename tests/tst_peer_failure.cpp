// A peer that dies or goes silent mid-collective: every other rank fails
// with an error naming it, within the configured timeout; nothing hangs.
#include "rank_threads.h"

#include "net/errors.h"

#include <QtTest>

#include <chrono>

using namespace smol;
using Clock = std::chrono::steady_clock;

Q_DECLARE_METATYPE(net::TransportKind)

class TestPeerFailure : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void killedPeer_data();
    void killedPeer();
    void silentPeer_data();
    void silentPeer();
};

namespace {

struct Outcome {
    std::string error;
    double seconds = 0;
};

// Ranks other than `victim` all-reduce repeatedly; the victim joins a few
// all-reduces and then either aborts (dies) or just stops (goes silent).
std::vector<Outcome> run(net::TransportKind kind, int world, int victim, bool dies, std::chrono::milliseconds timeout)
{
    net::TransportOptions opts;
    opts.timeout = timeout;
    auto ranks = net::makeLocalMesh(kind, world, "failure-token", opts);
    std::vector<Outcome> outcomes(static_cast<std::size_t>(world));
    std::vector<std::thread> threads;
    for (int r = 0; r < world; ++r) {
        threads.emplace_back([&, r] {
            net::Communicator comm(*ranks[std::size_t(r)]);
            std::vector<float> buf(1 << 18, 1.f);
            Clock::time_point failStart = Clock::now();
            try {
                for (int step = 0; step < 1000; ++step) {
                    if (r == victim && step == 3) {
                        if (dies)
                            ranks[std::size_t(r)]->abort();
                        return; // silent: keeps its sockets open, says nothing
                    }
                    failStart = Clock::now();
                    comm.allReduce(net::viewOf(buf.data(), buf.size()), net::ReduceOp::Average, "grads");
                }
            } catch (const net::PeerError &e) {
                outcomes[std::size_t(r)].error = e.what();
                outcomes[std::size_t(r)].seconds = std::chrono::duration<double>(Clock::now() - failStart).count();
            }
        });
    }
    for (auto &t : threads)
        t.join();
    return outcomes;
}

} // namespace

void TestPeerFailure::killedPeer_data()
{
    QTest::addColumn<net::TransportKind>("kind");
    QTest::addColumn<int>("world");
    for (auto kind : {net::TransportKind::Inproc, net::TransportKind::Tcp})
        for (int world : {2, 3, 5})
            QTest::addRow("%s/N%d", net::transportName(kind), world) << kind << world;
}

void TestPeerFailure::killedPeer()
{
    QFETCH(net::TransportKind, kind);
    QFETCH(int, world);
    const int victim = world - 1;
    const auto timeout = std::chrono::milliseconds(2000);
    const auto outcomes = run(kind, world, victim, /*dies=*/true, timeout);
    for (int r = 0; r < world; ++r) {
        if (r == victim)
            continue;
        const Outcome &o = outcomes[std::size_t(r)];
        QVERIFY2(!o.error.empty(), qPrintable(QString("rank %1 did not fail").arg(r)));
        QVERIFY2(o.error.find("peer " + std::to_string(victim)) != std::string::npos, o.error.c_str());
        QVERIFY2(o.error.find("all-reduce") != std::string::npos, o.error.c_str());
        // A death is noticed at once, well within the timeout.
        QVERIFY2(o.seconds < 2.0, qPrintable(QString("rank %1 took %2 s").arg(r).arg(o.seconds)));
    }
}

void TestPeerFailure::silentPeer_data()
{
    killedPeer_data();
}

void TestPeerFailure::silentPeer()
{
    QFETCH(net::TransportKind, kind);
    QFETCH(int, world);
    const int victim = world - 1;
    const auto timeout = std::chrono::milliseconds(500);
    const auto outcomes = run(kind, world, victim, /*dies=*/false, timeout);
    // The victim's ring neighbour waits on it directly and must name it.
    const int neighbour = (victim + 1) % world;
    const Outcome &o = outcomes[std::size_t(neighbour)];
    QVERIFY2(o.error.find("peer " + std::to_string(victim)) != std::string::npos, o.error.c_str());
    QVERIFY2(o.error.find("silent") != std::string::npos, o.error.c_str());
    for (int r = 0; r < world; ++r) {
        if (r == victim)
            continue;
        const Outcome &x = outcomes[std::size_t(r)];
        QVERIFY2(!x.error.empty(), qPrintable(QString("rank %1 did not fail").arg(r)));
        // Bounded: the timeout plus scheduling slack on a loaded 2-core box.
        QVERIFY2(x.seconds < 0.5 * 2 + 3.0, qPrintable(QString("rank %1 took %2 s").arg(r).arg(x.seconds)));
    }
}

QTEST_GUILESS_MAIN(TestPeerFailure)
#include "tst_peer_failure.moc"
