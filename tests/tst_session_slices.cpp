// tst_session_slices: schema version 4's packed slices (event_slices.h)
// against the unpacked rows of version 3, which the recorder still writes on
// request. The same events, fed in the same order, are recorded both ways;
// every read of SessionReader must then give the same records in the same
// order (windows, replay ranges, the whole file streamed, info, collectives,
// newest memory, step starts, next event times), including ties in time,
// events that arrive out of time order, slices cut by count and by time, and
// a span longer than many slices. A version-2 file still reads. Slices whose
// blob lies (truncated, counts beyond its length, bad kinds, lengths past its
// end, trailing bytes) give a one-line SessionError naming the slice, never a
// crash or an over-read.
#include "engine/session/event_slices.h"
#include "engine/session/replay_source.h"
#include "engine/session/session_reader.h"
#include "engine/session/session_recorder.h"

#include <QRandomGenerator>
#include <QSqlDatabase>
#include <QSqlError>
#include <QSqlQuery>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

using namespace smol;
using namespace smol::engine;

namespace {

constexpr std::int64_t kMs = 1'000'000;
constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

auto key(const net::FrameEvent &e)
{
    return std::make_tuple(e.sendStartNs, e.sendCompleteNs, e.recvCompleteNs, int(e.side), e.src, e.dst,
                           int(e.kind), e.seq, e.tag, e.bytes);
}
auto key(const SpanEvent &e)
{
    return std::make_tuple(e.startNs, e.endNs, e.node, int(e.kind), e.name, e.step, int(e.collective), e.seq,
                           e.bytes);
}
auto key(const MemorySample &e)
{
    const net::MemoryByCategory &m = e.memory;
    return std::make_tuple(e.tNs, e.node, e.step, m.params, m.grads, m.optimizer, m.activations, m.comm,
                           m.live, m.peak, int(e.collective), e.seq, e.before, e.stepPeak);
}
auto key(const MetricSample &e)
{
    return std::make_tuple(e.tNs, e.step, e.node, e.name, std::isnan(e.value),
                           std::isnan(e.value) ? 0 : e.value);
}
auto key(const LogLine &e)
{
    return std::make_tuple(e.tNs, e.node, e.text);
}
auto key(const TensorRecord &e)
{
    return std::make_tuple(e.tNs, e.pauseId, e.node, e.step, int(e.collective), e.seq, e.name, e.before,
                           e.snapshotJson.isNull(), e.snapshotJson);
}

// Same records in the same order.
template <class T> bool same(const std::vector<T> &a, const std::vector<T> &b)
{
    if (a.size() != b.size())
        return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (key(a[i]) != key(b[i]))
            return false;
    }
    return true;
}

bool same(const SessionEvents &a, const SessionEvents &b)
{
    return same(a.frames, b.frames) && same(a.spans, b.spans) && same(a.memory, b.memory) &&
           same(a.metrics, b.metrics) && same(a.logs, b.logs) && same(a.tensors, b.tensors);
}

// Events of every kind, fed in one fixed order (so ties in time keep one
// arrival order in both files): 2 s of a 4-node run with bursts (8000 frames
// within 50 ms: slices cut by count), arrivals up to 30 ms late (slices whose
// time ranges overlap), equal times, a 700 ms pause span, every span kind,
// memory at collectives and step peaks, names of every length and NaN metrics.
struct Feed {
    SessionHeader header;
    SessionEvents events;
    std::vector<std::pair<int, std::size_t>> order; // (kind, index) in feeding order
    std::int64_t endNs = 0;

    void feed(SessionEventSink &sink) const
    {
        for (const auto &[kind, i] : order) {
            switch (kind) {
            case 0:
                sink.onFrame(events.frames[i]);
                break;
            case 1:
                sink.onSpan(events.spans[i]);
                break;
            case 2:
                sink.onMemory(events.memory[i]);
                break;
            case 3:
                sink.onMetric(events.metrics[i]);
                break;
            case 4:
                sink.onLog(events.logs[i]);
                break;
            default:
                sink.onTensor(events.tensors[i]);
                break;
            }
        }
    }
};

Feed makeFeed()
{
    Feed f;
    f.header.strategy = "zero3";
    f.header.model = "gpt";
    f.header.nodes = 4;
    f.header.steps = 20;
    f.header.configJson = "{}";
    f.header.startNs = 10'000 * kMs;
    for (int n = 0; n < 4; ++n)
        f.header.nodeList.push_back({n, "n" + std::to_string(n), "h", "worker"});
    QRandomGenerator rng(42);
    auto add = [&f](int kind, std::size_t index) { f.order.push_back({kind, index}); };
    const std::int64_t t0 = f.header.startNs + kMs;
    for (int step = 0; step < 20; ++step) {
        const std::int64_t s0 = t0 + step * 100 * kMs;
        const int frames = step == 7 ? 8000 : 300;
        for (int i = 0; i < frames; ++i) {
            net::FrameEvent e;
            e.side = i % 2 ? net::FrameEvent::Side::Receive : net::FrameEvent::Side::Send;
            e.src = i % 4;
            e.dst = (i + 1) % 4;
            e.kind = i % 3 ? net::CollectiveKind::AllGather : net::CollectiveKind::ReduceScatter;
            e.seq = std::uint64_t(step * 1000 + i / 8);
            e.tag = std::uint32_t(rng.generate());
            e.bytes = rng.bounded(1u << 30); // SQL SUM over version 3 rows stays in int64
            // Times on a 20 us grid (many ties), some late by up to 30 ms.
            const std::int64_t t = s0 + std::int64_t(rng.bounded(frames == 300 ? 5000 : 2500)) * 20'000 -
                                   (i % 17 == 0 ? std::int64_t(rng.bounded(30)) * kMs : 0);
            e.sendStartNs = t - std::int64_t(rng.bounded(200'000));
            (e.side == net::FrameEvent::Side::Send ? e.sendCompleteNs : e.recvCompleteNs) = t;
            f.events.frames.push_back(e);
            add(0, f.events.frames.size() - 1);
        }
        for (int n = 0; n < 4; ++n) {
            for (int k = 0; k < SpanEvent::kKinds; ++k) {
                SpanEvent s;
                s.node = n;
                s.kind = SpanEvent::Kind(k);
                s.step = step;
                s.name = k == 0 ? std::string() : std::string(std::size_t(k * 7), char('a' + k)) + " ✓";
                s.startNs = s0 + k * 5 * kMs;
                s.endNs = s.startNs + (s.kind == SpanEvent::Kind::Pause && step == 3 ? 700 * kMs : 3 * kMs);
                s.collective = k == 3 ? net::CollectiveKind::AllGather : net::CollectiveKind::None;
                s.seq = std::uint64_t(step * 10 + (n % 2)); // two collectives per step
                s.bytes = std::uint64_t(n) << 40;
                f.events.spans.push_back(s);
                add(1, f.events.spans.size() - 1);
            }
            for (int c = 0; c < 3; ++c) {
                MemorySample m;
                m.tNs = s0 + 20 * kMs + (c == 2 ? 0 : c) * kMs; // the step peak and end sample tie
                m.node = n;
                m.step = step;
                m.memory = {step * 10 + c, 2, 3, 4, 5, 6 + n, 7};
                m.collective = c == 0 ? net::CollectiveKind::AllGather : net::CollectiveKind::None;
                m.seq = std::uint64_t(c);
                m.before = c == 0;
                m.stepPeak = c == 1;
                f.events.memory.push_back(m);
                add(2, f.events.memory.size() - 1);
            }
        }
        f.events.metrics.push_back(
            {s0 + 50 * kMs, step, -1, "loss", step == 5 ? std::nan("") : 1.0 / (step + 1)});
        add(3, f.events.metrics.size() - 1);
        f.events.logs.push_back({s0 + 50 * kMs, -1, "step " + std::to_string(step)});
        add(4, f.events.logs.size() - 1);
    }
    f.events.tensors.push_back(
        {t0 + 310 * kMs, 1, 2, 3, net::CollectiveKind::AllGather, 30, "w", true, "{}"});
    f.events.tensors.push_back({t0 + 310 * kMs, 1, 2, 3, net::CollectiveKind::AllGather, 30, "w", false, {}});
    add(5, 0);
    add(5, 1);
    f.endNs = t0 + 2100 * kMs;
    return f;
}

QString record(const QString &path, const Feed &f, int version)
{
    SessionRecorder recorder(path, f.header, /*overwrite=*/true, version);
    f.feed(recorder);
    recorder.finish(0.5, f.endNs);
    return path;
}

SessionEvents streamed(const SessionReader &r)
{
    SessionEvents out;
    r.forEachFrame([&](const net::FrameEvent &e) { out.frames.push_back(e); });
    r.forEachSpanByStart([&](const SpanEvent &e) { out.spans.push_back(e); });
    r.forEachMemory([&](const MemorySample &e) { out.memory.push_back(e); });
    r.forEachMetric([&](const MetricSample &e) { out.metrics.push_back(e); });
    r.forEachLog([&](const LogLine &e) { out.logs.push_back(e); });
    return out;
}

// Everything a replay emits, in order.
class Recording : public SessionEventSink {
public:
    void onFrame(const net::FrameEvent &e) override { events.frames.push_back(e); }
    void onSpan(const SpanEvent &e) override { events.spans.push_back(e); }
    void onMemory(const MemorySample &e) override { events.memory.push_back(e); }
    void onMetric(const MetricSample &e) override { events.metrics.push_back(e); }
    void onLog(const LogLine &e) override { events.logs.push_back(e); }
    void onTensor(const TensorRecord &e) override { events.tensors.push_back(e); }
    SessionEvents events;
};

// Rewrites the blob and count of one slice row (the first of `table`).
void tamper(const QString &path, const char *table,
            const std::function<void(QByteArray &, qlonglong &)> &edit)
{
    {
        QSqlDatabase db = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), QStringLiteral("tamper"));
        db.setDatabaseName(path);
        QVERIFY(db.open());
        QSqlQuery q(db);
        QVERIFY(q.exec(QStringLiteral("SELECT id, count, events FROM %1 ORDER BY id LIMIT 1").arg(table)));
        QVERIFY(q.next());
        const qlonglong id = q.value(0).toLongLong();
        qlonglong count = q.value(1).toLongLong();
        QByteArray blob = q.value(2).toByteArray();
        edit(blob, count);
        QVERIFY(q.prepare(QStringLiteral("UPDATE %1 SET count = ?, events = ? WHERE id = ?").arg(table)));
        q.addBindValue(count);
        q.addBindValue(blob);
        q.addBindValue(id);
        QVERIFY2(q.exec(), qPrintable(q.lastError().text()));
        q.finish();
        db.close();
    }
    QSqlDatabase::removeDatabase(QStringLiteral("tamper"));
}

} // namespace

class TestSessionSlices : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase();
    void packedReadsAsUnpacked();
    void slicesAreCompact();
    void replaysIdentically();
    void readsVersion2Files();
    void lyingSlices_data();
    void lyingSlices();

private:
    static void checkCompact(const QString &path, const Feed &feed);
    QTemporaryDir m_dir;
    Feed m_feed;
    QString m_v3, m_v4;
};

void TestSessionSlices::initTestCase()
{
    m_feed = makeFeed();
    m_v3 = record(m_dir.filePath("v3.smolrec"), m_feed, 3);
    m_v4 = record(m_dir.filePath("v4.smolrec"), m_feed, kSessionSchemaVersion);
}

void TestSessionSlices::packedReadsAsUnpacked()
{
    const SessionReader a(m_v3), b(m_v4);
    QCOMPARE(a.schemaVersion(), 3);
    QCOMPARE(b.schemaVersion(), 4);
    QVERIFY(same(streamed(a), streamed(b)));
    QCOMPARE(streamed(b).frames.size(), m_feed.events.frames.size());
    QVERIFY(same(a.eventsIn(kMin, kMax), b.eventsIn(kMin, kMax)));
    QCOMPARE(b.eventsIn(kMin, kMax).size(), m_feed.events.size());
    QVERIFY(a.timeRange() == b.timeRange());
    // Windows and replay ranges across the run, from 1 ns to 1.5 s wide.
    QRandomGenerator rng(3);
    const auto [first, last] = b.timeRange();
    for (int w = 0; w < 60; ++w) {
        const std::int64_t t0 =
            first - 50 * kMs + std::int64_t(rng.bounded(double(last - first + 100 * kMs)));
        const std::int64_t width = w % 3 == 0 ? 1 : std::int64_t(rng.bounded(1500.0 * kMs));
        const std::int64_t t1 = t0 + width;
        QVERIFY2(same(a.frames(t0, t1), b.frames(t0, t1)), qPrintable(QString::number(w)));
        QVERIFY2(same(a.spans(t0, t1), b.spans(t0, t1)), qPrintable(QString::number(w)));
        QVERIFY2(same(a.memory(t0, t1), b.memory(t0, t1)), qPrintable(QString::number(w)));
        QVERIFY2(same(a.eventsIn(t0, t1), b.eventsIn(t0, t1)), qPrintable(QString::number(w)));
        QCOMPARE(a.nextEventTime(t0), b.nextEventTime(t0));
        QVERIFY(same(a.latestMemory(t0), b.latestMemory(t0)));
        QVERIFY(same(a.latestStepPeaks(t0), b.latestStepPeaks(t0)));
    }
    QVERIFY(!b.frames(m_feed.header.startNs + 700 * kMs, m_feed.header.startNs + 800 * kMs).empty());
    QCOMPARE(a.nextEventTime(last), std::optional<std::int64_t>());
    QCOMPARE(b.nextEventTime(last), std::optional<std::int64_t>());
    for (std::int64_t step : {0, 7, 19, 20})
        QCOMPARE(a.stepStart(step), b.stepStart(step));
    const auto ca = a.collectives(), cb = b.collectives();
    QCOMPARE(cb.size(), std::size_t(40));
    QCOMPARE(ca.size(), cb.size());
    for (std::size_t i = 0; i < ca.size(); ++i) {
        QCOMPARE(std::make_tuple(int(ca[i].kind), ca[i].seq, ca[i].step, ca[i].startNs, ca[i].endNs),
                 std::make_tuple(int(cb[i].kind), cb[i].seq, cb[i].step, cb[i].startNs, cb[i].endNs));
    }
    const SessionInfo ia = a.info(), ib = b.info();
    QCOMPARE(ib.events(), std::uint64_t(m_feed.events.size()));
    QCOMPARE(ia.events(), ib.events());
    QCOMPARE(ia.framesSend, ib.framesSend);
    QCOMPARE(ia.framesReceive, ib.framesReceive);
    QVERIFY(ia.spans == ib.spans);
    QCOMPARE(ia.memoryAtCollectives, ib.memoryAtCollectives);
    QCOMPARE(ia.memoryStepPeaks, ib.memoryStepPeaks);
    QCOMPARE(ia.stepsRecorded, ib.stepsRecorded);
    QCOMPARE(ia.lastStep, ib.lastStep);
    QCOMPARE(ia.lastEventNs, ib.lastEventNs);
    QCOMPARE(ia.durationNs, ib.durationNs);
    QCOMPARE(ia.links.size(), ib.links.size());
    for (std::size_t i = 0; i < ia.links.size(); ++i) {
        QCOMPARE(ia.links[i].src, ib.links[i].src);
        QCOMPARE(ia.links[i].bytes, ib.links[i].bytes);
        QCOMPARE(ia.links[i].frames, ib.links[i].frames);
    }
}

// The point of version 4: a row per slice, not per event.
void TestSessionSlices::slicesAreCompact()
{
    checkCompact(m_v4, m_feed);
    QSqlDatabase::removeDatabase(QStringLiteral("count"));
}

void TestSessionSlices::checkCompact(const QString &path, const Feed &feed)
{
    QSqlDatabase db = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), QStringLiteral("count"));
    db.setDatabaseName(path);
    QVERIFY(db.open());
    QSqlQuery q(db);
    auto scalar = [&](const char *sql) {
        if (!q.exec(QString::fromLatin1(sql)) || !q.next())
            return qlonglong(-1);
        return q.value(0).toLongLong();
    };
    QCOMPARE(scalar("SELECT COUNT(*) FROM frames") + scalar("SELECT COUNT(*) FROM spans") +
                 scalar("SELECT COUNT(*) FROM memory"),
             0);
    const qlonglong slices = scalar("SELECT COUNT(*) FROM frame_slices");
    QCOMPARE(scalar("SELECT SUM(count) FROM frame_slices"), qlonglong(feed.events.frames.size()));
    QVERIFY2(slices > 1 && slices * 200 < qlonglong(feed.events.frames.size()),
             qPrintable(QString::number(slices)));
    QVERIFY(scalar("SELECT MAX(count) FROM frame_slices") <= qlonglong(EventSlices::kSliceEvents));
    QVERIFY(scalar("SELECT MAX(t_max - t_min) FROM frame_slices") < EventSlices::kSliceNs);
    QVERIFY(scalar("SELECT COUNT(*) FROM frame_slices WHERE t_start_min > t_min") == 0);
    q.finish();
    db.close();
}

void TestSessionSlices::replaysIdentically()
{
    const SessionReader a(m_v3), b(m_v4);
    Recording ra, rb;
    ReplaySource pa(a, &ra), pb(b, &rb);
    pa.setSpeed(7);
    pb.setSpeed(7);
    for (int i = 0; i < 40; ++i) {
        pa.advance(9 * kMs);
        pb.advance(9 * kMs);
    }
    pa.seekToStep(4);
    pb.seekToStep(4);
    pa.nextCollective();
    pb.nextCollective();
    pa.advance(30 * kMs);
    pb.advance(30 * kMs);
    QVERIFY(!rb.events.frames.empty());
    QVERIFY(same(ra.events, rb.events));
}

// A version-2 file (the recorder's version-3 rows without step peaks) opens
// and reads its records as written.
void TestSessionSlices::readsVersion2Files()
{
    Feed f = m_feed;
    const QString path = record(m_dir.filePath("v2.smolrec"), f, 3);
    {
        QSqlDatabase db = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), QStringLiteral("v2"));
        db.setDatabaseName(path);
        QVERIFY(db.open());
        QSqlQuery q(db);
        for (const char *s :
             {"DELETE FROM memory WHERE step_peak != 0", "ALTER TABLE memory DROP COLUMN step_peak",
              "UPDATE meta SET value = 2 WHERE key = 'schema_version'"})
            QVERIFY2(q.exec(QString::fromLatin1(s)), s);
        q.finish();
        db.close();
    }
    QSqlDatabase::removeDatabase(QStringLiteral("v2"));
    std::vector<MemorySample> memory;
    for (const MemorySample &m : f.events.memory) {
        if (!m.stepPeak)
            memory.push_back(m);
    }
    std::stable_sort(memory.begin(), memory.end(),
                     [](const MemorySample &x, const MemorySample &y) { return x.tNs < y.tNs; });
    const SessionReader r(path), v4(m_v4);
    QCOMPARE(r.schemaVersion(), 2);
    QVERIFY(same(r.memory(kMin, kMax), memory));
    QVERIFY(same(r.frames(kMin, kMax), v4.frames(kMin, kMax)));
    QVERIFY(same(r.spans(kMin, kMax), v4.spans(kMin, kMax)));
    QVERIFY(r.latestStepPeaks(kMax).empty());
    QCOMPARE(r.info().memoryStepPeaks, std::uint64_t(0));
    QCOMPARE(r.info().framesSend, v4.info().framesSend);
}

void TestSessionSlices::lyingSlices_data()
{
    QTest::addColumn<QString>("table");
    QTest::addColumn<int>("lie");
    QTest::addColumn<QString>("expected");
    // Byte offsets in a record (event_slices.h): a frame's side at 16, a
    // span's kind at 20 and its name's length at 21..24, a memory sample's
    // node at 8.
    QTest::newRow("truncated blob") << "frame_slices" << 0 << "claims";
    QTest::newRow("count beyond the blob") << "frame_slices" << 1 << "claims";
    QTest::newRow("count 2^40") << "span_slices" << 2 << "claims";
    QTest::newRow("negative count") << "memory_slices" << 3 << "claims";
    QTest::newRow("fewer records than bytes") << "frame_slices" << 4 << "bytes after its";
    QTest::newRow("bad frame side") << "frame_slices" << 5 << "frame side 9";
    QTest::newRow("bad span kind") << "span_slices" << 6 << "span kind 200";
    QTest::newRow("name longer than the blob") << "span_slices" << 7 << "runs past the end";
    QTest::newRow("bad rank") << "memory_slices" << 8 << "rank -7";
    QTest::newRow("empty blob") << "span_slices" << 9 << "claims";
}

void TestSessionSlices::lyingSlices()
{
    QFETCH(QString, table);
    QFETCH(int, lie);
    QFETCH(QString, expected);
    const QString path = m_dir.filePath(QStringLiteral("lie%1.smolrec").arg(lie));
    QFile::remove(path);
    QVERIFY(QFile::copy(m_v4, path));
    tamper(path, qPrintable(table), [lie](QByteArray &blob, qlonglong &count) {
        auto put = [&blob](int at, const void *bytes, int n) {
            std::memcpy(blob.data() + at, bytes, std::size_t(n));
        };
        const std::int32_t badRank = -7;
        const std::uint32_t hugeName = 0xFFFFFFF0u;
        switch (lie) {
        case 0:
            blob.chop(blob.size() / 3);
            break;
        case 1:
            ++count;
            break;
        case 2:
            count = qlonglong(1) << 40;
            break;
        case 3:
            count = -1;
            break;
        case 4:
            --count;
            break;
        case 5:
            blob[16] = 9;
            break;
        case 6:
            blob[20] = char(200);
            break;
        case 7:
            put(21, &hugeName, 4);
            break;
        case 8:
            put(8, &badRank, 4);
            break;
        default:
            blob = QByteArray("");
            break;
        }
    });
    if (QTest::currentTestFailed())
        return;
    // Every read that decodes that slice fails the same way, in one line.
    int failures = 0;
    auto attempt = [&](const std::function<void(const SessionReader &)> &read) {
        try {
            const SessionReader r(path);
            read(r);
        } catch (const SessionError &e) {
            const QString what = QString::fromUtf8(e.what());
            QVERIFY2(what.startsWith(path + ": damaged: " + table + " row ") && what.contains(expected) &&
                         !what.contains('\n'),
                     e.what());
            ++failures;
        }
    };
    attempt([](const SessionReader &r) { r.info(); });
    attempt([](const SessionReader &r) { r.eventsIn(kMin, kMax); });
    attempt([](const SessionReader &r) { streamed(r); });
    attempt([](const SessionReader &r) {
        Recording sink;
        ReplaySource replay(r, &sink);
        replay.setSpeed(ReplaySource::kMaxSpeed);
        replay.advance(3000 * kMs);
    });
    QCOMPARE(failures, 4);
}

QTEST_GUILESS_MAIN(TestSessionSlices)
#include "tst_session_slices.moc"
