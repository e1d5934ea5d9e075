// Mixed precision (--precision bf16, ModelConfig::precision): bf16
// parameters and gradients for compute and on the wire, float32 master
// weights and Adam moments in the optimizer (engine/flat_optimizer.h).
// Checks: the optimizer's master update is the float32 update, rounded; the
// model states per node are the ZeRO paper's 2P + 2P + 12P (ddp) and its
// sharded forms (zero1-3), exactly, and the strategies' closed forms say
// the same; ddp's wire bytes are half of fp32's; the loss follows fp32's;
// the parameters are bf16 on every node and identical across ddp's
// replicas; a resume from a checkpoint (the master weights and moments)
// continues bit for bit; pipeline and the gpt run in bf16; Gloo,
// TorchScript and --compress refuse it in one line.
#include "engine/models/model.h"
#include "engine/trainer.h"
#include "net/communicator.h"
#include "net/transport.h"

#include <QtTest>

#include <cstring>
#include <map>
#include <thread>

using namespace smol::engine;
using smol::net::Communicator;

class TestPrecision : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void masterUpdateIsTheFloatUpdateRounded();
    void modelStatesAreTheZeroPapers_data();
    void modelStatesAreTheZeroPapers();
    void wireBytesHalve();
    void lossFollowsFp32();
    void replicasHoldIdenticalBf16();
    void resumeContinuesExactly();
    void pipelineAndGptRun();
    void refusesInOneLine();
};

namespace {

TrainConfig mlpConfig(const std::string &strategy, int nodes, Precision precision, bool adam = true)
{
    TrainConfig c;
    c.strategy = strategy;
    c.nodes = nodes;
    c.steps = 2;
    c.globalBatch = 120;
    c.seed = 5;
    c.transport = smol::net::TransportKind::Inproc;
    c.model.precision = precision;
    if (adam) {
        c.optimizer.kind = OptimizerConfig::Kind::Adam;
        c.optimizer.lr = 1e-3;
    }
    return c;
}

std::int64_t chunkOf(std::int64_t numel, int nodes, int rank)
{
    return std::int64_t(Communicator::chunk(std::size_t(numel), nodes, rank).count);
}

// Every node's result of a run, each node a thread running runNode over
// inproc transports (what runTraining does, keeping every node's result).
std::vector<NodeResult> runEveryNode(TrainConfig c, const std::function<void(NodeRun &)> &adjust = {})
{
    c.model.seed = c.seed;
    const auto data = loadTrainingData(c);
    auto mesh = smol::net::makeLocalMesh(smol::net::TransportKind::Inproc, c.nodes, "precision");
    std::vector<std::unique_ptr<Communicator>> comms;
    for (auto &t : mesh)
        comms.push_back(std::make_unique<Communicator>(*t));
    std::vector<NodeResult> results(std::size_t(c.nodes));
    std::vector<std::string> errors(std::size_t(c.nodes));
    std::vector<std::thread> threads;
    for (int r = 0; r < c.nodes; ++r)
        threads.emplace_back([&, r] {
            try {
                NodeRun run;
                run.rank = r;
                run.memorySlot = r;
                run.comm = comms[std::size_t(r)].get();
                run.data = data;
                if (adjust)
                    adjust(run);
                results[std::size_t(r)] = runNode(c, run);
            } catch (const std::exception &e) {
                errors[std::size_t(r)] = e.what();
                mesh[std::size_t(r)]->abort();
            }
        });
    for (auto &t : threads)
        t.join();
    for (const auto &e : errors)
        if (!e.empty())
            throw std::runtime_error(e);
    return results;
}

bool sameBits(const torch::Tensor &a, const torch::Tensor &b)
{
    return a.scalar_type() == b.scalar_type() && a.numel() == b.numel() &&
           std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0;
}

} // namespace

// The master of a bf16 optimizer follows exactly the float32 optimizer that
// starts from the same (bf16-representable) values and sees the same
// gradients; the bf16 parameters are the master rounded to nearest even.
void TestPrecision::masterUpdateIsTheFloatUpdateRounded()
{
    for (auto kind : {OptimizerConfig::Kind::Sgd, OptimizerConfig::Kind::Adam}) {
        OptimizerConfig cfg;
        cfg.kind = kind;
        cfg.lr = 0.01;
        const std::int64_t n = 150000; // more than two of the update's 64K chunks
        torch::Tensor p16 = torch::randn({n}).to(torch::kBFloat16);
        torch::Tensor p32 = p16.to(torch::kFloat32);
        FlatOptimizer o16(cfg, n), o32(cfg, n);
        for (int s = 0; s < 4; ++s) {
            const torch::Tensor g = torch::randn({n}).to(torch::kBFloat16);
            o16.step(p16, g);
            o32.step(p32, g.to(torch::kFloat32));
        }
        QVERIFY(o16.hasMaster());
        QVERIFY(sameBits(o16.master(), p32));
        QVERIFY(sameBits(p16, p32.to(torch::kBFloat16)));
        QCOMPARE(p16.scalar_type(), torch::kBFloat16);
        // State: master 4 bytes an element (+ Adam's 8); fp32 keeps none.
        std::int64_t b16 = 0, b32 = 0;
        for (const auto &t : o16.state())
            b16 += std::int64_t(t.nbytes());
        for (const auto &t : o32.state())
            b32 += std::int64_t(t.nbytes());
        QCOMPARE(b16, (kind == OptimizerConfig::Kind::Adam ? 12 : 4) * n);
        QCOMPARE(b32, (kind == OptimizerConfig::Kind::Adam ? 8 : 0) * n);
    }
    OptimizerConfig sgd;
    FlatOptimizer o(sgd, 3);
    torch::Tensor half = torch::zeros({3}, torch::kHalf);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, o.step(half, half));
}

void TestPrecision::modelStatesAreTheZeroPapers_data()
{
    QTest::addColumn<QString>("strategy");
    QTest::addColumn<int>("nodes");
    QTest::newRow("ddp 2") << QStringLiteral("ddp") << 2;
    QTest::newRow("zero1 4") << QStringLiteral("zero1") << 4;
    QTest::newRow("zero2 4") << QStringLiteral("zero2") << 4;
    QTest::newRow("zero3 2") << QStringLiteral("zero3") << 2;
    QTest::newRow("zero3 4") << QStringLiteral("zero3") << 4;
}

// Adam with bf16: 2 bytes a parameter, 2 a gradient, 12 of optimizer state
// (4 master + 8 moments) per element a node updates: 16P for ddp, and zero1
// 2P + 2P + 12P/N, zero2 2P + (2P + 12P)/N, zero3 16P/N, element for
// element (N's chunks of the flat vector, or of each layer's for zero3).
void TestPrecision::modelStatesAreTheZeroPapers()
{
    QFETCH(QString, strategy);
    QFETCH(int, nodes);
    const TrainConfig c = mlpConfig(strategy.toStdString(), nodes, Precision::Bf16);
    const TrainSummary s = runTraining(c);
    const std::int64_t P = s.paramCount;
    std::vector<std::int64_t> layerNumel; // zero3 cuts each layer on its own
    {
        ModelConfig m = c.model;
        auto model = makeModel(m);
        std::map<std::string, std::int64_t> numel;
        for (const auto &[name, p] : model->namedParameters()) {
            QCOMPARE(p.scalar_type(), torch::kBFloat16);
            numel[name] = p.numel();
        }
        for (const auto &layer : model->layers()) {
            std::int64_t n = 0;
            for (const auto &name : layer.paramNames)
                n += numel.at(name);
            layerNumel.push_back(n);
        }
    }
    std::int64_t total = 0;
    for (int r = 0; r < nodes; ++r) {
        const smol::net::MemoryByCategory &m = s.memoryPerNode[std::size_t(r)];
        std::int64_t mine = chunkOf(P, nodes, r);
        if (strategy == "zero3") {
            mine = 0;
            for (std::int64_t n : layerNumel)
                mine += chunkOf(n, nodes, r);
        }
        const std::int64_t params = strategy == "zero3" ? mine : P;
        const std::int64_t grads = strategy == "zero2" || strategy == "zero3" ? mine : P;
        const std::int64_t updated = strategy == "ddp" ? P : mine;
        QCOMPARE(m.params, 2 * params);
        QCOMPARE(m.grads, 2 * grads);
        QCOMPARE(m.optimizer, 12 * updated);
        total += m.params + m.grads + m.optimizer;
        // The description's closed form (16P/N rounded down for zero3),
        // within the bytes the uneven chunks add.
        ClosedFormInput in{P, nodes, /*adam=*/true, /*accumulate=*/1, /*bf16=*/true};
        const std::int64_t closed = *describeStrategy(strategy.toStdString())->modelStateBytes(in);
        QVERIFY2(std::abs(m.params + m.grads + m.optimizer - closed) <= 16 * std::int64_t(layerNumel.size()),
                 qPrintable(QStringLiteral("rank %1 holds %2 B, closed form %3 B")
                                .arg(r)
                                .arg(m.params + m.grads + m.optimizer)
                                .arg(closed)));
        if (strategy == "ddp")
            QCOMPARE(m.params + m.grads + m.optimizer, 16 * P);
    }
    if (strategy == "zero3")
        QCOMPARE(total, 16 * P); // 16P over the N nodes, exactly
}

// ddp's gradients travel as bf16: the nodes' payload bytes are exactly half
// of fp32's (one bucket: every rank's; default buckets: their sum, each
// rank within the odd element per bucket its ring rounds).
void TestPrecision::wireBytesHalve()
{
    for (std::int64_t bucket : {std::int64_t(1) << 30, std::int64_t(256 * 1024)}) {
        TrainConfig f = mlpConfig("ddp", 2, Precision::Fp32), b = mlpConfig("ddp", 2, Precision::Bf16);
        f.bucketBytes = b.bucketBytes = bucket;
        const TrainSummary sf = runTraining(f), sb = runTraining(b);
        std::uint64_t totalF = 0, totalB = 0;
        for (int r = 0; r < 2; ++r) {
            totalF += sf.bytesSentPerNode[std::size_t(r)];
            totalB += sb.bytesSentPerNode[std::size_t(r)];
            const double ratio = double(sb.bytesSentPerNode[std::size_t(r)]) / double(sf.bytesSentPerNode[std::size_t(r)]);
            QVERIFY2(std::abs(ratio - 0.5) < 1e-4, qPrintable(QStringLiteral("bf16/fp32 bytes %1").arg(ratio)));
            if (bucket > 4 * sf.paramCount)
                QCOMPARE(2 * sb.bytesSentPerNode[std::size_t(r)], sf.bytesSentPerNode[std::size_t(r)]);
        }
        QCOMPARE(2 * totalB, totalF);
    }
}

// The loss of a bf16 run follows fp32's: the figure, within 2%
// after 300 steps (ddp on 2 nodes, SGD as smolctl's default), and within 3%
// after 40 steps of Adam, falling as fast (ddp; zero3's too).
void TestPrecision::lossFollowsFp32()
{
    {
        TrainConfig f = mlpConfig("ddp", 2, Precision::Fp32, /*adam=*/false);
        TrainConfig b = mlpConfig("ddp", 2, Precision::Bf16, /*adam=*/false);
        f.steps = b.steps = 300;
        const TrainSummary sf = runTraining(f), sb = runTraining(b);
        QVERIFY2(std::abs(sb.finalLoss - sf.finalLoss) < 0.02 * sf.finalLoss,
                 qPrintable(QStringLiteral("300 steps: bf16 %1 vs fp32 %2").arg(sb.finalLoss).arg(sf.finalLoss)));
    }
    for (const char *strategy : {"ddp", "zero3"}) {
        TrainConfig f = mlpConfig(strategy, 2, Precision::Fp32), b = mlpConfig(strategy, 2, Precision::Bf16);
        f.steps = b.steps = 40;
        const TrainSummary sf = runTraining(f), sb = runTraining(b);
        QVERIFY2(sb.finalLoss < 0.6 * sb.lossCurve.front(), "the bf16 run did not learn");
        QVERIFY2(std::abs(sb.finalLoss - sf.finalLoss) < 0.03 * sf.finalLoss,
                 qPrintable(QStringLiteral("%1: bf16 %2 vs fp32 %3").arg(strategy).arg(sb.finalLoss).arg(sf.finalLoss)));
        QVERIFY2(std::abs(sb.testAccuracy - sf.testAccuracy) < 0.03,
                 qPrintable(QStringLiteral("accuracy bf16 %1 vs fp32 %2").arg(sb.testAccuracy).arg(sf.testAccuracy)));
        QVERIFY(std::isfinite(sb.paramChecksum));
    }
}

// Every ddp replica ends with the same bf16 parameters, bit for bit, and
// they are the ones the summary reports (its checksum is theirs, widened).
void TestPrecision::replicasHoldIdenticalBf16()
{
    TrainConfig c = mlpConfig("ddp", 3, Precision::Bf16);
    c.steps = 5;
    c.globalBatch = 121; // uneven shares too
    const std::vector<NodeResult> nodes = runEveryNode(c);
    for (const NodeResult &n : nodes) {
        QCOMPARE(n.finalParams.scalar_type(), torch::kBFloat16);
        QVERIFY(sameBits(n.finalParams, nodes.front().finalParams));
        QCOMPARE(n.memory.params, 2 * n.finalParams.numel());
    }
    const TrainSummary s = runTraining(c);
    QVERIFY(sameBits(s.finalParams, nodes.front().finalParams));
    QCOMPARE(s.paramChecksum, nodes.front().finalParams.to(torch::kFloat64).sum().item<double>());
}

// A checkpoint of a bf16 run holds the float32 master weights (and Adam's
// moments): resumed from it, a run ends bit for bit where the uninterrupted
// one does (ddp and zero2, Adam; zero3, SGD).
void TestPrecision::resumeContinuesExactly()
{
    for (auto [strategy, adam] : {std::pair{"ddp", true}, std::pair{"zero2", true}, std::pair{"zero3", false}}) {
        TrainConfig c = mlpConfig(strategy, 2, Precision::Bf16, adam);
        c.steps = 6;
        torch::Tensor savedParams;
        OptimizerMoments saved;
        std::int64_t savedAfter = 0;
        const std::vector<NodeResult> whole = runEveryNode(c, [&](NodeRun &run) {
            run.checkpointEvery = 3;
            if (run.rank == 0)
                run.onCheckpoint = [&](std::int64_t done, const torch::Tensor &params, const OptimizerMoments &m) {
                    savedAfter = done;
                    savedParams = params.clone();
                    saved = m;
                };
        });
        QCOMPARE(savedAfter, std::int64_t(3));
        QVERIFY(savedParams.defined());
        QCOMPARE(savedParams.scalar_type(), torch::kFloat32); // the master, not its rounding
        QCOMPARE(saved.defined(), adam);
        const std::vector<NodeResult> resumed = runEveryNode(c, [&](NodeRun &run) {
            run.firstStep = 3;
            run.initialParams = savedParams;
            run.initialMoments = saved.defined() ? OptimizerMoments{saved.exp, saved.expSq, {}} : OptimizerMoments{};
        });
        QVERIFY2(sameBits(resumed.front().finalParams, whole.front().finalParams),
                 qPrintable(QStringLiteral("%1: resumed run differs").arg(strategy)));
        QVERIFY(!resumed.front().momentsRestarted);
    }
}

// The stage links carry bf16 activations (pipeline), and the gpt computes
// in bf16 (LayerNorm, GELU, softmax) under ddp and tensor parallelism.
void TestPrecision::pipelineAndGptRun()
{
    TrainConfig pipe = mlpConfig("pipeline", 2, Precision::Bf16);
    pipe.steps = 20;
    pipe.microBatches = 4;
    const TrainSummary p = runTraining(pipe);
    QVERIFY2(p.finalLoss < 0.8 * p.lossCurve.front(), "bf16 pipeline did not learn");
    QCOMPARE(p.finalParams.scalar_type(), torch::kBFloat16);
    for (const char *strategy : {"ddp", "tensor"}) {
        TrainConfig g = mlpConfig(strategy, 2, Precision::Bf16);
        g.model.kind = "gpt";
        g.model.blockSize = 16;
        g.globalBatch = 8;
        g.steps = 15;
        g.optimizer.lr = 3e-3;
        const TrainSummary s = runTraining(g);
        QVERIFY2(std::isfinite(s.finalLoss) && s.finalLoss < s.lossCurve.front(),
                 qPrintable(QStringLiteral("gpt %1 bf16: %2 -> %3").arg(strategy).arg(s.lossCurve.front()).arg(s.finalLoss)));
        QCOMPARE(s.finalParams.scalar_type(), torch::kBFloat16);
    }
}

void TestPrecision::refusesInOneLine()
{
    TrainConfig gloo = mlpConfig("ddp", 2, Precision::Bf16);
    gloo.backend = TrainConfig::Backend::Gloo;
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, validateConfig(gloo));
    TrainConfig script = mlpConfig("ddp", 2, Precision::Bf16);
    script.model.kind = "/nonexistent/model.pt";
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, validateConfig(script));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, makeModel(script.model));
    TrainConfig compress = mlpConfig("ddp", 2, Precision::Bf16);
    compress.compression = parseCompression("fp16");
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, validateConfig(compress));
    // fp32 stays allowed on all of them but the missing file.
    TrainConfig fine = mlpConfig("ddp", 2, Precision::Fp32);
    fine.backend = TrainConfig::Backend::Gloo;
    validateConfig(fine);
}

QTEST_GUILESS_MAIN(TestPrecision)
#include "tst_precision.moc"
