// smolctl plan (engine/plan/): its predictions against small real runs.
// ddp, zero1, zero2 and zero3 on the mlp with 2 and 3 nodes, SGD and Adam,
// and a dp=2,tp=2 mesh (ddp and zero1 on dp) on a small gpt: every model
// state (params, grads, optimizer, their sum) and every byte figure (a step,
// and each axis) within 5% of what the run measured, and an activation
// prediction for every node. The comparison fails a figure 10% off and
// never fails the activations; each description's split by category sums
// to its total; the command's exit codes and output (bad settings: one
// line, 2; --json: one object; --check: a line per figure, 0).
#include "engine/plan/plan_check.h"
#include "engine/plan/plan_command.h"
#include "engine/plan/run_prediction.h"
#include "engine/strategies/strategy_registry.h"
#include "engine/trainer.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QtTest>

#include <cstdlib>

using namespace smol::engine;

namespace {

TrainConfig mlpConfig(const std::string &strategy, int nodes, bool adam)
{
    TrainConfig c;
    c.strategy = strategy;
    c.nodes = nodes;
    c.steps = 3;
    c.globalBatch = 60;
    c.seed = 3;
    c.transport = smol::net::TransportKind::Inproc;
    c.optimizer.kind = adam ? OptimizerConfig::Kind::Adam : OptimizerConfig::Kind::Sgd;
    c.optimizer.lr = adam ? 1e-3 : 0.1;
    return c;
}

TrainConfig gptMeshConfig(const std::string &dp)
{
    TrainConfig c = mlpConfig(dp, 4, true);
    c.mesh = "dp=2,tp=2";
    c.globalBatch = 8;
    c.model.kind = "gpt";
    c.model.nLayer = 2;
    c.model.nHead = 4;
    c.model.nEmbd = 32;
    c.model.blockSize = 16;
    return c;
}

struct CommandResult {
    int code = -1;
    QString out, err;
};

CommandResult runPlan(const QStringList &args)
{
    CommandResult r;
    QTextStream out(&r.out), err(&r.err);
    r.code = runPlanCommand(args, out, err);
    out.flush();
    err.flush();
    return r;
}

} // namespace

class TestPlan : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void predictionsMatchRuns_data();
    void predictionsMatchRuns();
    void comparisonFailsAFigureOff();
    void splitsSumToTotals();
    void badSettingsAreOneLine();
    void jsonIsOneObject();
    void checkPrintsEveryFigure();
};

void TestPlan::predictionsMatchRuns_data()
{
    QTest::addColumn<int>("which"); // 0: mlp alone, 1: gpt on a mesh
    QTest::addColumn<QString>("strategy");
    QTest::addColumn<int>("nodes");
    QTest::addColumn<bool>("adam");
    for (const char *s : {"ddp", "zero1", "zero2", "zero3"})
        for (int nodes : {2, 3})
            for (bool adam : {false, true})
                QTest::addRow("mlp %s %d %s", s, nodes, adam ? "adam" : "sgd") << 0 << s << nodes << adam;
    QTest::addRow("gpt dp=2,tp=2 ddp") << 1 << "ddp" << 4 << true;
    QTest::addRow("gpt dp=2,tp=2 zero1") << 1 << "zero1" << 4 << true;
}

void TestPlan::predictionsMatchRuns()
{
    QFETCH(int, which);
    QFETCH(QString, strategy);
    QFETCH(int, nodes);
    QFETCH(bool, adam);
    const TrainConfig c =
        which == 0 ? mlpConfig(strategy.toStdString(), nodes, adam) : gptMeshConfig(strategy.toStdString());
    const plan::RunPrediction p = plan::predictRun(c);
    QCOMPARE(int(p.ranks.size()), c.nodes);
    const plan::MeasuredRun m = plan::measureRun(c);
    const std::vector<plan::FigureCheck> checks = plan::compareRun(p, m);
    int states = 0, bytes = 0, activations = 0;
    for (const plan::FigureCheck &f : checks) {
        QVERIFY2(!f.off(), plan::checkLine(f).c_str());
        states += f.figure.rfind("model states", 0) == 0;
        bytes += f.figure.rfind("bytes a step", 0) == 0;
        activations += f.figure.rfind("activations", 0) == 0;
    }
    QCOMPARE(states, c.nodes);
    QCOMPARE(activations, c.nodes);
    QCOMPARE(bytes, c.nodes * (which == 0 ? 1 : 3)); // a mesh: the step's, dp's and tp's
    for (const plan::FigureCheck &f : checks)
        if (f.figure.rfind("bytes a step", 0) == 0)
            QVERIFY2(f.measured > 0, plan::checkLine(f).c_str());
}

void TestPlan::comparisonFailsAFigureOff()
{
    plan::RunPrediction p;
    plan::NodePrediction n;
    n.label = "rank 0";
    n.held = HeldBytes{1000, 1000, 0};
    n.activations = 500;
    n.bytesPerStep = 2000;
    p.ranks.push_back(n);
    plan::MeasuredRun m;
    m.steps = 1;
    m.heldAtEnd.resize(1);
    m.heldAtEnd[0].params = 1100; // 10% over
    m.heldAtEnd[0].grads = 960; // 4% under
    m.peakActivations = {1000}; // twice the prediction: printed, never off
    m.bytesPerStep = {2040};    // 2% over
    m.bytesByAxis.resize(1);
    const std::vector<plan::FigureCheck> checks = plan::compareRun(p, m);
    std::map<std::string, bool> off;
    for (const plan::FigureCheck &f : checks)
        off[f.figure] = f.off();
    QCOMPARE(off.at("params (rank 0)"), true);
    QCOMPARE(off.at("grads (rank 0)"), false);
    QCOMPARE(off.at("optimizer (rank 0)"), false); // 0 and 0
    QCOMPARE(off.at("model states (rank 0)"), false); // 2060 / 2000
    QCOMPARE(off.at("activations (rank 0)"), false);
    QCOMPARE(off.at("bytes a step (rank 0)"), false);
    for (const plan::FigureCheck &f : checks) {
        const std::string line = plan::checkLine(f);
        if (f.figure == "params (rank 0)")
            QVERIFY2(line.find("ratio 1.100") != std::string::npos && line.find("OFF") != std::string::npos,
                     line.c_str());
        if (f.figure == "activations (rank 0)")
            QVERIFY2(line.find("error +100.0% (not checked)") != std::string::npos, line.c_str());
    }
    // A figure measured where none was predicted is off.
    QVERIFY((plan::FigureCheck{"x", 0, 1}).off());
}

void TestPlan::splitsSumToTotals()
{
    for (const StrategyDescription *d : Strategies::kDescriptions) {
        if (!d->heldByCategory)
            continue;
        for (int nodes = 1; nodes <= 5; ++nodes)
            for (bool adam : {false, true})
                for (bool bf16 : {false, true}) {
                    ClosedFormInput in;
                    in.params = 235146;
                    in.nodes = nodes;
                    in.adam = adam;
                    in.bf16 = bf16;
                    const auto held = d->heldByCategory(in);
                    const auto total = d->modelStateBytes(in);
                    QVERIFY(held && total);
                    QVERIFY2(std::abs(held->total() - *total) <= 2, d->name); // integer division apart
                }
    }
}

void TestPlan::badSettingsAreOneLine()
{
    const QList<QStringList> cases = {
        {"--strategy", "nope"},
        {"--nodes", "0"},
        {"--bogus", "1"},
        {"--record", "x.smolrec"},
        {"--mesh", "dp=3,tp=2", "--nodes", "4"},
        {"--model", "gpt", "--mesh", "dp=2,tp=3", "--nodes", "6"}, // tp does not divide 4 heads
        {"--global-batch", "1", "--nodes", "2"},
    };
    for (const QStringList &args : cases) {
        const CommandResult r = runPlan(args);
        QVERIFY2(r.code == 2, qPrintable(args.join(' ') + ": exit " + QString::number(r.code)));
        QVERIFY2(r.err.startsWith("smolctl plan: ") && r.err.count('\n') == 1, qPrintable(r.err));
        QVERIFY(r.out.isEmpty());
    }
}

void TestPlan::jsonIsOneObject()
{
    const CommandResult r = runPlan({"--strategy", "zero2", "--nodes", "3", "--optimizer", "adam", "--json"});
    QCOMPARE(r.code, 0);
    QCOMPARE(r.out.count('\n'), 1);
    const QJsonObject o = QJsonDocument::fromJson(r.out.toUtf8()).object();
    QCOMPARE(o.value("type").toString(), QString("plan"));
    const QJsonArray nodes = o.value("per_node").toArray();
    QCOMPARE(nodes.size(), 3);
    const double P = o.value("param_count").toDouble();
    QCOMPARE(P, 235146.0); // the mlp's 784-256-128-10
    for (const QJsonValue &v : nodes) {
        const QJsonObject n = v.toObject();
        QCOMPARE(n.value("params").toDouble(), 4 * P);
        QCOMPARE(n.value("model_states").toDouble(),
                 n.value("params").toDouble() + n.value("grads").toDouble() + n.value("optimizer").toDouble());
        QVERIFY(n.value("activations").toDouble() > 0);
        QCOMPARE(n.value("bytes_per_step").toDouble(), 2.0 * 2 / 3 * 4 * P);
    }
    QVERIFY(o.value("formulas").toArray().size() >= 2);
}

void TestPlan::checkPrintsEveryFigure()
{
    const CommandResult r = runPlan({"--strategy", "ddp", "--nodes", "2", "--steps", "2", "--transport", "inproc",
                                  "--check"});
    QVERIFY2(r.code == 0, qPrintable(r.out + r.err));
    QVERIFY2(r.out.contains("2 steps measured"), qPrintable(r.out));
    for (const char *figure : {"params (rank 1)", "model states (rank 0)", "activations (rank 1)",
                               "bytes a step (rank 0)"})
        QVERIFY2(r.out.contains(figure), qPrintable(r.out));
    QVERIFY2(r.out.contains("ratio 1.0") && r.out.contains("every checked figure within 5%"), qPrintable(r.out));
}

QTEST_GUILESS_MAIN(TestPlan)
#include "tst_plan.moc"
