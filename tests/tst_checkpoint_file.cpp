// Checkpoint files: the exact byte layout, round trips, and every way a file
// can be wrong (truncated, bit-flipped, foreign, too new, absurd counts,
// missing) or unwritable, each reported as a one-line CheckpointError.
#include "engine/checkpoint_file.h"

#include <QtTest>

#include <QDir>
#include <QFile>
#include <QRandomGenerator>
#include <QScopeGuard>
#include <QTemporaryDir>
#include <QtEndian>

#include <zlib.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#ifdef Q_OS_UNIX
#include <csignal>
#include <sys/resource.h>
#endif

using namespace smol::engine;

class TestCheckpointFile : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void exactBytes();
    void roundTrip_data();
    void roundTrip();
    void createsMissingDirectories();
    void truncatedAtEveryOffset();
    void truncatedLargeAtRandomOffsets();
    void randomByteFlips();
    void foreignFile_data();
    void foreignFile();
    void newerVersion_data();
    void newerVersion();
    void absurdCounts_data();
    void absurdCounts();
    void trailingBytes();
    void missing();
    void overwriteReplaces();
    void unwritable_data();
    void unwritable();
    void readOnlyDirectory();
    void failedWriteKeepsPrevious_data();
    void failedWriteKeepsPrevious();
};

namespace {

constexpr qint64 kFixedBytes = 44; // an empty checkpoint: header, two counts, CRC

QByteArray le32(std::uint32_t v)
{
    QByteArray b(4, '\0');
    qToLittleEndian(v, b.data());
    return b;
}

QByteArray le64(std::uint64_t v)
{
    QByteArray b(8, '\0');
    qToLittleEndian(v, b.data());
    return b;
}

// Recomputes the trailing CRC-32 so that only the edited field is wrong.
QByteArray withCrc(QByteArray file)
{
    const uLong crc =
        crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef *>(file.constData()), uInt(file.size() - 4));
    qToLittleEndian(std::uint32_t(crc), file.data() + file.size() - 4);
    return file;
}

std::vector<float> randomFloats(QRandomGenerator &rng, std::size_t n)
{
    // Random bit patterns: includes NaNs with payloads, infinities, denormals.
    std::vector<float> v(n);
    static_assert(sizeof(float) == sizeof(quint32));
    std::vector<quint32> bits(n);
    rng.fillRange(bits.data(), qsizetype(n));
    std::memcpy(v.data(), bits.data(), n * sizeof(float));
    return v;
}

Checkpoint sample(quint32 seed, std::size_t params, std::size_t opt,
                  std::string config = R"({"strategy":"ddp"})")
{
    QRandomGenerator rng(seed);
    Checkpoint c;
    c.stepsDone = std::int64_t(rng.bounded(1, 1000000));
    c.configJson = std::move(config);
    c.params = randomFloats(rng, params);
    c.optimizerState = randomFloats(rng, opt);
    return c;
}

bool sameBits(const std::vector<float> &a, const std::vector<float> &b)
{
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

bool writeBytes(const QString &path, const QByteArray &bytes)
{
    QFile f(path);
    return f.open(QIODevice::WriteOnly | QIODevice::Truncate) && f.write(bytes) == bytes.size();
}

QByteArray readBytes(const QString &path)
{
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

// Empty if `action` threw a one-line CheckpointError containing every string
// of `needles`; otherwise a description of what happened instead.
QString expectError(const std::function<void()> &action, const QStringList &needles,
                    QString *message = nullptr)
{
    QString what;
    try {
        action();
        return QStringLiteral("no CheckpointError thrown");
    } catch (const CheckpointError &e) {
        what = QString::fromStdString(e.what());
    }
    if (message)
        *message = what;
    if (what.contains(QLatin1Char('\n')) || what.contains(QLatin1Char('\r')))
        return QStringLiteral("message is not one line: ") + what;
    for (const QString &needle : needles) {
        if (!what.contains(needle))
            return QStringLiteral("message lacks \"%1\": %2").arg(needle, what);
    }
    return QString();
}

QStringList entries(const QString &dir)
{
    return QDir(dir).entryList(QDir::AllEntries | QDir::Hidden | QDir::System | QDir::NoDotAndDotDot,
                               QDir::Name);
}

} // namespace

void TestCheckpointFile::exactBytes()
{
    // Built by hand from the table in checkpoint_file.h, independently of the writer.
    Checkpoint c;
    c.stepsDone = 0x0102030405060708;
    c.configJson = R"({"lr":0.1})";
    c.params = {1.0f, -2.5f};
    c.optimizerState = {0.5f};
    QByteArray expected("SMOLCKPT");
    expected += le32(1);
    expected += QByteArray("\x08\x07\x06\x05\x04\x03\x02\x01", 8);
    expected += le32(10);
    expected += QByteArray(R"({"lr":0.1})");
    expected += le64(2);
    expected += QByteArray("\x00\x00\x80\x3f\x00\x00\x20\xc0", 8);
    expected += le64(1);
    expected += QByteArray("\x00\x00\x00\x3f", 4);
    expected += QByteArray(4, '\0');
    expected = withCrc(expected);
    QCOMPARE(expected.size(), qsizetype(kFixedBytes + 10 + 4 * 3));

    QTemporaryDir tmp;
    QVERIFY(tmp.isValid());
    writeCheckpoint(tmp.path(), c);
    QCOMPARE(checkpointPath(tmp.path()), tmp.path() + "/checkpoint.smolckpt");
    QCOMPARE(readBytes(checkpointPath(tmp.path())).toHex(' '), expected.toHex(' '));

    const QString handMade = tmp.filePath("hand.smolckpt");
    QVERIFY(writeBytes(handMade, expected));
    const Checkpoint back = readCheckpoint(handMade);
    QCOMPARE(back.stepsDone, c.stepsDone);
    QCOMPARE(back.configJson, c.configJson);
    QVERIFY(back.params == c.params);
    QVERIFY(back.optimizerState == c.optimizerState);
}

void TestCheckpointFile::roundTrip_data()
{
    QTest::addColumn<qint64>("steps");
    QTest::addColumn<QByteArray>("config");
    QTest::addColumn<qint64>("params");
    QTest::addColumn<qint64>("opt");
    QTest::newRow("typical") << qint64(1234) << QByteArray(R"({"strategy":"zero2","nodes":4,"lr":0.001})")
                             << qint64(1000) << qint64(2000);
    QTest::newRow("empty optimizer state")
        << qint64(7) << QByteArray(R"({"optimizer":"sgd"})") << qint64(513) << qint64(0);
    QTest::newRow("everything empty") << qint64(0) << QByteArray() << qint64(0) << qint64(0);
    QTest::newRow("non-ASCII config, huge step")
        << std::numeric_limits<qint64>::max() << QByteArray("{\"name\":\"r\xc3\xa9sum\xc3\xa9 \\\"q\\\"\"}")
        << qint64(3) << qint64(5);
    QTest::newRow("1M floats") << qint64(99999) << QByteArray(R"({"model":"gpt"})") << qint64(1 << 20)
                               << qint64(2 << 20);
}

void TestCheckpointFile::roundTrip()
{
    QFETCH(qint64, steps);
    QFETCH(QByteArray, config);
    QFETCH(qint64, params);
    QFETCH(qint64, opt);
    Checkpoint c = sample(11, std::size_t(params), std::size_t(opt), config.toStdString());
    c.stepsDone = steps;
    if (c.params.size() >= 4) {
        c.params[0] = -0.0f;
        c.params[1] = std::numeric_limits<float>::quiet_NaN();
        c.params[2] = -std::numeric_limits<float>::infinity();
        c.params[3] = std::numeric_limits<float>::denorm_min();
    }

    QTemporaryDir tmp;
    QVERIFY(tmp.isValid());
    writeCheckpoint(tmp.path(), c);
    QCOMPARE(QFileInfo(checkpointPath(tmp.path())).size(), kFixedBytes + config.size() + 4 * (params + opt));
    QCOMPARE(entries(tmp.path()), QStringList{"checkpoint.smolckpt"});

    // Through the directory and through the file path.
    for (const QString &where : {tmp.path(), checkpointPath(tmp.path()), tmp.path() + "/"}) {
        const Checkpoint back = readCheckpoint(where);
        QCOMPARE(back.stepsDone, c.stepsDone);
        QCOMPARE(back.configJson, c.configJson);
        QVERIFY2(sameBits(back.params, c.params), qPrintable(where));
        QVERIFY2(sameBits(back.optimizerState, c.optimizerState), qPrintable(where));
    }
}

void TestCheckpointFile::createsMissingDirectories()
{
    QTemporaryDir tmp;
    QVERIFY(tmp.isValid());
    const QString dir = tmp.filePath("runs/exp1/step-100");
    const Checkpoint c = sample(3, 10, 10);
    writeCheckpoint(dir, c);
    QVERIFY(QFileInfo::exists(checkpointPath(dir)));
    QVERIFY(sameBits(readCheckpoint(dir).params, c.params));
}

void TestCheckpointFile::truncatedAtEveryOffset()
{
    QTemporaryDir tmp;
    QVERIFY(tmp.isValid());
    writeCheckpoint(tmp.path(), sample(5, 6, 4, R"({"model":"mlp"})"));
    const QByteArray whole = readBytes(checkpointPath(tmp.path()));
    QCOMPARE(whole.size(), qsizetype(kFixedBytes + 15 + 40));
    const QString path = tmp.filePath("cut.smolckpt");
    for (qsizetype n = 0; n < whole.size(); ++n) {
        QVERIFY(writeBytes(path, whole.left(n)));
        const QString why = n == 0 ? QStringLiteral("empty") : QStringLiteral("truncated");
        const QString problem = expectError([&] { readCheckpoint(path); }, {path, why});
        QVERIFY2(problem.isEmpty(), qPrintable(QStringLiteral("cut at %1: %2").arg(n).arg(problem)));
    }
    QVERIFY(writeBytes(path, whole));
    QCOMPARE(readCheckpoint(path).configJson, std::string(R"({"model":"mlp"})"));
}

void TestCheckpointFile::truncatedLargeAtRandomOffsets()
{
    QTemporaryDir tmp;
    QVERIFY(tmp.isValid());
    writeCheckpoint(tmp.path(), sample(6, 20000, 20000));
    const QByteArray whole = readBytes(checkpointPath(tmp.path()));
    const QString path = tmp.filePath("cut.smolckpt");
    QRandomGenerator rng(20240601);
    for (int i = 0; i < 200; ++i) {
        const qsizetype n = qsizetype(rng.bounded(qint64(whole.size())));
        QVERIFY(writeBytes(path, whole.left(n)));
        const QString problem = expectError([&] { readCheckpoint(path); }, {path});
        QVERIFY2(problem.isEmpty(), qPrintable(QStringLiteral("cut at %1: %2").arg(n).arg(problem)));
    }
}

void TestCheckpointFile::randomByteFlips()
{
    QTemporaryDir tmp;
    QVERIFY(tmp.isValid());
    const Checkpoint c = sample(8, 300, 200);
    writeCheckpoint(tmp.path(), c);
    const QByteArray whole = readBytes(checkpointPath(tmp.path()));
    const qsizetype configLen = qsizetype(c.configJson.size());
    const qsizetype optCountAt = 32 + configLen + 4 * 300;
    // Bytes whose corruption the layout checks catch before the CRC does.
    const auto structural = [&](qsizetype at) {
        return at < 12 || (at >= 20 && at < 24) || (at >= 24 + configLen && at < 32 + configLen) ||
               (at >= optCountAt && at < optCountAt + 8);
    };
    const QString path = tmp.filePath("flipped.smolckpt");
    QRandomGenerator rng(4242);
    int crcCaught = 0;
    for (int i = 0; i < 500; ++i) {
        const qsizetype at = qsizetype(rng.bounded(qint64(whole.size())));
        const char mask = char(rng.bounded(1, 256));
        QByteArray bad = whole;
        bad[at] = char(bad[at] ^ mask);
        QVERIFY(writeBytes(path, bad));
        QStringList needles{path};
        if (!structural(at))
            needles << QStringLiteral("CRC-32 mismatch");
        const QString problem = expectError([&] { readCheckpoint(path); }, needles);
        QVERIFY2(
            problem.isEmpty(),
            qPrintable(QStringLiteral("flip 0x%1 at %2: %3").arg(quint8(mask), 2, 16).arg(at).arg(problem)));
        crcCaught += structural(at) ? 0 : 1;
    }
    QVERIFY(crcCaught > 400); // the structural bytes are a small part of the file
}

void TestCheckpointFile::foreignFile_data()
{
    QTest::addColumn<QByteArray>("bytes");
    QTest::newRow("png") << QByteArray(
        "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x01\x00\x00\x00\x01\x00\x08\x06"
        "\x00\x00\x00\x5c\x72\xa8\x66\x00\x00\x00\x00IEND\xae\x42\x60\x82",
        45);
    QTest::newRow("text") << QByteArray(
        "{\"strategy\": \"ddp\", \"nodes\": 2}\nthis is a config, not a checkpoint\n");
    QTest::newRow("short") << QByteArray("abc");
    QTest::newRow("one byte off") << (QByteArray("SMOLCKPX") + QByteArray(100, '\0'));
    QTest::newRow("empty") << QByteArray();
}

void TestCheckpointFile::foreignFile()
{
    QFETCH(QByteArray, bytes);
    QTemporaryDir tmp;
    QVERIFY(tmp.isValid());
    const QString path = tmp.filePath("foreign.bin");
    QVERIFY(writeBytes(path, bytes));
    const QString problem =
        expectError([&] { readCheckpoint(path); }, {path, QStringLiteral("not a smolcluster checkpoint")});
    QVERIFY2(problem.isEmpty(), qPrintable(problem));
    // Same through the directory, with the file in its standard place.
    QVERIFY(writeBytes(checkpointPath(tmp.path()), bytes));
    const QString viaDir =
        expectError([&] { readCheckpoint(tmp.path()); },
                    {checkpointPath(tmp.path()), QStringLiteral("not a smolcluster checkpoint")});
    QVERIFY2(viaDir.isEmpty(), qPrintable(viaDir));
}

void TestCheckpointFile::newerVersion_data()
{
    QTest::addColumn<quint32>("version");
    QTest::newRow("2") << quint32(2);
    QTest::newRow("max") << std::numeric_limits<quint32>::max();
}

void TestCheckpointFile::newerVersion()
{
    QFETCH(quint32, version);
    QTemporaryDir tmp;
    QVERIFY(tmp.isValid());
    writeCheckpoint(tmp.path(), sample(9, 50, 50));
    QByteArray bytes = readBytes(checkpointPath(tmp.path()));
    bytes.replace(8, 4, le32(version));
    QVERIFY(writeBytes(checkpointPath(tmp.path()), withCrc(bytes)));
    const QString problem =
        expectError([&] { readCheckpoint(tmp.path()); },
                    {checkpointPath(tmp.path()),
                     QStringLiteral("written by a newer smolcluster (format %1)").arg(version)});
    QVERIFY2(problem.isEmpty(), qPrintable(problem));
}

void TestCheckpointFile::absurdCounts_data()
{
    // Each with a valid CRC: only the count check stands between the reader
    // and a huge allocation (which would throw std::bad_alloc/length_error).
    QTest::addColumn<int>("field"); // 0 config length, 1 param count, 2 optimizer state count
    QTest::addColumn<quint64>("value");
    QTest::newRow("config 4 GiB") << 0 << quint64(std::numeric_limits<quint32>::max());
    QTest::newRow("config one byte too long") << 0 << quint64(19);
    QTest::newRow("params 2^64-1") << 1 << std::numeric_limits<quint64>::max();
    QTest::newRow("params 2^62+1 (4x wraps to 4)") << 1 << ((quint64(1) << 62) + 1);
    QTest::newRow("params one too many") << 1 << quint64(101);
    QTest::newRow("optimizer 2^63") << 2 << (quint64(1) << 63);
    QTest::newRow("optimizer one too many") << 2 << quint64(51);
}

void TestCheckpointFile::absurdCounts()
{
    QFETCH(int, field);
    QFETCH(quint64, value);
    QTemporaryDir tmp;
    QVERIFY(tmp.isValid());
    const Checkpoint c = sample(10, 100, 50, R"({"strategy":"ddp"})");
    QCOMPARE(c.configJson.size(), std::size_t(18));
    writeCheckpoint(tmp.path(), c);
    QByteArray bytes = readBytes(checkpointPath(tmp.path()));
    if (field == 0)
        bytes.replace(20, 4, le32(quint32(value)));
    else if (field == 1)
        bytes.replace(24 + 18, 8, le64(value));
    else
        bytes.replace(32 + 18 + 400, 8, le64(value));
    QVERIFY(writeBytes(checkpointPath(tmp.path()), withCrc(bytes)));
    const QString problem = expectError([&] { readCheckpoint(tmp.path()); },
                                        {checkpointPath(tmp.path()), QStringLiteral("corrupt")});
    QVERIFY2(problem.isEmpty(), qPrintable(problem));
}

void TestCheckpointFile::trailingBytes()
{
    QTemporaryDir tmp;
    QVERIFY(tmp.isValid());
    writeCheckpoint(tmp.path(), sample(12, 10, 10));
    const QString path = checkpointPath(tmp.path());
    QVERIFY(writeBytes(path, readBytes(path) + QByteArray("garbage!")));
    const QString problem =
        expectError([&] { readCheckpoint(path); }, {path, QStringLiteral("8 unexpected bytes")});
    QVERIFY2(problem.isEmpty(), qPrintable(problem));
}

void TestCheckpointFile::missing()
{
    QTemporaryDir tmp;
    QVERIFY(tmp.isValid());
    const QString noDir = tmp.filePath("no-such-run");
    QString problem = expectError([&] { readCheckpoint(noDir); }, {noDir, QStringLiteral("no checkpoint")});
    QVERIFY2(problem.isEmpty(), qPrintable(problem));

    // An existing directory without a checkpoint names the file it looked for.
    problem = expectError([&] { readCheckpoint(tmp.path()); },
                          {checkpointPath(tmp.path()), QStringLiteral("does not exist")});
    QVERIFY2(problem.isEmpty(), qPrintable(problem));

    problem = expectError([&] { readCheckpoint(QString()); }, {QStringLiteral("empty path")});
    QVERIFY2(problem.isEmpty(), qPrintable(problem));

    // The checkpoint's place taken by a directory.
    QVERIFY(QDir(tmp.path()).mkdir("checkpoint.smolckpt"));
    problem = expectError([&] { readCheckpoint(tmp.path()); },
                          {checkpointPath(tmp.path()), QStringLiteral("is a directory")});
    QVERIFY2(problem.isEmpty(), qPrintable(problem));
}

void TestCheckpointFile::overwriteReplaces()
{
    QTemporaryDir tmp;
    QVERIFY(tmp.isValid());
    const Checkpoint first = sample(13, 5000, 5000, R"({"step":"first"})");
    Checkpoint second = sample(14, 700, 0, R"({"step":"second"})");
    second.stepsDone = first.stepsDone + 1;
    writeCheckpoint(tmp.path(), first);
    writeCheckpoint(tmp.path(), second);
    QCOMPARE(entries(tmp.path()), QStringList{"checkpoint.smolckpt"});
    const Checkpoint back = readCheckpoint(tmp.path());
    QCOMPARE(back.stepsDone, second.stepsDone);
    QCOMPARE(back.configJson, second.configJson);
    QVERIFY(sameBits(back.params, second.params));
    QVERIFY(back.optimizerState.empty());
    QCOMPARE(QFileInfo(checkpointPath(tmp.path())).size(), kFixedBytes + 17 + 4 * 700);
}

void TestCheckpointFile::unwritable_data()
{
    QTest::addColumn<QString>("sub"); // directory to write to, relative to the temporary directory
    QTest::addColumn<QString>("needle");
    QTest::newRow("under a regular file") << "file/run"
                                          << "is not a directory";
    QTest::newRow("deep under a regular file") << "file/a/b/c"
                                               << "is not a directory";
    QTest::newRow("directory is a regular file") << "file"
                                                 << "is not a directory";
    QTest::newRow("checkpoint path is a directory") << "taken"
                                                    << "cannot write checkpoint";
}

void TestCheckpointFile::unwritable()
{
    QFETCH(QString, sub);
    QFETCH(QString, needle);
    QTemporaryDir tmp;
    QVERIFY(tmp.isValid());
    QVERIFY(writeBytes(tmp.filePath("file"), "not a directory"));
    QVERIFY(QDir(tmp.path()).mkpath("taken/checkpoint.smolckpt"));
    const QString dir = tmp.filePath(sub);
    const QString problem =
        expectError([&] { writeCheckpoint(dir, sample(15, 10, 10)); }, {checkpointPath(dir), needle});
    QVERIFY2(problem.isEmpty(), qPrintable(problem));
    QCOMPARE(entries(tmp.path()), (QStringList{"file", "taken"}));
    QCOMPARE(entries(tmp.filePath("taken")), QStringList{"checkpoint.smolckpt"});
    QCOMPARE(readBytes(tmp.filePath("file")), QByteArray("not a directory"));

    const QString empty = expectError([&] { writeCheckpoint(QString(), sample(15, 1, 1)); },
                                      {QStringLiteral("empty directory path")});
    QVERIFY2(empty.isEmpty(), qPrintable(empty));
}

void TestCheckpointFile::readOnlyDirectory()
{
    QTemporaryDir tmp;
    QVERIFY(tmp.isValid());
    const QString dir = tmp.filePath("ro");
    const Checkpoint old = sample(16, 10, 10);
    writeCheckpoint(dir, old);
    QVERIFY(QFile::setPermissions(dir, QFileDevice::ReadOwner | QFileDevice::ExeOwner));
    const auto restore = qScopeGuard([&] {
        QFile::setPermissions(dir, QFileDevice::ReadOwner | QFileDevice::WriteOwner | QFileDevice::ExeOwner);
    });
    {
        QFile probe(dir + "/probe");
        if (probe.open(QIODevice::WriteOnly)) {
            probe.remove();
            QSKIP("permissions are not enforced for this user (root?)");
        }
    }
    const QString problem = expectError([&] { writeCheckpoint(dir, sample(17, 10, 10)); },
                                        {checkpointPath(dir), QStringLiteral("cannot write checkpoint")});
    QVERIFY2(problem.isEmpty(), qPrintable(problem));
    QVERIFY(sameBits(readCheckpoint(dir).params, old.params));
}

void TestCheckpointFile::failedWriteKeepsPrevious_data()
{
    QTest::addColumn<qint64>("floats"); // params and optimizer state each
    QTest::addColumn<qint64>("limit");  // file size limit; negative: relative to the new file's size
    // Fails in a write() while streaming the floats.
    QTest::newRow("mid-stream") << qint64(100000) << qint64(64 * 1024);
    // Everything fits in QFileDevice's write buffer: fails only when the
    // buffer is flushed on commit (which QSaveFile::commit alone ignores).
    QTest::newRow("final flush") << qint64(1000) << qint64(-10);
}

void TestCheckpointFile::failedWriteKeepsPrevious()
{
#ifdef Q_OS_UNIX
    // Simulate a full disk: a file size limit makes write() fail with EFBIG
    // once the new file passes it (SIGXFSZ ignored so it is not fatal).
    QFETCH(qint64, floats);
    QFETCH(qint64, limit);
    const Checkpoint next = sample(19, std::size_t(floats), std::size_t(floats));
    if (limit < 0)
        limit += kFixedBytes + qint64(next.configJson.size()) + 8 * floats;
    QTemporaryDir tmp;
    QVERIFY(tmp.isValid());
    const Checkpoint old = sample(18, 1000, 1000, R"({"which":"old"})");
    writeCheckpoint(tmp.path(), old);
    const QByteArray oldBytes = readBytes(checkpointPath(tmp.path()));

    rlimit saved{};
    QCOMPARE(getrlimit(RLIMIT_FSIZE, &saved), 0);
    const auto oldHandler = std::signal(SIGXFSZ, SIG_IGN);
    rlimit small = saved;
    small.rlim_cur = rlim_t(limit);
    QCOMPARE(setrlimit(RLIMIT_FSIZE, &small), 0);
    QString problem;
    {
        const auto restore = qScopeGuard([&] {
            setrlimit(RLIMIT_FSIZE, &saved);
            std::signal(SIGXFSZ, oldHandler);
        });
        problem = expectError([&] { writeCheckpoint(tmp.path(), next); },
                              {checkpointPath(tmp.path()), QStringLiteral("cannot write checkpoint")});
    }
    QVERIFY2(problem.isEmpty(), qPrintable(problem));
    QCOMPARE(entries(tmp.path()), QStringList{"checkpoint.smolckpt"});
    QVERIFY(readBytes(checkpointPath(tmp.path())) == oldBytes);
    const Checkpoint back = readCheckpoint(tmp.path());
    QCOMPARE(back.configJson, old.configJson);
    QVERIFY(sameBits(back.params, old.params));
#else
    QSKIP("needs RLIMIT_FSIZE");
#endif
}

QTEST_GUILESS_MAIN(TestCheckpointFile)
#include "tst_checkpoint_file.moc"
