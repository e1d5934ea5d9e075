// Fashion-MNIST and the character corpus as the strategies see them: shapes,
// determinism per (seed, step), the rank split, wrap-around at the epoch end,
// the decompression cache, and errors that say what to do.
#include "engine/data/data_source.h"

#include <QtTest>

#include <torch/torch.h>

#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QTemporaryDir>

#include <memory>
#include <thread>
#include <vector>

using namespace smol::engine;

class TestDataSource : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase();

    void mnistShapes_data();
    void mnistShapes();
    void mnistDeterministic();
    void mnistRankSplit_data();
    void mnistRankSplit();
    void mnistWrapsAroundTheEpoch();
    void mnistEpochIsAPermutation();
    void mnistTestSet();
    void batchRowsSplitEvenly_data();
    void batchRowsSplitEvenly();
    void badSplit_data();
    void badSplit();
    void mnistThreadsAgree();
    void mnistMissingDataDir();
    void mnistCacheReused();
    void mnistCacheConcurrentFill();

    void corpusShapes();
    void corpusDeterministic();
    void corpusRankSplit_data();
    void corpusRankSplit();
    void corpusBlocksComeFromTheirPart();
    void corpusErrors();

private:
    QTemporaryDir m_cache;
    std::shared_ptr<DataSource> m_mnist;  // seed 1
    std::shared_ptr<DataSource> m_corpus; // seed 1, block 32
    QByteArray m_text;                    // the default corpus, read independently
    QByteArray m_alphabet;                // its sorted distinct bytes: token id -> byte
};

namespace {

constexpr std::int64_t kBlock = 32;

torch::Tensor cat(const std::vector<Batch> &parts, bool input)
{
    std::vector<torch::Tensor> t;
    for (const Batch &b : parts)
        t.push_back(input ? b.input : b.target);
    return torch::cat(t, /*dim=*/0);
}

QByteArray decode(const torch::Tensor &row, const QByteArray &alphabet)
{
    QByteArray out;
    for (std::int64_t i = 0; i < row.size(0); ++i)
        out.append(alphabet.at(qsizetype(row[i].item<std::int64_t>())));
    return out;
}

} // namespace

void TestDataSource::initTestCase()
{
    torch::set_num_threads(1);
    QVERIFY(m_cache.isValid());
    m_mnist = makeFashionMnist(/*seed=*/1, "/usr/share/datasets/fashion-mnist", m_cache.path().toStdString());
    m_corpus = makeCharCorpus(/*seed=*/1, kBlock);

    QFile file(QString::fromStdString(defaultCorpusPath()));
    QVERIFY(file.open(QIODevice::ReadOnly));
    m_text = file.readAll();
    bool seen[256] = {};
    for (const char c : m_text)
        seen[static_cast<unsigned char>(c)] = true;
    for (int b = 0; b < 256; ++b)
        if (seen[b])
            m_alphabet.append(char(b));
}

void TestDataSource::mnistShapes_data()
{
    QTest::addColumn<qint64>("globalBatch");
    QTest::addColumn<int>("rank");
    QTest::addColumn<int>("nodes");
    QTest::newRow("single node") << qint64(64) << 0 << 1;
    QTest::newRow("rank 1 of 4") << qint64(64) << 1 << 4;
    QTest::newRow("last of 3") << qint64(9) << 2 << 3;
    QTest::newRow("uneven, a long share") << qint64(10) << 1 << 4;
    QTest::newRow("uneven, a short share") << qint64(10) << 3 << 4;
    QTest::newRow("one row") << qint64(1) << 0 << 1;
}

void TestDataSource::mnistShapes()
{
    QFETCH(qint64, globalBatch);
    QFETCH(int, rank);
    QFETCH(int, nodes);
    const Batch b = m_mnist->trainBatch(/*step=*/3, globalBatch, rank, nodes);
    const std::int64_t rows = globalBatch / nodes + (rank < globalBatch % nodes ? 1 : 0);
    QCOMPARE(b.input.sizes().vec(), (std::vector<std::int64_t>{rows, 784}));
    QCOMPARE(b.input.scalar_type(), torch::kFloat32);
    QCOMPARE(b.target.sizes().vec(), std::vector<std::int64_t>{rows});
    QCOMPARE(b.target.scalar_type(), torch::kInt64);
    QVERIFY(b.input.min().item<float>() >= 0.0f);
    QVERIFY(b.input.max().item<float>() <= 1.0f);
    QVERIFY(b.input.max().item<float>() > 0.5f); // really [0, 1], not [0, 1/255]
    QVERIFY(b.target.min().item<std::int64_t>() >= 0);
    QVERIFY(b.target.max().item<std::int64_t>() <= 9);
    QCOMPARE(m_mnist->vocabSize(), std::int64_t(0));
}

void TestDataSource::mnistDeterministic()
{
    const Batch a = m_mnist->trainBatch(/*step=*/7, /*globalBatch=*/32, /*rank=*/0, /*nodes=*/1);
    const Batch again = m_mnist->trainBatch(/*step=*/7, /*globalBatch=*/32, /*rank=*/0, /*nodes=*/1);
    QVERIFY(torch::equal(a.input, again.input));
    QVERIFY(torch::equal(a.target, again.target));
    QVERIFY(a.input.data_ptr() != again.input.data_ptr()); // fresh tensors, not views of a cache

    // A second source with the same seed (another node) draws the same batch.
    const auto twin =
        makeFashionMnist(/*seed=*/1, "/usr/share/datasets/fashion-mnist", m_cache.path().toStdString());
    QVERIFY(torch::equal(a.input, twin->trainBatch(7, 32, 0, 1).input));

    const auto other =
        makeFashionMnist(/*seed=*/2, "/usr/share/datasets/fashion-mnist", m_cache.path().toStdString());
    QVERIFY(!torch::equal(a.input, other->trainBatch(7, 32, 0, 1).input));
    QVERIFY(!torch::equal(a.input, m_mnist->trainBatch(8, 32, 0, 1).input));
}

void TestDataSource::mnistRankSplit_data()
{
    QTest::addColumn<int>("nodes");
    for (int n = 1; n <= 4; ++n)
        QTest::addRow("%d nodes", n) << n;
    for (int n : {5, 7}) // 36 and 12 rows split unevenly
        QTest::addRow("%d nodes, uneven", n) << n;
}

void TestDataSource::mnistRankSplit()
{
    QFETCH(int, nodes);
    const std::int64_t B = 36;      // divisible by 1..4, not by 5 or 7
    const std::int64_t step = 1666; // 1666 * 36 = 59976: this batch wraps into the next epoch
    const Batch global = m_mnist->trainBatch(step, B, 0, 1);
    std::vector<Batch> parts;
    for (int r = 0; r < nodes; ++r)
        parts.push_back(m_mnist->trainBatch(step, B, r, nodes));
    QVERIFY(torch::equal(cat(parts, true), global.input));
    QVERIFY(torch::equal(cat(parts, false), global.target));
}

void TestDataSource::mnistWrapsAroundTheEpoch()
{
    // Positions 59976..60011 of step 1666 (B = 36): the last 12 are positions
    // 0..11 of the next epoch, which step 0 with B = 12 also draws.
    const Batch tail = m_mnist->trainBatch(/*step=*/1666, /*globalBatch=*/36, /*rank=*/2, /*nodes=*/3);
    const Batch start = m_mnist->trainBatch(/*step=*/0, /*globalBatch=*/12, /*rank=*/0, /*nodes=*/1);
    QVERIFY(torch::equal(tail.input, start.input));
    QVERIFY(!torch::equal(m_mnist->trainBatch(1666, 36, 1, 3).input, start.input));
}

void TestDataSource::mnistEpochIsAPermutation()
{
    // Ten steps of 6000 cover one epoch: every class exactly 6000 times, and
    // the same multiset of images as another seed's epoch (compared by each
    // image's exact pixel-byte sum), so no image is drawn twice.
    const auto other =
        makeFashionMnist(/*seed=*/99, "/usr/share/datasets/fashion-mnist", m_cache.path().toStdString());
    auto byteSums = [](const torch::Tensor &images) {
        return images.mul(255).round().to(torch::kInt64).sum(1);
    };
    torch::Tensor counts = torch::zeros({10}, torch::kInt64);
    std::vector<torch::Tensor> sums, otherSums;
    for (std::int64_t step = 0; step < 10; ++step) {
        const Batch b = m_mnist->trainBatch(step, 6000, 0, 1);
        counts += torch::bincount(b.target, {}, /*minlength=*/10);
        sums.push_back(byteSums(b.input));
        otherSums.push_back(byteSums(other->trainBatch(step, 6000, 0, 1).input));
    }
    QVERIFY(torch::equal(counts, torch::full({10}, 6000, torch::kInt64)));
    const torch::Tensor mine = torch::cat(sums), theirs = torch::cat(otherSums);
    QVERIFY(!torch::equal(mine, theirs));                                        // different order...
    QVERIFY(torch::equal(std::get<0>(mine.sort()), std::get<0>(theirs.sort()))); // ...same images
}

void TestDataSource::mnistTestSet()
{
    const Batch t = m_mnist->testSet();
    QCOMPARE(t.input.sizes().vec(), (std::vector<std::int64_t>{10000, 784}));
    QCOMPARE(t.input.scalar_type(), torch::kFloat32);
    QCOMPARE(t.target.sizes().vec(), std::vector<std::int64_t>{10000});
    QVERIFY(torch::equal(torch::bincount(t.target), torch::full({10}, 1000, torch::kInt64)));
    QVERIFY(t.input.max().item<float>() == 1.0f);
    // A slice is those rows of the set and holds nothing more; past the end it is clamped.
    QCOMPARE(m_mnist->testRows(), std::int64_t(10000));
    const Batch s = m_mnist->testSlice(9000, 1000);
    QVERIFY(torch::equal(s.input, t.input.narrow(0, 9000, 1000)));
    QVERIFY(torch::equal(s.target, t.target.narrow(0, 9000, 1000)));
    QCOMPARE(std::int64_t(s.input.storage().nbytes()), std::int64_t(1000 * 784 * 4));
    QCOMPARE(m_mnist->testSlice(9990, 100).input.size(0), std::int64_t(10));
    QCOMPARE(m_mnist->testSlice(20000, 5).input.size(0), std::int64_t(0));
}

void TestDataSource::batchRowsSplitEvenly_data()
{
    QTest::addColumn<qint64>("globalBatch");
    QTest::addColumn<int>("shares");
    QTest::addColumn<QList<qint64>>("rows");
    QTest::newRow("even") << qint64(12) << 3 << QList<qint64>{4, 4, 4};
    QTest::newRow("10 over 4") << qint64(10) << 4 << QList<qint64>{3, 3, 2, 2};
    QTest::newRow("one extra row") << qint64(7) << 3 << QList<qint64>{3, 2, 2};
    QTest::newRow("one row each") << qint64(5) << 5 << QList<qint64>{1, 1, 1, 1, 1};
    QTest::newRow("70 over 32") << qint64(70) << 32 << [] {
        QList<qint64> r(32, 2);
        for (int i = 0; i < 6; ++i)
            r[i] = 3;
        return r;
    }();
}

void TestDataSource::batchRowsSplitEvenly()
{
    QFETCH(qint64, globalBatch);
    QFETCH(int, shares);
    QFETCH(QList<qint64>, rows);
    std::int64_t next = 0; // contiguous, in share order, covering the batch
    for (int s = 0; s < shares; ++s) {
        const RowRange r = batchRows(globalBatch, s, shares);
        QCOMPARE(r.first, next);
        QCOMPARE(r.count, rows[s]);
        next += r.count;
    }
    QCOMPARE(next, globalBatch);
}

void TestDataSource::badSplit_data()
{
    QTest::addColumn<qint64>("globalBatch");
    QTest::addColumn<int>("rank");
    QTest::addColumn<int>("nodes");
    QTest::addColumn<QString>("reason");
    QTest::newRow("a rank without rows") << qint64(3) << 0 << 4 << "smaller than the 4 nodes";
    QTest::newRow("rank too big") << qint64(12) << 3 << 3 << "rank 3 of 3";
    QTest::newRow("no nodes") << qint64(12) << 0 << 0 << "bad batch split";
    QTest::newRow("empty batch") << qint64(0) << 0 << 1 << "bad batch split";
}

void TestDataSource::badSplit()
{
    QFETCH(qint64, globalBatch);
    QFETCH(int, rank);
    QFETCH(int, nodes);
    QFETCH(QString, reason);
    for (const auto &source : {m_mnist, m_corpus}) {
        try {
            source->trainBatch(0, globalBatch, rank, nodes);
            QFAIL("no exception");
        } catch (const std::invalid_argument &e) {
            QVERIFY2(QString(e.what()).contains(reason), e.what());
        }
    }
}

void TestDataSource::mnistThreadsAgree()
{
    const Batch want = m_mnist->trainBatch(/*step=*/5, /*globalBatch=*/256, /*rank=*/0, /*nodes=*/1);
    std::vector<Batch> got(4);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
            for (int i = 0; i < 20; ++i)
                got[std::size_t(t)] = m_mnist->trainBatch(5, 256, 0, 1);
        });
    for (auto &t : threads)
        t.join();
    for (const Batch &b : got) {
        QVERIFY(torch::equal(b.input, want.input));
        QVERIFY(torch::equal(b.target, want.target));
    }
}

void TestDataSource::mnistMissingDataDir()
{
    QTemporaryDir emptyCache;
    try {
        makeFashionMnist(0, "/nonexistent/fashion-mnist", emptyCache.path().toStdString());
        QFAIL("no exception");
    } catch (const DataError &e) {
        const QString message = e.what();
        QVERIFY2(message.contains("apt-get install dataset-fashion-mnist"), e.what());
        QVERIFY2(message.contains("/nonexistent/fashion-mnist/train-images-idx3-ubyte.gz"), e.what());
        QVERIFY2(!message.contains('\n'), e.what());
    }
}

void TestDataSource::mnistCacheReused()
{
    const QString images = m_cache.filePath("train-images-idx3-ubyte");
    QCOMPARE(QFileInfo(images).size(), qint64(16 + 60000 * 784));
    QCOMPARE(QFileInfo(m_cache.filePath("t10k-labels-idx1-ubyte")).size(), qint64(8 + 10000));
    QCOMPARE(QDir(m_cache.path()).entryList(QDir::Files).size(), 4); // no temporary files left
    const QDateTime written = QFileInfo(images).lastModified();

    // A complete file is not written again...
    QTest::qSleep(20);
    makeFashionMnist(0, "/usr/share/datasets/fashion-mnist", m_cache.path().toStdString());
    QCOMPARE(QFileInfo(images).lastModified(), written);

    // ...a truncated one (a crash from before we renamed atomically) is.
    const QString labels = m_cache.filePath("train-labels-idx1-ubyte");
    QVERIFY(QFile::resize(labels, 100));
    const auto repaired =
        makeFashionMnist(1, "/usr/share/datasets/fashion-mnist", m_cache.path().toStdString());
    QCOMPARE(QFileInfo(labels).size(), qint64(8 + 60000));
    QVERIFY(torch::equal(repaired->trainBatch(3, 64, 0, 1).target, m_mnist->trainBatch(3, 64, 0, 1).target));
}

void TestDataSource::mnistCacheConcurrentFill()
{
    // Two nodes starting at once on an empty cache both decompress; the
    // renames are atomic, so each reads complete files.
    QTemporaryDir cache;
    std::shared_ptr<DataSource> sources[2];
    std::string errors[2];
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t)
        threads.emplace_back([&, t] {
            try {
                sources[t] =
                    makeFashionMnist(1, "/usr/share/datasets/fashion-mnist", cache.path().toStdString());
            } catch (const std::exception &e) {
                errors[t] = e.what();
            }
        });
    for (auto &t : threads)
        t.join();
    QVERIFY2(errors[0].empty() && errors[1].empty(), (errors[0] + errors[1]).c_str());
    const Batch want = m_mnist->trainBatch(11, 64, 0, 1);
    for (const auto &s : sources)
        QVERIFY(torch::equal(s->trainBatch(11, 64, 0, 1).input, want.input));
    QCOMPARE(QDir(cache.path()).entryList(QDir::Files).size(), 4);
}

void TestDataSource::corpusShapes()
{
    QCOMPARE(m_corpus->vocabSize(), std::int64_t(m_alphabet.size()));
    const Batch b = m_corpus->trainBatch(/*step=*/0, /*globalBatch=*/8, /*rank=*/0, /*nodes=*/1);
    QCOMPARE(b.input.sizes().vec(), (std::vector<std::int64_t>{8, kBlock}));
    QCOMPARE(b.target.sizes().vec(), (std::vector<std::int64_t>{8, kBlock}));
    QCOMPARE(b.input.scalar_type(), torch::kInt64);
    QCOMPARE(b.target.scalar_type(), torch::kInt64);
    QVERIFY(b.input.min().item<std::int64_t>() >= 0);
    QVERIFY(b.input.max().item<std::int64_t>() < m_corpus->vocabSize());
    // The target is the input shifted by one character.
    QVERIFY(torch::equal(b.input.slice(1, 1), b.target.slice(1, 0, kBlock - 1)));

    const Batch t = m_corpus->testSet();
    QCOMPARE(t.input.sizes().vec(), (std::vector<std::int64_t>{64, kBlock}));
    QVERIFY(torch::equal(t.input.slice(1, 1), t.target.slice(1, 0, kBlock - 1)));
}

void TestDataSource::corpusDeterministic()
{
    const Batch a = m_corpus->trainBatch(/*step=*/4, /*globalBatch=*/16, /*rank=*/0, /*nodes=*/1);
    const auto twin = makeCharCorpus(/*seed=*/1, kBlock);
    QVERIFY(torch::equal(a.input, twin->trainBatch(4, 16, 0, 1).input));
    QVERIFY(torch::equal(a.target, twin->trainBatch(4, 16, 0, 1).target));
    QVERIFY(!torch::equal(a.input, makeCharCorpus(/*seed=*/2, kBlock)->trainBatch(4, 16, 0, 1).input));
    QVERIFY(!torch::equal(a.input, m_corpus->trainBatch(5, 16, 0, 1).input));
    // The held-out set does not depend on the seed.
    QVERIFY(torch::equal(m_corpus->testSet().input, makeCharCorpus(/*seed=*/2, kBlock)->testSet().input));
}

void TestDataSource::corpusRankSplit_data()
{
    mnistRankSplit_data();
}

void TestDataSource::corpusRankSplit()
{
    QFETCH(int, nodes);
    const Batch global = m_corpus->trainBatch(/*step=*/9, /*globalBatch=*/12, 0, 1);
    std::vector<Batch> parts;
    for (int r = 0; r < nodes; ++r)
        parts.push_back(m_corpus->trainBatch(9, 12, r, nodes));
    QVERIFY(torch::equal(cat(parts, true), global.input));
    QVERIFY(torch::equal(cat(parts, false), global.target));
}

void TestDataSource::corpusBlocksComeFromTheirPart()
{
    // Decoded with an independently built alphabet, training blocks occur in
    // the first 90% of the text and held-out blocks in the last 10%.
    const qsizetype trainEnd = m_text.size() - m_text.size() / 10;
    const QByteArray trainText = m_text.left(trainEnd);
    const QByteArray heldOut = m_text.mid(trainEnd);
    const Batch b = m_corpus->trainBatch(/*step=*/2, /*globalBatch=*/16, 0, 1);
    for (std::int64_t i = 0; i < 16; ++i) {
        QByteArray block = decode(b.input[i], m_alphabet);
        block.append(decode(b.target[i].slice(0, kBlock - 1), m_alphabet));
        QVERIFY2(trainText.contains(block), block.constData());
    }
    const Batch t = m_corpus->testSet();
    for (std::int64_t i = 0; i < t.input.size(0); ++i) {
        const QByteArray block = decode(t.input[i], m_alphabet);
        QVERIFY2(heldOut.contains(block), block.constData());
    }
}

void TestDataSource::corpusErrors()
{
    QVERIFY_THROWS_EXCEPTION(DataError, makeCharCorpus(0, kBlock, "/nonexistent/corpus.txt"));
    try {
        makeCharCorpus(0, kBlock, "/nonexistent/corpus.txt");
    } catch (const DataError &e) {
        QVERIFY2(QString(e.what()).contains("/nonexistent/corpus.txt"), e.what());
    }

    QTemporaryDir dir;
    const QString shortFile = dir.filePath("short.txt");
    QFile f(shortFile);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(QByteArray(100, 'a')); // held-out part of 10 bytes < a block of 33
    f.close();
    QVERIFY_THROWS_EXCEPTION(DataError, makeCharCorpus(0, kBlock, shortFile.toStdString()));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, makeCharCorpus(0, /*blockSize=*/0));
}

QTEST_GUILESS_MAIN(TestDataSource)
#include "tst_data_source.moc"
