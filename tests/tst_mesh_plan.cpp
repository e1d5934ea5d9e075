// The mesh plan (engine/strategies/mesh_plan.h) against the mesh strategy it
// plans: for the gpt on dp=2,tp=2,pp=2 with Adam, each rank's planned
// params, grads and optimizer bytes equal what the rank reports from
// memory() at the end of a real 8-node run (ddp, zero1, zero3 on the dp
// axis), and each rank's planned ranges equal what MeshStrategy::shards()
// says it holds, set up over an in-process fabric. Also the sequence blocks
// with cp and a mesh the plan refuses.
#include "engine/data/data_source.h"
#include "engine/models/model.h"
#include "engine/strategies/mesh_plan.h"
#include "engine/strategy.h"
#include "engine/trainer.h"
#include "net/communicator.h"
#include "net/inproc_transport.h"

#include <QtTest>

#include <map>
#include <memory>
#include <set>
#include <tuple>

using namespace smol::engine;

namespace {

constexpr char kMesh[] = "dp=2,tp=2,pp=2";

TrainConfig gptConfig(const std::string &dp, const std::string &mesh, int nodes)
{
    TrainConfig c;
    c.strategy = dp;
    c.mesh = mesh;
    c.nodes = nodes;
    c.steps = 2;
    c.globalBatch = 8;
    c.seed = 5;
    c.transport = smol::net::TransportKind::Inproc;
    c.optimizer.kind = OptimizerConfig::Kind::Adam;
    c.optimizer.lr = 1e-3;
    c.model.kind = "gpt";
    c.model.nEmbd = 32;
    c.model.nHead = 4;
    c.model.blockSize = 16;
    c.model.nLayer = 2;
    return c;
}

// The model as the trainer builds it for `c` (its vocabulary from the data).
std::unique_ptr<TrainModel> modelOf(const TrainConfig &c)
{
    ModelConfig mc = c.model;
    mc.vocabSize = makeCharCorpus(c.seed, c.model.blockSize, c.corpus)->vocabSize();
    mc.seed = c.seed;
    return makeModel(mc);
}

using Held = std::set<std::tuple<std::string, std::int64_t, std::int64_t>>; // (param, begin, end)

Held plannedHoldings(const MeshRankPlan &r)
{
    Held out;
    for (const MeshParamHolding &h : r.params)
        for (const MeshElementRange &range : h.ranges)
            out.insert({h.param, range.begin, range.end});
    return out;
}

} // namespace

class TestMeshPlan : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase() { torch::set_num_threads(1); }
    void bytesEqualARun_data();
    void bytesEqualARun();
    void holdingsEqualTheStrategys_data();
    void holdingsEqualTheStrategys();
    void sequenceBlocksWithCp();
    void refusesWhatTheMeshRefuses();
};

void TestMeshPlan::bytesEqualARun_data()
{
    QTest::addColumn<QString>("dp");
    QTest::newRow("ddp") << "ddp";
    QTest::newRow("zero1") << "zero1";
    QTest::newRow("zero3") << "zero3";
}

void TestMeshPlan::bytesEqualARun()
{
    QFETCH(QString, dp);
    const TrainConfig c = gptConfig(dp.toStdString(), kMesh, 8);
    const std::unique_ptr<TrainModel> model = modelOf(c);
    const MeshPlan plan = planMesh(c, *model);
    QCOMPARE(int(plan.ranks.size()), 8);
    const TrainSummary run = runTraining(c);
    QCOMPARE(int(run.memoryPerNode.size()), 8);
    std::set<std::int64_t> distinct;
    for (int rank = 0; rank < 8; ++rank) {
        const MeshRankPlan &p = plan.ranks[std::size_t(rank)];
        const smol::net::MemoryByCategory &m = run.memoryPerNode[std::size_t(rank)];
        const QByteArray where = QByteArray("rank ") + QByteArray::number(rank);
        QVERIFY2(p.paramsBytes == m.params, where + " params " + QByteArray::number(qlonglong(m.params)));
        QVERIFY2(p.gradsBytes == m.grads, where + " grads " + QByteArray::number(qlonglong(m.grads)));
        QVERIFY2(p.optimizerBytes == m.optimizer,
                 where + " optimizer " + QByteArray::number(qlonglong(m.optimizer)));
        distinct.insert(p.modelStateBytes());
    }
    // The two stages differ in size (the embedding on one, the head on the other).
    QVERIFY(distinct.size() >= 2);
}

void TestMeshPlan::holdingsEqualTheStrategys_data()
{
    QTest::addColumn<QString>("mesh");
    QTest::addColumn<int>("nodes");
    QTest::newRow("dp=2,tp=2,pp=2") << kMesh << 8;
    QTest::newRow("tp=2,pp=2,cp=2") << "tp=2,pp=2,cp=2" << 8;
}

// Each rank's MeshStrategy, set up over an in-process fabric (setup only
// builds its groups; nothing is sent), tells what it holds: shards() entries
// with its own rank as owner.
void TestMeshPlan::holdingsEqualTheStrategys()
{
    QFETCH(QString, mesh);
    QFETCH(int, nodes);
    const TrainConfig c = gptConfig("zero1", mesh.toStdString(), nodes);
    const MeshPlan plan = planMesh(c, *modelOf(c));
    auto fabric = std::make_shared<smol::net::InprocFabric>(nodes);
    for (int rank = 0; rank < nodes; ++rank) {
        smol::net::InprocTransport transport(fabric, rank);
        smol::net::Communicator comm(transport);
        const std::unique_ptr<TrainModel> model = modelOf(c);
        NodeContext ctx = nodeContextOf(c, rank);
        ctx.comm = &comm;
        ctx.model = model.get();
        const std::unique_ptr<Strategy> strategy = makeStrategy(c.strategy, c.mesh);
        strategy->setup(ctx);
        Held reported;
        for (const ShardRange &r : strategy->shards())
            if (r.owner == rank)
                reported.insert({r.param, r.begin, r.end});
        const Held planned = plannedHoldings(plan.ranks[std::size_t(rank)]);
        QVERIFY2(!planned.empty(), qPrintable(QString("rank %1 holds nothing").arg(rank)));
        QVERIFY2(planned == reported, qPrintable(QString("rank %1: planned %2 ranges, the strategy %3")
                                                     .arg(rank)
                                                     .arg(planned.size())
                                                     .arg(reported.size())));
        std::int64_t local = 0;
        for (const auto &[param, begin, end] : planned)
            local += end - begin;
        QCOMPARE(4 * local, strategy->memory().params);
    }
}

void TestMeshPlan::sequenceBlocksWithCp()
{
    const TrainConfig c = gptConfig("zero1", "dp=2,cp=2", 4);
    const MeshPlan plan = planMesh(c, *modelOf(c));
    // Rank order: cp before dp, so ranks 0 and 2 hold positions 0..7, 1 and 3 8..15.
    const std::int64_t want[4][2] = {{0, 8}, {8, 16}, {0, 8}, {8, 16}};
    for (int rank = 0; rank < 4; ++rank) {
        const MeshRankPlan &r = plan.ranks[std::size_t(rank)];
        QCOMPARE(r.sequenceBegin, want[rank][0]);
        QCOMPARE(r.sequenceEnd, want[rank][1]);
        QCOMPARE(r.dataGroupSize, 4);
        // zero1: a quarter of the whole model's optimizer state each, full params.
        QCOMPARE(r.optimizerEnd - r.optimizerBegin,
                 std::int64_t(smol::net::Communicator::chunk(std::size_t(r.localElements), 4, rank).count));
        QCOMPARE(r.paramsBytes, 4 * r.localElements);
    }
}

void TestMeshPlan::refusesWhatTheMeshRefuses()
{
    TrainConfig c = gptConfig("syncps", kMesh, 8);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, planMesh(c, *modelOf(c)));
    c = gptConfig("ddp", "dp=2,pp=9", 18);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, planMesh(c, *modelOf(c)));
}

QTEST_GUILESS_MAIN(TestMeshPlan)
#include "tst_mesh_plan.moc"
