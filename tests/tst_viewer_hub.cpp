// The viewers' stream on loopback: a coordinator with no nodes, real
// ViewerClients over its control port. Events as bytes and back (and damaged
// bytes refused); a batch thinned in tiers, the links' totals exact; what a
// viewer is sent reaches it in order; a viewer that stops reading is dropped
// with a line while another keeps its stream; predictions validated (type,
// step, value, rate) and only the lesson's step taken; the watch token
// watches but cannot join as a node; and a short real run streamed end to end.
#include "engine/cluster/coordinator.h"
#include "engine/cluster/node_agent.h"
#include "engine/cluster/viewer_client.h"
#include "engine/cluster/viewer_hub.h"
#include "engine/cluster/viewer_protocol.h"
#include "engine/memory_tracker.h"
#include "engine/session/event_stream.h"
#include "net/control_channel.h"

#include <QtTest>

#include <atomic>
#include <cmath>
#include <mutex>
#include <set>
#include <thread>

using namespace smol;
using namespace smol::engine;

namespace {

const std::string kToken = "tst-viewer-token";
const std::string kWatch = "tst-watch-token";

net::FrameEvent frame(int src, int dst, std::uint64_t bytes, std::int64_t t)
{
    net::FrameEvent f;
    f.side = net::FrameEvent::Side::Send;
    f.src = src;
    f.dst = dst;
    f.kind = net::CollectiveKind::AllReduce;
    f.seq = 7;
    f.tag = 3;
    f.bytes = bytes;
    f.sendStartNs = t;
    f.sendCompleteNs = t + 1000;
    return f;
}

SessionEvents someEvents(int frames)
{
    SessionEvents e;
    for (int i = 0; i < frames; ++i)
        e.frames.push_back(frame(i % 3, (i + 1) % 3, 1000 + std::uint64_t(i), 1'000'000 + i));
    SpanEvent s;
    s.node = 1;
    s.kind = SpanEvent::Kind::Backward;
    s.name = "fc1";
    s.startNs = 5;
    s.endNs = 9;
    s.step = 4;
    e.spans.push_back(s);
    s.kind = SpanEvent::Kind::Step;
    s.name = "step 4";
    e.spans.push_back(s);
    MemorySample m;
    m.node = 2;
    m.step = 4;
    m.memory.params = 1234;
    e.memory.push_back(m);
    m.collective = net::CollectiveKind::AllReduce;
    m.before = true;
    e.memory.push_back(m);
    e.metrics.push_back(MetricSample{10, 4, -1, "loss", 2.5});
    e.metrics.push_back(MetricSample{11, 4, -1, "samples_per_s", std::nan("")});
    e.logs.push_back(LogLine{12, 0, "hello"});
    e.tensors.push_back(TensorRecord{13, 1, 0, 4, net::CollectiveKind::AllReduce, 7, "grad", true, "{\"a\":1}"});
    return e;
}

struct Collected {
    std::mutex mutex;
    std::vector<ViewerBatch> batches;
    std::vector<QJsonObject> lessons;
    std::vector<bool> pauses;
    std::vector<ViewerNode> nodes;
    std::string closed;
    bool ended = false;
    std::uint64_t metrics = 0;

    ViewerClient::Handlers handlers()
    {
        ViewerClient::Handlers h;
        h.events = [this](ViewerBatch &b) {
            std::lock_guard lock(mutex);
            metrics += b.events.metrics.size();
            batches.push_back(std::move(b));
        };
        h.lesson = [this](const QJsonObject &l) {
            std::lock_guard lock(mutex);
            lessons.push_back(l);
        };
        h.pause = [this](bool held) {
            std::lock_guard lock(mutex);
            pauses.push_back(held);
        };
        h.nodes = [this](const std::vector<ViewerNode> &n) {
            std::lock_guard lock(mutex);
            nodes = n;
        };
        h.end = [this](bool, const std::string &) {
            std::lock_guard lock(mutex);
            ended = true;
        };
        h.closed = [this](const std::string &why) {
            std::lock_guard lock(mutex);
            closed = why;
        };
        return h;
    }
    template <class F> bool waitFor(F pred, int ms = 10000)
    {
        for (int waited = 0; waited < ms; waited += 20) {
            {
                std::lock_guard lock(mutex);
                if (pred())
                    return true;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        std::lock_guard lock(mutex);
        return pred();
    }
};

struct Logged {
    std::mutex mutex;
    std::vector<std::string> lines;
    std::function<void(const std::string &)> sink()
    {
        return [this](const std::string &l) {
            std::lock_guard lock(mutex);
            lines.push_back(l);
        };
    }
    bool has(const std::string &needle)
    {
        std::lock_guard lock(mutex);
        for (const auto &l : lines)
            if (l.find(needle) != std::string::npos)
                return true;
        return false;
    }
    bool waitFor(const std::string &needle, int ms = 20000)
    {
        for (int waited = 0; waited < ms; waited += 50) {
            if (has(needle))
                return true;
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        return has(needle);
    }
};

CoordinatorOptions options()
{
    CoordinatorOptions o;
    o.bindAddress = "127.0.0.1";
    o.token = kToken;
    o.watchToken = kWatch;
    return o;
}

ViewerClientOptions viewerOn(const Coordinator &c, const std::string &token, const std::string &name)
{
    ViewerClientOptions o;
    o.port = c.port();
    o.token = token;
    o.name = name;
    return o;
}

} // namespace

class TestViewerHub : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void eventsRoundTrip()
    {
        const SessionEvents e = someEvents(5);
        const SessionEvents back = decodeEvents(encodeEvents(e));
        QCOMPARE(back.frames.size(), e.frames.size());
        QCOMPARE(back.frames[4].bytes, e.frames[4].bytes);
        QCOMPARE(back.frames[4].sendCompleteNs, e.frames[4].sendCompleteNs);
        QCOMPARE(back.frames[4].sendStartNs, e.frames[4].sendStartNs);
        QCOMPARE(back.spans[0].name, std::string("fc1"));
        QCOMPARE(int(back.spans[1].kind), int(SpanEvent::Kind::Step));
        QCOMPARE(back.memory[1].before, true);
        QCOMPARE(back.memory[0].memory.params, std::int64_t(1234));
        QCOMPARE(back.metrics[0].value, 2.5);
        QVERIFY(std::isnan(back.metrics[1].value));
        QCOMPARE(back.logs[0].text, std::string("hello"));
        QCOMPARE(back.tensors[0].snapshotJson, QByteArray("{\"a\":1}"));
    }

    void damagedBatchesAreRefused()
    {
        const QByteArray good = encodeEvents(someEvents(3));
        QVERIFY_THROWS_EXCEPTION(SessionError, decodeEvents(good.left(good.size() - 1)));
        QVERIFY_THROWS_EXCEPTION(SessionError, decodeEvents(good + "x"));
        QVERIFY_THROWS_EXCEPTION(SessionError, decodeEvents(QByteArray("SMEV")));
        QByteArray lying = good;
        lying[4] = char(0xff); // a frame count the bytes cannot hold
        lying[5] = char(0xff);
        QVERIFY_THROWS_EXCEPTION(SessionError, decodeEvents(lying));
        QByteArray badKind = encodeEvents(SessionEvents{{}, {someEvents(0).spans[0]}, {}, {}, {}, {}});
        badKind[4 + 24 + 24] = char(99); // the span's kind column (after t_start, t_end, node)
        QVERIFY_THROWS_EXCEPTION(SessionError, decodeEvents(badKind));
    }

    void batchesThinInTiers()
    {
        const SessionEvents e = someEvents(300);
        const auto t0 = ViewerHub::encodeBatch(e, 0, 1, 2), t1 = ViewerHub::encodeBatch(e, 1, 1, 2),
                   t2 = ViewerHub::encodeBatch(e, 2, 1, 2);
        QVERIFY(t0.wireBytes() > t1.wireBytes());
        QVERIFY(t1.wireBytes() > t2.wireBytes());
        QCOMPARE(t0.json.value("aggregated").toBool(), false);
        QCOMPARE(t1.json.value("aggregated").toBool(), true);
        const SessionEvents d1 = decodeEvents(t1.blob), d2 = decodeEvents(t2.blob);
        QCOMPARE(d1.frames.size(), std::size_t(0));
        QCOMPARE(d1.spans.size(), std::size_t(2));
        QCOMPARE(d1.memory.size(), std::size_t(1)); // the step end's, not the collective's
        QCOMPARE(d2.spans.size(), std::size_t(1));  // the step span only
        QCOMPARE(d2.tensors.size(), std::size_t(1));
        std::uint64_t want = 0, got = 0, frames = 0;
        for (const auto &f : e.frames)
            want += f.bytes;
        for (const QJsonValue &v : t1.json.value("links").toArray()) {
            got += std::uint64_t(v.toObject().value("bytes").toDouble());
            frames += std::uint64_t(v.toObject().value("frames").toDouble());
        }
        QCOMPARE(got, want);
        QCOMPARE(frames, std::uint64_t(300));
        // Tier 3: per node its newest step span and memory; the cluster's metrics whole.
        SessionEvents many = e;
        for (int k = 5; k < 50; ++k) {
            SpanEvent step = e.spans[1];
            step.step = k;
            step.name = "step " + std::to_string(k);
            many.spans.push_back(step);
            MemorySample m = e.memory[0];
            m.step = k;
            many.memory.push_back(m);
            many.metrics.push_back(MetricSample{100 + k, k, -1, "loss", double(k)});
            many.metrics.push_back(MetricSample{100 + k, k, 1, "loss", double(k)});
        }
        const SessionEvents d3 = ViewerHub::thinned(many, 3);
        QCOMPARE(d3.spans.size(), std::size_t(1));
        QCOMPARE(d3.spans[0].step, std::int64_t(49));
        QCOMPARE(d3.memory.size(), std::size_t(1));
        QCOMPARE(d3.memory[0].step, std::int64_t(49));
        QCOMPARE(d3.metrics.size(), std::size_t(2 + 45 + 1)); // every cluster-wide one, node 1's newest
        QVERIFY(ViewerHub::encodeBatch(many, 3, 1, 2).wireBytes() < ViewerHub::encodeBatch(many, 2, 1, 2).wireBytes());
    }

    void viewerGetsWhatIsPublishedInOrder()
    {
        Coordinator c(options());
        Collected a;
        ViewerClient v(viewerOn(c, kToken, "alice"), a.handlers());
        QVERIFY(a.waitFor([&] { return c.viewerCount() == 1; }));
        c.publishLesson(QJsonObject{{"index", 2}, {"title", QString("bytes\x1b[31m per step")}});
        const SessionEvents e = someEvents(4);
        for (const auto &m : e.metrics)
            c.viewerEvents()->onMetric(m);
        for (const auto &f : e.frames)
            c.viewerEvents()->onFrame(f);
        QVERIFY(a.waitFor([&] { return a.lessons.size() == 1 && a.metrics == 2; }));
        QCOMPARE(a.lessons[0].value("index").toInt(), 2);
        QVERIFY(!a.lessons[0].value("title").toString().contains(QChar(0x1b))); // made printable
        std::size_t frames = 0;
        {
            std::lock_guard lock(a.mutex);
            for (const auto &b : a.batches)
                frames += b.events.frames.size();
        }
        QCOMPARE(frames, std::size_t(4)); // small: under the budget, every frame
        // A viewer arriving later is given the lesson and the step history.
        Collected b;
        ViewerClient late(viewerOn(c, kWatch, "bob"), b.handlers());
        QVERIFY(b.waitFor([&] { return b.lessons.size() == 1 && b.metrics == 2; }));
    }

    void stalledViewerIsDroppedOthersKeepTheirStream()
    {
        CoordinatorOptions o = options();
        o.viewerBudgetBytesPerSecond = 4 << 20; // room for the flood below: the queue, not the budget, bounds it
        Logged log; // before the coordinator: its threads log until it is gone
        Coordinator c(o);
        c.setLogSink(log.sink());
        Collected live, stalled;
        ViewerClient good(viewerOn(c, kToken, "live"), live.handlers());
        ViewerClientOptions so = viewerOn(c, kToken, "stalled");
        so.receiveBuffer = 4096;
        ViewerClient bad(so, stalled.handlers());
        QVERIFY(live.waitFor([&] { return c.viewerCount() == 2; }));
        bad.stopReading();
        std::atomic<bool> stop{false};
        std::thread producer([&] {
            std::int64_t t = 0;
            while (!stop) {
                for (int i = 0; i < 400; ++i)
                    c.viewerEvents()->onFrame(frame(0, 1, 4096, ++t));
                c.viewerEvents()->onMetric(MetricSample{t, t, -1, "loss", 1.0});
                std::this_thread::sleep_for(std::chrono::milliseconds(10));
            }
        });
        const bool dropped = log.waitFor("'stalled' (127.0.0.1) dropped", 60000);
        const std::uint64_t before = live.metrics;
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        stop = true;
        producer.join();
        QVERIFY2(dropped, "the stalled viewer was not dropped within 60 s");
        QVERIFY(!log.has("'live' (127.0.0.1) dropped"));
        QVERIFY(live.waitFor([&] { return live.metrics > before; }));
        QCOMPARE(c.viewerCount(), 1);
    }

    void predictionsAreValidated()
    {
        Logged log; // before the coordinator: its threads log until it is gone
        Coordinator c(options());
        c.setLogSink(log.sink());
        std::mutex m;
        std::vector<Prediction> got;
        c.setPredictionSink([&](const Prediction &p) {
            std::lock_guard lock(m);
            got.push_back(p);
        });
        Collected a;
        ViewerClientOptions vo = viewerOn(c, kWatch, "carol\x07");
        vo.node = 3;
        ViewerClient v(vo, a.handlers());
        QVERIFY(a.waitFor([&] { return c.viewerCount() == 1; }));
        QVERIFY(v.sendPrediction(1, 5.0)); // no lesson shown: refused
        QVERIFY(log.waitFor("which the lesson does not show", 5000));
        c.publishLesson(QJsonObject{{"index", 1}, {"title", "t"}});
        QVERIFY(a.waitFor([&] { return a.lessons.size() == 1; }));
        QVERIFY(v.sendPrediction(1, 42.5));
        QVERIFY(a.waitFor([&] {
            std::lock_guard lock(m);
            return got.size() == 1;
        }));
        {
            std::lock_guard lock(m);
            QCOMPARE(got[0].value, 42.5);
            QCOMPARE(got[0].step, 1);
            QCOMPARE(got[0].node, 3);
            QCOMPARE(got[0].name, std::string("carol?"));
        }
        // Many at once: at most kMaxPredictionsPerSecond a second are taken.
        for (int i = 0; i < 12; ++i)
            v.sendPrediction(1, i);
        QVERIFY(log.waitFor("predictions faster than", 5000));
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        {
            std::lock_guard lock(m);
            QVERIFY(got.size() <= std::size_t(1 + viewer::kMaxPredictionsPerSecond + 1));
        }
        // Anything but a prediction, then too many refusals: dropped.
        net::ControlChannel &raw = *net::ControlChannel::connect("127.0.0.1", c.port(), kToken,
                                                                  std::chrono::seconds(5))
                                        .release();
        std::unique_ptr<net::ControlChannel> owned(&raw);
        raw.send(QJsonObject{{"type", "hello"}, {"role", "viewer"}, {"name", "mallory"}});
        QCOMPARE(raw.receive().type(), std::string("viewer_welcome"));
        for (int i = 0; i < viewer::kMaxRefusals + 2; ++i) {
            try {
                raw.send(i % 2 ? QJsonObject{{"type", "start"}} : QJsonObject{{"type", "predict"}, {"step", "x"}});
            } catch (const std::exception &) {
                break;
            }
        }
        QVERIFY(log.waitFor("'mallory' (127.0.0.1) dropped", 10000));
        QVERIFY(log.has("a viewer may send only predictions"));
    }

    // A real 2-node ddp run streamed: the viewer sees the run, its nodes,
    // every step's metrics and the end; the run ends as it does unwatched.
    void aRunIsStreamedEndToEnd()
    {
        memory::install();
        CoordinatorOptions o = options();
        o.streamToViewers = true;
        Coordinator c(o);
        std::vector<std::thread> nodes;
        for (int k = 0; k < 2; ++k)
            nodes.emplace_back([&, k] {
                NodeAgentOptions no;
                no.port = c.port();
                no.token = kToken;
                no.name = "n" + std::to_string(k);
                no.bindAddress = "127.0.0.1";
                no.memorySlot = k;
                no.inProcess = true;
                try {
                    runNodeAgent(no, {});
                } catch (const std::exception &) {
                }
            });
        QVERIFY(c.waitForNodes(2, std::chrono::seconds(20)));
        Collected a;
        SessionHeader header;
        ViewerClient::Handlers h = a.handlers();
        h.run = [&](const SessionHeader &hd, const QJsonObject &) {
            std::lock_guard lock(a.mutex);
            header = hd;
        };
        ViewerClient v(viewerOn(c, kToken, "watcher"), h);
        QVERIFY(a.waitFor([&] { return c.viewerCount() == 1; }));
        TrainConfig cfg;
        cfg.strategy = "ddp";
        cfg.nodes = 2;
        cfg.steps = 12;
        cfg.seed = 7;
        cfg.globalBatch = 60;
        const TrainSummary s = c.run(cfg, ClusterRunOptions{});
        QVERIFY(a.waitFor([&] { return a.ended; }));
        c.shutdownNodes();
        for (auto &t : nodes)
            t.join();
        std::lock_guard lock(a.mutex);
        QCOMPARE(header.strategy, std::string("ddp"));
        QCOMPARE(header.nodes, 2);
        QCOMPARE(int(a.nodes.size()), 2);
        std::set<std::int64_t> steps;
        std::uint64_t sent = 0;
        for (const auto &b : a.batches) {
            for (const auto &m : b.events.metrics)
                if (m.node == -1 && m.name == "samples_per_s")
                    steps.insert(m.step);
            for (const auto &f : b.events.frames)
                sent += f.side == net::FrameEvent::Side::Send ? f.bytes : 0;
            for (const auto &l : b.links)
                sent += l.bytes;
        }
        QCOMPARE(int(steps.size()), 12);
        std::uint64_t want = 0;
        for (auto b : s.bytesSentPerNode)
            want += b;
        QVERIFY2(sent > 0 && sent <= want, qPrintable(QString("frames %1, run %2").arg(sent).arg(want)));
    }

    void watchTokenCannotJoinAsANode()
    {
        memory::install();
        Logged log; // before the coordinator: its threads log until it is gone
        Coordinator c(options());
        c.setLogSink(log.sink());
        NodeAgentOptions no;
        no.port = c.port();
        no.token = kWatch;
        no.inProcess = true;
        no.name = "intruder";
        std::string said;
        int rc = -1;
        try {
            rc = runNodeAgent(no, [&](const std::string &l) { said += l + "\n"; });
        } catch (const std::exception &e) {
            said += e.what();
        }
        QVERIFY(rc != 0);
        QVERIFY2(said.find("refused") != std::string::npos, said.c_str());
        QVERIFY(log.has("may watch the run, not join it as a node"));
        QCOMPARE(int(c.nodes().size()), 0);
        // A wrong token is refused at the handshake, as a viewer too.
        Collected a;
        QVERIFY_THROWS_EXCEPTION(std::exception, ViewerClient(viewerOn(c, "wrong", "eve"), a.handlers()));
        // And the watch token must differ from the run's.
        CoordinatorOptions same = options();
        same.watchToken = kToken;
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, Coordinator{same});
    }
};

QTEST_GUILESS_MAIN(TestViewerHub)
#include "tst_viewer_hub.moc"
