// Nothing lost when every node dies: the coordinator keeps the newest state
// rank 0 sends (kept_checkpoint.h), and a run whose nodes are all lost at
// once resumes from it with fresh nodes, for every kind of strategy (ddp,
// zero3's shards, pipeline stages, tensor, edp's server) and on Gloo. Each
// all-lost episode waits the whole --rejoin-timeout from its own start.
// In-process nodes on loopback (the process test, with kill -9, is in
// tst_cluster_processes).
#include "engine/checkpoint_file.h"
#include "engine/cluster/coordinator.h"
#include "engine/cluster/kept_checkpoint.h"
#include "engine/cluster/node_agent.h"
#include "engine/memory_tracker.h"

#include "coordinator_support.h"

#include <QtTest>

#include <QDir>

#include <atomic>
#include <mutex>
#include <thread>

using namespace smol;
using namespace smol::engine;
using namespace smol::test;

namespace {

const std::string kToken = "tst-all-lost-token";

// In-process node agents joined to one coordinator, joined on destruction.
class Nodes {
public:
    explicit Nodes(Coordinator &c) : m_c(c) {}
    ~Nodes()
    {
        m_c.shutdownNodes();
        std::lock_guard lock(m_mutex);
        for (auto &t : m_threads)
            t.join();
    }
    void start(const std::string &name)
    {
        std::lock_guard lock(m_mutex);
        const int slot = int(m_threads.size());
        m_threads.emplace_back([port = m_c.port(), slot, name] {
            try {
                runNodeAgent(inProcessNode(port, kToken, name, slot % memory::kMaxNodes), {});
            } catch (const std::exception &) {
            }
        });
    }

private:
    Coordinator &m_c;
    std::mutex m_mutex;
    std::vector<std::thread> m_threads;
};

// At step `at`, kills nodes 0..n-1 (every member of the first epoch) and,
// after a moment, starts n fresh ones. Remembers where the run re-formed.
class KillAll : public TrainObserver {
public:
    std::function<void()> atStep;
    std::int64_t at = 0;
    std::atomic<std::int64_t> killedAt{-1}, resumedAt{-1};
    std::atomic<int> reforms{0};
    void onStep(const StepReport &r) override
    {
        if (r.step >= at && atStep) {
            killedAt = r.step;
            std::exchange(atStep, nullptr)();
        }
    }
    void onReform(int, int, int, std::int64_t fromStep, const std::string &) override
    {
        ++reforms;
        resumedAt = fromStep;
    }
};

TrainConfig config(const QString &strategy, int nodes, std::int64_t steps)
{
    TrainConfig c;
    c.strategy = strategy.toStdString();
    c.nodes = nodes;
    c.steps = steps;
    c.seed = 7;
    c.globalBatch = 32;
    c.behaviour.resize(std::size_t(nodes));
    for (auto &b : c.behaviour)
        b.slowdown = 2; // steps long enough that the kill lands mid-run
    return c;
}

} // namespace

class TestAllLost : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase() { memory::install(); }

    void keptStateStaysNewestAndRoundTrips()
    {
        QStringList said;
        KeptCheckpoint kept(1 << 20, [&](const std::string &l) { said << QString::fromStdString(l); });
        QCOMPARE(kept.steps(), std::int64_t(-1));
        QVERIFY(!kept.state().params.defined());
        QByteArray blob(3 * 4 * 4, '\0');
        for (int i = 0; i < 12; ++i)
            reinterpret_cast<float *>(blob.data())[i] = float(i);
        kept.keep(100, /*moments=*/true, blob, 4, "{}");
        kept.keep(50, false, QByteArray(16, '\0'), 4, "{}"); // older: ignored
        QCOMPARE(kept.steps(), std::int64_t(100));
        const TrainingState s = kept.state();
        QCOMPARE(s.params[3].item<float>(), 3.0f);
        QCOMPARE(s.moments.exp[0].item<float>(), 4.0f);
        QCOMPARE(s.moments.expSq[3].item<float>(), 11.0f);
        QVERIFY(!kept.onDisk());
        QVERIFY(said.isEmpty());
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, kept.keep(200, false, QByteArray(15, '\0'), 4, "{}"));
        QCOMPARE(kept.steps(), std::int64_t(100));
    }

    void keptStateOverTheBudgetGoesToDiskSaidOnce()
    {
        QStringList said;
        QString dir;
        {
            KeptCheckpoint kept(/*budgetBytes=*/8, [&](const std::string &l) { said << QString::fromStdString(l); });
            for (int step = 1; step <= 3; ++step) {
                QByteArray blob(4 * 4, '\0');
                reinterpret_cast<float *>(blob.data())[0] = float(step);
                kept.keep(step * 10, false, blob, 4, "{\"x\":1}");
            }
            QVERIFY(kept.onDisk());
            dir = kept.directory();
            QVERIFY(QFile::exists(checkpointPath(dir)));
            QCOMPARE(readCheckpoint(dir).stepsDone, std::int64_t(30));
            QCOMPARE(kept.state().params[0].item<float>(), 3.0f);
            QCOMPARE(said.size(), 1);
            QVERIFY2(said[0].contains("memory budget") && said[0].contains(dir), qPrintable(said.join('\n')));
        }
        QVERIFY(!QDir(dir).exists()); // removed with the run
    }

    void everyNodeLostResumesFromTheKeptState_data()
    {
        QTest::addColumn<QString>("strategy");
        QTest::addColumn<int>("nodes");
        QTest::addColumn<bool>("gloo");
        QTest::newRow("ddp") << "ddp" << 2 << false;
        QTest::newRow("zero3") << "zero3" << 2 << false;
        QTest::newRow("pipeline") << "pipeline" << 2 << false;
        QTest::newRow("tensor") << "tensor" << 2 << false;
        QTest::newRow("edp") << "edp" << 3 << false;
        QTest::newRow("ddp-gloo") << "ddp" << 2 << true;
    }

    void everyNodeLostResumesFromTheKeptState()
    {
        QFETCH(QString, strategy);
        QFETCH(int, nodes);
        QFETCH(bool, gloo);
        LogLines logs;
        Coordinator coord(loopbackCoordinator(kToken));
        coord.setLogSink(logs.sink());
        Nodes agents(coord);
        for (int i = 0; i < nodes; ++i)
            agents.start("first" + std::to_string(i));
        QVERIFY(coord.waitForNodes(nodes, std::chrono::seconds(20)));
        TrainConfig c = config(strategy, nodes, 120);
        if (gloo)
            c.backend = TrainConfig::Backend::Gloo;
        if (strategy == "tensor")
            c.model.kind = "gpt"; // it splits attention heads and the MLP (slow enough as it is)
        if (strategy == "tensor")
            c.behaviour.clear();
        KillAll observer;
        observer.at = 50;
        observer.atStep = [&] {
            for (int i = 0; i < nodes; ++i)
                coord.kill(i);
            std::thread([&agents, nodes] {
                std::this_thread::sleep_for(std::chrono::milliseconds(300));
                for (int i = 0; i < nodes; ++i)
                    agents.start("fresh" + std::to_string(i));
            }).detach();
        };
        ClusterRunOptions ro;
        ro.nodes = nodes;
        ro.rejoinTimeout = std::chrono::seconds(60);
        ro.keepEvery = 20;                       // (100 by default: tst_cluster_processes)
        ro.keepInterval = std::chrono::hours(1); // by steps only: the figure below is exact
        TrainSummary s;
        try {
            s = coord.run(c, ro, &observer);
        } catch (const std::exception &e) {
            QFAIL(qPrintable(QString::fromStdString(e.what()) + "\n" + logs.all()));
        }
        QCOMPARE(s.steps, c.steps);
        QVERIFY2(observer.reforms >= 1, qPrintable(logs.all()));
        // Kept every 20 steps: the run resumed at 40 or later (killed at 50
        // or a few steps later), never from 0.
        const std::int64_t killed = observer.killedAt;
        QVERIFY2(observer.resumedAt >= killed - 20 && observer.resumedAt >= 40,
                 qPrintable(QString("killed at %1, resumed at %2\n%3")
                                .arg(killed)
                                .arg(observer.resumedAt.load())
                                .arg(logs.all())));
        QVERIFY2(logs.all().contains("every node is lost"), qPrintable(logs.all()));
        QVERIFY(std::isfinite(s.finalLoss));
    }

    // Two all-lost episodes: the second waits its own whole timeout (it
    // used to end at once), and the error says how long it waited.
    void eachAllLostEpisodeWaitsTheWholeTimeout()
    {
        LogLines logs;
        Coordinator coord(loopbackCoordinator(kToken));
        coord.setLogSink(logs.sink());
        Nodes agents(coord);
        agents.start("first");
        QVERIFY(coord.waitForNodes(1, std::chrono::seconds(20)));
        class KillTwice : public TrainObserver {
        public:
            Coordinator *c = nullptr;
            Nodes *agents = nullptr;
            int kills = 0;
            std::chrono::steady_clock::time_point secondLoss;
            void onStep(const StepReport &r) override
            {
                if (kills == 0 && r.step >= 20) {
                    ++kills;
                    c->kill(0);
                    agents->start("second");
                } else if (kills == 1 && r.step >= 60) {
                    ++kills;
                    secondLoss = std::chrono::steady_clock::now();
                    c->kill(1);
                }
            }
        } observer;
        observer.c = &coord;
        observer.agents = &agents;
        ClusterRunOptions ro;
        ro.nodes = 1;
        ro.rejoinTimeout = std::chrono::milliseconds(2500);
        QString error;
        try {
            coord.run(config("ddp", 1, 100000), ro, &observer);
        } catch (const std::runtime_error &e) {
            error = e.what();
        }
        const double waited =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - observer.secondLoss).count();
        QCOMPARE(observer.kills, 2);
        QVERIFY2(waited >= 2.4, qPrintable(QString::number(waited) + " s: " + error + "\n" + logs.all()));
        const QRegularExpressionMatch said = QRegularExpression("waited (\\d+\\.\\d) s").match(error);
        QVERIFY2(said.hasMatch() && said.captured(1).toDouble() >= 2.4, qPrintable(error));
    }
};

QTEST_GUILESS_MAIN(TestAllLost)
#include "tst_all_lost.moc"
