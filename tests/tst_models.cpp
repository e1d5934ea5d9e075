// The models through makeModel: parameters (names, order, shapes, seeding,
// also when threads build models at once), that training on the real data
// learns (mlp accuracy, gpt loss), gpt's causal mask, and TorchScript loading
// with its error paths (the file is built from C++: Module::define + save).
#include "engine/data/data_source.h"
#include "engine/models/gpt_model.h"
#include "engine/models/model.h"

#include <QtTest>

#include <torch/torch.h>

#include <QElapsedTimer>
#include <QFile>
#include <QTemporaryDir>

#include <cmath>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

using namespace smol::engine;

class TestModels : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase();

    void parameterNames_data();
    void parameterNames();
    void sameSeedSameParameters_data();
    void sameSeedSameParameters();
    void concurrentBuildsAgree();
    void badConfig_data();
    void badConfig();

    void mlpLossDecreases();
    void mlpLearnsFashionMnist();
    void gptLossDecreases();
    void gptIsCausal();
    void gptRejectsBadInput();

    void torchScriptLoadErrors_data();
    void torchScriptLoadErrors();
    void torchScriptTrains();
    void torchScriptWrongOutput();

private:
    QTemporaryDir m_dir; // data cache and TorchScript files
    std::shared_ptr<DataSource> m_mnist;
    std::shared_ptr<DataSource> m_corpus;
};

namespace {

using NamedParameters = std::vector<std::pair<std::string, torch::Tensor>>;

constexpr std::int64_t kCorpusVocab = 76; // distinct bytes of GPL-3

ModelConfig gptConfig(std::uint64_t seed, std::int64_t vocab = kCorpusVocab)
{
    ModelConfig c;
    c.kind = "gpt";
    c.seed = seed;
    c.vocabSize = vocab;
    return c;
}

ModelConfig kindConfig(const std::string &kind, std::uint64_t seed = 0)
{
    ModelConfig c;
    c.kind = kind;
    c.seed = seed;
    c.vocabSize = kCorpusVocab;
    return c;
}

std::vector<torch::Tensor> tensors(const NamedParameters &named)
{
    std::vector<torch::Tensor> out;
    for (const auto &p : named)
        out.push_back(p.second);
    return out;
}

bool sameParameters(const NamedParameters &a, const NamedParameters &b)
{
    if (a.size() != b.size())
        return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (a[i].first != b[i].first || !torch::equal(a[i].second, b[i].second))
            return false;
    return true;
}

// Trains `steps` steps on global batches of `batch` (one node); returns the
// loss before each step.
std::vector<double> train(TrainModel &model, const DataSource &data, int steps, std::int64_t batch,
                          torch::optim::Optimizer &optimizer)
{
    std::vector<double> losses;
    for (int step = 0; step < steps; ++step) {
        optimizer.zero_grad();
        const torch::Tensor loss = model.loss(data.trainBatch(step, batch, /*rank=*/0, /*nodes=*/1));
        loss.backward();
        optimizer.step();
        losses.push_back(loss.item<double>());
    }
    return losses;
}

double mean(const std::vector<double> &v, std::size_t from, std::size_t to)
{
    double sum = 0;
    for (std::size_t i = from; i < to; ++i)
        sum += v[i];
    return sum / double(to - from);
}

QString join(const std::vector<double> &v)
{
    QStringList s;
    for (double x : v)
        s << QString::number(x, 'f', 3);
    return s.join(' ');
}

// A linear classifier as a TorchScript file, written without Python.
void saveLinearScript(const QString &path, torch::Dtype dtype, const char *forward)
{
    torch::jit::Module m("Linear");
    m.register_parameter("weight", torch::zeros({784, 10}, dtype), /*is_buffer=*/false);
    m.register_parameter("bias", torch::zeros({10}, dtype), /*is_buffer=*/false);
    m.define(forward);
    m.save(path.toStdString());
}

constexpr const char *kLinearForward = R"(
def forward(self, x):
    return torch.matmul(x, self.weight) + self.bias
)";

} // namespace

void TestModels::initTestCase()
{
    torch::set_num_threads(1);
    QVERIFY(m_dir.isValid());
    m_mnist = makeFashionMnist(/*seed=*/0, "/usr/share/datasets/fashion-mnist",
                               m_dir.filePath("cache").toStdString());
    m_corpus = makeCharCorpus(/*seed=*/0, /*blockSize=*/64);
    QCOMPARE(m_corpus->vocabSize(), kCorpusVocab);
}

void TestModels::parameterNames_data()
{
    QTest::addColumn<QString>("kind");
    QTest::addColumn<QStringList>("names");
    QTest::addColumn<qint64>("count");

    QTest::newRow("mlp") << "mlp" << QStringList{"fc1.weight", "fc1.bias",   "fc2.weight",
                                                 "fc2.bias",   "fc3.weight", "fc3.bias"}
                         << qint64(784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);

    QStringList gpt{"token_embedding.weight", "position_embedding.weight"};
    for (const QString block : {"blocks.0.", "blocks.1."})
        for (const QString layer :
             {"ln1", "attn.query", "attn.key", "attn.value", "attn.proj", "ln2", "fc", "proj"})
            gpt << block + layer + ".weight" << block + layer + ".bias";
    gpt << "ln_final.weight"
        << "ln_final.bias"
        << "lm_head.weight"
        << "lm_head.bias";
    const qint64 C = 64, V = kCorpusVocab;
    const qint64 perBlock = 2 * C + 4 * (C * C + C) + 2 * C + (C * 4 * C + 4 * C) + (4 * C * C + C);
    QTest::newRow("gpt") << "gpt" << gpt << qint64(V * C + 64 * C + 2 * perBlock + 2 * C + C * V + V);
}

void TestModels::parameterNames()
{
    QFETCH(QString, kind);
    QFETCH(QStringList, names);
    QFETCH(qint64, count);
    const auto model = makeModel(kindConfig(kind.toStdString()));
    QCOMPARE(model->name(), kind.toStdString());
    QStringList got;
    qint64 total = 0;
    for (const auto &[name, p] : model->namedParameters()) {
        got << QString::fromStdString(name);
        total += p.numel();
        QVERIFY(p.is_leaf());
        QVERIFY(p.requires_grad());
        QCOMPARE(p.scalar_type(), torch::kFloat32);
    }
    QCOMPARE(got, names);
    QCOMPARE(total, count);
}

void TestModels::sameSeedSameParameters_data()
{
    QTest::addColumn<QString>("kind");
    QTest::newRow("mlp") << "mlp";
    QTest::newRow("gpt") << "gpt";
}

void TestModels::sameSeedSameParameters()
{
    QFETCH(QString, kind);
    const auto a = makeModel(kindConfig(kind.toStdString(), /*seed=*/3));
    torch::randn({1000}); // the global generator moves on; the weights must not care
    const auto b = makeModel(kindConfig(kind.toStdString(), /*seed=*/3));
    const auto c = makeModel(kindConfig(kind.toStdString(), /*seed=*/4));
    QVERIFY(sameParameters(a->namedParameters(), b->namedParameters()));
    QVERIFY(!sameParameters(a->namedParameters(), c->namedParameters()));
    // Every parameter is its own storage (no sharing between tensors).
    const NamedParameters named = a->namedParameters();
    for (std::size_t i = 1; i < named.size(); ++i)
        QVERIFY(named[i].second.data_ptr() != named[i - 1].second.data_ptr());
}

void TestModels::concurrentBuildsAgree()
{
    // Nodes are threads: four build at once while a fifth draws from the
    // global generator; all must equal a model built alone.
    const NamedParameters want = makeModel(gptConfig(/*seed=*/11))->namedParameters();
    std::vector<NamedParameters> got(4);
    std::atomic<bool> done{false};
    std::thread noise([&] {
        while (!done)
            torch::rand({64});
    });
    std::vector<std::thread> nodes;
    for (std::size_t t = 0; t < got.size(); ++t)
        nodes.emplace_back([&, t] { got[t] = makeModel(gptConfig(/*seed=*/11))->namedParameters(); });
    for (auto &t : nodes)
        t.join();
    done = true;
    noise.join();
    for (const auto &g : got)
        QVERIFY(sameParameters(g, want));
}

void TestModels::badConfig_data()
{
    QTest::addColumn<QString>("kind");
    QTest::addColumn<qint64>("vocab");
    QTest::addColumn<qint64>("heads");
    QTest::addColumn<QString>("reason");
    QTest::newRow("unknown kind") << "resnet" << qint64(10) << qint64(4) << "'resnet'";
    QTest::newRow("not .pt") << "model.onnx" << qint64(10) << qint64(4) << "'model.onnx'";
    QTest::newRow("gpt without vocabulary") << "gpt" << qint64(0) << qint64(4) << "vocabSize";
    QTest::newRow("gpt heads don't divide") << "gpt" << qint64(10) << qint64(5) << "divisible";
}

void TestModels::badConfig()
{
    QFETCH(QString, kind);
    QFETCH(qint64, vocab);
    QFETCH(qint64, heads);
    QFETCH(QString, reason);
    ModelConfig c = kindConfig(kind.toStdString());
    c.vocabSize = vocab;
    c.nHead = heads;
    try {
        makeModel(c);
        QFAIL("no exception");
    } catch (const std::invalid_argument &e) {
        QVERIFY2(QString(e.what()).contains(reason), e.what());
    }
}

void TestModels::mlpLossDecreases()
{
    const auto model = makeModel(kindConfig("mlp", /*seed=*/1));
    torch::optim::SGD sgd(tensors(model->namedParameters()),
                          torch::optim::SGDOptions(/*lr=*/0.05).momentum(0.9));
    const std::vector<double> losses = train(*model, *m_mnist, /*steps=*/30, /*batch=*/64, sgd);
    for (double l : losses)
        QVERIFY(std::isfinite(l));
    qInfo("mlp loss: %s", qPrintable(join(losses)));
    QVERIFY(std::abs(losses.front() - std::log(10.0)) < 0.3); // near-uniform predictions at first
    QVERIFY2(mean(losses, 25, 30) < mean(losses, 0, 5) - 0.5, qPrintable(join(losses)));
}

void TestModels::mlpLearnsFashionMnist()
{
    const auto model = makeModel(kindConfig("mlp", /*seed=*/2));
    const Batch test = m_mnist->testSet();
    const Batch firstThousand{test.input.slice(0, 0, 1000), test.target.slice(0, 0, 1000)};
    const double before = model->accuracy(firstThousand);
    torch::optim::Adam adam(tensors(model->namedParameters()), torch::optim::AdamOptions(/*lr=*/1e-3));
    QElapsedTimer timer;
    timer.start();
    const std::vector<double> losses = train(*model, *m_mnist, /*steps=*/200, /*batch=*/64, adam);
    const qint64 trainMs = timer.restart();
    const double after = model->accuracy(test);
    qInfo("mlp test accuracy %.4f -> %.4f after 200 Adam steps of 64 (%lld ms, evaluation %lld ms), last "
          "loss %.3f",
          before, after, trainMs, timer.elapsed(), losses.back());
    QVERIFY(before < 0.3);
    QVERIFY2(after > 0.70, qPrintable(QString::number(after)));
    const double again = model->accuracy(firstThousand);
    QCOMPARE(model->accuracy(firstThousand), again); // evaluation does not train
}

void TestModels::gptLossDecreases()
{
    const auto model = makeModel(gptConfig(/*seed=*/1));
    torch::optim::Adam adam(tensors(model->namedParameters()), torch::optim::AdamOptions(/*lr=*/3e-3));
    QElapsedTimer timer;
    timer.start();
    const std::vector<double> losses = train(*model, *m_corpus, /*steps=*/40, /*batch=*/8, adam);
    double heldOut = 0;
    {
        torch::NoGradGuard noGrad;
        heldOut = model->loss(m_corpus->testSet()).item<double>();
    }
    qInfo("gpt loss: %s; held-out %.3f (%lld ms)", qPrintable(join(losses)), heldOut, timer.elapsed());
    for (double l : losses)
        QVERIFY(std::isfinite(l));
    QVERIFY(std::abs(losses.front() - std::log(double(kCorpusVocab))) < 0.2); // small init: uniform
    QVERIFY2(mean(losses, 35, 40) < losses.front() - 1.0, qPrintable(join(losses)));
    QVERIFY(heldOut < losses.front() - 0.8);
    QCOMPARE(model->accuracy(m_corpus->testSet()), -1.0);
}

void TestModels::gptIsCausal()
{
    Gpt gpt(gptConfig(/*seed=*/5));
    torch::NoGradGuard noGrad;
    const torch::Tensor tokens = m_corpus->testSet().input.slice(0, 0, 2); // (2, 64)
    torch::Tensor changed = tokens.clone();
    changed.index_put_({0, 40}, (tokens.index({0, 40}) + 1) % kCorpusVocab);
    const torch::Tensor a = gpt->forward(tokens);  // (2, 64, V)
    const torch::Tensor b = gpt->forward(changed); // (2, 64, V)
    QVERIFY(torch::allclose(a.slice(1, 0, 40), b.slice(1, 0, 40), /*rtol=*/0, /*atol=*/1e-6));
    QVERIFY(!torch::allclose(a.slice(1, 40), b.slice(1, 40), /*rtol=*/0, /*atol=*/1e-3));
    QVERIFY(torch::allclose(a[1], b[1], /*rtol=*/0, /*atol=*/1e-6)); // rows are independent
    // Shorter sequences use the top-left of the mask.
    QVERIFY(
        torch::allclose(gpt->forward(tokens.slice(1, 0, 10)), a.slice(1, 0, 10), /*rtol=*/0, /*atol=*/1e-5));
}

void TestModels::gptRejectsBadInput()
{
    Gpt gpt(gptConfig(/*seed=*/5));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, gpt->forward(torch::zeros({2, 65}, torch::kInt64)));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, gpt->forward(torch::zeros({2, 8}, torch::kFloat32)));
}

void TestModels::torchScriptLoadErrors_data()
{
    QTest::addColumn<QString>("file");     // in m_dir
    QTest::addColumn<QByteArray>("bytes"); // written to it first, unless empty
    QTest::addColumn<QString>("reason");
    QTest::newRow("missing") << "missing.pt" << QByteArray() << "No such file";
    QTest::newRow("garbage") << "garbage.pt" << QByteArray("this is not a zip archive\n") << "cannot load";
    QTest::newRow("empty zip") << "empty.pt" << QByteArray("PK\x05\x06" + QByteArray(18, '\0'))
                               << "cannot load";
    QTest::newRow("float64 parameters") << "double.pt" << QByteArray() << "expected float32";
}

void TestModels::torchScriptLoadErrors()
{
    QFETCH(QString, file);
    QFETCH(QByteArray, bytes);
    QFETCH(QString, reason);
    const QString path = m_dir.filePath(file);
    if (!bytes.isEmpty()) {
        QFile f(path);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(bytes);
    }
    if (file == "double.pt")
        saveLinearScript(path, torch::kFloat64, kLinearForward);
    try {
        makeModel(kindConfig(path.toStdString()));
        QFAIL("no exception");
    } catch (const DataError &e) {
        const QString message = e.what();
        qInfo("%s", e.what());
        QVERIFY2(message.contains(path), e.what());
        QVERIFY2(message.contains(reason), e.what());
        QVERIFY2(!message.contains('\n'), e.what());
    }
}

void TestModels::torchScriptTrains()
{
    const QString path = m_dir.filePath("linear.pt");
    saveLinearScript(path, torch::kFloat32, kLinearForward);
    const auto model = makeModel(kindConfig(path.toStdString(), /*seed=*/123));
    const NamedParameters named = model->namedParameters();
    QCOMPARE(named.size(), std::size_t(2));
    QCOMPARE(named[0].first, std::string("weight"));
    QCOMPARE(named[1].first, std::string("bias"));
    QVERIFY(named[0].second.requires_grad());
    QCOMPARE(named[0].second.sizes().vec(), (std::vector<std::int64_t>{784, 10}));

    const Batch test = m_mnist->testSet();
    QCOMPARE(model->accuracy(test), 0.1); // all-zero weights: always class 0, 1000 of 10000
    torch::optim::SGD sgd(tensors(named), torch::optim::SGDOptions(/*lr=*/0.1));
    const std::vector<double> losses = train(*model, *m_mnist, /*steps=*/30, /*batch=*/64, sgd);
    qInfo("torchscript loss: %s", qPrintable(join(losses)));
    QVERIFY(std::abs(losses.front() - std::log(10.0)) < 1e-5); // zero logits
    QVERIFY2(mean(losses, 25, 30) < losses.front() - 0.5, qPrintable(join(losses)));
    QVERIFY(model->accuracy(test) > 0.5);
    QVERIFY(named[0].second.abs().sum().item<double>() >
            0); // trained in place: the exposed tensors are the module's
}

void TestModels::torchScriptWrongOutput()
{
    const QString path = m_dir.filePath("wide.pt");
    saveLinearScript(path, torch::kFloat32, R"(
def forward(self, x):
    return torch.cat([torch.matmul(x, self.weight), x], 1)
)");
    const auto model = makeModel(kindConfig(path.toStdString()));
    try {
        model->loss(m_mnist->trainBatch(0, 8, 0, 1));
        QFAIL("no exception");
    } catch (const DataError &e) {
        QVERIFY2(QString(e.what()).contains("[8, 794]"), e.what());
    }
}

QTEST_GUILESS_MAIN(TestModels)
#include "tst_models.moc"
