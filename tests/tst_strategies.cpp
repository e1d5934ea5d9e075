// Every distributed strategy against the single-node reference: after K
// steps on the same global batches, parameters equal single's within 1e-5
// relative, for N = 2, 3, 4, with SGD and with Adam; on batches that do not
// split evenly (N = 3 to 6, B = 64); and ddp on a whole class (32 and 64
// nodes, B = 70). Also: determinism, and the memory each strategy says it
// holds.
#include "param_match.h"

#include "engine/memory_tracker.h"
#include "engine/trainer.h"
#include "engine/models/model.h"
#include "net/communicator.h"

#include <QtTest>
#include <QTemporaryDir>

#include <torch/script.h>

#include <map>
#include <set>
#include <mutex>
#include <numeric>

using namespace smol::engine;

class TestStrategies : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase();
    void matchesSingle_data();
    void matchesSingle();
    void deterministic();
    void torchScriptModelMatchesSingle_data();
    void torchScriptModelMatchesSingle();
    void memoryShrinksWithSharding();
    void zero1SendsWhatDdpSends();
    void memorySnapshotsAtCollectives();
    void memoryByCategoryAtCollectives();
    void rejectsBadConfigs_data();
    void rejectsBadConfigs();

private:
    TrainSummary reference(OptimizerConfig::Kind kind, std::int64_t batch);
    std::map<std::pair<int, std::int64_t>, TrainSummary> m_reference; // by (optimizer, global batch)
};

namespace {

constexpr std::int64_t kSteps = 4;
constexpr std::int64_t kBatch = 24; // divisible by 1..4 (and by 3 workers of syncps)

TrainConfig baseConfig(const std::string &strategy, int nodes, OptimizerConfig::Kind kind)
{
    TrainConfig c;
    c.strategy = strategy;
    c.nodes = nodes;
    c.steps = kSteps;
    c.globalBatch = kBatch;
    c.seed = 11;
    c.transport = smol::net::TransportKind::Inproc;
    c.optimizer.kind = kind;
    c.optimizer.lr = kind == OptimizerConfig::Kind::Adam ? 1e-3 : 0.1;
    c.bucketBytes = 64 * 1024; // several buckets for the mlp
    return c;
}

} // namespace

void TestStrategies::initTestCase()
{
    torch::set_num_threads(1);
}

TrainSummary TestStrategies::reference(OptimizerConfig::Kind kind, std::int64_t batch)
{
    const std::pair key{int(kind), batch};
    auto it = m_reference.find(key);
    if (it == m_reference.end()) {
        TrainConfig c = baseConfig("single", 1, kind);
        c.globalBatch = batch;
        it = m_reference.emplace(key, runTraining(c)).first;
    }
    return it->second;
}

void TestStrategies::matchesSingle_data()
{
    QTest::addColumn<QString>("strategy");
    QTest::addColumn<int>("nodes");
    QTest::addColumn<int>("optimizer");
    QTest::addColumn<bool>("tcp");
    QTest::addColumn<qint64>("batch");
    for (const char *s : {"ddp", "zero1", "zero2", "zero3", "syncps"})
        for (int n : {2, 3, 4})
            for (auto k : {OptimizerConfig::Kind::Sgd, OptimizerConfig::Kind::Adam})
                QTest::addRow("%s/N%d/%s", s, n, optimizerName(k))
                    << QString(s) << n << int(k) << false << qint64(kBatch);
    // The same over real sockets, once per strategy.
    for (const char *s : {"ddp", "zero1", "zero2", "zero3", "syncps"})
        QTest::addRow("%s/N3/adam/tcp", s)
            << QString(s) << 3 << int(OptimizerConfig::Kind::Adam) << true << qint64(kBatch);
    // Uneven shares: 64 rows over 3 nodes are 22, 21, 21; over 5, 13, 13, 13,
    // 13, 12 (syncps: over its 3 and 5 workers).
    for (const char *s : {"ddp", "zero1", "zero2", "zero3", "syncps"})
        for (int shares : {3, 5})
            for (auto k : {OptimizerConfig::Kind::Sgd, OptimizerConfig::Kind::Adam}) {
                const int n = QByteArray(s) == "syncps" ? shares + 1 : shares;
                QTest::addRow("%s/N%d/B64/%s", s, n, optimizerName(k))
                    << QString(s) << n << int(k) << false << qint64(64);
            }
    // A whole class: 70 rows over 32 nodes (six of 3 rows, 26 of 2) and over
    // 64 (six of 2, 58 of 1). SGD: measured 1e-8 from single, as on 2 nodes.
    // Under Adam the same runs are ~1.5e-5 off element-wise, and so are even
    // splits of that size (35 nodes of 2 rows: 1.9e-5): Adam turns the
    // all-reduce's different summation order into O(lr) moves of the
    // weights whose gradient is mostly rounding noise, more so the more
    // nodes sum (see param_match.h).
    for (int n : {32, 64})
        QTest::addRow("ddp/N%d/B70/sgd", n)
            << QString("ddp") << n << int(OptimizerConfig::Kind::Sgd) << false << qint64(70);
}

void TestStrategies::matchesSingle()
{
    QFETCH(QString, strategy);
    QFETCH(int, nodes);
    QFETCH(int, optimizer);
    QFETCH(bool, tcp);
    QFETCH(qint64, batch);
    const auto kind = OptimizerConfig::Kind(optimizer);
    TrainConfig c = baseConfig(strategy.toStdString(), nodes, kind);
    c.globalBatch = batch;
    if (tcp)
        c.transport = smol::net::TransportKind::Tcp;
    const TrainSummary got = runTraining(c);
    const TrainSummary want = reference(kind, batch);
    QCOMPARE(got.paramCount, want.paramCount);
    // Measured on the mlp with Adam: max |dp| ~3e-6, norm error ~4e-7.
    const QString mismatch = smol::test::paramMismatch(got, want);
    QVERIFY2(mismatch.isEmpty(), qPrintable(mismatch));
    // Every step's loss, the nodes' weighted by their rows when they differ.
    QCOMPARE(got.lossCurve.size(), want.lossCurve.size());
    for (std::size_t k = 0; k < want.lossCurve.size(); ++k)
        QVERIFY2(
            std::abs(got.lossCurve[k] - want.lossCurve[k]) <= 1e-4 * std::abs(want.lossCurve[k]),
            qPrintable(
                QString("step %1: loss %2, single %3").arg(k).arg(got.lossCurve[k]).arg(want.lossCurve[k])));
    for (auto b : got.bytesSentPerNode)
        QVERIFY(b > 0);
}

void TestStrategies::torchScriptModelMatchesSingle_data()
{
    QTest::addColumn<QString>("strategy");
    for (const char *s : {"ddp", "zero2", "zero3", "syncps"})
        QTest::newRow(s) << QString(s);
}

void TestStrategies::torchScriptModelMatchesSingle()
{
    // A TorchScript module built and saved from C++ (two hidden layers), then
    // trained through --model PATH.pt like any user's exported model.
    QFETCH(QString, strategy);
    QTemporaryDir dir;
    const QString path = dir.filePath("mlp.pt");
    {
        torch::jit::Module m("Mlp2");
        torch::manual_seed(3);
        m.register_parameter("w1", torch::randn({784, 32}) * 0.05, /*is_buffer=*/false);
        m.register_parameter("b1", torch::zeros({32}), /*is_buffer=*/false);
        m.register_parameter("w2", torch::randn({32, 10}) * 0.05, /*is_buffer=*/false);
        m.register_parameter("b2", torch::zeros({10}), /*is_buffer=*/false);
        m.define(R"(
def forward(self, x):
    h = torch.relu(torch.matmul(x, self.w1) + self.b1)
    return torch.matmul(h, self.w2) + self.b2
)");
        m.save(path.toStdString());
    }
    TrainConfig single = baseConfig("single", 1, OptimizerConfig::Kind::Adam);
    single.model.kind = path.toStdString();
    const TrainSummary want = runTraining(single);
    TrainConfig c = single;
    c.strategy = strategy.toStdString();
    c.nodes = 3;
    const TrainSummary got = runTraining(c);
    QCOMPARE(got.paramCount, std::int64_t(784 * 32 + 32 + 32 * 10 + 10));
    const QString mismatch = smol::test::paramMismatch(got, want);
    QVERIFY2(mismatch.isEmpty(), qPrintable(mismatch));
    QVERIFY(got.testAccuracy > 0.1);
}

void TestStrategies::deterministic()
{
    for (const char *s : {"ddp", "zero2", "syncps"}) {
        const TrainConfig c = baseConfig(s, 3, OptimizerConfig::Kind::Adam);
        const TrainSummary a = runTraining(c);
        const TrainSummary b = runTraining(c);
        QCOMPARE(a.lossCurve, b.lossCurve); // bit for bit
        QVERIFY(torch::equal(a.finalParams, b.finalParams));
    }
}

// The ZeRO paper's headline (section 7): stages 1 and 2 cost ddp's
// 2(N-1)/N x 4P per node per step; only stage 3 adds half again.
void TestStrategies::zero1SendsWhatDdpSends()
{
    const int N = 4;
    auto run = [&](const char *s) {
        TrainConfig c = baseConfig(s, N, OptimizerConfig::Kind::Adam);
        c.steps = 3;
        return runTraining(c);
    };
    const TrainSummary ddp = run("ddp"), zero1 = run("zero1"), zero2 = run("zero2"), zero3 = run("zero3");
    const double P = double(ddp.paramCount);
    const double closedForm = 3 * 2.0 * (N - 1) / N * 4 * P; // 3 steps
    for (int r = 0; r < N; ++r) {
        const double d = double(ddp.bytesSentPerNode[std::size_t(r)]);
        const double z1 = double(zero1.bytesSentPerNode[std::size_t(r)]);
        QCOMPARE(zero1.bytesSentPerNode[std::size_t(r)], zero2.bytesSentPerNode[std::size_t(r)]);
        // ddp's buckets round their chunks separately: equal to a few bytes per bucket.
        QVERIFY2(std::abs(z1 - d) <= 1e-3 * d, qPrintable(QString("rank %1: zero1 %2 B, ddp %3 B").arg(r).arg(z1).arg(d)));
        QVERIFY2(std::abs(z1 - closedForm) <= 1e-3 * closedForm, qPrintable(QString("zero1 %1 B, 2(N-1)/N x 4P x 3 = %2").arg(z1).arg(closedForm)));
        QVERIFY(double(zero3.bytesSentPerNode[std::size_t(r)]) > 1.4 * z1);
    }
}

void TestStrategies::memoryShrinksWithSharding()
{
    const int N = 4;
    auto run = [&](const char *s) {
        TrainConfig c = baseConfig(s, N, OptimizerConfig::Kind::Adam);
        c.steps = 2;
        return runTraining(c);
    };
    const TrainSummary ddp = run("ddp");
    const TrainSummary zero1 = run("zero1");
    const TrainSummary zero2 = run("zero2");
    const TrainSummary zero3 = run("zero3");
    const std::int64_t P = ddp.paramCount;
    for (int r = 0; r < N; ++r) {
        const smol::net::MemoryByCategory &d = ddp.memoryPerNode[std::size_t(r)];
        // The figures are the tensors' nbytes: 4 bytes a float, Adam keeps two moments.
        QCOMPARE(d.params, 4 * P);
        QCOMPARE(d.grads, 4 * P);
        QCOMPARE(d.optimizer, 8 * P);
        QVERIFY(d.live >= d.params + d.grads + d.optimizer);
        QVERIFY(d.peak >= d.live);
        const smol::net::MemoryByCategory &z1 = zero1.memoryPerNode[std::size_t(r)];
        QVERIFY2(std::abs(double(z1.optimizer) - d.optimizer / double(N)) <= 16, "zero1 optimizer state is not 1/N");
        QCOMPARE(z1.params, 4 * P);
        const smol::net::MemoryByCategory &z2 = zero2.memoryPerNode[std::size_t(r)];
        QVERIFY2(std::abs(double(z2.grads) - d.grads / double(N)) <= 8, "zero2 gradients are not 1/N");
        QVERIFY(z2.live < d.live);
        // zero3: parameters, gradients and optimizer state all about 1/N of ddp's.
        const smol::net::MemoryByCategory &z3 = zero3.memoryPerNode[std::size_t(r)];
        const double held = double(z3.params + z3.grads + z3.optimizer);
        const double full = double(d.params + d.grads + d.optimizer);
        QVERIFY2(std::abs(held - full / N) <= 64, qPrintable(QString("zero3 holds %1 of ddp's %2").arg(held).arg(full)));
        QVERIFY(z3.live < z2.live);
    }
}

namespace {
class SnapshotCounter : public TrainObserver {
public:
    void onStep(const StepReport &) override {}
    bool wantsCollectiveSnapshots() const override { return true; }
    void onMemorySnapshot(const MemorySnapshot &m) override
    {
        std::lock_guard lock(mutex);
        snapshots.push_back(m);
    }
    std::mutex mutex;
    std::vector<MemorySnapshot> snapshots;
};
} // namespace

void TestStrategies::memorySnapshotsAtCollectives()
{
    // zero3 on the mlp: per step and node, 3 forward gathers, 3 backward
    // gathers and 3 reduce-scatters, each seen before and after; plus the 3
    // final gathers of fullParameters(). During a gather a whole layer is
    // materialised, so live memory there exceeds the end-of-step figure.
    SnapshotCounter counter;
    TrainConfig c = baseConfig("zero3", 2, OptimizerConfig::Kind::Sgd);
    c.steps = 2;
    const TrainSummary s = runTraining(c, &counter);
    std::map<int, int> perNode;
    std::map<int, std::int64_t> maxDuringGather;
    for (const MemorySnapshot &m : counter.snapshots) {
        ++perNode[m.node];
        QVERIFY(m.memory.live > 0 && m.memory.peak >= m.memory.live);
        if (!m.before && m.kind == smol::net::CollectiveKind::AllGather)
            maxDuringGather[m.node] = std::max(maxDuringGather[m.node], m.memory.live);
    }
    QCOMPARE(perNode.size(), std::size_t(2));
    for (auto [node, count] : perNode) {
        QCOMPARE(count, 2 * (2 * 9 + 3));
        QVERIFY(maxDuringGather[node] > s.memoryPerNode[std::size_t(node)].live);
    }
}

// Memory by category at every collective boundary, exact at that instant:
// zero3 prefetches (zero3.cpp): at a forward gather of layer k, layer k-1 is
// still held in full; at a backward gather of k, layer k+1; at the
// reduce-scatter of k, layer k-1 (k itself is freed); a gathered layer is
// held from its gather's end. params are the shards plus exactly those
// layers' full size minus the node's shard; the buffer being gathered or
// reduced counts in comm; never more than two layers are held. ddp's params
// never move; gpipe holds more activations than 1f1b with 8 micro-batches.
void TestStrategies::memoryByCategoryAtCollectives()
{
    const int N = 4;
    SnapshotCounter zero3;
    TrainConfig c = baseConfig("zero3", N, OptimizerConfig::Kind::Sgd);
    c.steps = 2;
    runTraining(c, &zero3);
    ModelConfig mc;
    mc.seed = c.seed;
    const auto model = makeModel(mc);
    std::map<std::string, std::int64_t> numel, layerFull;
    std::map<std::string, int> layerIndex;
    for (auto &[name, p] : model->namedParameters())
        numel[name] = p.numel();
    for (const auto &layer : model->layers()) {
        layerIndex.emplace(layer.name, int(layerIndex.size()));
        for (const auto &p : layer.paramNames)
            layerFull[layer.name] += numel[p];
    }
    std::vector<std::string> layerAt(layerIndex.size());
    for (const auto &[name, k] : layerIndex)
        layerAt[std::size_t(k)] = name;
    const int L = int(layerAt.size());
    auto shard = [&](const std::string &layer, int node) {
        return std::int64_t(smol::net::Communicator::chunk(std::size_t(layerFull[layer]), N, node).count);
    };
    std::map<int, std::int64_t> shards; // params held between layers, by node
    for (int r = 0; r < N; ++r)
        for (const auto &[layer, full] : layerFull)
            shards[r] += 4 * shard(layer, r);
    std::map<int, int> lastScatters; // per node: reduce-scatters of layer 0 seen
    int checked = 0, twoHeld = 0;
    for (const MemorySnapshot &m : zero3.snapshots) {
        const std::string layer = m.name.substr(m.name.rfind('.') + 1);
        QVERIFY2(layerFull.count(layer), m.name.c_str());
        const int k = layerIndex[layer];
        const bool scatter = m.kind == smol::net::CollectiveKind::ReduceScatter;
        const bool afterSteps = lastScatters[m.node] == c.steps; // fullParameters' gathers, one at a time
        std::set<int> held;
        if (scatter ? k > 0 : !afterSteps && m.name.rfind("params.backward.", 0) != 0 && k > 0)
            held.insert(k - 1);
        if (!scatter && !afterSteps && m.name.rfind("params.backward.", 0) == 0 && k + 1 < L)
            held.insert(k + 1);
        if (!scatter && !m.before)
            held.insert(k);
        std::int64_t want = shards[m.node];
        for (int j : held)
            want += 4 * (layerFull[layerAt[std::size_t(j)]] - shard(layerAt[std::size_t(j)], m.node));
        QVERIFY2(m.memory.params == want, qPrintable(QString("node %1 %2 %3 %4: params %5, want %6")
                                                         .arg(m.node)
                                                         .arg(m.before ? "before" : "after")
                                                         .arg(smol::net::collectiveName(m.kind))
                                                         .arg(QString::fromStdString(m.name))
                                                         .arg(m.memory.params)
                                                         .arg(want)));
        const std::int64_t full = 4 * layerFull[layer];
        QCOMPARE(m.memory.comm, scatter || m.before ? full : 0);
        QVERIFY(m.memory.activations >= 0 && m.memory.live >= m.memory.params + m.memory.grads);
        twoHeld += held.size() == 2;
        if (scatter && k == 0 && !m.before)
            ++lastScatters[m.node];
        ++checked;
    }
    QVERIFY(twoHeld > 0); // the prefetch is visible: the next layer arrives while one is held
    QVERIFY(checked >= 2 * N * 2 * 9);

    SnapshotCounter ddp;
    runTraining(baseConfig("ddp", N, OptimizerConfig::Kind::Sgd), &ddp);
    QVERIFY(!ddp.snapshots.empty());
    for (const MemorySnapshot &m : ddp.snapshots)
        QCOMPARE(m.memory.params, 4 * std::accumulate(numel.begin(), numel.end(), std::int64_t(0),
                                                      [](std::int64_t a, const auto &kv) { return a + kv.second; }));

    auto peakActivations = [&](PipelineSchedule schedule) {
        SnapshotCounter pipe;
        TrainConfig p = baseConfig("pipeline", 3, OptimizerConfig::Kind::Sgd);
        p.globalBatch = 256;
        p.microBatches = 8;
        p.schedule = schedule;
        p.steps = 2;
        runTraining(p, &pipe);
        std::int64_t most = 0;
        for (const MemorySnapshot &m : pipe.snapshots) // the steps' sends and receives, not the final broadcast
            if (m.node == 0 && m.kind == smol::net::CollectiveKind::SendRecv)
                most = std::max(most, m.memory.activations);
        return most;
    };
    const std::int64_t gpipe = peakActivations(PipelineSchedule::GPipe);
    const std::int64_t oneF1B = peakActivations(PipelineSchedule::OneFOneB);
    qInfo("stage 0 peak activations at collectives, M=8: gpipe %lld B, 1f1b %lld B", qlonglong(gpipe),
          qlonglong(oneF1B));
    QVERIFY2(gpipe > oneF1B, qPrintable(QString("stage 0 activations: gpipe %1 B, 1f1b %2 B").arg(gpipe).arg(oneF1B)));
}

void TestStrategies::rejectsBadConfigs_data()
{
    QTest::addColumn<QString>("strategy");
    QTest::addColumn<int>("nodes");
    QTest::addColumn<int>("batch");
    QTest::addColumn<QString>("reason");
    QTest::newRow("unknown strategy") << "ring-of-fire" << 2 << 24 << "unknown strategy";
    QTest::newRow("single on 2") << "single" << 2 << 24 << "exactly 1 node";
    QTest::newRow("fewer rows than nodes")
        << "ddp" << 5 << 3 << "--global-batch 3 is smaller than the 5 data-parallel nodes";
    QTest::newRow("fewer rows than workers")
        << "syncps" << 5 << 3 << "--global-batch 3 is smaller than the 4 workers";
    QTest::newRow("too many nodes") << "ddp" << 65 << 130 << "between 1 and 64";
    QTest::newRow("syncps alone") << "syncps" << 1 << 24 << "at least 2 nodes";
}

void TestStrategies::rejectsBadConfigs()
{
    QFETCH(QString, strategy);
    QFETCH(int, nodes);
    QFETCH(int, batch);
    QFETCH(QString, reason);
    TrainConfig c = baseConfig(strategy.toStdString(), nodes, OptimizerConfig::Kind::Sgd);
    c.globalBatch = batch;
    try {
        runTraining(c);
        QFAIL("accepted a bad config");
    } catch (const std::exception &e) {
        QVERIFY2(QString(e.what()).contains(reason), e.what());
    }
}

QTEST_GUILESS_MAIN(TestStrategies)
#include "tst_strategies.moc"
