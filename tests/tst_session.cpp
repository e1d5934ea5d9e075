// tst_session: session files without LibTorch. A synthetic run (ranks,
// steps, ring all-reduce frames, spans, a long pause, memory, metrics, logs,
// tensors) is recorded and must come back field for field; info() must
// match counts made by hand from what was fed; window queries must match a
// brute-force filter; replay must emit exactly each window's events in time
// order and land seeks on the right events. A recorder killed with SIGKILL
// (a child process: this binary with --record-child) must leave a file that
// opens and misses at most the last 250 ms. Truncated, bit-flipped, foreign
// and text files must give a one-line SessionError, never a crash or hang.
// throughput() prints the events/s recorded and the time to read 1 s
// windows of a 1M-event file.
#include "engine/session/replay_source.h"
#include "engine/session/session_compare.h"
#include "engine/session/session_export.h"
#include "engine/session/session_reader.h"
#include "engine/session/session_recorder.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QRandomGenerator>
#include <QSqlDatabase>
#include <QSqlError>
#include <QSqlQuery>
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <thread>

using namespace smol;
using namespace smol::engine;

namespace {

constexpr std::int64_t kMs = 1'000'000;
constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

// Total orders over every field, to compare multisets of records.
auto key(const net::FrameEvent &e)
{
    return std::make_tuple(eventTimeNs(e), e.sendStartNs, e.sendCompleteNs, e.recvCompleteNs, int(e.side),
                           e.src, e.dst, int(e.kind), e.seq, e.tag, e.bytes);
}
auto key(const SpanEvent &e)
{
    return std::make_tuple(e.endNs, e.startNs, e.node, int(e.kind), e.name, e.step, int(e.collective), e.seq,
                           e.bytes);
}
auto key(const MemorySample &e)
{
    const smol::net::MemoryByCategory &m = e.memory;
    return std::make_tuple(e.tNs, e.node, e.step, m.params, m.grads, m.optimizer, m.activations, m.comm, m.live,
                           m.peak, int(e.collective), e.seq, e.before, e.stepPeak);
}
auto key(const MetricSample &e)
{
    // NaN compares equal to NaN here.
    return std::make_tuple(e.tNs, e.step, e.node, e.name, std::isnan(e.value),
                           std::isnan(e.value) ? 0.0 : e.value);
}
auto key(const LogLine &e)
{
    return std::make_tuple(e.tNs, e.node, e.text);
}
auto key(const TensorRecord &e)
{
    return std::make_tuple(e.tNs, e.pauseId, e.node, e.step, int(e.collective), e.seq, e.name, e.before,
                           e.snapshotJson);
}

template <class T> std::vector<T> sorted(std::vector<T> v)
{
    std::sort(v.begin(), v.end(), [](const T &a, const T &b) { return key(a) < key(b); });
    return v;
}

template <class T> bool sameRecords(const std::vector<T> &a, const std::vector<T> &b)
{
    const std::vector<T> x = sorted(a), y = sorted(b);
    if (x.size() != y.size())
        return false;
    for (std::size_t i = 0; i < x.size(); ++i) {
        if (key(x[i]) != key(y[i]))
            return false;
    }
    return true;
}

template <class T> bool timeOrdered(const std::vector<T> &v)
{
    return std::is_sorted(v.begin(), v.end(),
                          [](const T &a, const T &b) { return eventTimeNs(a) < eventTimeNs(b); });
}

// A deterministic synthetic run: `nodes` ranks, `steps` steps of 10 ms
// from t = 1 s, two ring all-reduces per step, a 35 ms pause from step 2 into step 5.
struct SyntheticRun {
    SessionHeader header;
    std::vector<net::FrameEvent> frames;
    std::vector<SpanEvent> spans;
    std::vector<MemorySample> memory;
    std::vector<MetricSample> metrics;
    std::vector<LogLine> logs;
    std::vector<TensorRecord> tensors;
    std::int64_t endNs = 0;

    std::size_t size() const
    {
        return frames.size() + spans.size() + memory.size() + metrics.size() + logs.size() + tensors.size();
    }

    // Frames from one thread, everything else from another: a sink is fed
    // from many threads at once.
    void feed(SessionEventSink &sink) const
    {
        std::thread io([&] {
            for (const auto &f : frames)
                sink.onFrame(f);
        });
        for (const auto &s : spans)
            sink.onSpan(s);
        for (const auto &m : memory)
            sink.onMemory(m);
        for (const auto &m : metrics)
            sink.onMetric(m);
        for (const auto &l : logs)
            sink.onLog(l);
        for (const auto &t : tensors)
            sink.onTensor(t);
        io.join();
    }
};

std::int64_t stepStartNs(int step)
{
    return 1000 * kMs + step * 10 * kMs;
}

SyntheticRun makeRun(int nodes = 3, int steps = 6)
{
    SyntheticRun run;
    SessionHeader &h = run.header;
    h.configJson = R"({"strategy":"ddp","lr":0.1})";
    h.strategy = "ddp";
    h.model = "mlp";
    h.nodes = nodes;
    h.steps = steps;
    h.placementJson = R"({"layers":"all"})";
    h.startNs = stepStartNs(0) - kMs;
    for (int n = 0; n < nodes; ++n)
        h.nodeList.push_back({n, "node-" + std::to_string(n), "10.0.0." + std::to_string(n + 1), "worker"});

    std::uint64_t seq = 0;
    for (int s = 0; s < steps; ++s) {
        const std::int64_t t0 = stepStartNs(s);
        for (int n = 0; n < nodes; ++n) {
            const std::int64_t off = n * 10'000; // nodes start 10 us apart
            run.spans.push_back({n, SpanEvent::Kind::Step, "step", t0 + off, t0 + 9 * kMs + off, s});
            run.spans.push_back(
                {n, SpanEvent::Kind::Forward, "forward", t0 + off + 100'000, t0 + off + 2 * kMs, s});
            run.spans.push_back(
                {n, SpanEvent::Kind::Backward, "backward", t0 + off + 2 * kMs, t0 + off + 5 * kMs, s});
            run.spans.push_back(
                {n, SpanEvent::Kind::Optimizer, "sgd", t0 + off + 8 * kMs, t0 + off + 8 * kMs + 900'000, s});
        }
        for (int b = 0; b < 2; ++b) {
            const std::uint64_t collectiveSeq = seq++;
            const std::int64_t c0 = t0 + 5 * kMs + b * 1'500'000;
            for (int n = 0; n < nodes; ++n) {
                const std::int64_t off = n * 10'000;
                run.spans.push_back({n, SpanEvent::Kind::Collective, "bucket " + std::to_string(b), c0 + off,
                                     c0 + off + 1'400'000, s, net::CollectiveKind::AllReduce, collectiveSeq,
                                     std::uint64_t(65536 * (b + 1))});
                const int dst = (n + 1) % nodes;
                for (std::uint32_t k = 0; k < 4; ++k) {
                    net::FrameEvent send;
                    send.side = net::FrameEvent::Side::Send;
                    send.src = n;
                    send.dst = dst;
                    send.bytes = 4096 * (k + 1) + std::uint64_t(n);
                    send.kind = net::CollectiveKind::AllReduce;
                    send.seq = collectiveSeq;
                    send.tag = (1u << 28) | (k << 16) | std::uint32_t(b);
                    send.sendStartNs = c0 + off + k * 200'000 + 1000;
                    send.sendCompleteNs = send.sendStartNs + 50'000;
                    net::FrameEvent recv = send;
                    recv.side = net::FrameEvent::Side::Receive;
                    recv.sendCompleteNs = 0;
                    recv.recvCompleteNs = send.sendCompleteNs + 30'000;
                    run.frames.push_back(send);
                    run.frames.push_back(recv);
                }
            }
        }
        for (int n = 0; n < nodes; ++n) {
            const std::int64_t p = 1000 * (n + 1);
            // The step's peaks, then the memory at its end (as emitStepEvents writes them).
            MemorySample peak{t0 + 9 * kMs + n, n, s, {p, p, 2 * p, 7000 + s, 128, 4 * p + 7128 + s, 5 * p + 7200}};
            peak.stepPeak = true;
            run.memory.push_back(peak);
            run.memory.push_back(
                {t0 + 9 * kMs + n, n, s, {p, p, 2 * p, 500 + s, 64, 4 * p + 564 + s, 5 * p + 600}});
        }
        run.metrics.push_back({t0 + 9 * kMs + 500'000, s, -1, "loss", 2.0 / (s + 1)});
        run.metrics.push_back({t0 + 9 * kMs + 500'000, s, -1, "samples_per_s", 1000.0 + s});
        run.metrics.push_back(
            {t0 + 9 * kMs + 600'000, s, 0, "loss", 9.0}); // a node's own: not the final loss
        run.logs.push_back(
            {t0 + 50'000, -1, "step " + std::to_string(s) + ": \"quoted\", comma, ✓\nsecond line"});
    }
    run.metrics.push_back(
        {stepStartNs(1) + 9 * kMs + 700'000, 1, -1, "grad_norm", std::numeric_limits<double>::quiet_NaN()});
    // A 35 ms pause at step 2's first collective, with the tensors taken.
    const std::int64_t pause0 = stepStartNs(2) + 4 * kMs;
    for (int n = 0; n < nodes; ++n) {
        run.spans.push_back({n, SpanEvent::Kind::Pause, "breakpoint: all-reduce", pause0, pause0 + 35 * kMs,
                             2, net::CollectiveKind::AllReduce, 4});
        run.tensors.push_back({pause0 + 1000 + n, 1, n, 2, net::CollectiveKind::AllReduce, 4, "bucket 0",
                               true, QByteArray("{\"node\":") + QByteArray::number(n) + "}"});
    }
    run.tensors.push_back(
        {pause0 + 2 * kMs, 1, 0, 2, net::CollectiveKind::AllReduce, 4, "bucket 0", false, {}});
    run.logs.push_back({pause0, 1, "paused"});
    // A backend's whole-collective event (src == dst) and a send never received.
    net::FrameEvent gloo;
    gloo.src = gloo.dst = 0;
    gloo.bytes = 1 << 20;
    gloo.kind = net::CollectiveKind::AllReduce;
    gloo.sendStartNs = stepStartNs(0) + 5 * kMs;
    gloo.sendCompleteNs = gloo.sendStartNs + 3 * kMs;
    run.frames.push_back(gloo);
    net::FrameEvent lost;
    lost.src = 1;
    lost.dst = 0;
    lost.bytes = 77;
    lost.kind = net::CollectiveKind::SendRecv;
    lost.seq = 3;
    lost.sendStartNs = stepStartNs(steps - 1) + 9 * kMs;
    lost.sendCompleteNs = lost.sendStartNs + 10'000;
    run.frames.push_back(lost);
    run.endNs = stepStartNs(steps) + kMs;
    return run;
}

// Everything a sink receives, in arrival order.
class CollectingSink : public SessionEventSink {
public:
    struct Event {
        int table; // 0 frames .. 5 tensors
        std::int64_t t;
    };
    void onFrame(const net::FrameEvent &e) override { add(0, eventTimeNs(e), frames, e); }
    void onSpan(const SpanEvent &e) override { add(1, e.endNs, spans, e); }
    void onMemory(const MemorySample &e) override { add(2, e.tNs, memory, e); }
    void onMetric(const MetricSample &e) override { add(3, e.tNs, metrics, e); }
    void onLog(const LogLine &e) override { add(4, e.tNs, logs, e); }
    void onTensor(const TensorRecord &e) override { add(5, e.tNs, tensors, e); }

    void clear()
    {
        std::lock_guard<std::mutex> lock(mutex);
        order.clear();
        frames.clear();
        spans.clear();
        memory.clear();
        metrics.clear();
        logs.clear();
        tensors.clear();
    }
    std::size_t size()
    {
        std::lock_guard<std::mutex> lock(mutex);
        return order.size();
    }

    std::mutex mutex;
    std::vector<Event> order;
    std::vector<net::FrameEvent> frames;
    std::vector<SpanEvent> spans;
    std::vector<MemorySample> memory;
    std::vector<MetricSample> metrics;
    std::vector<LogLine> logs;
    std::vector<TensorRecord> tensors;

private:
    template <class T> void add(int table, std::int64_t t, std::vector<T> &list, const T &e)
    {
        std::lock_guard<std::mutex> lock(mutex);
        order.push_back({table, t});
        list.push_back(e);
    }
};

template <class T> std::vector<T> inWindow(const std::vector<T> &all, std::int64_t after, std::int64_t upTo)
{
    std::vector<T> out;
    for (const T &e : all) {
        if (eventTimeNs(e) > after && eventTimeNs(e) <= upTo)
            out.push_back(e);
    }
    return out;
}

// The events of `run` whose time is in (after, upTo], as a sink would get them.
bool sinkHasExactly(CollectingSink &sink, const SyntheticRun &run, std::int64_t after, std::int64_t upTo)
{
    return sameRecords(sink.frames, inWindow(run.frames, after, upTo)) &&
           sameRecords(sink.spans, inWindow(run.spans, after, upTo)) &&
           sameRecords(sink.memory, inWindow(run.memory, after, upTo)) &&
           sameRecords(sink.metrics, inWindow(run.metrics, after, upTo)) &&
           sameRecords(sink.logs, inWindow(run.logs, after, upTo)) &&
           sameRecords(sink.tensors, inWindow(run.tensors, after, upTo));
}

bool inTimeOrder(const CollectingSink &sink)
{
    return std::is_sorted(
        sink.order.begin(), sink.order.end(),
        [](const CollectingSink::Event &a, const CollectingSink::Event &b) { return a.t < b.t; });
}

QString record(const QString &dir, const SyntheticRun &run, const char *name = "run.smolrec",
               int version = kSessionSchemaVersion)
{
    const QString path = dir + QLatin1Char('/') + QLatin1String(name);
    SessionRecorder recorder(path, run.header, /*overwrite=*/false, version);
    run.feed(recorder);
    recorder.finish(0.25, run.endNs);
    return path;
}

// The schema SQL of earlier writers, as they wrote it (version 1 from
// b3165f7, version 2 from 664424b, both through Qt Sql). Version 2 differs
// from version 1 only in the memory table; the writer that replaced Qt Sql
// by SQLite's own API writes version 2 unchanged.
const char *const kEarlierSchema[] = {
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value)",
    "CREATE TABLE run (id INTEGER PRIMARY KEY CHECK (id = 1), strategy TEXT NOT NULL, model TEXT NOT NULL,"
    " nodes INTEGER NOT NULL, steps INTEGER NOT NULL, start_ns INTEGER NOT NULL, config_json BLOB,"
    " placement_json BLOB)",
    "CREATE TABLE nodes (rank INTEGER PRIMARY KEY, name TEXT NOT NULL, host TEXT NOT NULL, role TEXT NOT "
    "NULL)",
    "CREATE TABLE frames (t_end INTEGER NOT NULL, id INTEGER NOT NULL, t_start INTEGER NOT NULL,"
    " side INTEGER NOT NULL, src INTEGER NOT NULL, dst INTEGER NOT NULL, kind INTEGER NOT NULL,"
    " seq INTEGER NOT NULL, tag INTEGER NOT NULL, bytes INTEGER NOT NULL, PRIMARY KEY (t_end, id)) WITHOUT "
    "ROWID",
    "CREATE TABLE spans (id INTEGER PRIMARY KEY, t_start INTEGER NOT NULL, t_end INTEGER NOT NULL,"
    " node INTEGER NOT NULL, kind INTEGER NOT NULL, name TEXT NOT NULL, step INTEGER NOT NULL,"
    " collective INTEGER NOT NULL, seq INTEGER NOT NULL, bytes INTEGER NOT NULL)",
    "CREATE INDEX spans_by_end ON spans (t_end)",
    "CREATE INDEX spans_by_kind_start ON spans (kind, t_start)",
    "CREATE INDEX spans_by_step ON spans (step)",
    "MEMORY", // the version's memory table
    "CREATE INDEX memory_by_t ON memory (t)",
    "CREATE TABLE metrics (id INTEGER PRIMARY KEY, t INTEGER NOT NULL, step INTEGER NOT NULL,"
    " node INTEGER NOT NULL, name TEXT NOT NULL, value REAL)",
    "CREATE INDEX metrics_by_t ON metrics (t)",
    "CREATE INDEX metrics_by_step ON metrics (step)",
    "CREATE TABLE logs (id INTEGER PRIMARY KEY, t INTEGER NOT NULL, node INTEGER NOT NULL, text TEXT NOT "
    "NULL)",
    "CREATE INDEX logs_by_t ON logs (t)",
    "CREATE TABLE tensors (id INTEGER PRIMARY KEY, t INTEGER NOT NULL, pause_id INTEGER NOT NULL,"
    " node INTEGER NOT NULL, step INTEGER NOT NULL, collective INTEGER NOT NULL, seq INTEGER NOT NULL,"
    " name TEXT NOT NULL, before INTEGER NOT NULL, snapshot_json BLOB)",
    "CREATE INDEX tensors_by_t ON tensors (t)",
    "CREATE INDEX tensors_by_pause ON tensors (pause_id)",
};
const char kMemoryV1[] =
    "CREATE TABLE memory (id INTEGER PRIMARY KEY, t INTEGER NOT NULL, node INTEGER NOT NULL,"
    " step INTEGER NOT NULL, params INTEGER NOT NULL, grads INTEGER NOT NULL, optimizer INTEGER NOT NULL,"
    " activations INTEGER NOT NULL, comm INTEGER NOT NULL, live INTEGER NOT NULL, peak INTEGER NOT NULL)";
const char kMemoryV2[] =
    "CREATE TABLE memory (id INTEGER PRIMARY KEY, t INTEGER NOT NULL, node INTEGER NOT NULL,"
    " step INTEGER NOT NULL, params INTEGER NOT NULL, grads INTEGER NOT NULL, optimizer INTEGER NOT NULL,"
    " activations INTEGER NOT NULL, comm INTEGER NOT NULL, live INTEGER NOT NULL, peak INTEGER NOT NULL,"
    " collective INTEGER NOT NULL DEFAULT 0, seq INTEGER NOT NULL DEFAULT 0, before INTEGER NOT NULL DEFAULT "
    "0)";
// Version 3 (written by SQLite's own API, never by Qt Sql; the fixture
// writes it through Qt Sql all the same) added the step peaks.
const char kMemoryV3[] =
    "CREATE TABLE memory (id INTEGER PRIMARY KEY, t INTEGER NOT NULL, node INTEGER NOT NULL,"
    " step INTEGER NOT NULL, params INTEGER NOT NULL, grads INTEGER NOT NULL, optimizer INTEGER NOT NULL,"
    " activations INTEGER NOT NULL, comm INTEGER NOT NULL, live INTEGER NOT NULL, peak INTEGER NOT NULL,"
    " collective INTEGER NOT NULL DEFAULT 0, seq INTEGER NOT NULL DEFAULT 0, before INTEGER NOT NULL DEFAULT "
    "0, step_peak INTEGER NOT NULL DEFAULT 0)";

// Writes `run` the way the Qt Sql writer did: its schema, one QVariant per
// value (unsigned values as qlonglong), no max_*_ns meta for versions that
// predate them being required (the reader measures them then).
void writeWithQtSql(const QString &path, const SyntheticRun &run, int version)
{
    const QString name = QStringLiteral("tst-earlier-%1").arg(version);
    {
        QSqlDatabase db = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), name);
        db.setDatabaseName(path);
        QVERIFY(db.open());
        QSqlQuery q(db);
        QVERIFY(db.transaction());
        for (const char *statement : kEarlierSchema) {
            const char *sql = std::strcmp(statement, "MEMORY") ? statement
                              : version >= 3                   ? kMemoryV3
                              : version == 2                   ? kMemoryV2
                                                               : kMemoryV1;
            QVERIFY2(q.exec(QString::fromLatin1(sql)), sql);
        }
        auto insert = [&](const char *sql, const QVariantList &values) {
            QVERIFY2(q.prepare(QString::fromLatin1(sql)), sql);
            for (const QVariant &v : values)
                q.addBindValue(v);
            QVERIFY2(q.exec(), qPrintable(q.lastError().text()));
        };
        auto meta = [&](const char *key, const QVariant &value) {
            insert("INSERT INTO meta (key, value) VALUES (?, ?)", {QString::fromLatin1(key), value});
        };
        auto text = [](const std::string &s) { return QVariant(QString::fromStdString(s)); };
        meta("format", QStringLiteral("smolcluster-session"));
        meta("schema_version", version);
        meta("created_utc", QStringLiteral("2026-11-20T10:00:00Z"));
        const SessionHeader &h = run.header;
        insert("INSERT INTO run (id, strategy, model, nodes, steps, start_ns, config_json, placement_json)"
               " VALUES (1, ?, ?, ?, ?, ?, ?, ?)",
               {text(h.strategy), text(h.model), h.nodes, qlonglong(h.steps), qlonglong(h.startNs),
                h.configJson, h.placementJson});
        for (const SessionNode &n : h.nodeList)
            insert("INSERT INTO nodes (rank, name, host, role) VALUES (?, ?, ?, ?)",
                   {n.rank, text(n.name), text(n.host), text(n.role)});
        qlonglong id = 0;
        for (const net::FrameEvent &e : run.frames)
            insert("INSERT INTO frames (t_end, id, t_start, side, src, dst, kind, seq, tag, bytes)"
                   " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   {qlonglong(eventTimeNs(e)), ++id, qlonglong(e.sendStartNs), int(e.side), e.src, e.dst,
                    int(e.kind), qlonglong(e.seq), qlonglong(e.tag), qlonglong(e.bytes)});
        for (const SpanEvent &e : run.spans)
            insert("INSERT INTO spans (t_start, t_end, node, kind, name, step, collective, seq, bytes)"
                   " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   {qlonglong(e.startNs), qlonglong(e.endNs), e.node, int(e.kind), text(e.name),
                    qlonglong(e.step), int(e.collective), qlonglong(e.seq), qlonglong(e.bytes)});
        for (const MemorySample &m : run.memory) {
            QVariantList v{qlonglong(m.tNs),         m.node,
                           qlonglong(m.step),               qlonglong(m.memory.params),
                           qlonglong(m.memory.grads),       qlonglong(m.memory.optimizer),
                           qlonglong(m.memory.activations), qlonglong(m.memory.comm),
                           qlonglong(m.memory.live),        qlonglong(m.memory.peak)};
            if (version >= 3) {
                v << int(m.collective) << qlonglong(m.seq) << int(m.before) << int(m.stepPeak);
                insert("INSERT INTO memory (t, node, step, params, grads, optimizer, activations, comm, live,"
                       " peak, collective, seq, before, step_peak) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       v);
            } else if (version == 2) {
                v << int(m.collective) << qlonglong(m.seq) << int(m.before);
                insert("INSERT INTO memory (t, node, step, params, grads, optimizer, activations, comm, live,"
                       " peak, collective, seq, before) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       v);
            } else {
                insert("INSERT INTO memory (t, node, step, params, grads, optimizer, activations, comm, live,"
                       " peak) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       v);
            }
        }
        for (const MetricSample &m : run.metrics)
            insert("INSERT INTO metrics (t, step, node, name, value) VALUES (?, ?, ?, ?, ?)",
                   {qlonglong(m.tNs), qlonglong(m.step), m.node, text(m.name), m.value});
        for (const LogLine &l : run.logs)
            insert("INSERT INTO logs (t, node, text) VALUES (?, ?, ?)",
                   {qlonglong(l.tNs), l.node, text(l.text)});
        for (const TensorRecord &t : run.tensors)
            insert(
                "INSERT INTO tensors (t, pause_id, node, step, collective, seq, name, before, snapshot_json)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                {qlonglong(t.tNs), qlonglong(t.pauseId), t.node, qlonglong(t.step), int(t.collective),
                 qlonglong(t.seq), text(t.name), int(t.before), t.snapshotJson});
        meta("end_ns", qlonglong(run.endNs));
        meta("duration_ns", qlonglong(run.endNs - h.startNs));
        meta("events_written", qlonglong(run.size()));
        meta("final_loss", 0.25);
        QVERIFY(db.commit());
        q.finish();
        db.close();
    }
    QSqlDatabase::removeDatabase(name);
}

// The CREATE statements of a file, by name.
std::map<QString, QString> schemaOf(const QString &path)
{
    std::map<QString, QString> out;
    {
        QSqlDatabase db = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), QStringLiteral("tst-schema"));
        db.setDatabaseName(path);
        if (db.open()) {
            QSqlQuery q(db);
            q.exec(QStringLiteral("SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL"));
            while (q.next())
                out[q.value(0).toString()] = q.value(1).toString().simplified();
        }
        db.close();
    }
    QSqlDatabase::removeDatabase(QStringLiteral("tst-schema"));
    return out;
}

// The child of killedRecorderLosesAtMost250ms(): records ~100k frame events/s
// stamped with its own clock and prints "alive T" every 10 ms, until killed
// (or 20 s pass).
int recordUntilKilled(const QString &path)
{
    SessionHeader h;
    h.strategy = "ddp";
    h.model = "mlp";
    h.nodes = 2;
    h.steps = 1000000;
    h.startNs = net::monotonicNs();
    h.nodeList = {{0, "a", "localhost", "worker"}, {1, "b", "localhost", "worker"}};
    SessionRecorder recorder(path, h);
    std::printf("started\n");
    std::fflush(stdout);
    std::int64_t lastAlive = 0;
    std::uint64_t seq = 0;
    const std::int64_t stopAt = h.startNs + 20'000 * kMs;
    for (std::int64_t now = net::monotonicNs(); now < stopAt; now = net::monotonicNs()) {
        for (int i = 0; i < 100; ++i) {
            net::FrameEvent e;
            e.src = int(seq % 2);
            e.dst = 1 - e.src;
            e.seq = seq++;
            e.bytes = 4096;
            e.kind = net::CollectiveKind::AllReduce;
            e.sendCompleteNs = net::monotonicNs();
            e.sendStartNs = e.sendCompleteNs - 1000;
            recorder.onFrame(e);
        }
        recorder.onMetric({net::monotonicNs(), std::int64_t(seq / 1000), -1, "loss", 1.0});
        // Everything stamped before this instant is queued.
        const std::int64_t alive = net::monotonicNs();
        if (alive - lastAlive >= 10 * kMs) {
            std::printf("alive %lld\n", static_cast<long long>(alive));
            std::fflush(stdout);
            lastAlive = alive;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return 0;
}

// Every read a damaged file could be put through. Returns normally or throws.
void exercise(const QString &path, const QString &scratch)
{
    const SessionReader reader(path);
    const SessionInfo info = reader.info();
    (void)info;
    const auto [first, last] = reader.timeRange();
    const std::int64_t span = std::max<std::int64_t>(1, (last / 8 - first / 8));
    for (int w = 0; w < 8; ++w) {
        const std::int64_t t0 = first + w * span;
        const std::int64_t t1 = t0 + span;
        reader.frames(t0, t1);
        reader.spans(t0, t1);
        reader.memory(t0, t1);
        reader.metrics(t0, t1);
        reader.metrics(t0, t1, "loss");
        reader.logs(t0, t1);
        reader.tensors(t0, t1);
        reader.eventsIn(t0 - 1, t1);
    }
    reader.tensorsOfPause(1);
    reader.latestMemory(last);
    reader.stepStart(2);
    reader.nextEventTime(first);
    CollectingSink sink;
    ReplaySource replay(reader, &sink);
    replay.setSpeed(ReplaySource::kMaxSpeed);
    replay.advance((last - first) / 50 + 1);
    while (replay.nextCollective()) { }
    replay.seekToStep(3);
    exportChromeTrace(reader, scratch + QStringLiteral("/out.json"));
    exportMetricsCsv(reader, scratch + QStringLiteral("/out.csv"));
}

// Aborts the test binary (a visible failure naming the case) if one case
// runs longer than the limit: "never hang" made checkable.
class Watchdog {
public:
    explicit Watchdog(std::chrono::seconds limit)
        : m_limit(limit)
        , m_thread([this] { run(); })
    {
    }
    ~Watchdog()
    {
        {
            std::lock_guard<std::mutex> lock(m_mutex);
            m_quit = true;
        }
        m_wake.notify_all();
        m_thread.join();
    }
    void start(const std::string &name)
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_case = name;
        m_deadline = std::chrono::steady_clock::now() + m_limit;
    }

private:
    void run()
    {
        std::unique_lock<std::mutex> lock(m_mutex);
        while (!m_quit) {
            m_wake.wait_for(lock, std::chrono::milliseconds(200));
            if (!m_case.empty() && std::chrono::steady_clock::now() > m_deadline) {
                std::fprintf(stderr, "FAIL: damaged-file case '%s' ran longer than %lld s\n", m_case.c_str(),
                             static_cast<long long>(m_limit.count()));
                std::abort();
            }
        }
    }

    std::chrono::seconds m_limit;
    std::mutex m_mutex;
    std::condition_variable m_wake;
    bool m_quit = false;
    std::string m_case;
    std::chrono::steady_clock::time_point m_deadline;
    std::thread m_thread;
};

bool copyFile(const QString &from, const QString &to)
{
    QFile::remove(to);
    return QFile::copy(from, to);
}

} // namespace

class TestSession : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void roundTrip();
    void infoMatchesHandCounts();
    void windows_data();
    void windows();
    void refusesToOverwrite();
    void replayAdvanceEmitsEachWindowInOrder();
    void replaySpeedScales();
    void replaySeeks();
    void replayCollectiveNavigation();
    void replayPlaysInRealTime();
    void badFiles_data();
    void badFiles();
    void readsVersion1Files();
    void stepPeaksStandApart();
    void readsFilesOfTheQtSqlWriter_data();
    void readsFilesOfTheQtSqlWriter();
    void killedRecorderLosesAtMost250ms();
    void damagedFilesNeverCrash();
    void throughput();

private:
    QTemporaryDir m_dir;
};

void TestSession::roundTrip()
{
    const SyntheticRun run = makeRun();
    const QString path = m_dir.path() + QStringLiteral("/roundtrip.smolrec");
    {
        SessionRecorder recorder(path, run.header);
        run.feed(recorder);
        recorder.finish(0.25, run.endNs);
        QCOMPARE(recorder.eventsWritten(), std::uint64_t(run.size()));
        QVERIFY(recorder.error().empty());
    }
    const SessionReader reader(path);
    QCOMPARE(reader.schemaVersion(), kSessionSchemaVersion);
    QVERIFY(reader.isComplete());
    const SessionHeader &h = reader.header();
    QCOMPARE(h.configJson, run.header.configJson);
    QCOMPARE(h.placementJson, run.header.placementJson);
    QCOMPARE(h.strategy, run.header.strategy);
    QCOMPARE(h.model, run.header.model);
    QCOMPARE(h.nodes, run.header.nodes);
    QCOMPARE(h.steps, run.header.steps);
    QCOMPARE(h.startNs, run.header.startNs);
    QCOMPARE(h.nodeList.size(), run.header.nodeList.size());
    for (std::size_t i = 0; i < h.nodeList.size(); ++i) {
        QCOMPARE(h.nodeList[i].rank, run.header.nodeList[i].rank);
        QCOMPARE(h.nodeList[i].name, run.header.nodeList[i].name);
        QCOMPARE(h.nodeList[i].host, run.header.nodeList[i].host);
        QCOMPARE(h.nodeList[i].role, run.header.nodeList[i].role);
    }
    QVERIFY(sameRecords(reader.frames(kMin, kMax), run.frames));
    QVERIFY(sameRecords(reader.spans(kMin, kMax), run.spans));
    QVERIFY(sameRecords(reader.memory(kMin, kMax), run.memory));
    QVERIFY(sameRecords(reader.metrics(kMin, kMax), run.metrics));
    QVERIFY(sameRecords(reader.logs(kMin, kMax), run.logs));
    QVERIFY(sameRecords(reader.tensors(kMin, kMax), run.tensors));
    QVERIFY(sameRecords(reader.tensorsOfPause(1), run.tensors));
    QVERIFY(reader.tensorsOfPause(2).empty());
    const SessionEvents all = reader.eventsIn(kMin, kMax);
    QCOMPARE(all.size(), run.size());
    QVERIFY(timeOrdered(all.frames) && timeOrdered(all.spans) && timeOrdered(all.metrics));

    // The NaN metric survives (SQLite keeps NaN as NULL).
    const auto norms = reader.metrics(kMin, kMax, "grad_norm");
    QCOMPARE(norms.size(), std::size_t(1));
    QVERIFY(std::isnan(norms[0].value));

    const auto range = reader.timeRange();
    QCOMPARE(range.first, run.header.startNs);
    QCOMPARE(range.second, run.endNs);
    QCOMPARE(reader.stepStart(3), std::optional<std::int64_t>(stepStartNs(3)));
    QVERIFY(!reader.stepStart(99));
}

void TestSession::infoMatchesHandCounts()
{
    const SyntheticRun run = makeRun(4, 5);
    const SessionReader reader(record(m_dir.path(), run, "info.smolrec"));
    const SessionInfo info = reader.info();

    std::uint64_t sends = 0, receives = 0;
    std::map<std::pair<int, int>, std::pair<std::uint64_t, std::uint64_t>> links; // bytes, frames
    for (const auto &f : run.frames) {
        if (f.side == net::FrameEvent::Side::Send) {
            ++sends;
            links[{f.src, f.dst}].first += f.bytes;
            ++links[{f.src, f.dst}].second;
        } else {
            ++receives;
        }
    }
    std::array<std::uint64_t, SpanEvent::kKinds> spans{};
    for (const auto &s : run.spans)
        ++spans[std::size_t(s.kind)];
    QCOMPARE(info.framesSend, sends);
    QCOMPARE(info.framesReceive, receives);
    QVERIFY(info.spans == spans);
    QCOMPARE(info.memory, std::uint64_t(run.memory.size()));
    QCOMPARE(info.metrics, std::uint64_t(run.metrics.size()));
    QCOMPARE(info.logs, std::uint64_t(run.logs.size()));
    QCOMPARE(info.tensors, std::uint64_t(run.tensors.size()));
    QCOMPARE(info.events(), std::uint64_t(run.size()));
    QCOMPARE(info.links.size(), links.size());
    for (const SessionLink &l : info.links) {
        QCOMPARE(l.bytes, (links[{l.src, l.dst}].first));
        QCOMPARE(l.frames, (links[{l.src, l.dst}].second));
    }
    // The last cluster-wide loss, not node 0's later 9.0, not finish()'s 0.25.
    QVERIFY(info.finalLoss.has_value());
    QCOMPARE(*info.finalLoss, 2.0 / 5);
    QCOMPARE(info.finalLossStep, std::int64_t(4));
    QCOMPARE(info.stepsRecorded, std::int64_t(5));
    QCOMPARE(info.lastStep, std::int64_t(4));
    QCOMPARE(info.stepsPlanned, std::int64_t(5));
    QVERIFY(info.complete);
    QCOMPARE(info.durationNs, run.endNs - run.header.startNs);
    QCOMPARE(info.strategy, std::string("ddp"));
    QCOMPARE(info.nodes, 4);
}

void TestSession::windows_data()
{
    QTest::addColumn<qint64>("t0");
    QTest::addColumn<qint64>("t1");
    QTest::newRow("inside step 1") << qint64(stepStartNs(1) + 4 * kMs) << qint64(stepStartNs(1) + 6 * kMs);
    QTest::newRow("step 4 (inside the long pause)") << qint64(stepStartNs(4)) << qint64(stepStartNs(5) - 1);
    QTest::newRow("one nanosecond") << qint64(stepStartNs(0) + 5 * kMs + 1000)
                                    << qint64(stepStartNs(0) + 5 * kMs + 1000);
    QTest::newRow("before the run") << qint64(0) << qint64(stepStartNs(0) - 2 * kMs);
    QTest::newRow("after the run") << qint64(stepStartNs(50)) << qint64(stepStartNs(60));
    QTest::newRow("everything") << qint64(kMin) << qint64(kMax);
}

void TestSession::windows()
{
    QFETCH(qint64, t0);
    QFETCH(qint64, t1);
    static const SyntheticRun run = makeRun();
    static const QString path = record(m_dir.path(), run, "windows.smolrec");
    const SessionReader reader(path);

    std::vector<net::FrameEvent> frames;
    for (const auto &f : run.frames) {
        if (eventTimeNs(f) >= t0 && f.sendStartNs <= t1)
            frames.push_back(f);
    }
    std::vector<SpanEvent> spans;
    for (const auto &s : run.spans) {
        if (s.endNs >= t0 && s.startNs <= t1)
            spans.push_back(s);
    }
    auto points = [&](const auto &all) {
        std::decay_t<decltype(all)> out;
        for (const auto &e : all) {
            if (eventTimeNs(e) >= t0 && eventTimeNs(e) <= t1)
                out.push_back(e);
        }
        return out;
    };
    const auto gotFrames = reader.frames(t0, t1);
    const auto gotSpans = reader.spans(t0, t1);
    QVERIFY(sameRecords(gotFrames, frames));
    QVERIFY(sameRecords(gotSpans, spans));
    QVERIFY(timeOrdered(gotFrames) && timeOrdered(gotSpans));
    QVERIFY(sameRecords(reader.memory(t0, t1), points(run.memory)));
    QVERIFY(sameRecords(reader.metrics(t0, t1), points(run.metrics)));
    QVERIFY(sameRecords(reader.logs(t0, t1), points(run.logs)));
    QVERIFY(sameRecords(reader.tensors(t0, t1), points(run.tensors)));
    if (QByteArray(QTest::currentDataTag()).startsWith("step 4")) {
        // The pause began in step 2 and is still on: only a long-span-aware
        // query finds it.
        QVERIFY(std::count_if(gotSpans.begin(), gotSpans.end(),
                              [](const SpanEvent &s) { return s.kind == SpanEvent::Kind::Pause; }) == 3);
    }
}

void TestSession::refusesToOverwrite()
{
    const SyntheticRun run = makeRun(2, 2);
    const QString path = record(m_dir.path(), run, "exists.smolrec");
    try {
        SessionRecorder again(path, run.header);
        QFAIL("a second recorder overwrote an existing session");
    } catch (const SessionError &e) {
        const QString what = QString::fromUtf8(e.what());
        QVERIFY2(what.contains(path) && what.contains(QStringLiteral("exists")) && !what.contains('\n'),
                 e.what());
    }
    SessionHeader other = run.header;
    other.strategy = "zero1";
    {
        SessionRecorder replace(path, other, /*overwrite=*/true);
        replace.finish();
    }
    const SessionReader reader(path);
    QCOMPARE(reader.header().strategy, std::string("zero1"));
    QCOMPARE(reader.info().events(), std::uint64_t(0));

    try {
        SessionRecorder nowhere(m_dir.path() + QStringLiteral("/no/such/dir/x.smolrec"), run.header);
        QFAIL("recorded into a directory that does not exist");
    } catch (const SessionError &e) {
        QVERIFY2(QString::fromUtf8(e.what()).contains(QStringLiteral("x.smolrec")), e.what());
    }
}

void TestSession::replayAdvanceEmitsEachWindowInOrder()
{
    const SyntheticRun run = makeRun();
    const SessionReader reader(record(m_dir.path(), run, "replay.smolrec"));
    CollectingSink sink;
    ReplaySource replay(reader, &sink);
    QCOMPARE(replay.begin(), run.header.startNs);
    QCOMPARE(replay.end(), run.endNs);
    QCOMPARE(replay.position(), replay.begin() - 1);
    QCOMPARE(replay.advance(0), std::size_t(0));

    // 3.7 ms at a time: windows cut through spans, frames and steps.
    std::size_t total = 0;
    int windows = 0;
    while (!replay.atEnd()) {
        const std::int64_t before = replay.position();
        sink.clear();
        const std::size_t emitted = replay.advance(3'700'000);
        const std::int64_t after = replay.position();
        QCOMPARE(after, std::min(before + 3'700'000, replay.end()));
        QCOMPARE(emitted, sink.size());
        QVERIFY2(sinkHasExactly(sink, run, before, after),
                 qPrintable(QStringLiteral("window %1").arg(windows)));
        QVERIFY(inTimeOrder(sink));
        total += emitted;
        ++windows;
    }
    QCOMPARE(total, run.size());
    QVERIFY(windows > 10);
    QCOMPARE(replay.advance(kMs), std::size_t(0));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, replay.advance(-1));
}

void TestSession::replaySpeedScales()
{
    const SyntheticRun run = makeRun();
    const SessionReader reader(record(m_dir.path(), run, "speed.smolrec"));
    CollectingSink sink;
    ReplaySource replay(reader, &sink);
    QCOMPARE(replay.speed(), 1.0);
    for (double bad : {0.0, 0.05, 50.5, -1.0, std::numeric_limits<double>::quiet_NaN()})
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, replay.setSpeed(bad));

    std::int64_t p = replay.position();
    replay.setSpeed(4);
    replay.advance(kMs);
    QCOMPARE(replay.position(), p + 4 * kMs);
    p = replay.position();
    replay.setSpeed(50);
    replay.advance(kMs / 10);
    QCOMPARE(replay.position(), p + 5 * kMs);
    // 0.1x: ten advances of 1 us move 1 us in all (fractions carry over).
    p = replay.position();
    replay.setSpeed(0.1);
    for (int i = 0; i < 10; ++i)
        replay.advance(1000);
    QCOMPARE(replay.position(), p + 1000);
    // What was emitted is still exactly the events up to the position.
    QVERIFY(sinkHasExactly(sink, run, kMin, replay.position()));
}

void TestSession::replaySeeks()
{
    const SyntheticRun run = makeRun();
    const SessionReader reader(record(m_dir.path(), run, "seek.smolrec"));
    CollectingSink sink;
    ReplaySource replay(reader, &sink);

    // seek() emits only state to rebuild from: each node's newest step
    // peaks and memory sample and every metric up to t.
    const std::int64_t t = stepStartNs(3) + 500'000;
    replay.seek(t);
    QCOMPARE(replay.position(), t);
    QVERIFY(sink.frames.empty() && sink.spans.empty() && sink.logs.empty() && sink.tensors.empty());
    QCOMPARE(sink.memory.size(), std::size_t(6));
    for (const MemorySample &m : sink.memory)
        QCOMPARE(m.step, std::int64_t(2)); // step 2's, taken at its end
    QVERIFY(sameRecords(sink.metrics, inWindow(run.metrics, kMin, t)));
    sink.clear();
    replay.advance(2 * kMs);
    QVERIFY(sinkHasExactly(sink, run, t, t + 2 * kMs));

    // seekToStep lands just before the step's first event: no earlier step's
    // span follows, and step 4's first Step span is the next one emitted.
    QVERIFY(replay.seekToStep(4));
    QCOMPARE(replay.position(), stepStartNs(4) - 1);
    sink.clear();
    replay.advance(12 * kMs);
    const auto firstStep = std::find_if(sink.spans.begin(), sink.spans.end(),
                                        [](const SpanEvent &s) { return s.kind == SpanEvent::Kind::Step; });
    QVERIFY(firstStep != sink.spans.end());
    QCOMPARE(firstStep->step, std::int64_t(4));
    for (const SpanEvent &s : sink.spans)
        QVERIFY(s.step >= 4);
    QVERIFY(!replay.seekToStep(42));

    // Seeking is clamped to the recording.
    replay.seek(kMin);
    QCOMPARE(replay.position(), replay.begin() - 1);
    replay.seek(kMax);
    QVERIFY(replay.atEnd());
}

void TestSession::replayCollectiveNavigation()
{
    const SyntheticRun run = makeRun();
    const SessionReader reader(record(m_dir.path(), run, "navigate.smolrec"));
    // Each collective starts on node 0 first (nodes are 10 us apart).
    std::vector<std::int64_t> starts;
    for (const SpanEvent &s : run.spans) {
        if (s.kind == SpanEvent::Kind::Collective && s.node == 0)
            starts.push_back(s.startNs);
    }
    std::sort(starts.begin(), starts.end());
    const auto boundaries = reader.collectives();
    QCOMPARE(boundaries.size(), starts.size());
    for (std::size_t i = 0; i < starts.size(); ++i) {
        QCOMPARE(boundaries[i].startNs, starts[i]);
        QCOMPARE(boundaries[i].seq, std::uint64_t(i));
        QCOMPARE(boundaries[i].endNs, starts[i] + 20'000 + 1'400'000);
    }

    CollectingSink sink;
    ReplaySource replay(reader, &sink);
    for (std::int64_t start : starts) {
        QVERIFY(replay.nextCollective());
        QCOMPARE(replay.position(), start - 1);
    }
    QVERIFY(!replay.nextCollective());
    for (auto it = starts.rbegin() + 1; it != starts.rend(); ++it) {
        QVERIFY(replay.previousCollective());
        QCOMPARE(replay.position(), *it - 1);
    }
    QVERIFY(!replay.previousCollective());

    // From inside collective 3, previous goes to its start, then to 2's.
    replay.seek(starts[3] + 100'000);
    QVERIFY(replay.previousCollective());
    QCOMPARE(replay.position(), starts[3] - 1);
    QVERIFY(replay.previousCollective());
    QCOMPARE(replay.position(), starts[2] - 1);
    // And the first collective span that plays is that collective's.
    sink.clear();
    replay.advance(2 * kMs);
    const auto first = std::find_if(sink.spans.begin(), sink.spans.end(),
                                    [](const SpanEvent &s) { return s.kind == SpanEvent::Kind::Collective; });
    QVERIFY(first != sink.spans.end());
    QCOMPARE(first->seq, std::uint64_t(2));
}

void TestSession::replayPlaysInRealTime()
{
    const SyntheticRun run = makeRun();
    const SessionReader reader(record(m_dir.path(), run, "play.smolrec"));
    CollectingSink sink;
    ReplaySource replay(reader, &sink);

    // 0.1x: ~200 ms of wall time plays ~20 ms of recording; pause holds.
    replay.setSpeed(0.1);
    replay.play();
    QVERIFY(replay.isPlaying());
    QThread::msleep(200);
    replay.pause();
    QThread::msleep(50); // a tick in flight lands
    const std::int64_t held = replay.position();
    QVERIFY(held > replay.begin() && held < replay.begin() + 60 * kMs);
    QThread::msleep(100);
    QCOMPARE(replay.position(), held);

    // 50x to the end: everything, once, in order.
    replay.setSpeed(50);
    replay.play();
    QTRY_VERIFY_WITH_TIMEOUT(!replay.isPlaying(), 10000);
    QVERIFY(replay.atEnd());
    QVERIFY(replay.error().empty());
    QCOMPARE(sink.size(), run.size());
    QVERIFY(inTimeOrder(sink));
    QVERIFY(sinkHasExactly(sink, run, kMin, kMax));
    replay.play(); // at the end: nothing to do
    QVERIFY(!replay.isPlaying());
}

void TestSession::badFiles_data()
{
    QTest::addColumn<QString>("kind");
    QTest::addColumn<QString>("expected");
    QTest::newRow("missing") << "missing"
                             << "no such file";
    QTest::newRow("empty") << "empty"
                           << "empty file";
    QTest::newRow("text") << "text"
                          << "not an SQLite database";
    QTest::newRow("foreign SQLite") << "foreign"
                                    << "not a smolcluster session";
    QTest::newRow("newer schema") << "newer"
                                  << QString("schema version %1 is newer than this build reads (%2)")
                                         .arg(kSessionSchemaVersion + 1)
                                         .arg(kSessionSchemaVersion);
    QTest::newRow("table missing") << "no-frames"
                                   << "table 'frames' is missing";
    QTest::newRow("directory") << "directory"
                               << "not a file";
}

void TestSession::badFiles()
{
    QFETCH(QString, kind);
    QFETCH(QString, expected);
    const QString path = m_dir.path() + QStringLiteral("/bad-") + kind;
    auto sql = [&](const QStringList &statements) {
        const QString name = QStringLiteral("tst-bad-") + kind;
        {
            QSqlDatabase db = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), name);
            db.setDatabaseName(path);
            QVERIFY(db.open());
            QSqlQuery q(db);
            for (const QString &s : statements)
                QVERIFY2(q.exec(s), qPrintable(s));
        }
        QSqlDatabase::removeDatabase(name);
    };
    if (kind == "empty") {
        QFile f(path);
        QVERIFY(f.open(QIODevice::WriteOnly));
    } else if (kind == "text") {
        QFile f(path);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("step,loss\n1,2.3\n2,2.1\n");
    } else if (kind == "foreign") {
        sql({"CREATE TABLE songs (title TEXT, seconds INTEGER)", "INSERT INTO songs VALUES ('a', 3)"});
    } else if (kind == "newer" || kind == "no-frames") {
        QFile::remove(path);
        QVERIFY(QFile::copy(record(m_dir.path(), makeRun(2, 2), qPrintable("src-" + kind)), path));
        sql({kind == "newer" ? QStringLiteral("UPDATE meta SET value = %1 WHERE key = 'schema_version'")
                                   .arg(kSessionSchemaVersion + 1)
                             : QStringLiteral("DROP TABLE frames")});
    } else if (kind == "directory") {
        QVERIFY(QDir().mkpath(path));
    }
    try {
        const SessionReader reader(path);
        QFAIL("opened a bad file");
    } catch (const SessionError &e) {
        const QString what = QString::fromUtf8(e.what());
        QVERIFY2(what.startsWith(path + ": ") && what.contains(expected) && !what.contains('\n'), e.what());
    }
}

// Version 2 added the collective boundary to memory samples; a version-1
// file (no such columns) still opens, its memory samples at step ends.
void TestSession::readsVersion1Files()
{
    const QString path = record(m_dir.path(), makeRun(2, 3), "v1", /*version=*/3); // unpacked rows
    {
        QSqlDatabase db = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), QStringLiteral("tst-v1"));
        db.setDatabaseName(path);
        QVERIFY(db.open());
        QSqlQuery q(db);
        for (const char *s : {"ALTER TABLE memory DROP COLUMN step_peak", "ALTER TABLE memory DROP COLUMN collective",
                              "ALTER TABLE memory DROP COLUMN seq", "ALTER TABLE memory DROP COLUMN before",
                              "UPDATE meta SET value = 1 WHERE key = 'schema_version'"})
            QVERIFY2(q.exec(QString::fromLatin1(s)), s);
        q.finish();
        db.close();
    }
    QSqlDatabase::removeDatabase(QStringLiteral("tst-v1"));
    const SessionReader reader(path);
    QCOMPARE(reader.schemaVersion(), 1);
    std::vector<MemorySample> all;
    reader.forEachMemory([&](const MemorySample &m) { all.push_back(m); });
    QVERIFY(!all.empty());
    for (const MemorySample &m : all)
        QCOMPARE(m.collective, net::CollectiveKind::None);
    QCOMPARE(reader.info().memory, std::uint64_t(all.size()));
    QCOMPARE(reader.info().memoryAtCollectives, std::uint64_t(0));
}

// A step's peaks are not the memory at its end: "now" (latestMemory, what a
// replay's picture shows after a seek) skips them, latestStepPeaks and a
// seek bring them back, and the figures' "largest" counts them while "held
// at step end" does not.
void TestSession::stepPeaksStandApart()
{
    const SyntheticRun run = makeRun(3, 6);
    const QString path = record(m_dir.path(), run, "peaks.smolrec");
    const SessionReader reader(path);
    QCOMPARE(reader.info().memoryStepPeaks, std::uint64_t(3 * 6));
    const std::int64_t end = stepStartNs(5) + 9 * kMs + 10;
    const std::vector<MemorySample> now = reader.latestMemory(end);
    const std::vector<MemorySample> peaks = reader.latestStepPeaks(end);
    QCOMPARE(now.size(), std::size_t(3));
    QCOMPARE(peaks.size(), std::size_t(3));
    for (int n = 0; n < 3; ++n) {
        QVERIFY(!now[std::size_t(n)].stepPeak);
        QCOMPARE(now[std::size_t(n)].memory.activations, std::int64_t(500 + 5));
        QVERIFY(peaks[std::size_t(n)].stepPeak);
        QCOMPARE(peaks[std::size_t(n)].memory.activations, std::int64_t(7000 + 5));
        QCOMPARE(peaks[std::size_t(n)].step, std::int64_t(5));
    }

    CollectingSink sink;
    ReplaySource replay(reader, &sink);
    replay.seek(end);
    QCOMPARE(sink.memory.size(), std::size_t(6));
    for (std::size_t i = 0; i < sink.memory.size(); ++i) // peaks first: a view's "now" is the end sample
        QCOMPARE(sink.memory[i].stepPeak, i < 3);

    const RunFigures f = measureRun(reader);
    for (int n = 0; n < 3; ++n) {
        const NodeFigures &nf = f.byNode.at(n);
        const double p = 1000.0 * (n + 1);
        QCOMPARE(*nf.activations, 7000.0 + 5);
        QCOMPARE(*nf.heldAtStepEnd, 4 * p);
    }
}

// Files the Qt Sql writer made, from the earlier schema SQL (a fixture
// written here rather than a checked-in binary), read field for field; and
// the present writer, asked for version 3, writes its schema statement for statement.
void TestSession::readsFilesOfTheQtSqlWriter_data()
{
    QTest::addColumn<int>("version");
    QTest::newRow("version 1") << 1;
    QTest::newRow("version 2") << 2;
    QTest::newRow("version 3") << 3;
}

void TestSession::readsFilesOfTheQtSqlWriter()
{
    QFETCH(int, version);
    SyntheticRun run = makeRun(3, 6);
    if (version < 3) // no step peaks before version 3
        run.memory.erase(std::remove_if(run.memory.begin(), run.memory.end(),
                                        [](const MemorySample &m) { return m.stepPeak; }),
                         run.memory.end());
    const QString path = m_dir.path() + QStringLiteral("/qtsql-v%1.smolrec").arg(version);
    writeWithQtSql(path, run, version);
    if (QTest::currentTestFailed())
        return;
    if (version == 1) { // no collective boundary in version 1: samples read as taken at step ends
        for (MemorySample &m : run.memory) {
            m.collective = net::CollectiveKind::None;
            m.seq = 0;
            m.before = false;
        }
    }
    const SessionReader reader(path);
    QCOMPARE(reader.schemaVersion(), version);
    QVERIFY(reader.isComplete());
    QCOMPARE(reader.header().configJson, run.header.configJson);
    QCOMPARE(reader.header().nodeList.size(), run.header.nodeList.size());
    QVERIFY(sameRecords(reader.frames(kMin, kMax), run.frames));
    QVERIFY(sameRecords(reader.spans(kMin, kMax), run.spans));
    QVERIFY(sameRecords(reader.memory(kMin, kMax), run.memory));
    QVERIFY(sameRecords(reader.metrics(kMin, kMax), run.metrics));
    QVERIFY(sameRecords(reader.logs(kMin, kMax), run.logs));
    QVERIFY(sameRecords(reader.tensors(kMin, kMax), run.tensors));
    // Windows without the recorded maxima: the reader measures them.
    const std::int64_t t0 = stepStartNs(2), t1 = stepStartNs(4);
    auto overlaps = [&](std::int64_t start, std::int64_t end) { return end >= t0 && start <= t1; };
    std::vector<SpanEvent> expected;
    for (const SpanEvent &e : run.spans) {
        if (overlaps(e.startNs, e.endNs))
            expected.push_back(e);
    }
    QVERIFY(sameRecords(reader.spans(t0, t1), expected));
    const SessionInfo info = reader.info();
    QCOMPARE(info.events(), std::uint64_t(run.size()));
    QVERIFY(info.complete);

    // The same run through today's recorder: the same records, and (for
    // version 3, which it still writes on request) the same schema.
    const QString now = record(m_dir.path(), run, qPrintable(QStringLiteral("now-v%1.smolrec").arg(version)),
                               version == 3 ? 3 : kSessionSchemaVersion);
    const SessionReader current(now);
    QVERIFY(sameRecords(current.frames(kMin, kMax), reader.frames(kMin, kMax)));
    QVERIFY(sameRecords(current.spans(kMin, kMax), reader.spans(kMin, kMax)));
    QVERIFY(sameRecords(current.metrics(kMin, kMax), reader.metrics(kMin, kMax)));
    if (version == 3) {
        const auto earlier = schemaOf(path), present = schemaOf(now);
        QCOMPARE(present.size(), earlier.size());
        for (const auto &[table, sql] : earlier) {
            QVERIFY2(present.count(table), qPrintable(table));
            QCOMPARE(present.at(table), sql);
        }
    }
}

void TestSession::killedRecorderLosesAtMost250ms()
{
    const QString path = m_dir.path() + QStringLiteral("/killed.smolrec");
    QProcess child;
    child.start(QCoreApplication::applicationFilePath(), {QStringLiteral("--record-child"), path});
    QVERIFY(child.waitForStarted());
    QVERIFY2(child.waitForReadyRead(10000), "the child never started recording");
    QThread::msleep(1500);
    // The child stamps its events with CLOCK_MONOTONIC (net::monotonicNs),
    // which every process on the machine shares: this instant precedes the
    // child's death.
    const std::int64_t killedAt = net::monotonicNs();
    child.kill(); // SIGKILL
    QVERIFY(child.waitForFinished(10000));
    QCOMPARE(child.exitStatus(), QProcess::CrashExit);

    std::int64_t lastAlive = 0;
    for (const QByteArray &line : child.readAllStandardOutput().split('\n')) {
        if (line.startsWith("alive "))
            lastAlive = line.mid(6).toLongLong();
    }
    QVERIFY(lastAlive > 0);

    const SessionReader reader(path);
    const SessionInfo info = reader.info();
    QVERIFY(!info.complete);
    const std::int64_t newest = info.lastEventNs;
    qInfo("kill -9: newest recorded event %.1f ms before the child's last 'alive' line, %.1f ms before the "
          "kill "
          "(last 'alive' %.1f ms before the kill); %llu events recorded",
          double(lastAlive - newest) / kMs, double(killedAt - newest) / kMs,
          double(killedAt - lastAlive) / kMs, static_cast<unsigned long long>(info.events()));
    QVERIFY(info.framesSend > 10000);
    // The child really was recording until the kill: it prints every 10 ms;
    // 100 ms leaves room for a descheduled child on 2 busy cores.
    QVERIFY(killedAt - lastAlive <= 100 * kMs);
    // At most 250 ms lost, measured both from the child's own last word and
    // from the kill itself (no margin needed: killedAt is before the death).
    QVERIFY(lastAlive - newest <= 250 * kMs);
    QVERIFY(killedAt - newest <= 250 * kMs);
    // The interrupted file reads end to end.
    exercise(path, m_dir.path());
}

void TestSession::damagedFilesNeverCrash()
{
    // SMOL_FUZZ_SEED=N explores other cases.
    const quint32 seed = qEnvironmentVariableIsSet("SMOL_FUZZ_SEED")
                             ? quint32(qEnvironmentVariableIntValue("SMOL_FUZZ_SEED"))
                             : 20240611u;
    // Two sources: a live copy, taken while the recorder is open, with the
    // first part of the run checkpointed into the database file and the
    // rest in the -wal; and the finished, fully checkpointed file.
    const QString work = m_dir.path() + QStringLiteral("/fuzz");
    QVERIFY(QDir().mkpath(work));
    const SyntheticRun run = makeRun(3, 8);
    const SyntheticRun more = makeRun(3, 3);
    const QString live = work + QStringLiteral("/live.smolrec");
    const QString done = work + QStringLiteral("/done.smolrec");
    {
        SessionRecorder recorder(done, run.header);
        run.feed(recorder);
        QTRY_COMPARE_WITH_TIMEOUT(recorder.eventsWritten(), std::uint64_t(run.size()), 5000);
        {
            QSqlDatabase db =
                QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), QStringLiteral("tst-checkpoint"));
            db.setDatabaseName(done);
            QVERIFY(db.open());
            QSqlQuery q(db);
            QVERIFY(q.exec(QStringLiteral("PRAGMA wal_checkpoint(TRUNCATE)")) && q.next());
            QCOMPARE(q.value(0).toInt(), 0); // not busy
        }
        QSqlDatabase::removeDatabase(QStringLiteral("tst-checkpoint"));
        more.feed(recorder);
        QTRY_COMPARE_WITH_TIMEOUT(recorder.eventsWritten(), std::uint64_t(run.size() + more.size()), 5000);
        QVERIFY(copyFile(done, live));
        QVERIFY(copyFile(done + "-wal", live + "-wal"));
        recorder.finish(0.5, run.endNs);
    }
    qInfo("seed %u; sources: live copy %lld + %lld (-wal) bytes, finished file %lld bytes", seed,
          QFileInfo(live).size(), QFileInfo(live + "-wal").size(), QFileInfo(done).size());
    QVERIFY(QFileInfo(live).size() > 16384);
    QVERIFY(QFileInfo(live + "-wal").size() > 0);
    QVERIFY(!QFileInfo::exists(done + "-wal") || QFileInfo(done + "-wal").size() == 0);
    exercise(live, work); // both sources are whole
    exercise(done, work);

    QRandomGenerator random(seed);
    Watchdog watchdog(std::chrono::seconds(30));
    std::map<QString, int> outcomes;
    const QString target = work + QStringLiteral("/case.smolrec");
    for (int c = 0; c < 400; ++c) {
        const bool flip = c >= 200;
        // Source and which file is damaged: the db with its -wal, the db
        // alone (wal dropped), the -wal, or the finished db.
        const int variant = c % 4;
        const QString source = variant == 3 ? done : live;
        QFile::remove(target + "-wal");
        QFile::remove(target + "-shm");
        QVERIFY(copyFile(source, target));
        if (variant != 1 && variant != 3)
            QVERIFY(copyFile(live + "-wal", target + "-wal"));
        const QString damaged = variant == 2 ? target + "-wal" : target;
        QFile file(damaged);
        QVERIFY(file.open(QIODevice::ReadWrite));
        const qint64 size = file.size();
        QVERIFY(size > 0);
        const qint64 offset = qint64(random.bounded(quint64(size)));
        QString name;
        if (flip) {
            QVERIFY(file.seek(offset));
            char byte = 0;
            QVERIFY(file.getChar(&byte));
            const char flipped = char(byte ^ char(1 + random.bounded(255)));
            QVERIFY(file.seek(offset));
            QVERIFY(file.putChar(flipped));
            name = QStringLiteral("flip %1 at %2 of %3")
                       .arg(variant)
                       .arg(offset)
                       .arg(QFileInfo(damaged).fileName());
        } else {
            QVERIFY(file.resize(offset));
            name = QStringLiteral("truncate %1 to %2 of %3")
                       .arg(variant)
                       .arg(offset)
                       .arg(QFileInfo(damaged).fileName());
        }
        file.close();

        watchdog.start(name.toStdString());
        try {
            exercise(target, work);
            ++outcomes[QStringLiteral("read")];
        } catch (const SessionError &e) {
            QVERIFY2(!QByteArray(e.what()).contains('\n'), e.what());
            QVERIFY2(QByteArray(e.what()).size() < 400, e.what());
            ++outcomes[QString::fromUtf8(e.what()).section(QStringLiteral(": "), 1, 1).left(40)];
        } catch (const std::exception &e) {
            QFAIL(qPrintable(
                QStringLiteral("%1: not a SessionError: %2").arg(name, QString::fromUtf8(e.what()))));
        }
    }
    watchdog.start({});
    for (const auto &[what, count] : outcomes)
        qInfo("%4d x %s", count, qPrintable(what));
    QVERIFY(outcomes.size() > 1); // some read, some failed: the damage was real
}

void TestSession::throughput()
{
    // 1M frame events from one producer thread, as fast as it can queue
    // them: 40k events per second of recording (25 us apart) over 25 s, a
    // ring of 4 nodes, send and receive sides alternating.
    const int kEvents = 1'000'000;
    const std::int64_t kGap = 25'000;
    const std::int64_t kFlight = 10'000;
    const std::int64_t start = 5'000 * kMs;
    const QString path = m_dir.path() + QStringLiteral("/million.smolrec");
    SessionHeader h;
    h.strategy = "ddp";
    h.model = "gpt";
    h.nodes = 4;
    h.steps = 1000;
    h.startNs = start;
    QElapsedTimer timer;
    double queueSeconds = 0;
    {
        SessionRecorder recorder(path, h);
        timer.start();
        for (int i = 0; i < kEvents; ++i) {
            net::FrameEvent e;
            e.side = i % 2 ? net::FrameEvent::Side::Receive : net::FrameEvent::Side::Send;
            e.src = (i / 2) % 4;
            e.dst = (e.src + 1) % 4;
            e.bytes = 65536;
            e.kind = net::CollectiveKind::AllReduce;
            e.seq = std::uint64_t(i / 128); // a send and its receive share seq and tag
            e.tag = std::uint32_t(i / 2 % 64);
            const std::int64_t t = start + i * kGap;
            e.sendStartNs = t - kFlight;
            (i % 2 ? e.recvCompleteNs : e.sendCompleteNs) = t;
            recorder.onFrame(e);
        }
        queueSeconds = timer.nsecsElapsed() / 1e9;
        recorder.finish(std::nullopt, start + kEvents * kGap);
        QCOMPARE(recorder.eventsWritten(), std::uint64_t(kEvents));
    }
    const double writeSeconds = timer.nsecsElapsed() / 1e9;
    qInfo("recorded %d frame events: queued in %.3f s (%.0f events/s on the producer), written and committed "
          "in "
          "%.3f s: %.0f events/s end to end",
          kEvents, queueSeconds, kEvents / queueSeconds, writeSeconds, kEvents / writeSeconds);

    timer.start();
    const SessionReader reader(path);
    const double openMs = timer.nsecsElapsed() / 1e6;
    QRandomGenerator random(7);
    std::vector<double> ms;
    for (int w = 0; w < 20; ++w) {
        const std::int64_t t0 = start + std::int64_t(random.bounded(24'000)) * kMs;
        const std::int64_t t1 = t0 + 1000 * kMs;
        timer.start();
        const auto frames = reader.frames(t0, t1);
        ms.push_back(timer.nsecsElapsed() / 1e6);
        // Event i (time start + i * gap) overlaps [t0, t1] iff its time is in [t0, t1 + flight].
        const std::int64_t first = (t0 - start + kGap - 1) / kGap;
        const std::int64_t last = (t1 + kFlight - start) / kGap;
        QCOMPARE(std::int64_t(frames.size()), last - first + 1);
    }
    std::sort(ms.begin(), ms.end());
    qInfo("1M-event file: opened in %.1f ms; a 1 s window (~40k frames) read in %.1f ms median, %.1f ms max "
          "(20 random windows)",
          openMs, ms[ms.size() / 2], ms.back());

    timer.start();
    const SessionInfo info = reader.info();
    const double infoMs = timer.nsecsElapsed() / 1e6;
    QCOMPARE(info.framesSend, std::uint64_t(kEvents / 2));
    const QString trace = m_dir.path() + QStringLiteral("/million.json");
    timer.start();
    exportChromeTrace(reader, trace);
    qInfo("1M-event file: info() in %.0f ms, Chrome trace export in %.0f ms (%.0f MB)", infoMs,
          timer.nsecsElapsed() / 1e6, QFileInfo(trace).size() / 1e6);
    QFile::remove(trace);
    QFile::remove(path);
}

int main(int argc, char **argv)
{
    QCoreApplication app(argc, argv);
    if (argc == 3 && std::strcmp(argv[1], "--record-child") == 0)
        return recordUntilKilled(QString::fromLocal8Bit(argv[2]));
    TestSession test;
    QTEST_SET_MAIN_SOURCE_PATH
    return QTest::qExec(&test, argc, argv);
}

#include "tst_session.moc"
