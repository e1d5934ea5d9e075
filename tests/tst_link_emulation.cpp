// Emulated slow links (net/link_shaper.h) over both transports: measured
// transfer times must match the configured bandwidth and latency (no more
// than 20% early; late only by a loaded machine's scheduling, see asShaped),
// unlimited links must stay fast, a limit changed at run time must take
// effect, and a ring all-reduce must slow down by what its slow link costs.
#include "rank_threads.h"

#include "net/communicator.h"
#include "net/link_shaper.h"
#include "net/transport.h"

#include <QtTest>

#include <algorithm>
#include <chrono>
#include <vector>

using namespace smol;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

Q_DECLARE_METATYPE(net::TransportKind)

class TestLinkEmulation : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void shaperPacesBytes();
    void bandwidthAndLatency_data() { transports(); }
    void bandwidthAndLatency();
    void latencyAlone_data() { transports(); }
    void latencyAlone();
    void unlimitedStaysFast_data() { transports(); }
    void unlimitedStaysFast();
    void limitChangesAtRunTime_data() { transports(); }
    void limitChangesAtRunTime();
    void slowLinkSlowsTheRing_data() { transports(); }
    void slowLinkSlowsTheRing();

private:
    static void transports()
    {
        QTest::addColumn<net::TransportKind>("kind");
        QTest::newRow("tcp") << net::TransportKind::Tcp;
        QTest::newRow("inproc") << net::TransportKind::Inproc;
    }
};

namespace {

constexpr double kMbit = 1e6;
const net::LinkLimit kWifi{20 * kMbit, 5ms}; // the example

net::TransportOptions options()
{
    net::TransportOptions o;
    o.timeout = 5000ms; // bounded waits: a broken shaper fails, never hangs
    return o;
}

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// A shaped transfer took `want` seconds, as configured: at most 20% early (the
// shaper's burst), and late only by what a loaded 2-core machine's scheduling
// adds (30% + 15 ms). A limit not applied, or the wrong one (a 4x rate),
// still fails.
bool asShaped(double got, double want)
{
    return got >= 0.8 * want && got <= 1.3 * want + 0.015;
}

struct Timing {
    double sendComplete = 0; // ticket finished: the last byte left
    double received = 0;     // recv() returned on the other rank
};

// Sends `bytes` from rank 0 to rank 1 and times both ends from send().
Timing transfer(std::vector<std::unique_ptr<net::Transport>> &mesh, std::size_t bytes, std::uint64_t seq)
{
    std::vector<char> data(bytes, 'x');
    net::FrameMeta meta;
    meta.kind = net::CollectiveKind::SendRecv;
    meta.seq = seq;
    Timing t;
    const auto t0 = Clock::now();
    std::thread receiver([&] {
        net::Message m = mesh[1]->recv(0, meta);
        t.received = seconds(Clock::now() - t0);
        if (m.payload.size() != bytes)
            t.received = -1;
    });
    net::SendTicket ticket = mesh[0]->send(1, meta, data.data(), bytes);
    ticket.wait();
    t.sendComplete = seconds(Clock::now() - t0);
    receiver.join();
    return t;
}

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

} // namespace

void TestLinkEmulation::shaperPacesBytes()
{
    // 20 Mbit/s = 2.5 MB/s: 1 MB in bursts takes 0.4 s of virtual time.
    net::LinkShaper s;
    s.setLimit(kWifi);
    auto now = Clock::now();
    std::size_t left = 1000000;
    const auto start = now;
    while (left > 0) {
        const std::size_t n = std::min(left, s.allowance(now));
        if (n == 0) {
            now = s.whenAllowed(std::min(left, s.burstBytes()), now);
            continue;
        }
        s.consume(n, now);
        left -= n;
    }
    QVERIFY2(std::abs(seconds(now - start) - 0.4) < 0.01, qPrintable(QString::number(seconds(now - start))));
    QCOMPARE(s.transferTime(2500000), std::chrono::nanoseconds(1000000000));
}

void TestLinkEmulation::bandwidthAndLatency()
{
    QFETCH(net::TransportKind, kind);
    auto mesh = net::makeLocalMesh(kind, 2, "token", options());
    mesh[0]->setLinkLimit(1, kWifi);
    const std::size_t bytes = std::size_t(1) << 20; // 1 MiB: 0.42 s at 20 Mbit/s
    const double wire = 8.0 * bytes / kWifi.bitsPerSecond;
    const double expected = wire + 0.005;
    const Timing t = transfer(mesh, bytes, 1);
    qInfo("%s: 1 MiB at 20 Mbit/s + 5 ms: received after %.1f ms (expected %.1f), send complete after %.1f ms "
          "(expected %.1f)",
          net::transportName(kind), 1e3 * t.received, 1e3 * expected, 1e3 * t.sendComplete, 1e3 * wire);
    QVERIFY(t.received > 0);
    QVERIFY(asShaped(t.received, expected));
    QVERIFY(asShaped(t.sendComplete, wire));
    QVERIFY(t.sendComplete <= t.received + 0.001); // a send completes when its bytes left, before they arrive
}

void TestLinkEmulation::latencyAlone()
{
    QFETCH(net::TransportKind, kind);
    auto mesh = net::makeLocalMesh(kind, 2, "token", options());
    mesh[0]->setLinkLimit(1, net::LinkLimit{0, 5ms});
    std::vector<double> times;
    for (std::uint64_t i = 0; i < 7; ++i)
        times.push_back(transfer(mesh, 8, i + 1).received);
    const double got = median(times);
    qInfo("%s: 8 bytes over 5 ms latency: received after %.2f ms (median of 7)", net::transportName(kind),
          1e3 * got);
    QVERIFY(got >= 0.005);
    // Applied once, not twice: under 9 ms. The slack is scheduling on a
    // shared 2-core machine running other tests (a 7 ms bound failed once
    // there); a doubled latency (10 ms) still fails.
    QVERIFY2(got < 0.009, qPrintable(QString::number(1e3 * got)));
}

void TestLinkEmulation::unlimitedStaysFast()
{
    QFETCH(net::TransportKind, kind);
    auto mesh = net::makeLocalMesh(kind, 2, "token", options());
    const Timing t = transfer(mesh, std::size_t(1) << 20, 1);
    qInfo("%s: 1 MiB unlimited: received after %.2f ms", net::transportName(kind), 1e3 * t.received);
    QVERIFY(t.received > 0);
    QVERIFY(t.received < 0.05); // a 20 Mbit/s link would take 420 ms
}

void TestLinkEmulation::limitChangesAtRunTime()
{
    QFETCH(net::TransportKind, kind);
    auto mesh = net::makeLocalMesh(kind, 2, "token", options());
    const std::size_t bytes = 512 * 1024;
    mesh[0]->setLinkLimit(1, kWifi);
    const double slow = transfer(mesh, bytes, 1).received;
    mesh[0]->setLinkLimit(1, net::LinkLimit{80 * kMbit, 1ms});
    const double faster = transfer(mesh, bytes, 2).received;
    mesh[0]->setLinkLimit(1, net::LinkLimit{});
    const double unlimited = transfer(mesh, bytes, 3).received;
    const double wantSlow = 8.0 * bytes / 20e6 + 0.005;
    const double wantFaster = 8.0 * bytes / 80e6 + 0.001;
    qInfo("%s: 512 KiB at 20 Mbit/s: %.1f ms (expected %.1f); then 80 Mbit/s: %.1f ms (expected %.1f); then "
          "unlimited: %.2f ms",
          net::transportName(kind), 1e3 * slow, 1e3 * wantSlow, 1e3 * faster, 1e3 * wantFaster, 1e3 * unlimited);
    QVERIFY(asShaped(slow, wantSlow));
    QVERIFY(asShaped(faster, wantFaster));
    QVERIFY(unlimited > 0 && unlimited < 0.03);
}

void TestLinkEmulation::slowLinkSlowsTheRing()
{
    QFETCH(net::TransportKind, kind);
    constexpr int N = 4;
    const std::size_t count = 256 * 1024; // 1 MiB of float32
    auto mesh = net::makeLocalMesh(kind, N, "token", options());
    auto run = [&](double &secondsOut) {
        std::vector<double> perRank(N, 0);
        const std::string error = test::runRanks(mesh, [&](int rank, net::Communicator &comm) {
            std::vector<float> buf(count, float(rank));
            comm.barrier();
            const auto t0 = Clock::now();
            comm.allReduce(net::viewOf(buf.data(), count), net::ReduceOp::Sum, "grads");
            perRank[std::size_t(rank)] = seconds(Clock::now() - t0);
            if (buf.front() != float(N * (N - 1) / 2) || buf.back() != buf.front())
                throw std::runtime_error("wrong sum");
        });
        secondsOut = *std::max_element(perRank.begin(), perRank.end());
        return error;
    };
    double fast = 0;
    QString error = QString::fromStdString(run(fast));
    QVERIFY2(error.isEmpty(), qPrintable(error));
    // One slow link, both directions, between ranks 0 and 1 (a Wi-Fi node).
    mesh[0]->setLinkLimit(1, kWifi);
    mesh[1]->setLinkLimit(0, kWifi);
    double slow = 0;
    error = QString::fromStdString(run(slow));
    QVERIFY2(error.isEmpty(), qPrintable(error));
    // 2(N-1) ring steps, each carrying one S/N chunk across the slow link
    // (segments pipeline, so latency adds between once and once per step).
    const double chunkTime = 8.0 * (count * sizeof(float) / N) / kWifi.bitsPerSecond;
    const double low = 2 * (N - 1) * chunkTime + 0.005;
    const double high = 2 * (N - 1) * (chunkTime + 0.005);
    qInfo("%s: all-reduce of 1 MiB on %d ranks: %.1f ms unlimited, %.1f ms with one 20 Mbit/s + 5 ms link "
          "(expected %.1f..%.1f)",
          net::transportName(kind), N, 1e3 * fast, 1e3 * slow, 1e3 * low, 1e3 * high);
    QVERIFY(slow >= 0.8 * low);
    QVERIFY(slow <= 1.2 * high);
    QVERIFY(fast < 0.25 * slow);
}

QTEST_GUILESS_MAIN(TestLinkEmulation)
#include "tst_link_emulation.moc"
