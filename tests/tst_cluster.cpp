// The cluster runtime in one process: a Coordinator and node agents as
// threads, talking the real control protocol over loopback TCP. Same result
// as the embedded trainer; wrong tokens refused; heartbeat loss; clock offset
// estimation; a node killed mid-run (ddp re-forms from the in-memory
// checkpoint, edp trains on); a late joiner taken in at the re-form;
// checkpoints on disk and resuming from them.
#include "engine/breakpoints/breakpoints.h"
#include "engine/checkpoint_file.h"
#include "engine/cluster/coordinator.h"
#include "engine/cluster/node_agent.h"
#include "engine/memory_tracker.h"
#include "net/control_channel.h"
#include "net/errors.h"
#include "net/socket_util.h"
#include "net/trace.h"
#include "param_match.h"

#include <QtTest>

#include <QFile>
#include <QTemporaryDir>

#include <atomic>
#include <mutex>
#include <poll.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

using namespace smol;
using namespace smol::engine;

namespace {

const std::string kToken = "tst-cluster-token";

// N agent threads joined to a coordinator; shut down and joined on exit.
class LocalNodes {
public:
    LocalNodes(Coordinator &c, int n) : m_c(c)
    {
        for (int k = 0; k < n; ++k)
            add();
        QVERIFY(m_c.waitForNodes(n, std::chrono::seconds(20)));
    }
    ~LocalNodes()
    {
        m_c.shutdownNodes();
        for (auto &t : m_threads)
            t.join();
    }
    void add(const std::string &token = kToken)
    {
        const int slot = int(m_threads.size());
        m_threads.emplace_back([this, slot, token] {
            NodeAgentOptions o;
            o.port = m_c.port();
            o.token = token;
            o.name = "t" + std::to_string(slot);
            o.bindAddress = "127.0.0.1";
            o.memorySlot = slot;
            o.inProcess = true;
            try {
                runNodeAgent(o, {});
            } catch (const std::exception &e) {
                std::lock_guard lock(m_mutex);
                m_errors.push_back(e.what());
            }
        });
    }
    std::vector<std::string> errors()
    {
        std::lock_guard lock(m_mutex);
        return m_errors;
    }

private:
    Coordinator &m_c;
    std::vector<std::thread> m_threads;
    std::mutex m_mutex;
    std::vector<std::string> m_errors;
};

CoordinatorOptions options()
{
    CoordinatorOptions o;
    o.bindAddress = "127.0.0.1";
    o.token = kToken;
    return o;
}

TrainConfig config(const std::string &strategy, int nodes, std::int64_t steps)
{
    TrainConfig c;
    c.strategy = strategy;
    c.nodes = nodes;
    c.steps = steps;
    c.seed = 7;
    c.globalBatch = 60;
    return c;
}

// Calls `action` once, on the run's thread, when step `at` completes.
class AtStep : public TrainObserver {
public:
    AtStep(std::int64_t at, std::function<void()> action) : m_at(at), m_action(std::move(action)) {}
    void onStep(const StepReport &r) override
    {
        losses.push_back(r.loss);
        if (r.step >= m_at && !m_done.exchange(true))
            m_action();
    }
    std::vector<double> losses;

private:
    std::int64_t m_at;
    std::function<void()> m_action;
    std::atomic<bool> m_done{false};
};

int nodeWithRank(Coordinator &c, int rank)
{
    for (const ClusterNode &n : c.nodes())
        if (n.rank == rank && n.state != ClusterNode::State::Lost)
            return n.id;
    return -1;
}

} // namespace

class TestCluster : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase()
    {
        memory::install();
        torch::set_num_threads(1);
    }
    void sameResultAsEmbedded_data();
    void sameResultAsEmbedded();
    void wrongTokenIsRefused();
    void silentNodeIsLost();
    void clockOffsetIsEstimated();
    void killedNodeReforms_data();
    void killedNodeReforms();
    void lateJoinerTakenInAtReform();
    void edpTrainsOnWithoutAWorker();
    void checkpointAndResume_data();
    void checkpointAndResume();
    void badResumeFiles();
    void stopEndsTheRun();
    void backToBackEpochs_data();
    void backToBackEpochs();
    void malformedControlTrafficIsDropped();
};

void TestCluster::sameResultAsEmbedded_data()
{
    QTest::addColumn<QString>("strategy");
    QTest::newRow("ddp") << "ddp";
    QTest::newRow("zero3") << "zero3";
    QTest::newRow("syncps") << "syncps";
}

namespace {
// The held-out losses a run reports.
struct TestLosses : TrainObserver {
    void onStep(const StepReport &) override {}
    void onTestLoss(std::int64_t step, double loss) override
    {
        std::lock_guard lock(mutex);
        losses.emplace_back(step, loss);
    }
    std::mutex mutex;
    std::vector<std::pair<std::int64_t, double>> losses;
};
} // namespace

void TestCluster::sameResultAsEmbedded()
{
    QFETCH(QString, strategy);
    TrainConfig c = config(strategy.toStdString(), 3, 15);
    c.testEvery = 4; // after steps 3, 7, 11 and the last, 14
    TestLosses embeddedTests, clusterTests;
    const TrainSummary embedded = runTraining(c, &embeddedTests);
    Coordinator coord(options());
    LocalNodes nodes(coord, 3);
    ClusterRunOptions ro;
    ro.nodes = 3;
    ro.recoveryEvery = 0; // no recovery gathers: the same bytes on the wire as embedded
    const TrainSummary cluster = coord.run(c, ro, &clusterTests);
    // Held-out losses: the same points, the same values, falling.
    const std::vector<std::pair<std::int64_t, double>> want{{3, 0}, {7, 0}, {11, 0}, {14, 0}};
    QCOMPARE(embeddedTests.losses.size(), want.size());
    QCOMPARE(clusterTests.losses.size(), want.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
        QCOMPARE(embeddedTests.losses[i].first, want[i].first);
        QCOMPARE(clusterTests.losses[i], embeddedTests.losses[i]);
    }
    QVERIFY(embeddedTests.losses.back().second < embeddedTests.losses.front().second);
    QCOMPARE(cluster.nodes, 3);
    QVERIFY(torch::equal(cluster.finalParams, embedded.finalParams)); // same code, same order of sums
    QCOMPARE(cluster.finalLoss, embedded.finalLoss);
    QCOMPARE(cluster.lossCurve.size(), embedded.lossCurve.size());
    for (int r = 0; r < 3; ++r) {
        QCOMPARE(cluster.memoryPerNode[std::size_t(r)].params, embedded.memoryPerNode[std::size_t(r)].params);
        QCOMPARE(cluster.bytesSentPerNode[std::size_t(r)], embedded.bytesSentPerNode[std::size_t(r)]);
    }
}

void TestCluster::wrongTokenIsRefused()
{
    Coordinator coord(options());
    std::vector<std::string> logs;
    std::mutex m;
    coord.setLogSink([&](const std::string &l) {
        std::lock_guard lock(m);
        logs.push_back(l);
    });
    NodeAgentOptions o;
    o.port = coord.port();
    o.token = "not-the-token";
    o.inProcess = true;
    QVERIFY_THROWS_EXCEPTION(net::AuthError, runNodeAgent(o, {}));
    QTRY_VERIFY_WITH_TIMEOUT(
        [&] {
            std::lock_guard lock(m);
            return std::any_of(logs.begin(), logs.end(),
                               [](const std::string &l) { return l.find("wrong token") != std::string::npos; });
        }(),
        5000);
    QVERIFY(coord.nodes().empty());
}

void TestCluster::silentNodeIsLost()
{
    CoordinatorOptions o = options();
    o.heartbeatTimeout = std::chrono::milliseconds(800);
    Coordinator coord(o);
    // Joins properly, then never says another word (a frozen process).
    auto ch = net::ControlChannel::connect("127.0.0.1", coord.port(), kToken, std::chrono::seconds(5));
    ch->send(QJsonObject{{"type", "hello"}, {"name", "frozen"}});
    QVERIFY(coord.waitForNodes(1, std::chrono::seconds(5)));
    QElapsedTimer t;
    t.start();
    QTRY_VERIFY_WITH_TIMEOUT(coord.nodes().at(0).state == ClusterNode::State::Lost, 5000);
    QVERIFY2(t.elapsed() < 2500, qPrintable(QString::number(t.elapsed())));
    QVERIFY(QString::fromStdString(coord.nodes().at(0).lostReason).contains("no heartbeat"));
}

void TestCluster::clockOffsetIsEstimated()
{
    Coordinator coord(options());
    // A node whose clock runs 7 s ahead and whose replies dawdle a little.
    const std::int64_t skew = 7'000'000'000;
    auto ch = net::ControlChannel::connect("127.0.0.1", coord.port(), kToken, std::chrono::seconds(5));
    ch->send(QJsonObject{{"type", "hello"}, {"name", "skewed"}});
    std::atomic<bool> stop{false};
    std::thread answer([&] {
        try {
            for (int i = 0; !stop; ++i) {
                net::ControlMessage m = ch->receive();
                if (m.type() != "ping")
                    continue;
                std::this_thread::sleep_for(std::chrono::microseconds(200 * (i % 5)));
                ch->send(QJsonObject{{"type", "pong"},
                                     {"t0", m.json.value("t0")},
                                     {"tn", QString::number(net::monotonicNs() + skew)}});
            }
        } catch (const std::exception &) {
        }
    });
    QTRY_VERIFY_WITH_TIMEOUT(!coord.nodes().empty() && coord.nodes().at(0).clockValid, 5000);
    QTest::qWait(300);
    const ClusterNode n = coord.nodes().at(0);
    stop = true;
    ch->close();
    answer.join();
    QVERIFY2(std::abs(n.clockOffsetNs - skew) <= n.clockErrorNs,
             qPrintable(QString("offset %1 ns, error %2 ns").arg(n.clockOffsetNs).arg(n.clockErrorNs)));
    QVERIFY(n.clockErrorNs < 20'000'000); // loopback: well under 20 ms
}

void TestCluster::killedNodeReforms_data()
{
    QTest::addColumn<QString>("strategy");
    QTest::addColumn<bool>("adam");
    QTest::newRow("ddp/sgd") << "ddp" << false;
    QTest::newRow("zero2/adam") << "zero2" << true; // Adam's moments come through the re-form too
    QTest::newRow("zero3/adam") << "zero3" << true;
}

void TestCluster::killedNodeReforms()
{
    QFETCH(QString, strategy);
    QFETCH(bool, adam);
    Coordinator coord(options());
    std::mutex m;
    QStringList logs;
    coord.setLogSink([&](const std::string &l) {
        std::lock_guard lock(m);
        logs << QString::fromStdString(l);
    });
    LocalNodes nodes(coord, 3);
    TrainConfig c = config(strategy.toStdString(), 3, 120);
    if (adam) {
        c.optimizer.kind = OptimizerConfig::Kind::Adam;
        c.optimizer.lr = 1e-3;
    }
    const TrainSummary reference = runTraining(c);
    AtStep killer(40, [&] { coord.kill(nodeWithRank(coord, 1)); });
    ClusterRunOptions ro;
    ro.nodes = 3;
    const TrainSummary s = coord.run(c, ro, &killer);
    QCOMPARE(s.nodes, 2);
    QCOMPARE(s.extra.at("reforms"), 1.0);
    QCOMPARE(int(s.lossCurve.size()), 120);
    for (std::size_t k = 0; k < s.lossCurve.size(); ++k)
        QVERIFY2(std::isfinite(s.lossCurve[k]), qPrintable(QStringLiteral("step %1: loss %2; log: %3")
                                                                 .arg(k)
                                                                 .arg(s.lossCurve[k])
                                                                 .arg(logs.join(" | "))));
    QVERIFY(s.finalLoss < s.lossCurve.front());
    // Redone from the last completed step, on 2 nodes instead of 3: the
    // same mathematics as the uninterrupted run (same global batches, and
    // with Adam the same moments).
    const QString mismatch = test::paramMismatch(s, reference);
    QVERIFY2(mismatch.isEmpty(), qPrintable(mismatch));
    std::lock_guard lock(m);
    // The survivors' own account arrives in the coordinator's log.
    QVERIFY2(!logs.filter(QRegularExpression("node \\d 't\\d': epoch 1 \\(rank \\d\\) ended")).isEmpty(),
             qPrintable(logs.join('\n')));
    QVERIFY(!logs.filter("re-forming").isEmpty());
}

void TestCluster::lateJoinerTakenInAtReform()
{
    Coordinator coord(options());
    LocalNodes nodes(coord, 2);
    const TrainConfig c = config("ddp", 2, 150);
    int lateId = -1;
    AtStep joiner(20, [&] {
        nodes.add();
        QVERIFY(coord.waitForNodes(3, std::chrono::seconds(10)));
        lateId = 2;
        coord.kill(nodeWithRank(coord, 1));
    });
    ClusterRunOptions ro;
    ro.nodes = 2;
    const TrainSummary s = coord.run(c, ro, &joiner);
    QCOMPARE(s.extra.at("reforms"), 1.0);
    QCOMPARE(s.nodes, 2); // the survivor and the late joiner
    const ClusterNode late = coord.nodes().at(std::size_t(lateId));
    QCOMPARE(late.state, ClusterNode::State::Idle);
    QCOMPARE(late.rank, 1);
    const QString mismatch = test::paramMismatch(s, runTraining(c));
    QVERIFY2(mismatch.isEmpty(), qPrintable(mismatch));
}

void TestCluster::edpTrainsOnWithoutAWorker()
{
    Coordinator coord(options());
    LocalNodes nodes(coord, 4);
    TrainConfig c = config("edp", 4, 400);
    AtStep killer(80, [&] { coord.kill(nodeWithRank(coord, 2)); });
    ClusterRunOptions ro;
    ro.nodes = 4;
    const TrainSummary s = coord.run(c, ro, &killer);
    QCOMPARE(s.async.updates, 400);
    QCOMPARE(s.extra.at("reforms"), 0.0);
    QCOMPARE(s.lostRanks, std::vector<int>{2});
    QCOMPARE(s.async.lost.at(2), 1);
    QVERIFY(s.async.pushes.at(1) + s.async.pushes.at(3) > 300); // the others carried on
    QVERIFY(s.finalLoss < s.lossCurve.front());
}

void TestCluster::checkpointAndResume_data()
{
    QTest::addColumn<bool>("adam");
    QTest::newRow("sgd") << false;
    QTest::newRow("adam") << true;
}

void TestCluster::checkpointAndResume()
{
    QFETCH(bool, adam);
    QTemporaryDir dir;
    const QString ckdir = dir.filePath("ck");
    Coordinator coord(options());
    LocalNodes nodes(coord, 3);
    TrainConfig c = config("ddp", 2, 40);
    if (adam) {
        c.optimizer.kind = OptimizerConfig::Kind::Adam;
        c.optimizer.lr = 1e-3;
    }
    ClusterRunOptions ro;
    ro.nodes = 2;
    ro.checkpointEvery = 15;
    ro.checkpointDir = ckdir;
    const TrainSummary whole = coord.run(c, ro);
    const Checkpoint ck = readCheckpoint(ckdir);
    QCOMPARE(ck.stepsDone, 30); // 15 and 30; never the last step
    QCOMPARE(std::int64_t(ck.params.size()), whole.paramCount);
    QCOMPARE(std::int64_t(ck.optimizerState.size()), adam ? 2 * whole.paramCount : 0);
    QCOMPARE(QDir(ckdir).entryList(QDir::Files), QStringList{"checkpoint.smolckpt"});

    // Resume on the same world: bit for bit the same as never stopping.
    ClusterRunOptions resume;
    resume.nodes = 2;
    resume.resumeDir = ckdir;
    const TrainSummary resumed = coord.run(c, resume);
    QVERIFY(torch::equal(resumed.finalParams, whole.finalParams));
    // On 3 nodes with zero3 (moments cut per layer): the same mathematics.
    TrainConfig c3 = c;
    c3.strategy = "zero3";
    c3.nodes = 3;
    resume.nodes = 3;
    const TrainSummary wider = coord.run(c3, resume);
    const QString mismatch = test::paramMismatch(wider, whole);
    QVERIFY2(mismatch.isEmpty(), qPrintable(mismatch));
}

void TestCluster::badResumeFiles()
{
    QTemporaryDir dir;
    Coordinator coord(options());
    LocalNodes nodes(coord, 1);
    ClusterRunOptions ro;
    ro.nodes = 1;
    ro.resumeDir = dir.filePath("missing");
    QVERIFY_THROWS_EXCEPTION(CheckpointError, coord.run(config("single", 1, 5), ro));
    // A checkpoint of another model.
    Checkpoint other;
    other.stepsDone = 2;
    other.params.assign(10, 1.0f);
    writeCheckpoint(dir.filePath("other"), other);
    ro.resumeDir = dir.filePath("other");
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, coord.run(config("single", 1, 5), ro));
    // Truncated.
    QFile f(checkpointPath(dir.filePath("other")));
    QVERIFY(f.resize(f.size() / 2));
    QVERIFY_THROWS_EXCEPTION(CheckpointError, coord.run(config("single", 1, 5), ro));
    // The cluster is still usable.
    ro.resumeDir.clear();
    QCOMPARE(coord.run(config("single", 1, 5), ro).steps, 5);
}

void TestCluster::stopEndsTheRun()
{
    Coordinator coord(options());
    LocalNodes nodes(coord, 2);
    AtStep stopper(10, [&] { coord.stop(); });
    ClusterRunOptions ro;
    ro.nodes = 2;
    try {
        coord.run(config("ddp", 2, 100000), ro, &stopper);
        QFAIL("the run did not stop");
    } catch (const std::runtime_error &e) {
        QCOMPARE(QString(e.what()), QString("stopped by the user"));
    }
    QVERIFY(stopper.losses.size() < 1000);
    // Both nodes are idle again and run the next job.
    QCOMPARE(coord.run(config("ddp", 2, 5), ro).steps, 5);
}

void TestCluster::backToBackEpochs_data()
{
    QTest::addColumn<QString>("strategy");
    QTest::addColumn<int>("nodes");
    QTest::addColumn<QString>("model");
    QTest::newRow("single") << "single" << 1 << "mlp";
    QTest::newRow("ddp on 1 node") << "ddp" << 1 << "mlp"; // its hooks once ran with no communicator
    for (const char *s : {"ddp", "zero1", "zero2", "zero3", "syncps", "edp"})
        QTest::newRow(s) << s << 3 << "mlp";
    QTest::newRow("pipeline") << "pipeline" << 3 << "mlp";
    QTest::newRow("tensor") << "tensor" << 2 << "gpt";
}

// The same node threads run, one after another: an epoch stopped while held
// at a collective (ddp: inside backward's hook), an epoch whose nodes fail
// because a peer is killed and the re-formed epoch after it, then a whole
// run that must equal the embedded one. Nothing of an ended epoch (hooks,
// callbacks, threads) may be left to run into the next: tst_cluster_asan
// runs this under AddressSanitizer.
void TestCluster::backToBackEpochs()
{
    QFETCH(QString, strategy);
    QFETCH(int, nodes);
    QFETCH(QString, model);
    TrainConfig c = config(strategy.toStdString(), nodes, 8);
    if (model == "gpt") {
        c.model.kind = "gpt";
        c.model.nEmbd = 16;
        c.model.nHead = 2;
        c.model.blockSize = 8;
        c.model.nLayer = 1;
        c.globalBatch = 4;
    }
    Coordinator coord(options());
    LocalNodes agents(coord, nodes + 1); // one spare, taken in at the re-form
    ClusterRunOptions ro;
    ro.nodes = nodes;

    // 1. Stopped while held at a collective (single has none: stopped at a step).
    BreakpointController ctl;
    std::thread stopper;
    AtStep pauseThenStop(1, [&] {
        if (nodes == 1) {
            coord.stop();
            return;
        }
        ctl.pauseAtNext();
        stopper = std::thread([&] {
            ctl.waitForPause(std::chrono::seconds(30));
            coord.stop();
        });
    });
    ClusterRunOptions held = ro;
    held.breakpoints = &ctl;
    TrainConfig longRun = c;
    longRun.steps = 100000;
    QString stopped;
    try {
        coord.run(longRun, held, &pauseThenStop);
    } catch (const std::runtime_error &e) {
        stopped = e.what();
    }
    if (stopper.joinable())
        stopper.join();
    QCOMPARE(stopped, QString("stopped by the user"));

    // 2. A node killed mid-run: the others' epoch fails, the run re-forms
    // (with the spare) and finishes; edp trains on without the worker.
    if (nodes > 1) {
        TrainConfig killed = c;
        killed.steps = 200; // the kill lands long before the end
        AtStep killer(2, [&] { coord.kill(nodeWithRank(coord, nodes - 1)); });
        const TrainSummary s = coord.run(killed, ro, &killer);
        QCOMPARE(s.steps, killed.steps);
        QVERIFY(std::isfinite(s.finalLoss));
        if (strategy != "edp")
            QCOMPARE(s.extra.at("reforms"), 1.0);
    }

    // 3. Restarted on the same threads: the embedded run's parameters.
    const TrainSummary reference = runTraining(c);
    const TrainSummary s = coord.run(c, ro);
    if (strategy != "edp") { // asynchronous: its order of updates is not fixed
        const QString mismatch = test::paramMismatch(s, reference);
        QVERIFY2(mismatch.isEmpty(), qPrintable(mismatch));
    }
    QCOMPARE(s.steps, c.steps);
}

void TestCluster::malformedControlTrafficIsDropped()
{
    Coordinator coord(options());
    // Not authenticated: garbage instead of a proof.
    {
        const int fd = net::sock::connectTcp("127.0.0.1", coord.port(), std::chrono::seconds(2));
        const std::string junk(200, 'x');
        ::send(fd, junk.data(), junk.size(), MSG_NOSIGNAL);
        char buf[256];
        pollfd p{fd, POLLIN, 0};
        QElapsedTimer t;
        t.start();
        ssize_t got = 1;
        while (got > 0 && t.elapsed() < 5000) // read the hello, then the close
            got = ::poll(&p, 1, 100) > 0 ? ::recv(fd, buf, sizeof buf, 0) : 1;
        QCOMPARE(got, ssize_t(0));
        ::close(fd);
    }
    // Authenticated, then a bad header, a lying length, a non-object.
    const std::vector<QByteArray> bad{
        QByteArray("GARBAGE!GARBAGE!"),
        QByteArray("SMCT") + QByteArray("\xff\xff\xff\x7f", 4) + QByteArray(8, '\0'),
        QByteArray("SMCT") + QByteArray("\x02\0\0\0", 4) + QByteArray(8, '\0') + "[]",
        QByteArray("SMCT") + QByteArray("\x0b\0\0\0", 4) + QByteArray("\0\0\0\x41\0\0\0\0", 8) +
            "{\"type\":\"x\"}",
    };
    for (std::size_t i = 0; i < bad.size(); ++i) {
        auto ch = net::ControlChannel::connect("127.0.0.1", coord.port(), kToken, std::chrono::seconds(5));
        ch->send(QJsonObject{{"type", "hello"}, {"name", "liar"}});
        QTRY_COMPARE_WITH_TIMEOUT(coord.nodes().size(), i + 1, 5000);
        // Raw bytes past the channel's framing.
        QVERIFY(::send(ch->fdForTesting(), bad[i].constData(), std::size_t(bad[i].size()), MSG_NOSIGNAL) > 0);
        QTRY_VERIFY_WITH_TIMEOUT(coord.nodes().at(i).state == ClusterNode::State::Lost, 5000);
        QVERIFY(!coord.nodes().at(i).lostReason.empty());
        QVERIFY(coord.nodes().at(i).lostReason.find('\n') == std::string::npos);
    }
    // The coordinator still works.
    LocalNodes nodes(coord, 1);
    ClusterRunOptions ro;
    ro.nodes = 1;
    QCOMPARE(coord.run(config("single", 1, 3), ro).steps, 3);
}

QTEST_GUILESS_MAIN(TestCluster)
#include "tst_cluster.moc"
