// smolctl compare on runs recorded by the real smolctl, with differences we
// know in closed form:
//
//   ddp vs zero3, 4 nodes, Adam: zero3 holds 1/4 of ddp's params + grads +
//   optimizer state per node between steps, and sends 3 x (N-1)/N x 4P bytes
//   per node per step against ddp's 2 x (N-1)/N x 4P: 1.5x.
//   ddp healthy vs node 3 four times slower: the other nodes wait for it, so
//   their idle share rises and node 3's falls.
//
// Then bad files (truncated, not SQLite, SQLite but not a session, missing)
// are refused with exit code 1 and one line on stderr, and the pure
// measureRun/compareRuns on hand-made events: idle share with a wait inside
// backward, the pipeline bubble, a node only one run has.
#include "engine/session/session_compare.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QSqlDatabase>
#include <QSqlQuery>
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <cmath>

using namespace smol::engine;

class TestSessionCompare : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase();
    void zero3AgainstDdp();
    void stragglerRaisesOthersIdle();
    void printsTable();
    void refusesBadFiles_data();
    void refusesBadFiles();
    void refusesBadArguments();
    void idleShareCountsWaitsAsIdle();
    void pipelineBubble();
    void missingNodeIsKeptAsNull();

private:
    struct Run {
        int exitCode = -1;
        QByteArray out, err;
    };
    static Run smolctl(const QStringList &args);
    void record(const QString &file, const QStringList &extra);
    QJsonObject compareJson(const QString &a, const QString &b);

    QTemporaryDir m_dir;
};

TestSessionCompare::Run TestSessionCompare::smolctl(const QStringList &args)
{
    QProcess p;
    p.setProgram(QStringLiteral(SMOLCTL_PATH));
    p.setArguments(args);
    p.start();
    p.closeWriteChannel();
    Run r;
    if (!p.waitForFinished(60000))
        return r;
    r.exitCode = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    r.out = p.readAllStandardOutput();
    r.err = p.readAllStandardError();
    return r;
}

void TestSessionCompare::record(const QString &file, const QStringList &extra)
{
    const Run r = smolctl(QStringList{"train", "--nodes", "4", "--optimizer", "adam", "--steps", "20",
                                      "--record", m_dir.filePath(file)} +
                          extra);
    QVERIFY2(r.exitCode == 0, r.err.constData());
}

QJsonObject TestSessionCompare::compareJson(const QString &a, const QString &b)
{
    const Run r = smolctl({"compare", m_dir.filePath(a), m_dir.filePath(b), "--json"});
    if (r.exitCode != 0) {
        qWarning("smolctl compare: exit %d: %s", r.exitCode, r.err.constData());
        return {};
    }
    if (r.out.count('\n') != 1)
        return {};
    return QJsonDocument::fromJson(r.out).object();
}

void TestSessionCompare::initTestCase()
{
    QVERIFY(m_dir.isValid());
    record("ddp.smolrec", {"--strategy", "ddp"});
    record("zero3.smolrec", {"--strategy", "zero3"});
    // A larger batch, so that compute, not the all-reduce, sets the pace and
    // a straggler's extra compute shows as the others' waiting.
    record("healthy.smolrec", {"--strategy", "ddp", "--global-batch", "960"});
    record("straggler.smolrec", {"--strategy", "ddp", "--global-batch", "960", "--slowdown", "3:4"});
}

void TestSessionCompare::zero3AgainstDdp()
{
    const QJsonObject c = compareJson("ddp.smolrec", "zero3.smolrec");
    QCOMPARE(c.value("type").toString(), QStringLiteral("compare"));
    QCOMPARE(c.value("a").toObject().value("strategy").toString(), QStringLiteral("ddp"));
    QCOMPARE(c.value("b").toObject().value("recorded").toString(), QStringLiteral("complete"));
    const QJsonArray diffs = c.value("config_differences").toArray();
    QCOMPARE(diffs.size(), 1); // the same run otherwise
    QCOMPARE(diffs[0].toObject().value("key").toString(), QStringLiteral("strategy"));
    QCOMPARE(diffs[0].toObject().value("b").toString(), QStringLiteral("zero3"));

    const QJsonObject figures = c.value("figures").toObject();
    QCOMPARE(figures.value("steps").toObject().value("a").toDouble(), 20.0);
    QCOMPARE(figures.value("steps").toObject().value("ratio").toDouble(), 1.0);
    QVERIFY(figures.value("bubble").toObject().value("a").isNull()); // not a pipeline run
    QVERIFY(figures.value("step_time_median_s").toObject().value("a").toDouble() > 0);
    // Same seed, same samples: the same losses within float rounding.
    const QJsonObject loss = c.value("loss_difference").toObject();
    QCOMPARE(loss.value("common_steps").toInt(), 20);
    QVERIFY(loss.value("largest").toDouble() < 1e-4);

    const QJsonArray nodes = c.value("nodes").toArray();
    QCOMPARE(nodes.size(), 4);
    for (const QJsonValue &v : nodes) {
        const QJsonObject n = v.toObject();
        const double held = n.value("memory_held_at_step_end").toObject().value("ratio").toDouble();
        const double bytes = n.value("bytes_sent_per_step").toObject().value("ratio").toDouble();
        qInfo("node %d: held at step end zero3/ddp %.4f, bytes sent per step %.4f", n.value("rank").toInt(),
              held, bytes);
        QVERIFY2(std::abs(held / 0.25 - 1) < 0.01, qPrintable(QString::number(held)));
        QVERIFY2(std::abs(bytes / 1.5 - 1) < 0.05, qPrintable(QString::number(bytes)));
    }
}

void TestSessionCompare::stragglerRaisesOthersIdle()
{
    const QJsonObject c = compareJson("healthy.smolrec", "straggler.smolrec");
    bool slowdownListed = false;
    for (const QJsonValue &d : c.value("config_differences").toArray())
        slowdownListed |= d.toObject().value("key").toString() == QLatin1String("behaviour[3].slowdown") &&
                          d.toObject().value("b").toDouble() == 4;
    QVERIFY(slowdownListed);
    const QJsonArray nodes = c.value("nodes").toArray();
    QCOMPARE(nodes.size(), 4);
    double slowestFast = 1;
    for (int rank = 0; rank < 4; ++rank) {
        const QJsonObject idle = nodes[rank].toObject().value("idle_share").toObject();
        const double healthy = idle.value("a").toDouble(), straggler = idle.value("b").toDouble();
        qInfo("node %d idle share: healthy %.3f, with node 3 x4 slower %.3f", rank, healthy, straggler);
        QVERIFY(healthy > 0 && healthy < 1 && straggler > 0 && straggler < 1);
        if (rank < 3) {
            QVERIFY2(straggler > healthy, qPrintable(QStringLiteral("node %1").arg(rank)));
            slowestFast = std::min(slowestFast, straggler);
        } else {
            QVERIFY(straggler < healthy); // the straggler is the one computing
            QVERIFY(straggler < slowestFast);
        }
    }
}

void TestSessionCompare::printsTable()
{
    const Run r = smolctl({"compare", m_dir.filePath("ddp.smolrec"), m_dir.filePath("zero3.smolrec")});
    QCOMPARE(r.exitCode, 0);
    const QString text = QString::fromUtf8(r.out);
    QVERIFY(text.contains(QRegularExpression("strategy\\s+ddp -> zero3")));
    QVERIFY(text.contains(QRegularExpression("figure\\s+A\\s+B\\s+B/A")));
    QVERIFY(text.contains(QRegularExpression("params\\+grads\\+optimizer at step end .* 0\\.25\\d\\n")));
    QVERIFY(text.contains(QRegularExpression("pipeline bubble\\s+\u2014\\s+\u2014\\s+\u2014\\n")));
    QVERIFY(text.contains("node 3\n"));
    QVERIFY(r.err.isEmpty());
}

void TestSessionCompare::refusesBadFiles_data()
{
    QTest::addColumn<QString>("file");
    QTest::addColumn<QString>("reason");

    QFile whole(m_dir.filePath("ddp.smolrec"));
    QVERIFY(whole.open(QIODevice::ReadOnly));
    const QByteArray bytes = whole.readAll();
    QFile half(m_dir.filePath("half.smolrec"));
    QVERIFY(half.open(QIODevice::WriteOnly));
    half.write(bytes.left(bytes.size() / 2));
    half.close();

    QFile notes(m_dir.filePath("notes.txt"));
    QVERIFY(notes.open(QIODevice::WriteOnly));
    notes.write("not a session at all\n");
    notes.close();

    {
        QSqlDatabase db = QSqlDatabase::addDatabase("QSQLITE", "foreign");
        db.setDatabaseName(m_dir.filePath("songs.db"));
        QVERIFY(db.open());
        QSqlQuery q(db);
        QVERIFY(q.exec("CREATE TABLE songs (title TEXT)"));
        QVERIFY(q.exec("INSERT INTO songs VALUES ('x')"));
        db.close();
    }
    QSqlDatabase::removeDatabase("foreign");

    QTest::newRow("truncated") << "half.smolrec"
                               << "damaged";
    QTest::newRow("not SQLite") << "notes.txt"
                                << "not a session file";
    QTest::newRow("SQLite, not a session") << "songs.db"
                                           << "not a smolcluster session";
    QTest::newRow("missing") << "missing.smolrec"
                             << "no such file";
}

void TestSessionCompare::refusesBadFiles()
{
    QFETCH(QString, file);
    QFETCH(QString, reason);
    for (bool bFirst : {false, true}) {
        const QString bad = m_dir.filePath(file), good = m_dir.filePath("ddp.smolrec");
        const Run r = smolctl({"compare", bFirst ? good : bad, bFirst ? bad : good, "--json"});
        QVERIFY(r.exitCode != 0);
        QCOMPARE(r.exitCode, 1);
        QVERIFY(r.out.isEmpty());
        QCOMPARE(r.err.count('\n'), 1);
        QVERIFY2(r.err.startsWith("smolctl compare: ") && r.err.contains(file.toUtf8()) &&
                     r.err.contains(reason.toUtf8()),
                 r.err.constData());
    }
}

void TestSessionCompare::refusesBadArguments()
{
    for (const QStringList &args :
         {QStringList{"compare"}, QStringList{"compare", "a.smolrec"}, QStringList{"compare", "a", "b", "c"},
          QStringList{"compare", "a", "b", "--x"}}) {
        const Run r = smolctl(args);
        QCOMPARE(r.exitCode, 2);
        QCOMPARE(r.err.count('\n'), 1);
    }
    const Run help = smolctl({"compare", "--help"});
    QCOMPARE(help.exitCode, 0);
    QVERIFY(help.out.contains("Usage: smolctl compare A.smolrec B.smolrec [--json]"));
}

namespace {

SpanEvent span(int node, SpanEvent::Kind kind, std::int64_t start, std::int64_t end, std::int64_t step)
{
    SpanEvent s;
    s.node = node;
    s.kind = kind;
    s.startNs = start;
    s.endNs = end;
    s.step = step;
    return s;
}

SessionHeader header(const char *strategy, int nodes)
{
    SessionHeader h;
    h.strategy = strategy;
    h.model = "mlp";
    h.nodes = nodes;
    h.steps = 2;
    return h;
}

} // namespace

void TestSessionCompare::idleShareCountsWaitsAsIdle()
{
    using K = SpanEvent::Kind;
    SessionEvents e;
    // Steps [0, 100) and [100, 200). Step 0: forward 20, backward 40 with a
    // 20 ns all-reduce inside, optimizer 10: 50 computing. Step 1: forward
    // 30 and a pause of 10 inside it: 20. Idle = 1 - 70 / 200.
    e.spans = {span(0, K::Step, 0, 100, 0),      span(0, K::Forward, 0, 20, 0),
               span(0, K::Backward, 20, 60, 0),  span(0, K::Collective, 30, 50, 0),
               span(0, K::Optimizer, 60, 70, 0), span(0, K::Step, 100, 200, 1),
               span(0, K::Forward, 100, 130, 1), span(0, K::Pause, 110, 120, 1)};
    smol::net::FrameEvent inside, between;
    inside.src = 0;
    inside.bytes = 1000;
    inside.sendStartNs = 40;
    between = inside;
    between.sendStartNs = 250; // after the last step
    e.frames = {inside, between};
    const RunFigures r = measureRun(header("ddp", 1), e);
    QCOMPARE(*r.steps, 2.0);
    QCOMPARE(*r.stepTimeMedianS, 100e-9);
    const NodeFigures &n = r.byNode.at(0);
    QCOMPARE(*n.idleShare, 1 - 70.0 / 200.0);
    QCOMPARE(*n.bytesSent, 2000.0);
    QCOMPARE(*n.bytesSentPerStep, 500.0); // the frame after the last step is not a step's
    QVERIFY(!r.bubble);
}

void TestSessionCompare::pipelineBubble()
{
    using K = SpanEvent::Kind;
    SessionEvents e;
    // Step 0 is skipped (warm-up). Step 1 on node 0: [100, 200), optimizer at
    // 180; waiting 40 of the 80 before it: 0.5. Node 1: waiting 20 of 80.
    e.spans = {span(0, K::Step, 0, 100, 0),         span(0, K::Collective, 0, 90, 0),
               span(0, K::Step, 100, 200, 1),       span(0, K::Collective, 110, 150, 1),
               span(0, K::Optimizer, 180, 190, 1),  span(1, K::Step, 100, 200, 1),
               span(1, K::Collective, 160, 190, 1), span(1, K::Optimizer, 180, 200, 1)};
    RunFigures r = measureRun(header("pipeline", 2), e);
    QVERIFY(r.bubble);
    QCOMPARE(*r.bubble, (0.5 + 0.25) / 2); // node 1: its only step counts, [160, 180) of [100, 180)
    r = measureRun(header("ddp", 2), e);
    QVERIFY(!r.bubble);
}

void TestSessionCompare::missingNodeIsKeptAsNull()
{
    using K = SpanEvent::Kind;
    SessionEvents two, three;
    for (int node = 0; node < 3; ++node) {
        (node < 2 ? two : three).spans.push_back(span(node, K::Step, 0, 100, 0));
        three.spans.push_back(span(node, K::Step, 0, 100, 0));
    }
    MetricSample loss;
    loss.name = "loss";
    loss.step = 0;
    loss.value = 2.0;
    two.metrics = {loss};
    loss.value = 2.5;
    three.metrics = {loss};
    const SessionComparison c =
        compareRuns(measureRun(header("ddp", 2), two), measureRun(header("ddp", 3), three));
    QCOMPARE(c.nodes.size(), std::size_t(3));
    QCOMPARE(c.nodes[2].rank, 2);
    for (const ComparedRow &row : c.nodes[2].rows) {
        QVERIFY2(!row.value.a, row.key);
        QVERIFY(!row.value.ratio());
    }
    QCOMPARE(*c.nodes[2].rows[0].value.b, 0.0); // bytes sent per step: it sent nothing
    QCOMPARE(c.configDifferences.size(), std::size_t(1));
    QCOMPARE(c.configDifferences[0].key, std::string("nodes"));
    QVERIFY(c.lossDifference);
    QCOMPARE(c.lossDifference->largest, 0.5);
    QCOMPARE(c.lossDifference->commonSteps, std::int64_t(1));
    const auto bubble = std::find_if(c.run.begin(), c.run.end(),
                                     [](const ComparedRow &row) { return std::string(row.key) == "bubble"; });
    QVERIFY(bubble != c.run.end() && !bubble->value.a && !bubble->value.b);
}

QTEST_GUILESS_MAIN(TestSessionCompare)
#include "tst_session_compare.moc"
