// The cluster runtime with real processes: `smolctl train --listen` as the
// coordinator and `smolctl node --join` processes on loopback. Same result
// as the embedded run; a wrong token refused; kill -9 of a node mid-run
// (ddp re-forms and finishes, edp trains on); kill -9 of every node (two
// fresh ones resume from the state the coordinator kept); clocks skewed by seconds
// corrected onto the coordinator's timeline within the reported error.
#include "engine/cluster/coordinator.h"
#include "engine/memory_tracker.h"
#include "net/trace.h"

#include "smolctl_process.h"

#include <QtTest>

#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>

#include <mutex>
#include <signal.h>

using namespace smol;
using namespace smol::engine;
using smol::test::Smolctl;

namespace {

const QString kToken = QStringLiteral("tst-processes-token");

// A coordinator process and `n` node processes, joined in order (process i
// is node i, hence rank i in the first epoch).
struct Cluster {
    std::unique_ptr<Smolctl> coordinator;
    std::vector<std::unique_ptr<Smolctl>> nodes;

    bool start(const QStringList &trainArgs, int n)
    {
        coordinator = std::make_unique<Smolctl>(QStringList{"train", "--listen", "0", "--token", kToken, "--json"} +
                                                trainArgs);
        const auto port = coordinator->waitFor(QRegularExpression("listening on port (\\d+)"));
        if (!port.hasMatch())
            return false;
        for (int i = 0; i < n; ++i) {
            nodes.push_back(std::make_unique<Smolctl>(QStringList{"node", "--join", "127.0.0.1:" + port.captured(1),
                                                                  "--token", kToken, "--name",
                                                                  "proc" + QString::number(i)}));
            if (!coordinator->waitFor(QRegularExpression(QString("node %1 'proc%1' joined").arg(i))).hasMatch())
                return false;
        }
        return true;
    }
    void waitForStep(int step)
    {
        QElapsedTimer t;
        t.start();
        while (coordinator->lastStep() < step && t.elapsed() < 60000)
            coordinator->pump();
    }
};

QJsonObject embeddedSummary(const QStringList &trainArgs)
{
    Smolctl p(QStringList{"train", "--json"} + trainArgs);
    if (p.finish() != 0)
        return {};
    return p.summary();
}

class Recorder : public net::TraceSink {
public:
    void onFrame(const net::FrameEvent &e) override
    {
        std::lock_guard lock(m_mutex);
        events.push_back(e);
    }
    std::mutex m_mutex;
    std::vector<net::FrameEvent> events;
};

} // namespace

class TestClusterProcesses : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void processesMatchEmbedded();
    void killNineDdpReforms();
    void killNineEdpTrainsOn();
    void killNineEveryNodeResumesFromTheKeptState();
    void skewedClocksAreCorrected();
    void breakpointPausesNodeProcesses();
};

void TestClusterProcesses::processesMatchEmbedded()
{
    // Long enough that the intruder below arrives while the run goes on
    // (20 steps could end first under load, and then nothing refuses it).
    const QStringList args{"--strategy", "ddp", "--nodes", "3", "--steps", "150", "--seed", "5"};
    const QJsonObject embedded = embeddedSummary(args);
    QVERIFY(!embedded.isEmpty());
    Cluster c;
    QVERIFY2(c.start(args, 3), qPrintable(c.coordinator->err()));
    // A fourth node with the wrong token is refused; the run does not notice.
    Smolctl intruder(QStringList{"node", "--join", "127.0.0.1:" +
                                     c.coordinator->waitFor(QRegularExpression("port (\\d+)")).captured(1),
                                 "--token", "wrong"});
    QCOMPARE(intruder.finish(30000), 2);
    QVERIFY2(intruder.err().contains("cannot join"), qPrintable(intruder.err()));
    QCOMPARE(c.coordinator->finish(), 0);
    QVERIFY2(c.coordinator->err().contains("wrong token"), qPrintable(c.coordinator->err()));
    const QJsonObject s = c.coordinator->summary();
    QCOMPARE(s.value("param_checksum").toDouble(), embedded.value("param_checksum").toDouble());
    QCOMPARE(s.value("final_loss").toDouble(), embedded.value("final_loss").toDouble());
    for (auto &n : c.nodes)
        QCOMPARE(n->finish(), 0); // told to shut down
}

void TestClusterProcesses::killNineDdpReforms()
{
    Cluster c;
    QVERIFY(c.start({"--strategy", "ddp", "--nodes", "3", "--steps", "300", "--seed", "2"}, 3));
    c.waitForStep(30);
    c.nodes[1]->killNine();
    QCOMPARE(c.coordinator->finish(), 0);
    const QJsonObject s = c.coordinator->summary();
    QVERIFY2(c.coordinator->err().contains("re-forming"), qPrintable(c.coordinator->err()));
    QCOMPARE(s.value("nodes").toInt(), 2);
    QCOMPARE(s.value("reforms").toDouble(), 1.0);
    QCOMPARE(s.value("steps").toInt(), 300);
    const double finalLoss = s.value("final_loss").toDouble();
    QVERIFY2(std::isfinite(finalLoss) && finalLoss < 0.9, qPrintable(QString::number(finalLoss)));
}

void TestClusterProcesses::killNineEdpTrainsOn()
{
    Cluster c;
    QVERIFY(c.start({"--strategy", "edp", "--nodes", "4", "--steps", "600", "--global-batch", "48", "--seed", "2"}, 4));
    c.waitForStep(60);
    c.nodes[2]->killNine();
    QCOMPARE(c.coordinator->finish(), 0);
    const QJsonObject s = c.coordinator->summary();
    QCOMPARE(s.value("updates_applied").toInt(), 600);
    QCOMPARE(s.value("lost_ranks").toArray(), QJsonArray{2});
    QCOMPARE(s.value("reforms").toDouble(), 0.0);
    // edp's final loss is one push's, on one worker's 16 samples: 0.3 to 1.0
    // from run to run. The last 50 pushes' mean is the figure that says the
    // run learned (2.3 at the start).
    double sum = 0;
    int count = 0;
    const QStringList lines = c.coordinator->out().split('\n', Qt::SkipEmptyParts);
    for (qsizetype i = lines.size() - 1; i >= 0 && count < 50; --i) {
        const QJsonObject o = QJsonDocument::fromJson(lines[i].toUtf8()).object();
        if (o.value("type").toString() == "step") {
            sum += o.value("loss").toDouble();
            ++count;
        }
    }
    QCOMPARE(count, 50);
    QVERIFY2(sum / count < 1.2, qPrintable(QStringLiteral("mean loss of the last 50 pushes %1, final %2")
                                               .arg(sum / count)
                                               .arg(s.value("final_loss").toDouble())));
}

// Every node of a 2-node ddp run killed -9 at step N (their in-memory
// checkpoints die with them, and there is no --checkpoint-dir): two fresh
// nodes join and the run resumes from the state the coordinator kept, at a
// step of at least N - 100, and finishes.
void TestClusterProcesses::killNineEveryNodeResumesFromTheKeptState()
{
    Cluster c;
    QVERIFY(c.start({"--strategy", "ddp", "--nodes", "2", "--steps", "600", "--seed", "3", "--slowdown", "0:3",
                     "--rejoin-timeout", "60"},
                    2));
    c.waitForStep(250);
    const int killedAt = c.coordinator->lastStep();
    QVERIFY2(killedAt >= 250 && killedAt < 599, qPrintable(QString::number(killedAt)));
    for (auto &n : c.nodes)
        n->killNine();
    QVERIFY2(c.coordinator->waitFor(QRegularExpression("every node is lost")).hasMatch(),
             qPrintable(c.coordinator->err()));
    const QString port = c.coordinator->waitFor(QRegularExpression("listening on port (\\d+)")).captured(1);
    std::vector<std::unique_ptr<Smolctl>> fresh;
    for (int i = 0; i < 2; ++i)
        fresh.push_back(std::make_unique<Smolctl>(QStringList{"node", "--join", "127.0.0.1:" + port, "--token",
                                                              kToken, "--name", "fresh" + QString::number(i)}));
    QCOMPARE(c.coordinator->finish(), 0);
    const QRegularExpressionMatch resumed =
        QRegularExpression("2 node\\(s\\) resume from step (\\d+)").match(c.coordinator->err());
    QVERIFY2(resumed.hasMatch(), qPrintable(c.coordinator->err()));
    const int from = resumed.captured(1).toInt();
    QVERIFY2(from >= killedAt - 100 && from < 600,
             qPrintable(QString("resumed at %1, killed at step %2").arg(from).arg(killedAt)));
    const QJsonObject s = c.coordinator->summary();
    QCOMPARE(s.value("steps").toInt(), 600);
    QCOMPARE(s.value("reforms").toDouble(), 1.0);
    for (auto &n : fresh)
        QCOMPARE(n->finish(), 0);
}

void TestClusterProcesses::skewedClocksAreCorrected()
{
    memory::install();
    CoordinatorOptions co;
    co.bindAddress = "127.0.0.1";
    co.token = kToken.toStdString();
    Coordinator coord(co);
    Recorder recorder;
    coord.setTraceSink(&recorder);
    const QString where = "127.0.0.1:" + QString::number(coord.port());
    const std::vector<double> skewMs{5000, -3000};
    std::vector<std::unique_ptr<Smolctl>> nodes;
    for (std::size_t i = 0; i < skewMs.size(); ++i) {
        nodes.push_back(std::make_unique<Smolctl>(QStringList{"node", "--join", where, "--token", kToken,
                                                              "--clock-skew", QString::number(skewMs[i])}));
        QVERIFY(coord.waitForNodes(int(i) + 1, std::chrono::seconds(30)));
    }
    QTRY_VERIFY_WITH_TIMEOUT(coord.nodes().at(1).clockValid, 5000);
    TrainConfig c;
    c.strategy = "ddp";
    c.nodes = 2;
    c.steps = 10;
    ClusterRunOptions ro;
    ro.nodes = 2;
    const std::int64_t t0 = net::monotonicNs();
    coord.run(c, ro);
    const std::int64_t t1 = net::monotonicNs();
    coord.shutdownNodes();

    const std::vector<ClusterNode> info = coord.nodes();
    std::vector<std::int64_t> err;
    for (std::size_t i = 0; i < skewMs.size(); ++i) {
        const std::int64_t skew = std::int64_t(skewMs[i] * 1e6);
        QVERIFY2(std::abs(info[i].clockOffsetNs - skew) <= info[i].clockErrorNs,
                 qPrintable(QString("node %1: offset %2 ns, error %3 ns")
                                .arg(i).arg(info[i].clockOffsetNs).arg(info[i].clockErrorNs)));
        QVERIFY(info[i].clockErrorNs < 50'000'000);
        err.push_back(info[i].clockErrorNs);
    }
    // Every event lies within the run on the coordinator's clock, and every
    // frame arrives after it left, to within the two nodes' errors. (Rank i
    // is node i: they joined in that order.)
    QVERIFY2(recorder.events.size() >= 40, qPrintable(QString::number(recorder.events.size())));
    int receives = 0;
    for (const net::FrameEvent &e : recorder.events) {
        const std::int64_t slack = err[0] + err[1];
        auto inRun = [&](std::int64_t t) { return t >= t0 - slack && t <= t1 + slack; };
        QVERIFY(inRun(e.sendStartNs));
        if (e.side == net::FrameEvent::Side::Send) {
            QVERIFY(inRun(e.sendCompleteNs));
        } else {
            ++receives;
            QVERIFY(inRun(e.recvCompleteNs));
            QVERIFY2(e.recvCompleteNs >= e.sendStartNs - slack,
                     qPrintable(QString("frame %1->%2 arrived %3 ns before it left")
                                    .arg(e.src).arg(e.dst).arg(e.sendStartNs - e.recvCompleteNs)));
        }
    }
    QVERIFY(receives >= 20);
    for (auto &n : nodes)
        QCOMPARE(n->finish(), 0);
}

void TestClusterProcesses::breakpointPausesNodeProcesses()
{
    Cluster c;
    QVERIFY(c.start({"--strategy", "zero2", "--nodes", "3", "--steps", "5", "--seed", "4", "--break",
                     "reducescatter@step=3", "--break-hold", "0.2"},
                    3));
    QCOMPARE(c.coordinator->finish(), 0);
    // One JSON pause line with every node's tensor entering the same collective.
    QJsonObject pause;
    for (const QString &line : c.coordinator->out().split('\n', Qt::SkipEmptyParts)) {
        const QJsonObject o = QJsonDocument::fromJson(line.toUtf8()).object();
        if (o.value("type") == "pause")
            pause = o;
    }
    QVERIFY2(!pause.isEmpty(), qPrintable(c.coordinator->out().left(2000)));
    const QJsonArray nodes = pause.value("nodes").toArray();
    QCOMPARE(nodes.size(), 3);
    for (const QJsonValue &n : nodes) {
        QCOMPARE(n.toObject().value("step").toInt(), 3);
        QCOMPARE(n.toObject().value("seq").toDouble(), nodes[0].toObject().value("seq").toDouble());
        QVERIFY(n.toObject().value("count").toDouble() > 0);
    }
    QCOMPARE(c.coordinator->summary().value("steps").toInt(), 5);
}

QTEST_GUILESS_MAIN(TestClusterProcesses)
#include "tst_cluster_processes.moc"
