// The pipeline strategy against the single-node reference: after K steps on
// the same global batches, parameters equal single's (norm-relative and max
// abs error <= 1e-5) for 2, 3 and 4 stages, GPipe and 1F1B, on gpt and the
// mlp. Also: each node holds only its stage's parameters, the bubble is
// measured and reported, and bad settings are refused with a one-line reason.
#include "engine/data/data_source.h"
#include "engine/models/model.h"
#include "engine/placement.h"
#include "engine/trainer.h"

#include "param_match.h"

#include <QtTest>

#include <map>

using namespace smol::engine;
namespace test = smol::test;

class TestPipeline : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase();
    void matchesSingle_data();
    void matchesSingle();
    void oneMicroBatchIsSingleBitForBit();
    void holdsOnlyItsStage();
    void reportsBubble();
    void rejectsBadSettings_data();
    void rejectsBadSettings();

private:
    const TrainSummary &reference(const QString &model);
    std::map<QString, TrainSummary> m_reference;
};

namespace {

constexpr std::int64_t kSteps = 3;

TrainConfig baseConfig(const QString &model, const std::string &strategy, int nodes)
{
    TrainConfig c;
    c.strategy = strategy;
    c.nodes = nodes;
    c.steps = kSteps;
    c.seed = 5;
    c.transport = smol::net::TransportKind::Inproc;
    c.optimizer.kind = OptimizerConfig::Kind::Adam;
    c.optimizer.lr = 1e-3;
    c.model.kind = model.toStdString();
    if (model == "gpt") {
        c.model.nLayer = 2; // layers: embed, block0, block1, head
        c.model.nHead = 4;
        c.model.nEmbd = 32;
        c.model.blockSize = 16;
        c.globalBatch = 8;
        c.microBatches = 4;
    } else {
        // SGD: under Adam, summing the mlp's gradients over micro-batches
        // changes their rounding, which Adam scales up (measured max |dp|
        // 1.03e-5 at M = 3, norm-relative 9e-7; M = 1 is exact, see below).
        c.optimizer.kind = OptimizerConfig::Kind::Sgd;
        c.optimizer.lr = 0.1;
        c.globalBatch = 24;
        c.microBatches = 3;
    }
    return c;
}

// Parameter count of each layer of the model the config builds.
std::vector<std::int64_t> layerSizes(const TrainConfig &c)
{
    ModelConfig m = c.model;
    m.seed = c.seed;
    if (m.kind == "gpt")
        m.vocabSize = makeCharCorpus(c.seed, m.blockSize)->vocabSize();
    const std::unique_ptr<TrainModel> model = makeModel(m);
    std::map<std::string, std::int64_t> numel;
    for (const auto &[name, p] : model->namedParameters())
        numel[name] = p.numel();
    std::vector<std::int64_t> sizes;
    for (const auto &layer : model->layers()) {
        std::int64_t n = 0;
        for (const auto &name : layer.paramNames)
            n += numel.at(name);
        sizes.push_back(n);
    }
    return sizes;
}

} // namespace

void TestPipeline::initTestCase()
{
    torch::set_num_threads(1);
}

const TrainSummary &TestPipeline::reference(const QString &model)
{
    auto it = m_reference.find(model);
    if (it == m_reference.end())
        it = m_reference.emplace(model, runTraining(baseConfig(model, "single", 1))).first;
    return it->second;
}

void TestPipeline::matchesSingle_data()
{
    QTest::addColumn<QString>("model");
    QTest::addColumn<int>("nodes");
    QTest::addColumn<int>("schedule");
    QTest::addColumn<QString>("placement");
    QTest::addColumn<bool>("tcp");
    const auto gpipe = int(PipelineSchedule::GPipe), oneFOneB = int(PipelineSchedule::OneFOneB);
    for (int n : {2, 3, 4})
        for (int s : {gpipe, oneFOneB})
            QTest::addRow("gpt/N%d/%s", n, pipelineScheduleName(PipelineSchedule(s)))
                << "gpt" << n << s << "" << false;
    for (int n : {2, 3})
        for (int s : {gpipe, oneFOneB})
            QTest::addRow("mlp/N%d/%s", n, pipelineScheduleName(PipelineSchedule(s)))
                << "mlp" << n << s << "" << false;
    // Stages in an order other than the ranks'; and once over real sockets.
    QTest::newRow("gpt/N3/1f1b/placed") << "gpt" << 3 << oneFOneB << "0:2,1-2:0,3:1" << false;
    QTest::newRow("gpt/N3/gpipe/tcp") << "gpt" << 3 << gpipe << "" << true;
}

void TestPipeline::matchesSingle()
{
    QFETCH(QString, model);
    QFETCH(int, nodes);
    QFETCH(int, schedule);
    QFETCH(QString, placement);
    QFETCH(bool, tcp);
    TrainConfig c = baseConfig(model, "pipeline", nodes);
    c.schedule = PipelineSchedule(schedule);
    c.placement = placement.toStdString();
    if (tcp)
        c.transport = smol::net::TransportKind::Tcp;
    const TrainSummary got = runTraining(c);
    const TrainSummary &want = reference(model);
    const QString mismatch = test::paramMismatch(got, want);
    QVERIFY2(mismatch.isEmpty(), qPrintable(mismatch));
    // The loss is the last stage's, over the whole global batch.
    for (std::size_t k = 0; k < got.lossCurve.size(); ++k)
        QVERIFY2(
            std::abs(got.lossCurve[k] - want.lossCurve[k]) <= 1e-4 * std::abs(want.lossCurve[k]),
            qPrintable(
                QString("step %1: loss %2, single %3").arg(k).arg(got.lossCurve[k]).arg(want.lossCurve[k])));
    for (auto b : got.bytesSentPerNode)
        QVERIFY(b > 0);
}

void TestPipeline::oneMicroBatchIsSingleBitForBit()
{
    // With M = 1 the stages run single's arithmetic exactly, only split
    // across nodes; any difference at M > 1 is the micro-batches' summation.
    TrainConfig c = baseConfig("mlp", "single", 1);
    c.optimizer.kind = OptimizerConfig::Kind::Adam;
    c.optimizer.lr = 1e-3;
    c.microBatches = 1;
    const TrainSummary want = runTraining(c);
    c.strategy = "pipeline";
    c.nodes = 3;
    const TrainSummary got = runTraining(c);
    QVERIFY(torch::equal(got.finalParams, want.finalParams));
    QCOMPARE(got.lossCurve, want.lossCurve);
}

void TestPipeline::holdsOnlyItsStage()
{
    for (const char *spec : {"", "0-1:1,2-3:0"}) {
        TrainConfig c = baseConfig("gpt", "pipeline", 2);
        c.placement = spec;
        c.steps = 1;
        const TrainSummary s = runTraining(c);
        const std::vector<std::int64_t> sizes = layerSizes(c);
        const Placement placement =
            *spec ? Placement::parse(spec, int(sizes.size()), 2) : Placement::balanced(sizes, 2);
        std::vector<std::int64_t> held(2, 0);
        for (std::size_t l = 0; l < sizes.size(); ++l)
            held[std::size_t(placement.nodeOf(int(l)))] += sizes[l];
        QCOMPARE(held[0] + held[1], s.paramCount);
        for (int r = 0; r < 2; ++r) {
            const smol::net::MemoryByCategory &m = s.memoryPerNode[std::size_t(r)];
            QCOMPARE(m.params, 4 * held[std::size_t(r)]);
            QCOMPARE(m.grads, 4 * held[std::size_t(r)]);
            QCOMPARE(m.optimizer, 8 * held[std::size_t(r)]); // Adam: two moments
            QVERIFY(m.live >= m.params + m.grads + m.optimizer);
            // The other stage's parameters were freed: the node holds well
            // under the whole model's parameters, gradients and state.
            QVERIFY2(m.live < 16 * s.paramCount, qPrintable(QString("node %1 live %2").arg(r).arg(m.live)));
        }
    }
}

void TestPipeline::reportsBubble()
{
    for (auto schedule : {PipelineSchedule::GPipe, PipelineSchedule::OneFOneB}) {
        TrainConfig c = baseConfig("gpt", "pipeline", 4);
        c.schedule = schedule;
        c.microBatches = 8;
        c.steps = 3;
        const TrainSummary s = runTraining(c);
        QVERIFY(s.extra.count("bubble_fraction") && s.extra.count("bubble_fraction_formula"));
        QCOMPARE(s.extra.at("bubble_fraction_formula"), 3.0 / (8 + 3));
        const double measured = s.extra.at("bubble_fraction");
        QVERIFY2(measured > 0 && measured < 1, qPrintable(QString::number(measured)));
        qInfo("%s: bubble measured %.3f, formula %.3f", pipelineScheduleName(schedule), measured,
              s.extra.at("bubble_fraction_formula"));
    }
}

void TestPipeline::rejectsBadSettings_data()
{
    QTest::addColumn<QString>("model");
    QTest::addColumn<int>("nodes");
    QTest::addColumn<QString>("placement");
    QTest::addColumn<int>("microBatches");
    QTest::addColumn<QString>("reason");
    QTest::newRow("layer placed twice") << "gpt" << 2 << "0-2:0,2-3:1" << 4 << "layer 2 is placed twice";
    QTest::newRow("unplaced layer") << "gpt" << 2 << "0-1:0,2:1" << 4 << "layer 3 is not placed";
    QTest::newRow("node out of range") << "gpt" << 2 << "0-1:0,2-3:2" << 4 << "node 2 does not exist";
    QTest::newRow("non-contiguous") << "gpt" << 2 << "0:0,1-2:1,3:0" << 4 << "node 0 holds layers 0 and 3";
    QTest::newRow("empty node") << "gpt" << 3 << "0-1:0,2-3:1" << 4 << "node 2 holds no layers";
    QTest::newRow("syntax") << "gpt" << 2 << "0-1:0;2-3:1" << 4 << "is not a node number";
    QTest::newRow("too many nodes") << "mlp" << 4 << "" << 3 << "3 layers, too few for 4";
    QTest::newRow("micro-batches") << "gpt" << 2 << "" << 3
                                   << "--micro-batches 3 does not divide --global-batch 8";
}

void TestPipeline::rejectsBadSettings()
{
    QFETCH(QString, model);
    QFETCH(int, nodes);
    QFETCH(QString, placement);
    QFETCH(int, microBatches);
    QFETCH(QString, reason);
    TrainConfig c = baseConfig(model, "pipeline", nodes);
    c.placement = placement.toStdString();
    c.microBatches = microBatches;
    try {
        runTraining(c);
        QFAIL("accepted bad settings");
    } catch (const std::invalid_argument &e) { // refused before any node starts
        QVERIFY2(QString(e.what()).contains(reason), e.what());
        QVERIFY2(!QString(e.what()).contains('\n'), e.what());
    }
}

QTEST_GUILESS_MAIN(TestPipeline)
#include "tst_pipeline.moc"
