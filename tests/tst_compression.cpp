// Gradient compression (engine/grad_compressor.h) on real runs: its bytes on
// the wire against plain ddp, its convergence (not equality: compressed runs
// differ from single by design), the replicas staying identical, the mesh's
// dp axis, Gloo, and the configurations it refuses in one line.
#include "engine/grad_compressor.h"
#include "engine/session/session_events.h"
#include "engine/trainer.h"
#include "net/communicator.h"

#include <QtTest>

#include <mutex>
#include <set>

using namespace smol::engine;

class TestCompression : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void parsesAndRefuses();
    void fp16HalvesTheBytes();
    void powerSgdSendsFactorsAndConverges();
    void powerSgdOnTheMeshDpAxis();
    void fp16OnGloo();
};

namespace {

TrainConfig mlpConfig(const std::string &compress, std::int64_t steps, int nodes = 4)
{
    TrainConfig c;
    c.strategy = "ddp";
    c.nodes = nodes;
    c.steps = steps;
    c.globalBatch = 120;
    c.seed = 3;
    c.optimizer.lr = 0.1;
    c.transport = smol::net::TransportKind::Inproc;
    c.compression = parseCompression(compress);
    return c;
}

// Collective spans' names and the all-reduce algorithm each ran with.
class SpanNames : public SessionEventSink {
public:
    void onSpan(const SpanEvent &s) override
    {
        if (s.kind != SpanEvent::Kind::Collective)
            return;
        std::lock_guard lock(m_mutex);
        m_names.insert(s.name);
    }
    std::set<std::string> names()
    {
        std::lock_guard lock(m_mutex);
        return m_names;
    }

private:
    std::mutex m_mutex;
    std::set<std::string> m_names;
};

} // namespace

void TestCompression::parsesAndRefuses()
{
    QCOMPARE(parseCompression("powersgd:4").rank, 4);
    QCOMPARE(parseCompression("powersgd").rank, 1);
    QCOMPARE(parseCompression("bf16").text(), std::string("bf16"));
    for (const char *bad : {"powersgd:0", "powersgd:65", "powersgd:x", "fp8", "powersgd:2x"})
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, parseCompression(bad));

    TrainConfig zero = mlpConfig("fp16", 2);
    zero.strategy = "zero1";
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, validateConfig(zero));
    TrainConfig gloo = mlpConfig("bf16", 2);
    gloo.backend = TrainConfig::Backend::Gloo;
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, validateConfig(gloo));
    TrainConfig algo = mlpConfig("none", 2);
    algo.allReduce = "tree";
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, validateConfig(algo));
    QCOMPARE(allReduceAlgorithmOf(mlpConfig("none", 2)), smol::net::AllReduceAlgorithm::Ring);
    QCOMPARE(allReduceAlgorithmOf(mlpConfig("powersgd:2", 2)), smol::net::AllReduceAlgorithm::Auto);
}

// fp16: exactly half of plain ddp's bytes (the same ring over half-size
// elements), a loss that still falls like plain ddp's.
void TestCompression::fp16HalvesTheBytes()
{
    TrainConfig plain = mlpConfig("none", 30), half = mlpConfig("fp16", 30);
    SpanNames spans;
    half.events = &spans;
    const TrainSummary p = runTraining(plain), h = runTraining(half);
    const double pb = p.extra.at("bytes_per_node_per_step"), hb = h.extra.at("bytes_per_node_per_step");
    QVERIFY2(std::abs(hb / pb - 0.5) < 0.005, qPrintable(QStringLiteral("fp16/plain bytes %1").arg(hb / pb)));
    QCOMPARE(h.bytesSentPerNode[1] * 2, p.bytesSentPerNode[1]);
    QVERIFY(spans.names().count("grads.bucket0.fp16"));
    QVERIFY2(h.lossCurve.back() < 0.8 * h.lossCurve.front(), "fp16 run did not learn");
    QVERIFY2(std::abs(h.finalLoss - p.finalLoss) < 0.05,
             qPrintable(QStringLiteral("fp16 %1 vs plain %2").arg(h.finalLoss).arg(p.finalLoss)));
}

// powersgd:2: plain for --compress-start steps, then P's and Q's all-reduces
// (named so) carrying under 3% of plain's bytes; it converges close to plain
// ddp, and the error buffers and Qs are held as optimizer state.
void TestCompression::powerSgdSendsFactorsAndConverges()
{
    TrainConfig plain = mlpConfig("none", 150), psgd = mlpConfig("powersgd:2", 150);
    psgd.compression.startStep = 5;
    SpanNames spans;
    psgd.events = &spans;
    const TrainSummary p = runTraining(plain), s = runTraining(psgd);
    const double ratio = s.extra.at("bytes_per_node_per_step") / p.extra.at("bytes_per_node_per_step");
    QVERIFY2(ratio > 0.005 && ratio <= 0.03, qPrintable(QStringLiteral("powersgd/plain bytes %1").arg(ratio)));
    QCOMPARE(s.extra.at("bytes_per_step_from"), 5.0);
    const auto names = spans.names();
    QVERIFY(names.count("grads.bucket0")); // the plain start
    // P and Q are small: auto runs them by recursive doubling, and says so.
    QVERIFY(names.count("grads.bucket0.P (doubling)"));
    QVERIFY(names.count("grads.bucket0.Q (doubling)"));
    QVERIFY2(s.testAccuracy > p.testAccuracy - 0.04,
             qPrintable(QStringLiteral("powersgd %1 vs plain %2").arg(s.testAccuracy).arg(p.testAccuracy)));
    QVERIFY(s.memoryPerNode[0].optimizer > 0); // sgd has no state of its own: this is PowerSGD's
    QCOMPARE(p.memoryPerNode[0].optimizer, std::int64_t(0));
}

// The dp axis of a mesh compresses its one all-reduce of the stage's
// gradients; tp's collectives stay plain.
void TestCompression::powerSgdOnTheMeshDpAxis()
{
    TrainConfig c = mlpConfig("powersgd:1", 12);
    c.mesh = "dp=2,pp=2";
    c.compression.startStep = 2;
    SpanNames spans;
    c.events = &spans;
    const TrainSummary s = runTraining(c);
    QVERIFY(std::isfinite(s.finalLoss));
    const auto names = spans.names();
    QVERIFY2(names.count("dp \u00b7 grads.P (doubling)") && names.count("dp \u00b7 grads.Q (doubling)"),
             qPrintable(QStringLiteral("%1 collective names").arg(names.size())));
}

void TestCompression::fp16OnGloo()
{
    TrainConfig c = mlpConfig("fp16", 10, 2);
    c.backend = TrainConfig::Backend::Gloo;
    const TrainSummary s = runTraining(c);
    QVERIFY(std::isfinite(s.finalLoss));
    QVERIFY(s.lossCurve.back() < s.lossCurve.front());
}

QTEST_GUILESS_MAIN(TestCompression)
#include "tst_compression.moc"
