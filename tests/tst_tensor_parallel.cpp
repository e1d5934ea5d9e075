// Tensor parallelism (engine/strategies/tensor.cpp) against the single-node
// reference on a small gpt: after K steps on the same global batches the
// parameters equal single's, for N = 2 and 4, SGD and Adam, inproc and tcp.
// Also: bytes on the wire in closed form, 1/N of the split layers in memory,
// the shard map, and the configs it must refuse.
#include "engine/models/model.h"
#include "engine/trainer.h"

#include "param_match.h"

#include <QtTest>

#include <map>

using namespace smol::engine;
namespace test = smol::test;

class TestTensorParallel : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase();
    void matchesSingle_data();
    void matchesSingle();
    void bytesOnTheWire();
    void holdsItsSliceOfTheSplitLayers_data();
    void holdsItsSliceOfTheSplitLayers();
    void shardMapCoversEveryElementOnce();
    void rejectsBadConfigs_data();
    void rejectsBadConfigs();

private:
    std::map<int, TrainSummary> m_reference; // by optimizer kind
};

namespace {

constexpr std::int64_t kSteps = 3;
constexpr std::int64_t kBatch = 8;
constexpr std::int64_t kEmbd = 32, kHead = 4, kBlock = 16, kLayer = 2;

TrainConfig gptConfig(const std::string &strategy, int nodes, OptimizerConfig::Kind kind)
{
    TrainConfig c;
    c.strategy = strategy;
    c.nodes = nodes;
    c.steps = kSteps;
    c.globalBatch = kBatch;
    c.seed = 5;
    c.transport = smol::net::TransportKind::Inproc;
    c.optimizer.kind = kind;
    c.optimizer.lr = kind == OptimizerConfig::Kind::Adam ? 1e-3 : 0.1;
    c.model.kind = "gpt";
    c.model.nEmbd = kEmbd;
    c.model.nHead = kHead;
    c.model.blockSize = kBlock;
    c.model.nLayer = kLayer;
    return c;
}

// Elements of the split weights and biases: per block query, key, value
// (C x C + C each), attn.proj (C x C), fc (4C x C + 4C), proj (C x 4C).
constexpr std::int64_t kSplitElements = kLayer * (12 * kEmbd * kEmbd + 7 * kEmbd);

} // namespace

void TestTensorParallel::initTestCase()
{
    torch::set_num_threads(1);
    for (auto k : {OptimizerConfig::Kind::Sgd, OptimizerConfig::Kind::Adam})
        m_reference[int(k)] = runTraining(gptConfig("single", 1, k));
}

void TestTensorParallel::matchesSingle_data()
{
    QTest::addColumn<int>("nodes");
    QTest::addColumn<int>("optimizer");
    QTest::addColumn<bool>("tcp");
    for (int n : {2, 4})
        for (auto k : {OptimizerConfig::Kind::Sgd, OptimizerConfig::Kind::Adam})
            QTest::addRow("N%d/%s", n, optimizerName(k)) << n << int(k) << false;
    QTest::addRow("N2/adam/tcp") << 2 << int(OptimizerConfig::Kind::Adam) << true;
}

void TestTensorParallel::matchesSingle()
{
    QFETCH(int, nodes);
    QFETCH(int, optimizer);
    QFETCH(bool, tcp);
    const auto kind = OptimizerConfig::Kind(optimizer);
    TrainConfig c = gptConfig("tensor", nodes, kind);
    if (tcp)
        c.transport = smol::net::TransportKind::Tcp;
    const TrainSummary got = runTraining(c);
    const TrainSummary &want = m_reference.at(optimizer);
    const QString mismatch = test::paramMismatch(got, want);
    QVERIFY2(mismatch.isEmpty(), qPrintable(mismatch));
    // Every node computes the loss of the whole batch, as single does.
    for (std::size_t k = 0; k < want.lossCurve.size(); ++k)
        QVERIFY(std::abs(got.lossCurve[k] - want.lossCurve[k]) <= 1e-5 * std::abs(want.lossCurve[k]));
}

void TestTensorParallel::bytesOnTheWire()
{
    // Per step: 4 all-reduces per block of one (B, T, C) float32 activation,
    // each a ring sending 2(N-1)/N of it; then fullParameters() all-gathers
    // the split elements once ((N-1) slices of 1/N of them sent per node).
    const int N = 4;
    const TrainSummary s = runTraining(gptConfig("tensor", N, OptimizerConfig::Kind::Sgd));
    const std::uint64_t activation = 4 * kBatch * kBlock * kEmbd;
    const std::uint64_t perStep = 4 * kLayer * 2 * (N - 1) * activation / N;
    const std::uint64_t gather = (N - 1) * 4 * kSplitElements / N;
    for (auto sent : s.bytesSentPerNode)
        QCOMPARE(sent, kSteps * perStep + gather);
}

void TestTensorParallel::holdsItsSliceOfTheSplitLayers_data()
{
    QTest::addColumn<int>("nodes");
    QTest::newRow("N2") << 2;
    QTest::newRow("N4") << 4;
}

void TestTensorParallel::holdsItsSliceOfTheSplitLayers()
{
    QFETCH(int, nodes);
    TrainConfig c = gptConfig("tensor", nodes, OptimizerConfig::Kind::Adam);
    c.steps = 1;
    const TrainSummary s = runTraining(c);
    const std::int64_t P = s.paramCount;
    const std::int64_t held = P - kSplitElements + kSplitElements / nodes; // replicated + 1/N of the split
    for (const smol::net::MemoryByCategory &m : s.memoryPerNode) {
        QCOMPARE(m.params, 4 * held);
        QCOMPARE(m.grads, 4 * held);
        QCOMPARE(m.optimizer, 8 * held); // Adam's two moments
        // The full initial copies were freed: nothing like another 4P is live.
        QVERIFY2(m.live < m.params + m.grads + m.optimizer + 4 * (P - held),
                 qPrintable(QString("live %1 bytes").arg(m.live)));
    }
}

void TestTensorParallel::shardMapCoversEveryElementOnce()
{
    // Rank 0 of 2, set up without a network (setup needs none).
    TrainConfig c = gptConfig("tensor", 2, OptimizerConfig::Kind::Sgd);
    ModelConfig mc = c.model;
    std::shared_ptr<const DataSource> data = makeCharCorpus(c.seed, kBlock);
    mc.vocabSize = data->vocabSize();
    mc.seed = c.seed;
    std::unique_ptr<TrainModel> model = makeModel(mc);
    std::map<std::string, std::int64_t> numel;
    for (const auto &[name, p] : model->namedParameters())
        numel[name] = p.numel();
    std::unique_ptr<Strategy> tensor = makeStrategy("tensor");
    NodeContext ctx;
    ctx.rank = 0;
    ctx.nodes = 2;
    ctx.data = data;
    ctx.model = model.get();
    ctx.globalBatch = kBatch;
    tensor->setup(ctx);

    std::map<std::string, std::vector<int>> owner; // per element: owner, or -2 unseen
    for (const auto &[name, n] : numel)
        owner[name].assign(std::size_t(n), -2);
    std::int64_t mine = 0;
    for (const ShardRange &r : tensor->shards()) {
        QVERIFY(owner.count(r.param));
        QVERIFY(0 <= r.begin && r.begin < r.end && r.end <= numel[r.param]);
        for (std::int64_t i = r.begin; i < r.end; ++i) {
            QCOMPARE(owner[r.param][std::size_t(i)], -2);
            owner[r.param][std::size_t(i)] = r.owner;
        }
        QCOMPARE(r.materialised, r.owner == -1 || r.owner == 0);
        if (r.materialised)
            mine += r.end - r.begin;
    }
    for (const auto &[name, o] : owner)
        QVERIFY2(std::count(o.begin(), o.end(), -2) == 0, name.c_str());
    QCOMPARE(4 * mine, tensor->memory().params);
    // attn.proj is split by input features: row 0's first half is rank 0's, second half rank 1's.
    const auto &proj = owner["blocks.0.attn.proj.weight"];
    QCOMPARE(proj[0], 0);
    QCOMPARE(proj[std::size_t(kEmbd / 2)], 1);
    QCOMPARE(proj[std::size_t(kEmbd)], 0);
    QCOMPARE(owner["blocks.0.attn.proj.bias"][0], -1);
    QCOMPARE(owner["blocks.1.fc.bias"][std::size_t(4 * kEmbd - 1)], 1);
}

void TestTensorParallel::rejectsBadConfigs_data()
{
    QTest::addColumn<QString>("model");
    QTest::addColumn<int>("nodes");
    QTest::addColumn<QString>("reason");
    QTest::newRow("mlp") << "mlp" << 2 << "is not gpt";
    QTest::newRow("4 heads on 3 nodes") << "gpt" << 3 << "n_head 4 is not divisible by 3 nodes";
}

void TestTensorParallel::rejectsBadConfigs()
{
    QFETCH(QString, model);
    QFETCH(int, nodes);
    QFETCH(QString, reason);
    TrainConfig c = gptConfig("tensor", nodes, OptimizerConfig::Kind::Sgd);
    c.model.kind = model.toStdString();
    try {
        runTraining(c);
        QFAIL("accepted a bad config");
    } catch (const std::invalid_argument &e) {
        QVERIFY2(QString(e.what()).contains(reason), e.what());
        QVERIFY2(!QString(e.what()).contains('\n'), e.what());
    }
}

QTEST_GUILESS_MAIN(TestTensorParallel)
#include "tst_tensor_parallel.moc"
