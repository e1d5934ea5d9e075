// Activation recomputation (--recompute; engine/models/recompute.h): the
// primitive (the forward runs again in backward, on the node's thread; an
// input without a gradient gets none; nothing outlives a graph that never
// ran backward), the gradients of mlp full, gpt selective and gpt full
// bit-identical to none's (through loss() and through layers()), whole runs
// (ddp, and zero3 and pipeline, which run layers() one by one) ending with
// exactly none's parameters, and the step's measured activation peak lower.
#include "engine/data/data_source.h"
#include "engine/memory_tracker.h"
#include "engine/models/model.h"
#include "engine/models/recompute.h"
#include "engine/session/session_events.h"
#include "engine/trainer.h"

#include <QTemporaryDir>
#include <QtTest>

#include <torch/torch.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

using namespace smol::engine;

class TestRecompute : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase();
    void recomputesInBackwardOnTheCallingThread();
    void nothingOutlivesAnUnusedGraph();
    void gradientsAreBitIdentical_data();
    void gradientsAreBitIdentical();
    void trainingIsBitIdentical_data();
    void trainingIsBitIdentical();
    void activationPeakFalls();

private:
    QTemporaryDir m_dir;
    std::shared_ptr<DataSource> m_mnist;
    std::shared_ptr<DataSource> m_corpus;
};

namespace {

constexpr int kSlot = 61; // a memory slot no run of this test uses

Recompute recomputeOf(const QString &name)
{
    Recompute r = Recompute::None;
    if (!parseRecompute(name.toStdString(), &r))
        qFatal("bad recompute %s", qPrintable(name));
    return r;
}

// How many autograd nodes named like `name` the graph behind `t` has.
int nodesNamed(const torch::Tensor &t, const std::string &name)
{
    std::vector<torch::autograd::Node *> todo{t.grad_fn().get()};
    std::set<torch::autograd::Node *> seen;
    int count = 0;
    while (!todo.empty()) {
        torch::autograd::Node *n = todo.back();
        todo.pop_back();
        if (!n || !seen.insert(n).second)
            continue;
        count += n->name().find(name) != std::string::npos;
        for (const auto &e : n->next_edges())
            todo.push_back(e.function.get());
    }
    return count;
}

std::vector<torch::Tensor> gradsOf(TrainModel &model)
{
    std::vector<torch::Tensor> out;
    for (auto &[name, p] : model.namedParameters())
        out.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
    return out;
}

// Empty when every gradient is bit-identical, else the first that is not.
QString firstDifference(TrainModel &model, const std::vector<torch::Tensor> &got,
                        const std::vector<torch::Tensor> &want)
{
    const auto named = model.namedParameters();
    for (std::size_t i = 0; i < named.size(); ++i) {
        if (!got[i].defined() || !want[i].defined() || !torch::equal(got[i], want[i]))
            return QString::fromStdString(named[i].first) + " differs: max |d| " +
                   (got[i].defined() && want[i].defined()
                        ? QString::number((got[i] - want[i]).abs().max().item<double>())
                        : QString("(undefined)"));
    }
    return {};
}

// The loss through the model's layers() one by one, as zero3 and pipeline
// run them.
torch::Tensor layeredLoss(TrainModel &model, const Batch &batch)
{
    torch::Tensor x = batch.input;
    for (const auto &layer : model.layers())
        x = layer.forward(x);
    return model.lossFromOutput(x, batch);
}

TrainConfig runConfig(const QString &kind, const std::string &strategy, const QString &recompute)
{
    TrainConfig c;
    c.strategy = strategy;
    c.nodes = 2;
    c.steps = 5;
    c.seed = 7;
    c.transport = smol::net::TransportKind::Inproc;
    c.model.kind = kind.toStdString();
    c.model.recompute = recomputeOf(recompute);
    c.optimizer.kind = OptimizerConfig::Kind::Adam;
    c.optimizer.lr = 1e-3;
    c.globalBatch = 16;
    if (kind == "gpt") {
        c.model.nEmbd = 32;
        c.model.blockSize = 16;
    }
    if (strategy == "pipeline")
        c.microBatches = 2;
    return c;
}

// Each step's peak activations (StepMemory::peak, from the step-peak memory
// samples), the largest over the run's steps and nodes; and the same for
// the allocator's high-water mark less the model states (an upper bound on
// the activations the probes could have seen).
class PeakSink : public SessionEventSink {
public:
    void onMemory(const MemorySample &m) override
    {
        if (!m.stepPeak)
            return;
        std::lock_guard lock(m_mutex);
        activations = std::max(activations, m.memory.activations);
        const auto &p = m.memory;
        allocatorBound = std::max(allocatorBound, p.peak - p.params - p.grads - p.optimizer);
        ++samples;
    }
    std::mutex m_mutex;
    std::int64_t activations = 0;
    std::int64_t allocatorBound = 0;
    int samples = 0;
};

} // namespace

void TestRecompute::initTestCase()
{
    QVERIFY(m_dir.isValid());
    m_mnist = makeFashionMnist(/*seed=*/0, "/usr/share/datasets/fashion-mnist",
                               m_dir.filePath("cache").toStdString());
    m_corpus = makeCharCorpus(/*seed=*/0, /*blockSize=*/64);
}

// The forward runs once in forward and once more in backward, there on the
// thread that called backward (so a node's memory scope charges it and its
// probe is the node's); an input that needs no gradient gets none, the
// parameters theirs, equal to a plain run's.
void TestRecompute::recomputesInBackwardOnTheCallingThread()
{
    torch::manual_seed(0);
    const torch::Tensor w = torch::randn({8, 8}).requires_grad_(true);
    const torch::Tensor images = torch::randn({4, 8}); // no gradient wanted
    std::vector<int> nodeOfCall;
    auto f = [&](const torch::Tensor &x) {
        nodeOfCall.push_back(smol::engine::memory::currentNode());
        return torch::tanh(x.matmul(w)).exp();
    };
    const torch::Tensor plain = f(images).sum();
    plain.backward();
    const torch::Tensor wantGrad = w.grad().clone();
    w.mutable_grad().zero_();
    nodeOfCall.clear();

    smol::engine::memory::NodeScope scope(kSlot);
    const torch::Tensor out = recomputed(f, images, {w}).sum();
    QCOMPARE(nodeOfCall, std::vector<int>{kSlot});
    QVERIFY(torch::equal(out, plain));
    QCOMPARE(nodesNamed(out, "RecomputedLayer"), 1);
    out.backward();
    QCOMPARE(nodeOfCall, (std::vector<int>{kSlot, kSlot}));
    QVERIFY(torch::equal(w.grad(), wantGrad));
    QVERIFY(!images.grad().defined());

    // An input that needs a gradient gets it.
    const torch::Tensor x = images.clone().requires_grad_(true);
    f(x).sum().backward();
    const torch::Tensor wantX = x.grad().clone();
    x.mutable_grad().zero_();
    recomputed(f, x, {w}).sum().backward();
    QVERIFY(torch::equal(x.grad(), wantX));

    // With the gradient off: the forward, plainly (no node, no recomputation).
    torch::NoGradGuard noGrad;
    nodeOfCall.clear();
    QVERIFY(!recomputed(f, x, {w}).grad_fn());
    QCOMPARE(nodeOfCall.size(), std::size_t(1));
}

// A graph dropped without backward frees what the recomputation held.
void TestRecompute::nothingOutlivesAnUnusedGraph()
{
    const torch::Tensor w = torch::ones({4, 4}).requires_grad_(true);
    auto token = std::make_shared<int>(1);
    std::weak_ptr<int> alive = token;
    {
        const torch::Tensor y =
            recomputed([w, token](const torch::Tensor &x) { return x.matmul(w); }, torch::ones({2, 4}), {w});
        token.reset();
        QVERIFY(!alive.expired()); // the graph holds the forward
    }
    QVERIFY(alive.expired());
}

void TestRecompute::gradientsAreBitIdentical_data()
{
    QTest::addColumn<QString>("kind");
    QTest::addColumn<QString>("recompute");
    QTest::addColumn<int>("recomputedNodes"); // in the graph behind the loss
    QTest::newRow("mlp full") << "mlp"
                              << "full" << 2;
    QTest::newRow("gpt selective") << "gpt"
                                   << "selective" << 2;
    QTest::newRow("gpt full") << "gpt"
                              << "full" << 2;
}

// One backward, through loss() and through layers(): every parameter's
// gradient bit-identical to none's, and the loss too.
void TestRecompute::gradientsAreBitIdentical()
{
    QFETCH(QString, kind);
    QFETCH(QString, recompute);
    QFETCH(int, recomputedNodes);
    ModelConfig c;
    c.kind = kind.toStdString();
    c.seed = 3;
    const DataSource &data = kind == "gpt" ? *m_corpus : *m_mnist;
    c.vocabSize = data.vocabSize();
    const Batch batch = data.trainBatch(/*step=*/2, /*globalBatch=*/16, /*rank=*/0, /*nodes=*/1);
    const auto plain = makeModel(c);
    c.recompute = recomputeOf(recompute);
    const auto model = makeModel(c);

    const torch::Tensor want = plain->loss(batch);
    want.backward();
    const std::vector<torch::Tensor> wantGrads = gradsOf(*plain);

    const torch::Tensor got = model->loss(batch);
    QVERIFY(torch::equal(got, want));
    QCOMPARE(nodesNamed(got, "RecomputedLayer"), recomputedNodes);
    got.backward();
    QString diff = firstDifference(*model, gradsOf(*model), wantGrads);
    QVERIFY2(diff.isEmpty(), qPrintable("loss(): " + diff));

    for (auto &[name, p] : model->namedParameters())
        p.mutable_grad().zero_();
    const torch::Tensor layered = layeredLoss(*model, batch);
    QVERIFY(torch::equal(layered, want));
    QCOMPARE(nodesNamed(layered, "RecomputedLayer"), recomputedNodes);
    layered.backward();
    diff = firstDifference(*model, gradsOf(*model), wantGrads);
    QVERIFY2(diff.isEmpty(), qPrintable("layers(): " + diff));
}

void TestRecompute::trainingIsBitIdentical_data()
{
    QTest::addColumn<QString>("kind");
    QTest::addColumn<QString>("strategy");
    QTest::addColumn<QString>("recompute");
    for (const char *strategy : {"ddp", "zero3"}) {
        QTest::addRow("mlp full %s", strategy) << "mlp" << strategy << "full";
        QTest::addRow("gpt selective %s", strategy) << "gpt" << strategy << "selective";
        QTest::addRow("gpt full %s", strategy) << "gpt" << strategy << "full";
    }
    QTest::newRow("gpt full pipeline") << "gpt"
                                       << "pipeline"
                                       << "full";
}

// Five steps on two nodes over the in-process transport: exactly none's
// final parameters and losses.
void TestRecompute::trainingIsBitIdentical()
{
    QFETCH(QString, kind);
    QFETCH(QString, strategy);
    QFETCH(QString, recompute);
    const TrainSummary want = runTraining(runConfig(kind, strategy.toStdString(), "none"));
    const TrainSummary got = runTraining(runConfig(kind, strategy.toStdString(), recompute));
    QCOMPARE(got.paramCount, want.paramCount);
    QVERIFY2(torch::equal(got.finalParams, want.finalParams),
             qPrintable(
                 QString("max |d| %1").arg((got.finalParams - want.finalParams).abs().max().item<double>())));
    QCOMPARE(got.lossCurve, want.lossCurve);
}

// The gpt where attention's T^2 activations matter (T = 64, 16 samples a
// node): each step's activation peak, as the run measures it, is at least
// 20% lower with full than with none, and 5% lower with selective; and the
// probe in backward sees the recomputed block (full's peak is at least half
// of what the allocator's high-water mark leaves for activations, where the
// block inputs the forward ends with are about a quarter of it).
void TestRecompute::activationPeakFalls()
{
    std::map<QString, std::int64_t> peak;
    for (const QString r : {"none", "selective", "full"}) {
        TrainConfig c = runConfig("gpt", "ddp", r);
        c.model.nEmbd = 64;
        c.model.blockSize = 64;
        c.globalBatch = 32;
        c.steps = 3;
        PeakSink sink;
        c.events = &sink;
        runTraining(c);
        QCOMPARE(sink.samples, 2 * 3);
        peak[r] = sink.activations;
        qInfo("%s: peak activations %lld bytes, allocator's high-water mark less model states %lld",
              qPrintable(r), (long long)sink.activations, (long long)sink.allocatorBound);
        if (r == "full")
            QVERIFY2(double(sink.activations) >= 0.5 * double(sink.allocatorBound),
                     "the recomputation in backward was not probed");
    }
    QVERIFY2(double(peak["full"]) <= 0.8 * double(peak["none"]),
             qPrintable(QString("full %1 vs none %2").arg(peak["full"]).arg(peak["none"])));
    QVERIFY2(double(peak["selective"]) <= 0.95 * double(peak["none"]),
             qPrintable(QString("selective %1 vs none %2").arg(peak["selective"]).arg(peak["none"])));
}

QTEST_GUILESS_MAIN(TestRecompute)
#include "tst_recompute.moc"
