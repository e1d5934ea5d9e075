// A listening coordinator under hostile traffic, loopback only, bounded in
// count and time: floods of connections that close at once or stay silent
// (memory and threads come back, a real node still joins within 2 s and
// trains), refusals logged once per address and reason, names with control
// characters or megabytes long, type-confused and wrong-rank messages from
// an authenticated client, and a run whose nodes are all lost that waits
// for new ones and finishes. Plus the admission pieces on their own.
#include "engine/cluster/admission.h"
#include "engine/cluster/coordinator.h"
#include "engine/cluster/node_agent.h"
#include "engine/memory_tracker.h"
#include "net/control_channel.h"
#include "net/socket_util.h"

#include "coordinator_support.h"

#include <QtTest>

#include <QDir>
#include <QFile>

#include <arpa/inet.h>
#include <atomic>
#include <mutex>
#include <netinet/in.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

using namespace smol;
using namespace smol::engine;
using namespace smol::test;

namespace {

const std::string kToken = "tst-admission-token";

// Thread count of this process.
int threadCount() { return int(QDir("/proc/self/task").entryList(QDir::Dirs | QDir::NoDotAndDotDot).size()); }

// Joins a thread when the test returns, also when a check failed early.
struct Joined {
    std::thread thread;
    ~Joined()
    {
        if (thread.joinable())
            thread.join();
    }
};

// One in-process node agent, joined and idle; shut down with the coordinator.
std::thread startNode(Coordinator &c, int slot, const std::string &name)
{
    return std::thread([&c, slot, name] {
        try {
            runNodeAgent(inProcessNode(c.port(), kToken, name, slot), {});
        } catch (const std::exception &) {
        }
    });
}

TrainConfig ddp(int nodes, std::int64_t steps)
{
    TrainConfig c;
    c.strategy = "ddp";
    c.nodes = nodes;
    c.steps = steps;
    c.seed = 5;
    c.globalBatch = 60;
    return c;
}

} // namespace

class TestCoordinatorAdmission : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase() { memory::install(); }

    void gateBoundsHandshakes()
    {
        AdmissionGate gate(3, 2);
        QVERIFY(gate.tryEnter("a"));
        QVERIFY(gate.tryEnter("a"));
        QVERIFY(!gate.tryEnter("a")); // per address
        QVERIFY(gate.tryEnter("b"));
        QVERIFY(!gate.tryEnter("c")); // in all
        gate.leave("a");
        QVERIFY(gate.tryEnter("c"));
        QCOMPARE(gate.inProgress(), 3);
    }

    void refusalsAreCountedPerWindow()
    {
        RefusalLog log(std::chrono::seconds(10));
        const auto t0 = RefusalLog::Clock::now();
        QVERIFY(!log.refuse("192.0.2.7", "bad handshake", t0).empty());
        for (int i = 0; i < 4500; ++i)
            QVERIFY(log.refuse("192.0.2.7", "bad handshake", t0 + std::chrono::milliseconds(i)).empty());
        QVERIFY(!log.refuse("192.0.2.8", "bad handshake", t0).empty()); // another address: its own line
        QVERIFY(log.flush(t0 + std::chrono::seconds(5)).empty());
        const std::vector<std::string> lines = log.flush(t0 + std::chrono::seconds(11));
        QCOMPARE(int(lines.size()), 1);
        QCOMPARE(QString::fromStdString(lines[0]),
                 QString("refused 4500 more connection(s) from 192.0.2.7 in the last 10 s: bad handshake"));
    }

    void printableTextReplacesControls()
    {
        QCOMPARE(printableText(QString("a\nb\x1b[2Jc\td"), 64), QString("a?b?[2Jc?d"));
        const QString big(2'000'000, 'x');
        const QString cut = printableText(big, 64);
        QVERIFY(cut.startsWith(QString(64, 'x')));
        QVERIFY(cut.endsWith("(2000000 characters)"));
        QCOMPARE(printableText(std::string("ok"), 64), std::string("ok"));
    }

    void floodLeavesNothingBehind()
    {
        LogLines logs;
        Coordinator coord(loopbackCoordinator(kToken));
        coord.setLogSink(logs.sink());
        QTest::qWait(300);
        QElapsedTimer flooding;
        flooding.start();
        const std::int64_t rss0 = residentBytes();
        const int threads0 = threadCount();

        // 5,000 connect-and-close, then 500 held silent, from two addresses.
        for (int i = 0; i < 5000; ++i) {
            const int fd = connectFrom("127.0.0.2", coord.port());
            QVERIFY(fd >= 0);
            ::close(fd);
        }
        std::vector<int> silent;
        for (int i = 0; i < 500; ++i) {
            const int fd = connectFrom(i % 2 ? "127.0.0.3" : "127.0.0.4", coord.port());
            QVERIFY(fd >= 0);
            silent.push_back(fd);
        }
        // A real node joins within 2 s while the silent ones are held.
        QElapsedTimer joining;
        joining.start();
        struct Shutdown {
            Coordinator &c;
            ~Shutdown() { c.shutdownNodes(); }
        };
        Joined node{startNode(coord, 0, "real")};
        Shutdown shutdown{coord};
        QVERIFY(coord.waitForNodes(1, std::chrono::seconds(2)));
        const qint64 joinMs = joining.elapsed();
        for (int fd : silent)
            ::close(fd);
        QVERIFY2(joinMs < 2000, qPrintable(QString("joined after %1 ms").arg(joinMs)));

        // Handshakes time out within 5 s; then threads and memory are back.
        QTRY_VERIFY_WITH_TIMEOUT(threadCount() <= threads0 + 4, 15000); // + the node: agent, heartbeat, reader...
        const std::int64_t rss1 = residentBytes();
        QVERIFY2(rss1 - rss0 < 20 * 1024 * 1024,
                 qPrintable(QString("resident %1 MB -> %2 MB").arg(rss0 >> 20).arg(rss1 >> 20)));
        // A few lines, not thousands.
        // A few lines, not thousands: one per address, reason and 10 s (a
        // handful of reasons from three addresses).
        const QStringList refused = logs.lines().filter("refused");
        const qint64 windows = flooding.elapsed() / 10000 + 2;
        QVERIFY2(refused.size() <= 3 * 4 * windows, qPrintable(refused.join('\n')));
        QVERIFY(!refused.isEmpty());

        // And it trains.
        ClusterRunOptions ro;
        ro.nodes = 1;
        TrainConfig c = ddp(1, 3);
        c.strategy = "single";
        QCOMPARE(coord.run(c, ro).steps, 3);
    }

    void helloNamesAreSanitized()
    {
        LogLines logs;
        Coordinator coord(loopbackCoordinator(kToken));
        coord.setLogSink(logs.sink());
        auto evil = net::ControlChannel::connect("127.0.0.1", coord.port(), kToken, std::chrono::seconds(5));
        evil->send(QJsonObject{{"type", "hello"}, {"name", "x\nnode 0 'teacher' joined\x1b[2J"}});
        auto huge = net::ControlChannel::connect("127.0.0.1", coord.port(), kToken, std::chrono::seconds(5));
        huge->send(QJsonObject{{"type", "hello"}, {"name", QString(2'000'000, 'n')}});
        auto confused = net::ControlChannel::connect("127.0.0.1", coord.port(), kToken, std::chrono::seconds(5));
        confused->send(QJsonObject{{"type", "hello"}, {"name", 42}});
        QTRY_COMPARE_WITH_TIMEOUT(coord.nodes().size(), std::size_t(2), 5000);
        for (const ClusterNode &n : coord.nodes()) {
            const QString name = QString::fromStdString(n.name);
            QVERIFY2(printable(name), qPrintable(name));
            QVERIFY2(name.size() <= kMaxNodeNameChars + 32, qPrintable(QString::number(name.size())));
        }
        QTRY_VERIFY_WITH_TIMEOUT(!logs.lines().filter("'name' is not a string").isEmpty(), 5000);
        for (const QString &line : logs.lines())
            QVERIFY2(printable(line), qPrintable(line));
    }

    void wrongRankAndConfusedMessagesAreRefused()
    {
        LogLines logs;
        Coordinator coord(loopbackCoordinator(kToken));
        coord.setLogSink(logs.sink());
        std::thread real = startNode(coord, 0, "real");
        QVERIFY(coord.waitForNodes(1, std::chrono::seconds(10)));
        // An authenticated client that lies: it will be rank 1.
        auto liar = net::ControlChannel::connect("127.0.0.1", coord.port(), kToken, std::chrono::seconds(5));
        liar->send(QJsonObject{{"type", "hello"}, {"name", "liar"}});
        QVERIFY(coord.waitForNodes(2, std::chrono::seconds(10)));
        std::atomic<bool> stop{false};
        std::thread lying([&] {
            try {
                while (!stop) {
                    const net::ControlMessage m = liar->receive();
                    if (m.type() != "assign")
                        continue;
                    const QJsonValue epoch = m.json.value("epoch");
                    // About rank 0, and with fields of the wrong types.
                    liar->send(QJsonObject{{"type", "step"}, {"epoch", epoch}, {"rank", 0}, {"step", 0}, {"loss", 1}});
                    liar->send(QJsonObject{{"type", "listening"}, {"epoch", epoch}, {"port", "many"}});
                    liar->send(QJsonObject{{"type", "step"}, {"epoch", "x"}, {"rank", "y"}, {"step", "z"}});
                    liar->send(QJsonObject{{"type", "failed"}, {"epoch", epoch}, {"rank", 1},
                                           {"error", "gave up\n\x1b[31mnode 0 done"}});
                    return;
                }
            } catch (const std::exception &) {
            }
        });
        ClusterRunOptions ro;
        ro.nodes = 2;
        QString error;
        try {
            coord.run(ddp(2, 5), ro);
        } catch (const std::runtime_error &e) {
            error = e.what();
        }
        stop = true;
        liar->close();
        lying.join();
        QVERIFY2(error.contains("gave up"), qPrintable(error));
        QVERIFY2(printable(error), qPrintable(error));
        QVERIFY2(!logs.lines().filter("about rank 0; ignored").isEmpty(), qPrintable(logs.lines().join('\n')));
        coord.shutdownNodes();
        real.join();
    }

    void allNodesLostWaitsForNewOnes()
    {
        LogLines logs;
        Coordinator coord(loopbackCoordinator(kToken));
        coord.setLogSink(logs.sink());
        std::vector<std::thread> threads;
        threads.push_back(startNode(coord, 0, "first"));
        QVERIFY(coord.waitForNodes(1, std::chrono::seconds(10)));
        // Kill the only node at step 5; a new node joins a second later.
        class KillAt : public TrainObserver {
        public:
            std::function<void()> atFive;
            std::atomic<bool> waited{false};
            void onStep(const StepReport &r) override
            {
                if (r.step == 5 && atFive)
                    std::exchange(atFive, nullptr)();
            }
            void onWaitingForNodes(double) override { waited = true; }
        } observer;
        observer.atFive = [&] {
            coord.kill(0);
            threads.push_back(std::thread([&] {
                std::this_thread::sleep_for(std::chrono::milliseconds(1000));
                startNode(coord, 1, "second").join();
            }));
        };
        ClusterRunOptions ro;
        ro.nodes = 1;
        ro.rejoinTimeout = std::chrono::seconds(30);
        TrainConfig c = ddp(1, 300);
        const TrainSummary s = coord.run(c, ro, &observer);
        QCOMPARE(s.steps, c.steps);
        QCOMPARE(s.extra.at("reforms"), 1.0);
        QVERIFY(observer.waited);
        QVERIFY2(!logs.lines().filter("every node is lost").isEmpty(), qPrintable(logs.lines().join('\n')));
        coord.shutdownNodes();
        for (auto &t : threads)
            t.join();
    }

    void allNodesLostGivesUpAfterTheTimeout()
    {
        Coordinator coord(loopbackCoordinator(kToken));
        std::thread node = startNode(coord, 0, "only");
        QVERIFY(coord.waitForNodes(1, std::chrono::seconds(10)));
        class KillAt : public TrainObserver {
        public:
            Coordinator *c = nullptr;
            void onStep(const StepReport &r) override
            {
                if (r.step == 3)
                    c->kill(0);
            }
        } observer;
        observer.c = &coord;
        ClusterRunOptions ro;
        ro.nodes = 1;
        ro.rejoinTimeout = std::chrono::milliseconds(500);
        QString error;
        try {
            coord.run(ddp(1, 100000), ro, &observer);
        } catch (const std::runtime_error &e) {
            error = e.what();
        }
        QVERIFY2(error.contains("no node joined again: waited"), qPrintable(error));
        node.join();
    }
};

QTEST_GUILESS_MAIN(TestCoordinatorAdmission)
#include "tst_coordinator_admission.moc"
