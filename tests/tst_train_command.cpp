// `smolctl train`'s argument handling (engine/train_command.cpp): a bad
// argument, or a config the run rejects, fails with one line on stderr,
// nothing on stdout, exit code 2 and no session file; without --nodes a
// strategy runs on its own default count (single: 1, the others 2), embedded
// and through a coordinator.
#include "engine/train_command.h"

#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

using namespace smol::engine;

namespace {

struct CommandResult {
    int code = -1;
    QString out, err;
};

CommandResult train(const QStringList &args)
{
    CommandResult r;
    QTextStream out(&r.out), err(&r.err);
    r.code = runTrainCommand(args, out, err);
    out.flush();
    err.flush();
    return r;
}

} // namespace

class TestTrainCommand : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void rejectsInOneLine_data();
    void rejectsInOneLine();
    void rejectedRunLeavesNoSession();
    void defaultNodesAreTheStrategys_data();
    void defaultNodesAreTheStrategys();
    void compressedRunReportsItsBytes();
};

void TestTrainCommand::rejectsInOneLine_data()
{
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QString>("message");
    // Parse: the arguments themselves.
    QTest::newRow("no nodes") << QStringList{"--nodes", "0"} << "bad value '0' for --nodes";
    QTest::newRow("too many nodes") << QStringList{"--nodes", "65"} << "bad value '65' for --nodes";
    QTest::newRow("negative lr") << QStringList{"--lr", "-1"} << "bad value '-1' for --lr";
    QTest::newRow("steps not a number") << QStringList{"--steps", "many"} << "bad value 'many' for --steps";
    QTest::newRow("unknown transport")
        << QStringList{"--transport", "udp"} << "bad value 'udp' for --transport";
    QTest::newRow("unknown option") << QStringList{"--bogus", "x"}
                                    << "unknown option '--bogus' (see smolctl train --help)";
    QTest::newRow("last option without value")
        << QStringList{"--bogus"} << "'--bogus' is unknown or needs a value (see smolctl train --help)";
    QTest::newRow("slowdown below 1")
        << QStringList{"--slowdown", "1:0.5"}
        << "bad value '1:0.5' for --slowdown (expected RANK:FACTOR with FACTOR >= 1, e.g. 1:4)";
    QTest::newRow("link to itself")
        << QStringList{"--link", "1-1:2:3"}
        << "bad value '1-1:2:3' for --link (expected A-B:MBITS:MS with A != B, e.g. 0-3:20:5, or all:MBITS:MS)";
    QTest::newRow("link all without latency")
        << QStringList{"--link", "all:100"}
        << "bad value 'all:100' for --link (expected A-B:MBITS:MS with A != B, e.g. 0-3:20:5, or all:MBITS:MS)";
    QTest::newRow("unknown compression")
        << QStringList{"--compress", "fp8"} << "--compress takes none, fp16, bf16 or powersgd:R, not 'fp8'";
    QTest::newRow("powersgd rank 0")
        << QStringList{"--compress", "powersgd:0"} << "--compress powersgd:R takes a rank R from 1 to 64, not 'powersgd:0'";
    QTest::newRow("unknown all-reduce") << QStringList{"--allreduce", "tree"} << "bad value 'tree' for --allreduce";
    QTest::newRow("negative compress start")
        << QStringList{"--compress-start", "-1"} << "bad value '-1' for --compress-start";
    // Plan: the config as a whole.
    QTest::newRow("unknown model") << QStringList{"--model", "foo"}
                                   << "--model takes mlp, gpt or a TorchScript file ending in .pt, got 'foo'";
    QTest::newRow("unknown strategy") << QStringList{"--strategy", "nope"} << "unknown strategy 'nope'";
    QTest::newRow("single on 3 nodes") << QStringList{"--strategy", "single", "--nodes", "3"}
                                       << "the single strategy runs on exactly 1 node";
    QTest::newRow("single on 3 nodes, nodes first") << QStringList{"--nodes", "3", "--strategy", "single"}
                                                    << "the single strategy runs on exactly 1 node";
    QTest::newRow("compressing zero1")
        << QStringList{"--strategy", "zero1", "--compress", "fp16"}
        << "--compress fp16 compresses ddp's all-reduce (alone or as a mesh's dp axis), not zero1's gradients";
    QTest::newRow("selective recompute on the mlp")
        << QStringList{"--model", "mlp", "--recompute", "selective"}
        << "--recompute selective recomputes the gpt's attention; the mlp has none (take full or none)";
    QTest::newRow("bf16 on gloo")
        << QStringList{"--backend", "gloo", "--compress", "bf16"}
        << "--compress bf16: this LibTorch's Gloo has no bfloat16 all-reduce; use --compress fp16 with --backend gloo";
    QTest::newRow("link beyond the nodes")
        << QStringList{"--link", "0-3:20:5"} << "--link 0-3 needs two different ranks below --nodes";
    // Run: the cluster runtime's own checks, then the coordinator's.
    QTest::newRow("too few local nodes") << QStringList{"--local-nodes", "1"}
                                         << "without --listen only local nodes can join: --local-nodes 1 < 2";
    QTest::newRow("single on 2 cluster nodes")
        << QStringList{"--local-nodes", "2", "--strategy", "single", "--nodes", "2"}
        << "the single strategy runs on exactly 1 node";
}

void TestTrainCommand::rejectsInOneLine()
{
    QFETCH(QStringList, args);
    QFETCH(QString, message);
    const CommandResult r = train(QStringList{"--steps", "1"} + args);
    QCOMPARE(r.code, 2);
    QCOMPARE(r.err, "smolctl train: " + message + "\n");
    QCOMPARE(r.out, QString());
}

void TestTrainCommand::rejectedRunLeavesNoSession()
{
    QTemporaryDir dir;
    for (const QStringList &rejected :
         {QStringList{"--strategy", "single", "--nodes", "3"}, // embedded
          QStringList{"--local-nodes", "2", "--strategy", "single", "--nodes", "2"}}) {
        const QString path = dir.filePath("rejected.smolrec");
        const CommandResult r = train(rejected + QStringList{"--steps", "1", "--record", path});
        QCOMPARE(r.code, 2);
        QVERIFY2(QDir(dir.path()).isEmpty(), qPrintable(QDir(dir.path()).entryList().join(' ')));
    }
}

void TestTrainCommand::defaultNodesAreTheStrategys_data()
{
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<int>("nodes");
    QTest::newRow("single") << QStringList{"--strategy", "single"} << 1;
    QTest::newRow("ddp") << QStringList{"--strategy", "ddp"} << 2;
    QTest::newRow("single, through a coordinator")
        << QStringList{"--strategy", "single", "--local-nodes", "1"} << 1;
}

void TestTrainCommand::defaultNodesAreTheStrategys()
{
    QFETCH(QStringList, args);
    QFETCH(int, nodes);
    const CommandResult r = train(args + QStringList{"--steps", "1", "--global-batch", "8", "--json"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const QStringList lines = r.out.split('\n', Qt::SkipEmptyParts);
    QVERIFY(!lines.isEmpty());
    const QJsonObject summary = QJsonDocument::fromJson(lines.last().toUtf8()).object();
    QCOMPARE(summary.value("type").toString(), "summary");
    QCOMPARE(summary.value("strategy").toString(), args[1]);
    QCOMPARE(summary.value("nodes").toInt(), nodes);
}

// --compress and --link all reach the run; the summary says what ran and
// what it sent per step, half of plain ddp's with fp16.
void TestTrainCommand::compressedRunReportsItsBytes()
{
    auto summaryOf = [](const QStringList &extra) {
        const CommandResult r = train(QStringList{"--strategy", "ddp", "--nodes", "3", "--steps", "3", "--global-batch",
                                                  "12", "--link", "all:0:0", "--json"} + extra);
        const QStringList lines = r.out.split('\n', Qt::SkipEmptyParts);
        return r.code == 0 && !lines.isEmpty() ? QJsonDocument::fromJson(lines.last().toUtf8()).object()
                                               : QJsonObject{{"error", r.err}};
    };
    const QJsonObject plain = summaryOf({}), half = summaryOf({"--compress", "fp16"});
    QVERIFY2(!half.contains("error"), qPrintable(half.value("error").toString()));
    QCOMPARE(plain.value("compress").toString(), "none");
    QCOMPARE(plain.value("allreduce").toString(), "ring");
    QCOMPARE(half.value("compress").toString(), "fp16");
    QCOMPARE(half.value("allreduce").toString(), "auto");
    const double p = plain.value("bytes_per_node_per_step").toDouble();
    QVERIFY(p > 0);
    QCOMPARE(half.value("bytes_per_node_per_step").toDouble(), p / 2);
}

QTEST_GUILESS_MAIN(TestTrainCommand)
#include "tst_train_command.moc"
