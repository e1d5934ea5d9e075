// `--backend gloo` against `--backend ours`: the same strategies over c10d's
// ProcessGroupGloo end with the same parameters (param_match.h bounds), fire
// the hook and a trace event for every collective, and keep our in-place
// chunk layout for uneven buffers. Every strategy runs on Gloo (edp: its
// asynchronous server over Gloo's tagged send/recv); --link is refused.
#include "param_match.h"

#include "engine/gloo/gloo_communicator.h"
#include "engine/trainer.h"
#include "net/trace.h"

#include <QtTest>

#include <map>
#include <mutex>
#include <thread>

using namespace smol::engine;
using smol::net::CollectiveKind;

class TestGlooBackend : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase();
    void collectivesKeepOurLayout();
    void matchesOurs_data();
    void matchesOurs();
    void hookAndTracePerCollective();
    void edpRunsOnGloo();
    void rejectsLinks();
};

namespace {

TrainConfig baseConfig(const std::string &strategy, int nodes, OptimizerConfig::Kind kind,
                       TrainConfig::Backend backend)
{
    TrainConfig c;
    c.strategy = strategy;
    c.nodes = nodes;
    c.steps = 4;
    c.globalBatch = 24;
    c.seed = 11;
    c.transport = smol::net::TransportKind::Inproc;
    c.backend = backend;
    c.optimizer.kind = kind;
    c.optimizer.lr = kind == OptimizerConfig::Kind::Adam ? 1e-3 : 0.1;
    c.bucketBytes = 64 * 1024; // several ddp buckets for the mlp
    return c;
}

// Before and after snapshots, in order, per node.
class CollectiveLog : public TrainObserver, public smol::net::TraceSink {
public:
    void onStep(const StepReport &) override { }
    bool wantsCollectiveSnapshots() const override { return true; }
    void onMemorySnapshot(const MemorySnapshot &m) override
    {
        std::lock_guard lock(m_mutex);
        snapshots[m.node].push_back(m);
    }
    void onFrame(const smol::net::FrameEvent &e) override
    {
        std::lock_guard lock(m_mutex);
        events[e.src].push_back(e);
    }
    std::map<int, std::vector<MemorySnapshot>> snapshots;
    std::map<int, std::vector<smol::net::FrameEvent>> events;

private:
    std::mutex m_mutex;
};

} // namespace

void TestGlooBackend::initTestCase()
{
    torch::set_num_threads(1);
}

void TestGlooBackend::collectivesKeepOurLayout()
{
    // 3 ranks, 7 floats: chunks of 3, 2, 2 elements (Communicator::chunk).
    const int N = 3;
    const std::size_t count = 7;
    GlooStore store;
    std::mutex mutex;
    std::string firstError;
    auto fail = [&](int rank, const std::string &what) {
        std::lock_guard lock(mutex);
        if (firstError.empty())
            firstError = "rank " + std::to_string(rank) + ": " + what;
    };
    std::vector<std::thread> threads;
    for (int rank = 0; rank < N; ++rank) {
        threads.emplace_back([&, rank] {
            try {
                GlooCommunicator comm(store, rank, N);
                auto input = [&] {
                    std::vector<float> v(count);
                    for (std::size_t i = 0; i < count; ++i)
                        v[i] = float((rank + 1) * 10 + int(i));
                    return v;
                };
                auto sumOver = [&](std::size_t i) { return float(60 + 3 * int(i)); }; // sum_r (r+1)*10 + i
                auto expect = [&](bool ok, const std::string &what) {
                    if (!ok)
                        throw std::runtime_error(what);
                };

                std::vector<float> v = input();
                comm.allReduce(smol::net::viewOf(v.data(), count), smol::net::ReduceOp::Average);
                for (std::size_t i = 0; i < count; ++i)
                    expect(v[i] == sumOver(i) / 3, "allReduce average");

                v = input();
                comm.reduceScatter(smol::net::viewOf(v.data(), count), smol::net::ReduceOp::Sum);
                const auto mine = smol::net::Communicator::chunk(count, N, rank);
                for (std::size_t i = mine.offset; i < mine.offset + mine.count; ++i)
                    expect(v[i] == sumOver(i), "reduceScatter keeps this rank's chunk");

                std::vector<float> g(count, -1);
                for (std::size_t i = mine.offset; i < mine.offset + mine.count; ++i)
                    g[i] = float(i);
                comm.allGather(smol::net::viewOf(g.data(), count));
                for (std::size_t i = 0; i < count; ++i)
                    expect(g[i] == float(i), "allGather of uneven chunks");

                std::vector<float> b(count, float(rank));
                comm.broadcast(smol::net::viewOf(b.data(), count), /*root=*/2);
                expect(b[count - 1] == 2, "broadcast from rank 2");

                float one = float(rank);
                std::vector<float> all(N, -1);
                comm.gather(smol::net::viewOf(&one, 1), smol::net::viewOf(all.data(), all.size()),
                            /*root=*/1);
                if (rank == 1)
                    expect(all == std::vector<float>{0, 1, 2}, "gather to rank 1");
                std::vector<float> parts{5, 6, 7};
                float part = -1;
                comm.scatter(smol::net::viewOf(parts.data(), parts.size()), smol::net::viewOf(&part, 1),
                             /*root=*/0);
                expect(part == float(5 + rank), "scatter from rank 0");

                float token = float(rank);
                if (rank == 0)
                    comm.send(1, smol::net::viewOf(&token, 1));
                else if (rank == 1) {
                    comm.recv(0, smol::net::viewOf(&token, 1));
                    expect(token == 0, "recv from rank 0");
                }
                comm.barrier();
            } catch (const std::exception &e) {
                fail(rank, e.what());
            }
        });
    }
    for (auto &t : threads)
        t.join();
    QVERIFY2(firstError.empty(), firstError.c_str());
}

void TestGlooBackend::matchesOurs_data()
{
    QTest::addColumn<QString>("strategy");
    QTest::addColumn<int>("nodes");
    QTest::addColumn<int>("optimizer");
    for (const char *s : {"ddp", "zero1", "zero2", "zero3"})
        for (int n : {2, 3})
            for (auto k : {OptimizerConfig::Kind::Sgd, OptimizerConfig::Kind::Adam})
                QTest::addRow("%s/N%d/%s", s, n, optimizerName(k)) << QString(s) << n << int(k);
    // Point to point: a parameter server's per-worker threads, a pipeline's stages.
    for (const char *s : {"syncps", "pipeline"})
        for (auto k : {OptimizerConfig::Kind::Sgd, OptimizerConfig::Kind::Adam})
            QTest::addRow("%s/N3/%s", s, optimizerName(k)) << QString(s) << 3 << int(k);
}

void TestGlooBackend::matchesOurs()
{
    QFETCH(QString, strategy);
    QFETCH(int, nodes);
    QFETCH(int, optimizer);
    const auto kind = OptimizerConfig::Kind(optimizer);
    const TrainSummary want =
        runTraining(baseConfig(strategy.toStdString(), nodes, kind, TrainConfig::Backend::Ours));
    const TrainSummary got =
        runTraining(baseConfig(strategy.toStdString(), nodes, kind, TrainConfig::Backend::Gloo));
    const QString mismatch = smol::test::paramMismatch(got, want);
    QVERIFY2(mismatch.isEmpty(), qPrintable(mismatch));
    QVERIFY(std::abs(got.finalLoss - want.finalLoss) <= 1e-4 * std::abs(want.finalLoss));
    for (auto b : got.bytesSentPerNode)
        QVERIFY(b > 0);
}

void TestGlooBackend::hookAndTracePerCollective()
{
    // zero3 on 3 nodes: the same collectives, in the same order, reach the
    // hook under both backends; under gloo each also yields one trace event
    // carrying its kind, sequence number and payload size.
    CollectiveLog ours;
    CollectiveLog gloo;
    TrainConfig c = baseConfig("zero3", 3, OptimizerConfig::Kind::Sgd, TrainConfig::Backend::Ours);
    c.steps = 2;
    runTraining(c, &ours);
    c.backend = TrainConfig::Backend::Gloo;
    c.traceSink = &gloo;
    runTraining(c, &gloo);

    QCOMPARE(gloo.snapshots.size(), std::size_t(3));
    for (const auto &[node, snaps] : gloo.snapshots) {
        const auto &want = ours.snapshots[node];
        QCOMPARE(snaps.size(), want.size());
        QVERIFY(snaps.size() >= 2 * (2 * 9 + 3)); // 9 collectives a step, 3 in fullParameters()
        for (std::size_t i = 0; i < snaps.size(); ++i) {
            QCOMPARE(snaps[i].kind, want[i].kind);
            QCOMPARE(snaps[i].seq, want[i].seq);
            QCOMPARE(snaps[i].before, want[i].before);
        }
        const auto &events = gloo.events[node];
        QCOMPARE(events.size(), snaps.size() / 2);
        for (std::size_t i = 0; i < events.size(); ++i) {
            QCOMPARE(events[i].kind, snaps[2 * i].kind);
            QCOMPARE(events[i].seq, snaps[2 * i].seq);
            QCOMPARE(events[i].dst, node);
            QVERIFY(events[i].bytes > 0);
            QVERIFY(events[i].sendCompleteNs >= events[i].sendStartNs);
        }
    }
}

void TestGlooBackend::edpRunsOnGloo()
{
    // Asynchronous: no reference to equal, but every update is applied and it learns.
    TrainConfig c = baseConfig("edp", 3, OptimizerConfig::Kind::Sgd, TrainConfig::Backend::Gloo);
    c.steps = 30;
    const TrainSummary s = runTraining(c);
    QCOMPARE(s.async.updates, std::int64_t(30));
    QVERIFY(std::isfinite(s.finalLoss) && s.finalLoss < s.lossCurve.front());
}

void TestGlooBackend::rejectsLinks()
{
    TrainConfig c = baseConfig("ddp", 2, OptimizerConfig::Kind::Sgd, TrainConfig::Backend::Gloo);
    c.links.push_back(TrainConfig::Link{});
    try {
        runTraining(c);
        QFAIL("--backend gloo accepted --link");
    } catch (const std::invalid_argument &e) {
        QVERIFY2(QString(e.what()).contains("--backend gloo"), e.what());
    }
}

QTEST_GUILESS_MAIN(TestGlooBackend)
#include "tst_gloo_backend.moc"
