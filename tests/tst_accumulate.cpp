// Gradient accumulation (--accumulate K, TrainConfig::accumulate): a run of
// K micro-steps of B samples a step ends where the run with a K x B global
// batch ends (every element within 1e-5, its loss curve too) on single,
// ddp (plain, uneven shares, Adam, PowerSGD), zero1, zero2, zero3, syncps
// and the dp axis of meshes (dp=2,tp=2; dp=2,pp=2 with its own
// micro-batches; zero3 on dp), with the same gradient collectives per step:
// the same count and bytes, so bytes per sample fall K times (zero3 gathers
// the layers again for every micro-step: two all-gathers more per layer and
// micro-step, the reduce-scatters unchanged). A step counts K x B samples.
// The strategies without accumulation refuse it in one line.
#include "param_match.h"

#include "engine/session/session_events.h"
#include "engine/strategies/zero3.h"
#include "engine/trainer.h"

#include <QtTest>

#include <map>
#include <mutex>
#include <string>
#include <tuple>

using namespace smol::engine;
using smol::net::CollectiveKind;

class TestAccumulate : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase();
    void matchesLargerBatch_data();
    void matchesLargerBatch();
    void stepCountsKTimesTheSamples();
    void lossRowsAddUpTheMicroSteps();
    void refusesWhereMeaningless_data();
    void refusesWhereMeaningless();
};

namespace {

constexpr std::int64_t kSteps = 3;
constexpr std::int64_t kK = 4;

// Every collective a run's nodes took part in, by (node, kind, bytes, name).
class CollectiveCounts : public SessionEventSink {
public:
    using Key = std::tuple<int, CollectiveKind, std::uint64_t, std::string>;
    void onSpan(const SpanEvent &s) override
    {
        if (s.kind != SpanEvent::Kind::Collective)
            return;
        std::lock_guard lock(m_mutex);
        ++m_counts[{s.node, s.collective, s.bytes, s.name}];
    }
    // Those whose name starts with `prefix` ("": all).
    std::map<Key, int> counts(const std::string &prefix = {}) const
    {
        std::lock_guard lock(m_mutex);
        std::map<Key, int> out;
        for (const auto &[key, count] : m_counts)
            if (std::get<3>(key).rfind(prefix, 0) == 0)
                out[key] = count;
        return out;
    }
    int total(const std::string &prefix) const
    {
        int n = 0;
        for (const auto &[key, count] : counts(prefix))
            n += count;
        return n;
    }
    // Those of one kind on one node.
    int of(int node, CollectiveKind kind) const
    {
        int n = 0;
        for (const auto &[key, count] : counts())
            if (std::get<0>(key) == node && std::get<1>(key) == kind)
                n += count;
        return n;
    }

private:
    mutable std::mutex m_mutex;
    std::map<Key, int> m_counts;
};

TrainConfig mlpConfig(const std::string &strategy, int nodes, std::int64_t batch)
{
    TrainConfig c;
    c.strategy = strategy;
    c.nodes = nodes;
    c.steps = kSteps;
    c.globalBatch = batch;
    c.seed = 7;
    c.transport = smol::net::TransportKind::Inproc;
    c.optimizer.lr = 0.1;
    c.bucketBytes = 64 * 1024; // several ddp buckets
    return c;
}

TrainConfig gptMeshConfig(const std::string &mesh, const std::string &dp, std::int64_t batch)
{
    TrainConfig c = mlpConfig(dp, 4, batch);
    c.mesh = mesh;
    c.model.kind = "gpt";
    c.model.nEmbd = 32;
    c.model.nHead = 4;
    c.model.blockSize = 16;
    c.model.nLayer = 2;
    return c;
}

QString checksums(const TrainSummary &accumulated, const TrainSummary &large)
{
    return QStringLiteral("checksum --accumulate %1 --global-batch B: %2, --global-batch %1B: %3")
        .arg(kK)
        .arg(accumulated.paramChecksum, 0, 'g', 10)
        .arg(large.paramChecksum, 0, 'g', 10);
}

} // namespace

void TestAccumulate::initTestCase() { torch::set_num_threads(1); }

void TestAccumulate::matchesLargerBatch_data()
{
    QTest::addColumn<QString>("strategy");
    QTest::addColumn<int>("nodes");
    QTest::addColumn<int>("batch"); // per micro-step: the large run has kK x batch
    QTest::addColumn<QString>("mesh");
    QTest::addColumn<bool>("adam");
    QTest::addColumn<QString>("compress");
    QTest::addColumn<int>("microBatches");
    QTest::addRow("single") << "single" << 1 << 32 << "" << false << "none" << 1;
    QTest::addRow("ddp") << "ddp" << 4 << 32 << "" << false << "none" << 1;
    QTest::addRow("ddp/adam") << "ddp" << 4 << 32 << "" << true << "none" << 1;
    QTest::addRow("ddp/uneven shares") << "ddp" << 3 << 31 << "" << false << "none" << 1;
    QTest::addRow("ddp/powersgd") << "ddp" << 4 << 32 << "" << false << "powersgd:2" << 1;
    QTest::addRow("zero1") << "zero1" << 4 << 32 << "" << false << "none" << 1;
    QTest::addRow("zero2") << "zero2" << 4 << 32 << "" << false << "none" << 1;
    QTest::addRow("zero3") << "zero3" << 4 << 32 << "" << false << "none" << 1;
    QTest::addRow("zero3/adam") << "zero3" << 2 << 32 << "" << true << "none" << 1;
    QTest::addRow("syncps (3 workers: uneven)") << "syncps" << 4 << 32 << "" << false << "none" << 1;
    QTest::addRow("mesh dp=2,tp=2/ddp") << "ddp" << 4 << 8 << "dp=2,tp=2" << false << "none" << 1;
    QTest::addRow("mesh dp=2,tp=2/zero3") << "zero3" << 4 << 8 << "dp=2,tp=2" << false << "none" << 1;
    QTest::addRow("mesh dp=2,pp=2/zero1, 2 micro-batches")
        << "zero1" << 4 << 8 << "dp=2,pp=2" << false << "none" << 2;
}

// K micro-steps of B against one step of K x B: the same parameters and
// losses, the same gradient collectives.
void TestAccumulate::matchesLargerBatch()
{
    QFETCH(QString, strategy);
    QFETCH(int, nodes);
    QFETCH(int, batch);
    QFETCH(QString, mesh);
    QFETCH(bool, adam);
    QFETCH(QString, compress);
    QFETCH(int, microBatches);
    auto config = [&](std::int64_t globalBatch) {
        TrainConfig c = mesh.isEmpty() ? mlpConfig(strategy.toStdString(), nodes, globalBatch)
                                       : gptMeshConfig(mesh.toStdString(), strategy.toStdString(), globalBatch);
        if (adam) {
            c.optimizer.kind = OptimizerConfig::Kind::Adam;
            c.optimizer.lr = 1e-3;
        }
        c.compression = parseCompression(compress.toStdString());
        c.compression.startStep = 1; // powersgd: compressed from the second step on
        c.microBatches = microBatches;
        return c;
    };
    TrainConfig accumulated = config(batch), large = config(kK * batch);
    accumulated.accumulate = kK;
    CollectiveCounts accumulatedCounts, largeCounts;
    accumulated.events = &accumulatedCounts;
    large.events = &largeCounts;
    const TrainSummary a = runTraining(accumulated), l = runTraining(large);

    const QString sums = checksums(a, l);
    const QString mismatch = smol::test::paramMismatch(a, l);
    QVERIFY2(mismatch.isEmpty(), qPrintable(mismatch + "; " + sums));
    QCOMPARE(a.lossCurve.size(), l.lossCurve.size());
    for (std::size_t s = 0; s < a.lossCurve.size(); ++s)
        QVERIFY2(std::abs(a.lossCurve[s] - l.lossCurve[s]) < 1e-5,
                 qPrintable(QStringLiteral("step %1's loss %2, the large batch's %3")
                                .arg(s)
                                .arg(a.lossCurve[s], 0, 'g', 10)
                                .arg(l.lossCurve[s], 0, 'g', 10)));

    if (strategy == "zero3" && mesh.isEmpty()) {
        // The layers gathered for each micro-step's forward and backward;
        // one reduce-scatter per layer and step, as the large batch's.
        for (int r = 0; r < nodes; ++r) {
            const int layers = largeCounts.of(r, CollectiveKind::ReduceScatter) / int(kSteps);
            QCOMPARE(accumulatedCounts.of(r, CollectiveKind::ReduceScatter),
                     largeCounts.of(r, CollectiveKind::ReduceScatter));
            QCOMPARE(accumulatedCounts.of(r, CollectiveKind::AllGather) - largeCounts.of(r, CollectiveKind::AllGather),
                     int(kSteps * (kK - 1) * 2 * layers));
            QVERIFY(a.bytesSentPerNode[std::size_t(r)] > l.bytesSentPerNode[std::size_t(r)]);
        }
        ClosedFormInput in;
        in.params = a.paramCount;
        in.nodes = nodes;
        in.accumulate = kK;
        const double perStep = strategies::zero3BytesPerStep(in)->mean;
        in.accumulate = 1;
        QCOMPARE(perStep / strategies::zero3BytesPerStep(in)->mean, double(2 * kK + 1) / 3);
        return;
    }
    if (!mesh.isEmpty()) {
        // The dp axis reduces the gradients (zero1 gathers the parameters,
        // zero3 the stage) once a step, as the large batch's run does; tp
        // runs its collectives in every micro-step's forward and backward,
        // K times as many, each on 1/K of the activations.
        const std::string dp = "dp \u00b7 ", tpForward = "tp \u00b7 f.";
        QVERIFY(!largeCounts.counts(dp + "grads").empty());
        QVERIFY2(accumulatedCounts.counts(dp) == largeCounts.counts(dp), "the dp axis's collectives differ");
        if (mesh.contains("tp"))
            QCOMPARE(accumulatedCounts.total(tpForward), int(kK) * largeCounts.total(tpForward));
        for (int r = 0; r < nodes; ++r)
            QCOMPARE(a.bytesInStepsByAxis[std::size_t(r)].at("dp"), l.bytesInStepsByAxis[std::size_t(r)].at("dp"));
        return;
    }
    // The same collectives with the same bytes: K times the samples for them.
    QVERIFY(nodes == 1 || !largeCounts.counts().empty());
    QVERIFY2(accumulatedCounts.counts() == largeCounts.counts(), "the collectives differ");
    QCOMPARE(a.bytesSentPerNode, l.bytesSentPerNode);
}

// samples/s counts K x B samples a step (StepReport and the summary alike).
void TestAccumulate::stepCountsKTimesTheSamples()
{
    struct Samples : TrainObserver {
        void onStep(const StepReport &r) override
        {
            std::lock_guard lock(mutex);
            perStep.push_back(r.samplesPerS * r.seconds / double(r.step + 1));
        }
        std::mutex mutex;
        std::vector<double> perStep;
    } samples;
    TrainConfig c = mlpConfig("ddp", 2, 16);
    c.accumulate = 3;
    const TrainSummary s = runTraining(c, &samples);
    QCOMPARE(samples.perStep.size(), std::size_t(kSteps));
    for (double n : samples.perStep)
        QVERIFY2(std::abs(n - 48) < 1e-6, qPrintable(QStringLiteral("%1 samples a step, not 48").arg(n)));
    QVERIFY(s.seconds > 0);
    QVERIFY2(std::abs(s.samplesPerS * s.seconds - 48.0 * kSteps) < 1e-6,
             qPrintable(QStringLiteral("%1 samples in the run").arg(s.samplesPerS * s.seconds)));
}

// A rank's reported loss is the mean over all its micro-batches' rows.
void TestAccumulate::lossRowsAddUpTheMicroSteps()
{
    const auto ddp = makeStrategy("ddp"), syncps = makeStrategy("syncps");
    // 10 x 3 rows over 3 x 4 micro-shares: 3 3 3 3 | 3 3 2 2 | 2 2 2 2.
    QCOMPARE(lossRows(*ddp, 10, 4, 3), (std::vector<std::int64_t>{8, 8, 7, 7}));
    QCOMPARE(lossRows(*ddp, 10, 4, 1), (std::vector<std::int64_t>{3, 3, 2, 2}));
    QVERIFY(lossRows(*ddp, 12, 4, 3).empty()); // even: a plain mean
    // 7 x 2 over 2 x 3 worker shares: 3 3 2 | 2 2 2.
    QCOMPARE(lossRows(*syncps, 7, 4, 2), (std::vector<std::int64_t>{0, 5, 5, 4}));
}

void TestAccumulate::refusesWhereMeaningless_data()
{
    QTest::addColumn<QString>("strategy");
    QTest::addColumn<int>("nodes");
    QTest::addColumn<QString>("model");
    QTest::addRow("edp") << "edp" << 3 << "mlp";
    QTest::addRow("tensor") << "tensor" << 2 << "gpt";
    QTest::addRow("pipeline") << "pipeline" << 2 << "mlp";
}

// Refused in one line before any node starts, by runTraining and by the
// check a cluster's coordinator makes (Strategy::checkContext).
void TestAccumulate::refusesWhereMeaningless()
{
    QFETCH(QString, strategy);
    QFETCH(int, nodes);
    QFETCH(QString, model);
    TrainConfig c = mlpConfig(strategy.toStdString(), nodes, 16);
    c.model.kind = model.toStdString();
    c.model.nEmbd = 32;
    c.model.blockSize = 16;
    c.accumulate = 2;
    try {
        runTraining(c);
        QFAIL("accumulation was not refused");
    } catch (const std::invalid_argument &e) {
        const QString why = e.what();
        QVERIFY2(why.startsWith("--accumulate 2: ") && !why.contains('\n'), qPrintable(why));
    }
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                             makeStrategy(c.strategy)->checkContext(c.model, nodeContextOf(c, 0)));
    c.accumulate = 1;
    makeStrategy(c.strategy)->checkContext(c.model, nodeContextOf(c, 0)); // without: fine
    for (std::int64_t bad : {std::int64_t(0), kMaxAccumulate + 1}) {
        TrainConfig d = mlpConfig("ddp", 2, 16);
        d.accumulate = bad;
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, validateConfig(d));
    }
}

QTEST_GUILESS_MAIN(TestAccumulate)
#include "tst_accumulate.moc"
