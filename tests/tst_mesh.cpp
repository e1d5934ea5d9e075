// The device mesh (engine/strategies/mesh.cpp) against the single-node
// reference on a small gpt: every pair of axes on 4 nodes and dp x tp x pp
// on 8, sgd and adam, ddp, zero1, zero2 and zero3 on the dp axis, end where single ends
// (param_match.h's bounds); the losses are single's. Also the meshes and
// models it must refuse, in one line, before any node starts.
#include "engine/models/model.h"
#include "engine/trainer.h"
#include "net/communicator.h"
#include "net/device_mesh.h"

#include "param_match.h"

#include <QtTest>

#include <map>

using namespace smol::engine;
namespace test = smol::test;

class TestMesh : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase();
    void matchesSingle_data();
    void matchesSingle();
    void mlpOnDpAndPp();
    void zero3KeepsAShardBetweenSteps();
    void bytesPerAxisInClosedForm_data();
    void bytesPerAxisInClosedForm();
    void refusesBadMeshes_data();
    void refusesBadMeshes();

private:
    std::map<int, TrainSummary> m_reference; // by optimizer kind
};

namespace {

constexpr std::int64_t kSteps = 3;
constexpr std::int64_t kBatch = 8;

TrainConfig gptConfig(const std::string &mesh, int nodes, OptimizerConfig::Kind kind)
{
    TrainConfig c;
    c.strategy = mesh.empty() ? "single" : "ddp";
    c.mesh = mesh;
    c.nodes = nodes;
    c.steps = kSteps;
    c.globalBatch = kBatch;
    c.seed = 5;
    c.transport = smol::net::TransportKind::Inproc;
    c.optimizer.kind = kind;
    c.optimizer.lr = kind == OptimizerConfig::Kind::Adam ? 1e-3 : 0.1;
    c.model.kind = "gpt";
    c.model.nEmbd = 32;
    c.model.nHead = 4;
    c.model.blockSize = 16;
    c.model.nLayer = 2;
    return c;
}

} // namespace

void TestMesh::initTestCase()
{
    torch::set_num_threads(1);
    for (auto k : {OptimizerConfig::Kind::Sgd, OptimizerConfig::Kind::Adam})
        m_reference[int(k)] = runTraining(gptConfig("", 1, k));
}

void TestMesh::matchesSingle_data()
{
    QTest::addColumn<QString>("mesh");
    QTest::addColumn<int>("nodes");
    QTest::addColumn<QString>("dp");
    QTest::addColumn<int>("microBatches");
    QTest::addColumn<bool>("tcp");
    QTest::addColumn<bool>("gloo");
    const char *pairs[] = {"dp=2,tp=2", "dp=2,pp=2", "dp=2,cp=2", "tp=2,pp=2", "tp=2,cp=2", "pp=2,cp=2"};
    for (const char *mesh : pairs)
        QTest::addRow("%s/ddp", mesh) << QString(mesh) << 4 << "ddp" << 1 << false << false;
    QTest::addRow("dp=2,tp=2/zero1") << "dp=2,tp=2" << 4 << "zero1" << 1 << false << false;
    QTest::addRow("dp=2,cp=2/zero2") << "dp=2,cp=2" << 4 << "zero2" << 1 << false << false;
    QTest::addRow("pp=2,tp=2/2 micro-batches") << "pp=2,tp=2" << 4 << "ddp" << 2 << false << false;
    QTest::addRow("cp=4") << "cp=4" << 4 << "ddp" << 1 << false << false;
    QTest::addRow("dp=2,tp=2,sp") << "dp=2,tp=2,sp" << 4 << "ddp" << 1 << false << false;
    QTest::addRow("tp=2,pp=2,sp/2 micro-batches") << "tp=2,pp=2,sp" << 4 << "ddp" << 2 << false << false;
    QTest::addRow("tp=2,cp=2,sp") << "tp=2,cp=2,sp" << 4 << "zero1" << 1 << false << false;
    QTest::addRow("tp=4,sp") << "tp=4,sp" << 4 << "ddp" << 1 << false << false;
    QTest::addRow("dp=2,tp=2,pp=2/ddp") << "dp=2,tp=2,pp=2" << 8 << "ddp" << 2 << false << false;
    QTest::addRow("dp=2,tp=2,pp=2/zero1") << "dp=2,tp=2,pp=2" << 8 << "zero1" << 1 << false << false;
    // zero3: the stage gathered once a step for all its micro-batches.
    QTest::addRow("dp=2,tp=2/zero3") << "dp=2,tp=2" << 4 << "zero3" << 1 << false << false;
    QTest::addRow("dp=2,pp=2/zero3") << "dp=2,pp=2" << 4 << "zero3" << 2 << false << false;
    QTest::addRow("dp=2,cp=2/zero3") << "dp=2,cp=2" << 4 << "zero3" << 1 << false << false;
    QTest::addRow("dp=2,tp=2,pp=2/zero3") << "dp=2,tp=2,pp=2" << 8 << "zero3" << 2 << false << false;
    QTest::addRow("dp=2,tp=2,pp=2/tcp") << "dp=2,tp=2,pp=2" << 8 << "ddp" << 1 << true << false;
    // The same groups as Gloo's process groups (a ProcessGroupGloo each).
    QTest::addRow("dp=2,tp=2,pp=2/gloo") << "dp=2,tp=2,pp=2" << 8 << "zero1" << 2 << false << true;
    QTest::addRow("tp=2,cp=2,sp/gloo") << "tp=2,cp=2,sp" << 4 << "ddp" << 1 << false << true;
}

void TestMesh::matchesSingle()
{
    QFETCH(QString, mesh);
    QFETCH(int, nodes);
    QFETCH(QString, dp);
    QFETCH(int, microBatches);
    QFETCH(bool, tcp);
    QFETCH(bool, gloo);
    for (auto kind : {OptimizerConfig::Kind::Sgd, OptimizerConfig::Kind::Adam}) {
        TrainConfig c = gptConfig(mesh.toStdString(), nodes, kind);
        c.strategy = dp.toStdString();
        c.microBatches = microBatches;
        if (tcp)
            c.transport = smol::net::TransportKind::Tcp;
        if (gloo)
            c.backend = TrainConfig::Backend::Gloo;
        const TrainSummary got = runTraining(c);
        const TrainSummary &want = m_reference.at(int(kind));
        const QString mismatch = test::paramMismatch(got, want);
        QVERIFY2(mismatch.isEmpty(), qPrintable(QString(optimizerName(kind)) + ": " + mismatch));
        for (std::size_t k = 0; k < want.lossCurve.size(); ++k)
            QVERIFY2(std::abs(got.lossCurve[k] - want.lossCurve[k]) <= 1e-5 * std::abs(want.lossCurve[k]),
                     qPrintable(QString("step %1: loss %2, single %3").arg(k).arg(got.lossCurve[k]).arg(want.lossCurve[k])));
    }
}

void TestMesh::mlpOnDpAndPp()
{
    TrainConfig single;
    single.strategy = "single";
    single.nodes = 1;
    single.steps = kSteps;
    single.globalBatch = 16;
    single.transport = smol::net::TransportKind::Inproc;
    TrainConfig mesh = single;
    mesh.strategy = "zero1";
    mesh.mesh = "dp=2,pp=2";
    mesh.nodes = 4;
    mesh.microBatches = 2;
    const QString mismatch = test::paramMismatch(runTraining(mesh), runTraining(single));
    QVERIFY2(mismatch.isEmpty(), qPrintable(mismatch));
}

// zero3 on the dp axis holds, between steps, its chunk of the stage's
// parameters and gradients where zero1 holds the stage in full; the same
// optimizer shard; and the same bytes on every axis (a gather of the stage
// in place of zero1's gather of the update).
void TestMesh::zero3KeepsAShardBetweenSteps()
{
    TrainConfig c = gptConfig("dp=2,tp=2,pp=2", 8, OptimizerConfig::Kind::Adam);
    c.strategy = "zero1";
    c.microBatches = 2;
    const TrainSummary zero1 = runTraining(c);
    c.strategy = "zero3";
    const TrainSummary zero3 = runTraining(c);
    QCOMPARE(int(zero3.memoryPerNode.size()), 8);
    for (std::size_t r = 0; r < 8; ++r) {
        const auto stage = std::size_t(zero1.memoryPerNode[r].params / 4);
        const auto data = smol::net::DeviceMesh::parse(c.mesh).coordsOf(int(r)).dp;
        const auto chunk = std::int64_t(smol::net::Communicator::chunk(stage, 2, data).count);
        QCOMPARE(zero3.memoryPerNode[r].params, 4 * chunk);
        QCOMPARE(zero3.memoryPerNode[r].grads, 4 * chunk);
        QCOMPARE(zero3.memoryPerNode[r].optimizer, zero1.memoryPerNode[r].optimizer);
        QVERIFY2(zero3.bytesInStepsByAxis[r] == zero1.bytesInStepsByAxis[r], "bytes by axis differ from zero1's");
    }
}

void TestMesh::bytesPerAxisInClosedForm_data()
{
    QTest::addColumn<QString>("mesh");
    QTest::addColumn<int>("microBatches");
    QTest::newRow("dp=2,tp=2,pp=2") << "dp=2,tp=2,pp=2" << 2;
    QTest::newRow("tp=2,cp=2") << "tp=2,cp=2" << 1;
    QTest::newRow("dp=2,cp=2") << "dp=2,cp=2" << 1;
    QTest::newRow("pp=2,cp=2") << "pp=2,cp=2" << 2;
    QTest::newRow("dp=2,pp=2,cp=2/zero1") << "dp=2,pp=2,cp=2" << 1;
    QTest::newRow("tp=2,sp") << "tp=2,sp" << 1;
    QTest::newRow("dp=2,tp=4,sp") << "dp=2,tp=4,sp" << 2;
}

// docs/strategies.md, "Mesh": per node per step, with b = B/dp rows, s =
// T/cp positions, C' the width, L' the blocks of the node's stage and S its
// parameters (the stage's, its tp slices): tp 8 L' (tp-1)/tp b s C' x 4;
// cp 4 L' (cp-1) b s C'/tp x 4; pp b s C' x 4 forward from a stage other
// than the last (and once per run the 72-byte shape), as many backward from
// one other than the first; dp 2 (G-1)/G S x 4 over G = dp x cp. With sp
// (no pp here), tp also sums the replicated parameters' R gradients:
// 2 (tp-1)/tp R x 4, R = (tp S - P)/(tp - 1).
void TestMesh::bytesPerAxisInClosedForm()
{
    QFETCH(QString, mesh);
    QFETCH(int, microBatches);
    const smol::net::DeviceMesh m = smol::net::DeviceMesh::parse(mesh.toStdString());
    TrainConfig c = gptConfig(mesh.toStdString(), m.nodes(), OptimizerConfig::Kind::Sgd);
    c.strategy = mesh.endsWith("zero1") ? "zero1" : "ddp";
    QVERIFY(!m.sequenceParallel() || m.size(smol::net::MeshAxis::Pp) == 1); // the formula below has no SP pp
    c.mesh = m.spec();
    c.nodes = m.nodes();
    c.microBatches = microBatches;
    if (m.size(smol::net::MeshAxis::Pp) == 2)
        c.placement = "0-1:0,2-3:1"; // embed + block0, block1 + head: one block a stage
    const TrainSummary s = runTraining(c);
    QCOMPARE(int(s.bytesInStepsByAxis.size()), m.nodes());
    using smol::net::MeshAxis;
    const double tp = m.size(MeshAxis::Tp), cp = m.size(MeshAxis::Cp), pp = m.size(MeshAxis::Pp),
                 G = m.size(MeshAxis::Dp) * cp;
    const double b = double(kBatch) / m.size(MeshAxis::Dp), seq = 16 / cp, width = 32;
    const double blocks = pp == 2 ? 1 : 2;
    for (int r = 0; r < m.nodes(); ++r) {
        const auto coords = m.coordsOf(r);
        std::map<std::string, double> want;
        if (tp > 1)
            want["tp"] = 8 * blocks * (tp - 1) / tp * b * seq * width * 4;
        if (cp > 1)
            want["cp"] = 4 * blocks * (cp - 1) * b * seq * width / tp * 4;
        if (pp > 1)
            want["pp"] = b * seq * width * 4 * ((coords.pp == 0 || coords.pp == 1) ? 1 : 2);
        const double params = double(s.memoryPerNode[std::size_t(r)].params) / 4;
        if (m.sequenceParallel())
            want["tp"] += 2 * (tp - 1) / tp * (tp * params - double(s.paramCount)) / (tp - 1) * 4;
        if (G > 1)
            want[m.size(MeshAxis::Dp) > 1 ? "dp" : "cp"] += 2 * (G - 1) / G * params * 4;
        const auto &got = s.bytesInStepsByAxis[std::size_t(r)];
        QCOMPARE(got.size(), want.size());
        for (const auto &[axis, perStep] : want) {
            const double total = perStep * kSteps + (axis == "pp" && coords.pp + 1 < pp ? 72 : 0);
            const double measured = double(got.at(axis));
            QVERIFY2(std::abs(measured - total) <= 0.02 * total,
                     qPrintable(QString("rank %1 %2: %3 bytes, formula %4").arg(r).arg(axis.c_str()).arg(measured).arg(total)));
        }
    }
}

void TestMesh::refusesBadMeshes_data()
{
    QTest::addColumn<QString>("mesh");
    QTest::addColumn<int>("nodes");
    QTest::addColumn<QString>("model");
    QTest::addColumn<QString>("strategy");
    QTest::addColumn<QString>("reason");
    QTest::newRow("product") << "dp=2,tp=2" << 8 << "gpt" << "ddp" << "multiply to 4";
    QTest::newRow("tp heads") << "tp=3" << 3 << "gpt" << "ddp" << "does not divide n_head 4";
    QTest::newRow("pp layers") << "pp=5" << 5 << "gpt" << "ddp" << "more stages than the model's 4 layers";
    QTest::newRow("cp block") << "cp=3" << 3 << "gpt" << "ddp" << "does not divide the block size 16";
    QTest::newRow("twice") << "tp=2,tp=2" << 4 << "gpt" << "ddp" << "named twice";
    QTest::newRow("unknown") << "ep=2" << 2 << "gpt" << "ddp" << "unknown axis";
    QTest::newRow("mlp cp") << "cp=2" << 2 << "mlp" << "ddp" << "has no attention";
    QTest::newRow("mlp tp") << "tp=2" << 2 << "mlp" << "ddp" << "is not gpt";
    QTest::newRow("torchscript") << "pp=2" << 2 << "model.pt" << "ddp" << "TorchScript";
    QTest::newRow("dp strategy") << "dp=2" << 2 << "gpt" << "pipeline" << "ddp, zero1, zero2 or zero3";
    QTest::newRow("batch") << "dp=3" << 3 << "gpt" << "ddp" << "does not split into 3 replica";
    QTest::newRow("sp without tp") << "dp=2,sp" << 2 << "gpt" << "ddp" << "needs tp above 1";
    QTest::newRow("sp block") << "tp=4,cp=8,sp" << 32 << "gpt" << "ddp" << "cp x tp = 32 does not divide";
    QTest::newRow("placement without pp") << "dp=2" << 2 << "gpt" << "ddp" << "no pp axis";
}

void TestMesh::refusesBadMeshes()
{
    QFETCH(QString, mesh);
    QFETCH(int, nodes);
    QFETCH(QString, model);
    QFETCH(QString, strategy);
    QFETCH(QString, reason);
    TrainConfig c = gptConfig(mesh.toStdString(), nodes, OptimizerConfig::Kind::Sgd);
    c.model.kind = model.toStdString();
    c.strategy = strategy.toStdString();
    if (reason == "no pp axis")
        c.placement = "0-1:0,2-3:1";
    try {
        runTraining(c);
        QFAIL("accepted");
    } catch (const std::invalid_argument &e) {
        const QString what = e.what();
        QVERIFY2(what.contains(reason), qPrintable(what));
        QVERIFY2(!what.contains('\n'), qPrintable(what));
    }
}

QTEST_GUILESS_MAIN(TestMesh)
#include "tst_mesh.moc"
