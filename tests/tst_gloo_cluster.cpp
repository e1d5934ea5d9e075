// `--backend gloo` on real `smolctl node` processes over loopback: the
// coordinator hands each epoch a rendezvous (engine/cluster/rendezvous_board.h)
// and each node's Gloo device an address. ddp and zero3 end where the same
// run on our transport ends (relative L2 <= 1e-5), pipeline where single
// does (param_match.h), a node killed with -9 mid-run re-forms on Gloo
// (with a node that joined late), and the rendezvous answers only the epoch's members, and forgets an epoch's
// keys when the next begins.
#include "param_match.h"

#include "engine/cluster/coordinator.h"
#include "engine/cluster/rendezvous_board.h"
#include "engine/memory_tracker.h"

#include "smolctl_process.h"

#include <QtTest>

#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>

#include <signal.h>

using namespace smol;
using namespace smol::engine;
using smol::test::Smolctl;

namespace {

const QString kToken = QStringLiteral("tst-gloo-cluster-token");

// A coordinator in this process (its summary carries the final parameters)
// and `n` node processes joined to it.
struct LocalCoordinator {
    std::unique_ptr<Coordinator> coord;
    std::vector<std::unique_ptr<Smolctl>> nodes;

    bool start(int n)
    {
        memory::install();
        CoordinatorOptions co;
        co.bindAddress = "127.0.0.1";
        co.token = kToken.toStdString();
        coord = std::make_unique<Coordinator>(co);
        const QString where = "127.0.0.1:" + QString::number(coord->port());
        for (int i = 0; i < n; ++i) {
            nodes.push_back(
                std::make_unique<Smolctl>(QStringList{"node", "--join", where, "--token", kToken}));
            if (!coord->waitForNodes(i + 1, std::chrono::seconds(30)))
                return false;
        }
        return true;
    }
    TrainSummary run(TrainConfig c)
    {
        ClusterRunOptions ro;
        ro.nodes = c.nodes;
        return coord->run(c, ro);
    }
    ~LocalCoordinator()
    {
        if (coord)
            coord->shutdownNodes();
        for (auto &n : nodes)
            n->finish(10000);
    }
};

TrainConfig config(const std::string &strategy, int nodes, TrainConfig::Backend backend)
{
    TrainConfig c;
    c.strategy = strategy;
    c.nodes = nodes;
    c.steps = 12;
    c.globalBatch = 48;
    c.seed = 7;
    c.backend = backend;
    return c;
}

double relativeL2(const TrainSummary &a, const TrainSummary &b)
{
    const auto x = a.finalParams.to(torch::kFloat64), y = b.finalParams.to(torch::kFloat64);
    return ((x - y).norm() / y.norm()).item<double>();
}

net::ControlMessage storeMessage(int epoch, const QString &call, const QString &op, const QStringList &keys,
                                 const QByteArray &blob = {})
{
    return net::ControlMessage{QJsonObject{{"type", "store"},
                                           {"epoch", epoch},
                                           {"call", call},
                                           {"op", op},
                                           {"keys", QJsonArray::fromStringList(keys)}},
                               blob};
}

} // namespace

class TestGlooCluster : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase() { torch::set_num_threads(1); }
    void ddpAndZero3MatchOurs();
    void pipelineEqualsSingle();
    void killNineReformsOnGloo(); // with a late joiner
    void rendezvousAnswersOnlyItsEpoch();
};

void TestGlooCluster::ddpAndZero3MatchOurs()
{
    LocalCoordinator c;
    QVERIFY(c.start(3));
    for (const std::string strategy : {"ddp", "zero3"}) {
        const TrainSummary ours = c.run(config(strategy, 3, TrainConfig::Backend::Ours));
        const TrainSummary gloo = c.run(config(strategy, 3, TrainConfig::Backend::Gloo));
        QCOMPARE(gloo.nodes, 3);
        QCOMPARE(gloo.paramCount, ours.paramCount);
        const double rel = relativeL2(gloo, ours);
        qInfo("%s on 3 node processes: gloo vs ours, relative L2 %.3g", strategy.c_str(), rel);
        QVERIFY2(rel <= 1e-5, qPrintable(QString("%1: relative L2 %2").arg(strategy.c_str()).arg(rel)));
        // Gloo's bytes are the payload each node handed to its collectives.
        for (std::uint64_t b : gloo.bytesSentPerNode)
            QVERIFY(b > 0);
    }
}

void TestGlooCluster::pipelineEqualsSingle()
{
    TrainConfig single = config("single", 1, TrainConfig::Backend::Ours);
    single.transport = net::TransportKind::Inproc;
    const TrainSummary reference = runTraining(single);
    LocalCoordinator c;
    QVERIFY(c.start(3));
    const TrainSummary pipeline = c.run(config("pipeline", 3, TrainConfig::Backend::Gloo));
    const QString mismatch = test::paramMismatch(pipeline, reference);
    QVERIFY2(mismatch.isEmpty(), qPrintable(mismatch));
}

void TestGlooCluster::killNineReformsOnGloo()
{
    Smolctl coordinator(QStringList{"train", "--listen", "0", "--token", kToken, "--json", "--backend",
                                    "gloo", "--strategy", "ddp", "--nodes", "3", "--steps", "2000", "--seed",
                                    "2"});
    const auto port = coordinator.waitFor(QRegularExpression("listening on port (\\d+)"));
    QVERIFY2(port.hasMatch(), qPrintable(coordinator.err()));
    std::vector<std::unique_ptr<Smolctl>> nodes;
    for (int i = 0; i < 3; ++i) {
        nodes.push_back(
            std::make_unique<Smolctl>(QStringList{"node", "--join", "127.0.0.1:" + port.captured(1),
                                                  "--token", kToken, "--name", "proc" + QString::number(i)}));
        QVERIFY2(
            coordinator.waitFor(QRegularExpression(QString("node %1 'proc%1' joined").arg(i))).hasMatch(),
            qPrintable(coordinator.err()));
    }
    QElapsedTimer t;
    t.start();
    while (coordinator.lastStep() < 30 && t.elapsed() < 60000)
        coordinator.pump();
    // A late joiner waits for the next epoch; the kill makes one, with it.
    nodes.push_back(std::make_unique<Smolctl>(
        QStringList{"node", "--join", "127.0.0.1:" + port.captured(1), "--token", kToken, "--name", "late"}));
    QVERIFY2(coordinator.waitFor(QRegularExpression("node 3 'late' joined")).hasMatch(),
             qPrintable(coordinator.err()));
    nodes[1]->killNine();
    QCOMPARE(coordinator.finish(), 0);
    QVERIFY2(coordinator.err().contains("re-forming"), qPrintable(coordinator.err()));
    const QJsonObject s = coordinator.summary();
    QCOMPARE(s.value("backend").toString(), QStringLiteral("gloo"));
    QCOMPARE(s.value("nodes").toInt(), 3); // two survivors and the late joiner
    QCOMPARE(s.value("reforms").toDouble(), 1.0);
    QCOMPARE(s.value("steps").toInt(), 2000);
    const double finalLoss = s.value("final_loss").toDouble();
    QVERIFY2(std::isfinite(finalLoss) && finalLoss < 0.9, qPrintable(QString::number(finalLoss)));
}

void TestGlooCluster::rendezvousAnswersOnlyItsEpoch()
{
    std::vector<std::pair<int, QJsonObject>> replies;
    std::vector<QByteArray> blobs;
    RendezvousBoard board([&](int node, const QJsonObject &json, const QByteArray &blob) {
        replies.emplace_back(node, json);
        blobs.push_back(blob);
    });
    board.beginEpoch(1, {0, 1});
    // A get before the set waits; the set answers it.
    board.handle(1, storeMessage(1, "a", "get", {"rank0"}));
    QVERIFY(replies.empty());
    board.handle(0, storeMessage(1, "b", "set", {"rank0"}, "addr0"));
    QCOMPARE(replies.size(), std::size_t(2));
    QCOMPARE(replies[1].first, 1);
    QCOMPARE(replies[1].second.value("call").toString(), QStringLiteral("a"));
    QCOMPARE(blobs[1], QByteArray("addr0"));
    // Node 2 is not a member; a member naming another epoch is refused too.
    board.handle(2, storeMessage(1, "c", "get", {"rank0"}));
    QCOMPARE(replies.back().second.value("ok").toBool(), false);
    board.handle(0, storeMessage(0, "d", "get", {"rank0"}));
    QCOMPARE(replies.back().second.value("ok").toBool(), false);
    // The next epoch has no stale keys, and a waiter left over is failed.
    board.handle(1, storeMessage(1, "e", "get", {"rank1"}));
    const std::size_t before = replies.size();
    board.beginEpoch(2, {0, 1});
    QCOMPARE(replies.size(), before + 1);
    QCOMPARE(replies.back().second.value("ok").toBool(), false);
    board.handle(0, storeMessage(2, "f", "check", {"rank0"}));
    QCOMPARE(replies.back().second.value("value").toBool(), false);
}

QTEST_GUILESS_MAIN(TestGlooCluster)
#include "tst_gloo_cluster.moc"
