// tst_session_export: the Chrome trace and CSV exports, and the `smolctl
// info` / `smolctl export` commands, on a small hand-made session. The
// trace is parsed back with QJsonDocument: every process is named, every
// packet flow has one start on the sender and one finish on the receiver
// (and only matched frames have one), each flow point sits inside a slice,
// slices on one thread never partly overlap, counters are there; info's
// figures in text and JSON are the file's; bad arguments exit 2 and bad
// files 1 with one line.
#include "engine/session/session_commands.h"
#include "engine/session/session_export.h"
#include "engine/session/session_reader.h"
#include "engine/session/session_recorder.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <limits>
#include <map>
#include <set>

using namespace smol;
using namespace smol::engine;

namespace {

constexpr std::int64_t kMs = 1'000'000;
constexpr std::int64_t kStart = 7'000 * kMs;

net::FrameEvent sendOf(int src, int dst, std::uint64_t seq, std::uint32_t tag, std::int64_t start,
                       std::int64_t done, std::uint64_t bytes = 1000)
{
    net::FrameEvent e;
    e.side = net::FrameEvent::Side::Send;
    e.src = src;
    e.dst = dst;
    e.kind = net::CollectiveKind::AllReduce;
    e.seq = seq;
    e.tag = tag;
    e.bytes = bytes;
    e.sendStartNs = start;
    e.sendCompleteNs = done;
    return e;
}

net::FrameEvent receiveOf(const net::FrameEvent &send, std::int64_t arrived)
{
    net::FrameEvent e = send;
    e.side = net::FrameEvent::Side::Receive;
    e.sendCompleteNs = 0;
    e.recvCompleteNs = arrived;
    return e;
}

struct Session {
    SessionHeader header;
    std::vector<net::FrameEvent> frames;
    std::vector<SpanEvent> spans;
    std::vector<MemorySample> memory;
    std::vector<MetricSample> metrics;
    std::vector<LogLine> logs;
    std::vector<TensorRecord> tensors;
    int matchedFlows = 0;
};

Session makeSession()
{
    Session s;
    s.header.strategy = "ddp";
    s.header.model = "mlp";
    s.header.nodes = 3;
    s.header.steps = 2;
    s.header.startNs = kStart;
    s.header.nodeList = {{0, "alpha", "10.0.0.1", "worker"},
                         {1, "beta", "10.0.0.2", "worker"},
                         {2, "gamma \"g\"", "10.0.0.3", "worker"}};
    for (int step = 0; step < 2; ++step) {
        const std::int64_t t0 = kStart + kMs + step * 20 * kMs;
        for (int n = 0; n < 3; ++n) {
            s.spans.push_back({n, SpanEvent::Kind::Step, "", t0, t0 + 18 * kMs, step});
            s.spans.push_back({n, SpanEvent::Kind::Forward, "forward", t0, t0 + 3 * kMs, step});
            s.spans.push_back({n, SpanEvent::Kind::Backward, "backward", t0 + 3 * kMs, t0 + 8 * kMs, step});
            s.spans.push_back({n, SpanEvent::Kind::Optimizer, "adam", t0 + 15 * kMs, t0 + 16 * kMs, step});
            // Two all-reduces that overlap on every node: two lanes.
            for (std::uint64_t b = 0; b < 2; ++b) {
                const std::int64_t c0 = t0 + 6 * kMs + std::int64_t(b) * 2 * kMs;
                s.spans.push_back({n, SpanEvent::Kind::Collective, "", c0, c0 + 3 * kMs, step,
                                   net::CollectiveKind::AllReduce, std::uint64_t(step * 2) + b, 4096});
                for (std::uint32_t k = 0; k < 3; ++k) {
                    const std::int64_t f0 = c0 + k * 500'000 + n * 1000;
                    const net::FrameEvent send = sendOf(n, (n + 1) % 3, std::uint64_t(step * 2) + b, k, f0,
                                                        f0 + 100'000, 1000 * (k + 1));
                    s.frames.push_back(send);
                    s.frames.push_back(receiveOf(send, f0 + 150'000));
                    ++s.matchedFlows;
                }
            }
            const std::int64_t p = 100 * (n + 1);
            s.memory.push_back({t0 + 17 * kMs, n, step, {p, p, 2 * p, 50, 10, 4 * p + 60, 5 * p}});
        }
        s.metrics.push_back({t0 + 18 * kMs, step, -1, "loss", 1.5 - step});
        s.metrics.push_back({t0 + 18 * kMs, step, 1, "samples_per_s", 300.0 + step});
    }
    // A receive that completes before its send does (inproc can), the same
    // key twice (a re-formed run restarts seq), a send never received, and
    // a backend's whole-collective event (src == dst).
    const net::FrameEvent early = sendOf(2, 0, 90, 1, kStart + 2 * kMs, kStart + 2 * kMs + 500'000);
    s.frames.push_back(early);
    s.frames.push_back(receiveOf(early, kStart + 2 * kMs + 200'000));
    ++s.matchedFlows;
    for (int twice = 0; twice < 2; ++twice) {
        const net::FrameEvent again =
            sendOf(0, 1, 91, 0, kStart + (30 + twice) * kMs, kStart + (30 + twice) * kMs + 1000);
        s.frames.push_back(again);
        s.frames.push_back(receiveOf(again, kStart + (30 + twice) * kMs + 2000));
        ++s.matchedFlows;
    }
    s.frames.push_back(sendOf(1, 2, 92, 0, kStart + 35 * kMs, kStart + 35 * kMs + 1000));
    s.frames.push_back(sendOf(0, 0, 93, 0, kStart + 36 * kMs, kStart + 38 * kMs));

    s.spans.push_back({1, SpanEvent::Kind::Pause, "breakpoint", kStart + 9 * kMs, kStart + 12 * kMs, 0,
                       net::CollectiveKind::AllReduce, 1});
    s.tensors.push_back(
        {kStart + 9 * kMs + 1, 1, 1, 0, net::CollectiveKind::AllReduce, 1, "bucket 1", true, "{}"});
    // A node missing from the header still gets a named process.
    s.memory.push_back({kStart + 39 * kMs, 3, 1, {1, 1, 1, 1, 1, 5, 5}});
    s.metrics.push_back({kStart + 39 * kMs, 1, -1, "grad,norm \"l2\"", 0.5});
    s.metrics.push_back(
        {kStart + 39 * kMs + 1, 1, -1, "loss_scale", std::numeric_limits<double>::quiet_NaN()});
    s.logs.push_back({kStart + 100, -1, "coordinator: \"start\"\n\ttab ✓"});
    s.logs.push_back({kStart + 200, 0, std::string(78, 'x') + "ééé and more text after the cut"});
    return s;
}

QString record(const QString &dir, const Session &s, const QString &name)
{
    const QString path = dir + QLatin1Char('/') + name;
    SessionRecorder recorder(path, s.header);
    for (const auto &e : s.frames)
        recorder.onFrame(e);
    for (const auto &e : s.spans)
        recorder.onSpan(e);
    for (const auto &e : s.memory)
        recorder.onMemory(e);
    for (const auto &e : s.metrics)
        recorder.onMetric(e);
    for (const auto &e : s.logs)
        recorder.onLog(e);
    for (const auto &e : s.tensors)
        recorder.onTensor(e);
    recorder.finish(0.5, kStart + 40 * kMs);
    return path;
}

// ts in the trace: microseconds since the session's first instant.
double micros(std::int64_t ns)
{
    return double(ns - kStart) / 1000.0;
}

struct Command {
    int code = -1;
    QString out;
    QString err;
};

Command run(int (*command)(const QStringList &, QTextStream &, QTextStream &), const QStringList &args)
{
    Command c;
    QTextStream out(&c.out), err(&c.err);
    c.code = command(args, out, err);
    out.flush();
    err.flush();
    return c;
}

} // namespace

class TestSessionExport : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase();
    void chromeTrace();
    void metricsCsv();
    void infoCommand();
    void infoOfInterruptedFile();
    void exportCommand();
    void badArguments_data();
    void badArguments();

private:
    QTemporaryDir m_dir;
    Session m_session;
    QString m_path;
};

void TestSessionExport::initTestCase()
{
    QVERIFY(m_dir.isValid());
    m_session = makeSession();
    m_path = record(m_dir.path(), m_session, QStringLiteral("export.smolrec"));
}

void TestSessionExport::chromeTrace()
{
    const SessionReader reader(m_path);
    QCOMPARE(reader.timeRange().first, kStart);
    const QString out = m_dir.path() + QStringLiteral("/trace.json");
    exportChromeTrace(reader, out);
    QFile file(out);
    QVERIFY(file.open(QIODevice::ReadOnly));
    QJsonParseError error;
    const QJsonDocument doc = QJsonDocument::fromJson(file.readAll(), &error);
    QVERIFY2(error.error == QJsonParseError::NoError, qPrintable(error.errorString()));
    QCOMPARE(doc.object().value("displayTimeUnit").toString(), QStringLiteral("ns"));
    const QJsonArray events = doc.object().value("traceEvents").toArray();
    QVERIFY(!events.isEmpty());

    std::map<int, QString> processNames;
    std::set<std::pair<int, int>> namedThreads, usedThreads;
    std::set<int> usedPids;
    std::map<std::int64_t, QJsonObject> starts, finishes;
    std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> slices; // (pid, tid) -> [ts, end]
    int spans = 0, memoryCounters = 0, liveCounters = 0, metricCounters = 0, logs = 0;
    for (const QJsonValue &v : events) {
        const QJsonObject e = v.toObject();
        const QString ph = e.value("ph").toString();
        const int pid = e.value("pid").toInt(-1);
        const int tid = e.value("tid").toInt(-1);
        if (ph == "M") {
            if (e.value("name").toString() == "process_name")
                processNames[pid] = e.value("args").toObject().value("name").toString();
            if (e.value("name").toString() == "thread_name")
                namedThreads.insert({pid, tid});
            continue;
        }
        QVERIFY2(e.value("ts").isDouble() && std::isfinite(e.value("ts").toDouble()),
                 qPrintable(QJsonDocument(e).toJson(QJsonDocument::Compact)));
        usedPids.insert(pid);
        if (e.contains("tid"))
            usedThreads.insert({pid, tid});
        const double ts = e.value("ts").toDouble();
        if (ph == "X") {
            const double dur = e.value("dur").toDouble(-1);
            QVERIFY(dur >= 0);
            slices[{pid, tid}].push_back({ts, ts + dur});
            if (e.value("cat").toString() != "packet")
                ++spans;
        } else if (ph == "s") {
            QVERIFY2(starts.emplace(e.value("id").toInteger(), e).second, "two flow starts with one id");
        } else if (ph == "f") {
            QCOMPARE(e.value("bp").toString(), QStringLiteral("e"));
            QVERIFY2(finishes.emplace(e.value("id").toInteger(), e).second, "two flow finishes with one id");
        } else if (ph == "C") {
            const QString name = e.value("name").toString();
            const QJsonObject args = e.value("args").toObject();
            if (name == "memory") {
                for (const char *k : {"params", "grads", "optimizer", "activations", "comm"})
                    QVERIFY(args.value(k).isDouble());
                ++memoryCounters;
            } else if (name == "live bytes") {
                QVERIFY(args.value("live").isDouble());
                ++liveCounters;
            } else {
                QVERIFY(std::isfinite(args.value("value").toDouble()));
                ++metricCounters;
            }
        } else if (ph == "i") {
            if (e.value("cat").toString() == "log")
                ++logs;
        }
    }

    // Every process is named: the header's nodes by their names, others by rank.
    for (int pid : usedPids)
        QVERIFY2(processNames.count(pid), qPrintable(QStringLiteral("pid %1 has no process_name").arg(pid)));
    QCOMPARE(processNames[0], QStringLiteral("alpha"));
    QCOMPARE(processNames[2], QStringLiteral("gamma \"g\""));
    QCOMPARE(processNames[3], QStringLiteral("node 3"));
    QCOMPARE(processNames[kChromeCoordinatorPid], QStringLiteral("coordinator"));
    for (const auto &thread : usedThreads)
        QVERIFY(namedThreads.count(thread));

    // One flow per matched frame; each s on the sender at its send start,
    // each f on the receiver at its arrival, both inside a slice there.
    QCOMPARE(int(starts.size()), m_session.matchedFlows);
    QCOMPARE(int(finishes.size()), m_session.matchedFlows);
    auto enclosed = [&](const QJsonObject &e) {
        const double ts = e.value("ts").toDouble();
        for (const auto &[a, b] : slices[{e.value("pid").toInt(), e.value("tid").toInt()}]) {
            if (a <= ts && ts <= b)
                return true;
        }
        return false;
    };
    std::multiset<std::tuple<int, int, double, double>> flows; // src, dst, sent, arrived
    for (const auto &[id, s] : starts) {
        QVERIFY2(finishes.count(id), qPrintable(QStringLiteral("flow %1 has no finish").arg(id)));
        const QJsonObject &f = finishes[id];
        QVERIFY(enclosed(s) && enclosed(f));
        flows.insert({s.value("pid").toInt(), f.value("pid").toInt(), s.value("ts").toDouble(),
                      f.value("ts").toDouble()});
    }
    std::multiset<std::tuple<int, int, double, double>> expected;
    for (const net::FrameEvent &e : m_session.frames) {
        if (e.side == net::FrameEvent::Side::Receive)
            expected.insert({e.src, e.dst, micros(e.sendStartNs), micros(e.recvCompleteNs)});
    }
    QVERIFY(flows == expected);

    // Slices on one thread nest or are apart, never partly overlap
    // (overlapping collectives got lanes; two packets at the same ns nest).
    for (auto &[thread, list] : slices) {
        std::sort(list.begin(), list.end(), [](const auto &a, const auto &b) {
            return a.first != b.first ? a.first < b.first : a.second > b.second;
        });
        std::vector<double> open; // ends of the enclosing slices
        for (const auto &[start, end] : list) {
            while (!open.empty() && open.back() <= start)
                open.pop_back();
            QVERIFY2(open.empty() || end <= open.back(),
                     qPrintable(QStringLiteral("pid %1 tid %2: slices overlap at %3 us")
                                    .arg(thread.first)
                                    .arg(thread.second)
                                    .arg(start)));
            open.push_back(end);
        }
    }
    // The collectives overlap on every node: a second lane exists.
    QVERIFY(slices.count({0, 3}) && slices.count({0, 13}));
    QCOMPARE(spans, int(m_session.spans.size()));
    QCOMPARE(memoryCounters, int(m_session.memory.size()));
    QCOMPARE(liveCounters, int(m_session.memory.size()));
    QCOMPARE(metricCounters, int(m_session.metrics.size()) - 1); // the NaN one is left out
    QCOMPARE(logs, int(m_session.logs.size()));
}

void TestSessionExport::metricsCsv()
{
    const SessionReader reader(m_path);
    const QString out = m_dir.path() + QStringLiteral("/metrics.csv");
    exportMetricsCsv(reader, out);
    QFile file(out);
    QVERIFY(file.open(QIODevice::ReadOnly | QIODevice::Text));
    const QStringList lines = QString::fromUtf8(file.readAll()).split('\n', Qt::SkipEmptyParts);
    QCOMPARE(lines.first(), QStringLiteral("t_s,step,node,name,value"));
    QCOMPARE(lines.size(), int(m_session.metrics.size()) + 1);
    QCOMPARE(lines[1], QStringLiteral("0.019000000,0,-1,loss,1.5"));
    QVERIFY(lines.contains(QStringLiteral("0.039000000,1,-1,\"grad,norm \"\"l2\"\"\",0.5")));
    QVERIFY(lines.contains(QStringLiteral("0.039000001,1,-1,loss_scale,nan")));
}

void TestSessionExport::infoCommand()
{
    const SessionInfo info = SessionReader(m_path).info();
    const Command text = run(runInfoCommand, {m_path});
    QCOMPARE(text.code, 0);
    QVERIFY(text.err.isEmpty());
    QVERIFY(text.out.contains(QStringLiteral("recorded    complete")));
    QVERIFY(text.out.contains(QStringLiteral("strategy    ddp")));
    QVERIFY(text.out.contains(QStringLiteral("final loss  0.5 (step 1)")));
    QVERIFY(text.out.contains(QStringLiteral("0 -> 1")));

    const Command json = run(runInfoCommand, {m_path, QStringLiteral("--json")});
    QCOMPARE(json.code, 0);
    QCOMPARE(json.out.count('\n'), 1);
    const QJsonObject o = QJsonDocument::fromJson(json.out.toUtf8()).object();
    QCOMPARE(o.value("type").toString(), QStringLiteral("info"));
    QCOMPARE(o.value("recorded").toString(), QStringLiteral("complete"));
    QCOMPARE(o.value("strategy").toString(), QStringLiteral("ddp"));
    QCOMPARE(o.value("nodes").toInt(), 3);
    QCOMPARE(o.value("final_loss").toDouble(), 0.5);
    QCOMPARE(o.value("duration_ns").toInteger(), 40 * kMs);
    const QJsonObject events = o.value("events").toObject();
    QCOMPARE(events.value("total").toInteger(), qint64(info.events()));
    std::uint64_t total = m_session.frames.size() + m_session.spans.size() + m_session.memory.size() +
                          m_session.metrics.size() + m_session.logs.size() + m_session.tensors.size();
    QCOMPARE(info.events(), total);
    QCOMPARE(events.value("spans").toObject().value("collective").toInteger(), qint64(12));
    // Bytes per link by hand: every send side.
    std::map<std::pair<int, int>, qint64> bytes;
    for (const net::FrameEvent &e : m_session.frames) {
        if (e.side == net::FrameEvent::Side::Send)
            bytes[{e.src, e.dst}] += qint64(e.bytes);
    }
    const QJsonArray links = o.value("links").toArray();
    QCOMPARE(std::size_t(links.size()), bytes.size());
    for (const QJsonValue &l : links) {
        const QJsonObject link = l.toObject();
        QCOMPARE(link.value("bytes").toInteger(),
                 (bytes[{link.value("src").toInt(), link.value("dst").toInt()}]));
    }
}

void TestSessionExport::infoOfInterruptedFile()
{
    // A copy taken while the recorder is still open has no end marker.
    const QString live = m_dir.path() + QStringLiteral("/live.smolrec");
    const QString copy = m_dir.path() + QStringLiteral("/interrupted.smolrec");
    SessionRecorder recorder(live, m_session.header);
    for (const auto &e : m_session.frames)
        recorder.onFrame(e);
    recorder.onMetric({kStart + 50 * kMs, 3, -1, "loss", 0.75});
    QTRY_COMPARE(recorder.eventsWritten(), std::uint64_t(m_session.frames.size() + 1));
    QVERIFY(QFile::copy(live, copy));
    QVERIFY(QFile::copy(live + "-wal", copy + "-wal"));
    recorder.finish();

    const Command text = run(runInfoCommand, {copy});
    QCOMPARE(text.code, 0);
    QVERIFY(text.out.contains(QStringLiteral("interrupted")));
    const Command json = run(runInfoCommand, {QStringLiteral("--json"), copy});
    const QJsonObject o = QJsonDocument::fromJson(json.out.toUtf8()).object();
    QCOMPARE(o.value("recorded").toString(), QStringLiteral("interrupted"));
    QCOMPARE(o.value("final_loss").toDouble(), 0.75);
    // Duration runs to the newest event.
    QCOMPARE(o.value("duration_ns").toInteger(), 50 * kMs);
}

void TestSessionExport::exportCommand()
{
    const QString json = m_dir.path() + QStringLiteral("/cmd.json");
    const QString csv = m_dir.path() + QStringLiteral("/cmd.csv");
    const Command both =
        run(runExportCommand, {m_path, QStringLiteral("--chrome-trace"), json, QStringLiteral("--csv"), csv});
    QCOMPARE(both.code, 0);
    QVERIFY(both.err.isEmpty());
    QVERIFY(QFile::exists(json) && QFile::exists(csv));
    QVERIFY(!QJsonDocument::fromJson([&] {
                 QFile f(json);
                 f.open(QIODevice::ReadOnly);
                 return f.readAll();
             }())
                 .isNull());

    // An output that cannot be written: exit 1, one line, nothing left behind.
    const QString nowhere = m_dir.path() + QStringLiteral("/no/such/dir/out.json");
    const Command unwritable = run(runExportCommand, {m_path, QStringLiteral("--chrome-trace"), nowhere});
    QCOMPARE(unwritable.code, 1);
    QCOMPARE(unwritable.err.count('\n'), 1);
    QVERIFY(unwritable.err.startsWith(QStringLiteral("smolctl export: ") + nowhere));
    QVERIFY(!QFile::exists(nowhere));

    const Command help = run(runExportCommand, {QStringLiteral("--help")});
    QCOMPARE(help.code, 0);
    QVERIFY(help.out.contains(QStringLiteral("--chrome-trace")));
}

void TestSessionExport::badArguments_data()
{
    QTest::addColumn<bool>("info");
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<int>("code");
    const QString text = m_dir.path() + QStringLiteral("/not-a-session.txt");
    {
        QFile f(text);
        if (f.open(QIODevice::WriteOnly))
            f.write("hello\n");
    }
    QTest::newRow("info: no file") << true << QStringList{} << 2;
    QTest::newRow("info: unknown option") << true << QStringList{"--bogus", "x.smolrec"} << 2;
    QTest::newRow("info: two files") << true << QStringList{"a.smolrec", "b.smolrec"} << 2;
    QTest::newRow("info: missing file") << true << QStringList{"/nonexistent/x.smolrec"} << 1;
    QTest::newRow("info: text file") << true << QStringList{text} << 1;
    QTest::newRow("export: no output") << false << QStringList{"x.smolrec"} << 2;
    QTest::newRow("export: --csv without a file") << false << QStringList{"x.smolrec", "--csv"} << 2;
    QTest::newRow("export: unknown option") << false << QStringList{"x.smolrec", "--pdf", "a.pdf"} << 2;
    QTest::newRow("export: missing session")
        << false << QStringList{"/nonexistent/x.smolrec", "--csv", "o.csv"} << 1;
    QTest::newRow("export: text file") << false << QStringList{text, "--chrome-trace", "o.json"} << 1;
}

void TestSessionExport::badArguments()
{
    QFETCH(bool, info);
    QFETCH(QStringList, args);
    QFETCH(int, code);
    const Command c = run(info ? runInfoCommand : runExportCommand, args);
    QCOMPARE(c.code, code);
    QCOMPARE(c.err.count('\n'), 1);
    QVERIFY2(c.err.startsWith(info ? QStringLiteral("smolctl info: ") : QStringLiteral("smolctl export: ")),
             qPrintable(c.err));
    if (code == 1) // names the file
        QVERIFY2(c.err.contains(args.first()), qPrintable(c.err));
    QVERIFY(c.out.isEmpty());
}

QTEST_GUILESS_MAIN(TestSessionExport)
#include "tst_session_export.moc"
