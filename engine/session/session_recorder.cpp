// SessionRecorder: queue on the callers' threads, SQL on one writer thread.
//
// The writer thread opens the file with SQLite's own API (the sqlite3
// handle, no Qt Sql: Qt binds every value through a QVariant and formats a
// placeholder name per value, which held the writer at ~300-700k rows/s on
// this machine; the same statements through sqlite3_bind_* reach ~1.4M),
// writes the schema and the header, then loops: wait until the commit
// interval has passed or a batch's worth of rows is queued, swap the queue
// for an empty one (the old buffers keep their capacity and come back next
// time), and write the batch in one transaction. Each table's INSERT is a
// statement of 32 rows prepared once and reused (one VDBE run per 32 rows),
// plus a 1-row one for the tail.
#include "session_recorder.h"

#include "event_rows.h"
#include "event_slices.h"

#include <QDateTime>
#include <QFile>
#include <QFileInfo>

#include <sqlite3.h>

#include <algorithm>
#include <array>
#include <memory>

#include <pthread.h>
#include <sched.h>

namespace smol::engine {

namespace {

constexpr int kRowsPerStatement = 32;

// Schema version 1 (docs/session-format.md). Events are indexed on the time
// they happen (t, or t_end for frames and spans: a frame or span is known
// when it ends); spans also by (kind, t_start) for windows and collective
// navigation, and by step. Frames, the bulk of a file, are stored clustered
// by (t_end, id) instead of a rowid table plus an index: one B-tree to
// insert into, and a window is one contiguous range (measured: ~12% faster
// writes, ~10% faster window reads).
const char *const kSchema[] = {
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
    "CREATE TABLE memory (id INTEGER PRIMARY KEY, t INTEGER NOT NULL, node INTEGER NOT NULL,"
    " step INTEGER NOT NULL, params INTEGER NOT NULL, grads INTEGER NOT NULL, optimizer INTEGER NOT NULL,"
    " activations INTEGER NOT NULL, comm INTEGER NOT NULL, live INTEGER NOT NULL, peak INTEGER NOT NULL,"
    " collective INTEGER NOT NULL DEFAULT 0, seq INTEGER NOT NULL DEFAULT 0, before INTEGER NOT NULL DEFAULT "
    "0, step_peak INTEGER NOT NULL DEFAULT 0)",
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

// Version 4 adds the packed slices (event_slices.h): frames, spans and memory
// samples go there and their version-1 tables stay empty. A slice is found by
// its largest event time (windows, replay) or its smallest start (the whole
// file in order, streamed).
const char *const kSliceSchema[] = {
    "CREATE TABLE frame_slices (id INTEGER PRIMARY KEY, t_min INTEGER NOT NULL, t_max INTEGER NOT NULL,"
    " t_start_min INTEGER NOT NULL, count INTEGER NOT NULL, events BLOB NOT NULL)",
    "CREATE INDEX frame_slices_by_max ON frame_slices (t_max)",
    "CREATE INDEX frame_slices_by_start ON frame_slices (t_start_min)",
    "CREATE TABLE span_slices (id INTEGER PRIMARY KEY, t_min INTEGER NOT NULL, t_max INTEGER NOT NULL,"
    " t_start_min INTEGER NOT NULL, count INTEGER NOT NULL, events BLOB NOT NULL)",
    "CREATE INDEX span_slices_by_max ON span_slices (t_max)",
    "CREATE INDEX span_slices_by_start ON span_slices (t_start_min)",
    "CREATE TABLE memory_slices (id INTEGER PRIMARY KEY, t_min INTEGER NOT NULL, t_max INTEGER NOT NULL,"
    " t_start_min INTEGER NOT NULL, count INTEGER NOT NULL, events BLOB NOT NULL)",
    "CREATE INDEX memory_slices_by_max ON memory_slices (t_max)",
    "CREATE INDEX memory_slices_by_start ON memory_slices (t_start_min)",
};

// One prepared statement, reset after each run; binds are 1-based and run
// in order through bind().
class Statement {
public:
    Statement(sqlite3 *db, const std::string &sql)
        : m_db(db)
    {
        if (sqlite3_prepare_v3(db, sql.c_str(), int(sql.size()), SQLITE_PREPARE_PERSISTENT, &m_stmt,
                               nullptr) != SQLITE_OK)
            throw SessionError("cannot prepare " + sql.substr(0, sql.find(" (")) + ": " + sqlite3_errmsg(db));
    }
    ~Statement() { sqlite3_finalize(m_stmt); }
    Statement(const Statement &) = delete;
    Statement &operator=(const Statement &) = delete;

    void i64(std::int64_t v) { check(sqlite3_bind_int64(m_stmt, ++m_next, v)); }
    // Unsigned 64-bit values are stored as their two's-complement int64
    // (the format Qt Sql wrote and the reader reads).
    void u64(std::uint64_t v) { i64(std::int64_t(v)); }
    void f64(double v) { check(sqlite3_bind_double(m_stmt, ++m_next, v)); } // NaN is stored as NULL
    // The text and blob must outlive run(): they are bound without a copy.
    void text(const std::string &s)
    {
        check(sqlite3_bind_text(m_stmt, ++m_next, s.data(), int(s.size()), SQLITE_STATIC));
    }
    void bytes(const std::string &b)
    {
        check(sqlite3_bind_blob64(m_stmt, ++m_next, b.data(), b.size(), SQLITE_STATIC));
    }
    void blob(const QByteArray &b) // a null QByteArray is NULL, as Qt Sql stored it
    {
        check(b.isNull() ? sqlite3_bind_null(m_stmt, ++m_next)
                         : sqlite3_bind_blob(m_stmt, ++m_next, b.constData(), int(b.size()), SQLITE_STATIC));
    }

    void run(const char *what)
    {
        m_next = 0;
        const int rc = sqlite3_step(m_stmt);
        sqlite3_reset(m_stmt);
        if (rc != SQLITE_DONE)
            throw SessionError(std::string(what) + ": " + sqlite3_errmsg(m_db));
    }

private:
    void check(int rc)
    {
        if (rc != SQLITE_OK)
            throw SessionError(std::string("cannot bind a value: ") + sqlite3_errmsg(m_db));
    }

    sqlite3 *m_db;
    sqlite3_stmt *m_stmt = nullptr;
    int m_next = 0;
};

// A row of an event table as a statement's parameters: the writing side of
// event_rows.h's walks, each call binding the next parameter.
struct RowWriter {
    Statement &s;
    void i64(std::int64_t v) { s.i64(v); }
    void u64(std::uint64_t v) { s.u64(v); }
    void f64(double v) { s.f64(v); }
    void text(const std::string &v) { s.text(v); }
    void blob(const QByteArray &v) { s.blob(v); }
    void flag(bool v) { s.i64(v ? 1 : 0); }
    void rank(int v) { s.i64(v); }
    void collective(net::CollectiveKind v) { s.i64(int(v)); }
    void anyKind(net::CollectiveKind v) { s.i64(int(v)); }
    void spanKind(SpanEvent::Kind v) { s.i64(int(v)); }
    void side(net::FrameEvent::Side v) { s.i64(int(v)); }
    void tag(std::uint32_t v) { s.i64(v); }
};

// One table's INSERT: a 32-row statement for the bulk, a 1-row one for the
// tail, both prepared once.
class BulkInsert {
public:
    BulkInsert(sqlite3 *db, const char *table, const char *columns)
    {
        const std::string head = std::string("INSERT INTO ") + table + " (" + columns + ") VALUES ";
        std::string row = "(?";
        for (const char *c = columns; *c; ++c)
            row += *c == ',' ? ",?" : "";
        row += ")";
        std::string many = head;
        for (int r = 0; r < kRowsPerStatement; ++r)
            many += (r ? "," : "") + row;
        m_many = std::make_unique<Statement>(db, many);
        m_one = std::make_unique<Statement>(db, head + row);
        m_what = std::string("insert into ") + table + " failed";
    }

    // bind(event, RowWriter &) binds one row's values in column order; by
    // default the event's walk (event_rows.h).
    template <class Event, class Bind> void insert(const std::vector<Event> &events, Bind bind)
    {
        RowWriter many{*m_many}, one{*m_one};
        std::size_t i = 0;
        for (; i + kRowsPerStatement <= events.size(); i += kRowsPerStatement) {
            for (std::size_t r = 0; r < std::size_t(kRowsPerStatement); ++r)
                bind(events[i + r], many);
            m_many->run(m_what.c_str());
        }
        for (; i < events.size(); ++i) {
            bind(events[i], one);
            m_one->run(m_what.c_str());
        }
    }
    template <class Event> void insert(const std::vector<Event> &events)
    {
        insert(events, [](const Event &e, RowWriter &w) { EventRows::row(w, e); });
    }

private:
    std::unique_ptr<Statement> m_many, m_one;
    std::string m_what;
};

// One slice table's INSERT (version 4): a batch's events of one kind, in
// event-time order (ties in arrival order), cut into slices of at most
// kSliceNs of event time and kSliceEvents events, one row each.
class SliceInsert {
public:
    SliceInsert(sqlite3 *db, const char *table)
        : m_stmt(db, std::string("INSERT INTO ") + table + " (" + EventSlices::kColumns +
                         ") VALUES (?, ?, ?, ?, ?)")
        , m_what(std::string("insert into ") + table + " failed")
    {
    }

    // Returns the largest t_max - t_min written.
    template <class Event> std::int64_t insert(const std::vector<Event> &events)
    {
        m_order.resize(events.size());
        for (std::size_t i = 0; i < events.size(); ++i)
            m_order[i] = {eventTimeNs(events[i]), i};
        std::sort(m_order.begin(), m_order.end()); // (time, arrival): a stable sort by time
        std::int64_t extent = 0;
        for (std::size_t first = 0; first < m_order.size();) {
            const std::int64_t tMin = m_order[first].first;
            std::size_t last = first; // one past the slice
            std::int64_t startMin = tMin;
            m_blob.clear();
            for (; last < m_order.size() && last - first < EventSlices::kSliceEvents &&
                   m_order[last].first - tMin < EventSlices::kSliceNs;
                 ++last) {
                const Event &e = events[m_order[last].second];
                startMin = std::min(startMin, startTimeNs(e));
                EventSlices::append(m_blob, e);
            }
            const std::int64_t tMax = m_order[last - 1].first;
            m_stmt.i64(tMin);
            m_stmt.i64(tMax);
            m_stmt.i64(startMin);
            m_stmt.i64(std::int64_t(last - first));
            m_stmt.bytes(m_blob);
            m_stmt.run(m_what.c_str());
            extent = std::max(extent, tMax - tMin);
            first = last;
        }
        return extent;
    }

private:
    Statement m_stmt;
    std::string m_what;
    std::vector<std::pair<std::int64_t, std::size_t>> m_order;
    std::string m_blob;
};

} // namespace

// The writer thread's side: the connection, its statements, and the running
// maxima of span and frame durations that window queries rely on.
class SessionWriter {
public:
    explicit SessionWriter(const QString &path)
    {
        const QByteArray file = QFile::encodeName(path);
        // NOMUTEX: the connection is used by this thread only.
        const int rc =
            sqlite3_open_v2(file.constData(), &m_db,
                            SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
        if (rc != SQLITE_OK) {
            const std::string reason = m_db ? sqlite3_errmsg(m_db) : sqlite3_errstr(rc);
            sqlite3_close(m_db);
            m_db = nullptr;
            throw SessionError("cannot create: " + reason);
        }
        exec("PRAGMA journal_mode=WAL");
        exec("PRAGMA synchronous=NORMAL");
        exec("PRAGMA application_id=0x534D4F4C"); // "SMOL"
        exec("PRAGMA cache_size=-16384");         // 16 MiB: index pages stay hot
    }

    ~SessionWriter()
    {
        m_frames.reset();
        m_spans.reset();
        m_memory.reset();
        m_metrics.reset();
        m_logs.reset();
        m_tensors.reset();
        m_frameSlices.reset();
        m_spanSlices.reset();
        m_memorySlices.reset();
        m_meta.reset();
        m_begin.reset();
        m_commit.reset();
        sqlite3_close(m_db); // the last connection: checkpoints the WAL into the file and removes it
    }

    SessionWriter(const SessionWriter &) = delete;
    SessionWriter &operator=(const SessionWriter &) = delete;

    void createSchema(const SessionHeader &h, int version)
    {
        m_packed = version >= 4;
        exec("BEGIN");
        for (const char *statement : kSchema)
            exec(statement);
        if (m_packed) {
            for (const char *statement : kSliceSchema)
                exec(statement);
        }
        prepareStatements();
        setMeta("format", std::string("smolcluster-session"));
        setMeta("schema_version", std::int64_t(version));
        setMeta("created_utc", QDateTime::currentDateTimeUtc().toString(Qt::ISODate).toStdString());

        Statement run(m_db, "INSERT INTO run (id, strategy, model, nodes, steps, start_ns, config_json,"
                            " placement_json) VALUES (1, ?, ?, ?, ?, ?, ?, ?)");
        run.text(h.strategy);
        run.text(h.model);
        run.i64(h.nodes);
        run.i64(h.steps);
        run.i64(h.startNs);
        run.blob(h.configJson);
        run.blob(h.placementJson);
        run.run("writing the header");

        Statement node(m_db, "INSERT INTO nodes (rank, name, host, role) VALUES (?, ?, ?, ?)");
        for (const SessionNode &n : h.nodeList) {
            node.i64(n.rank);
            node.text(n.name);
            node.text(n.host);
            node.text(n.role);
            node.run("writing the node list");
        }
        exec("COMMIT");
    }

    void write(const SessionRecorder::Batch &b)
    {
        m_begin->run("cannot begin a transaction");
        for (const net::FrameEvent &e : b.frames)
            m_maxFrameNs = std::max(m_maxFrameNs, eventTimeNs(e) - e.sendStartNs);
        for (const SpanEvent &e : b.spans) {
            auto &max = m_maxSpanNs[std::size_t(std::clamp(int(e.kind), 0, SpanEvent::kKinds - 1))];
            max = std::max(max, e.endNs - e.startNs);
        }
        if (m_packed) {
            m_maxSliceNs = std::max({m_maxSliceNs, m_frameSlices->insert(b.frames),
                                     m_spanSlices->insert(b.spans), m_memorySlices->insert(b.memory)});
        } else {
            m_frames->insert(b.frames, [this](const net::FrameEvent &e, RowWriter &w) {
                std::int64_t end = eventTimeNs(e), id = ++m_frameId;
                EventRows::frame(w, e, end, id);
            });
            m_spans->insert(b.spans);
            m_memory->insert(b.memory);
        }
        m_metrics->insert(b.metrics);
        m_logs->insert(b.logs);
        m_tensors->insert(b.tensors);
        // The maxima travel in the same transaction as the rows they cover,
        // so an interrupted file is consistent too.
        if (m_maxFrameNs != m_writtenMaxFrameNs) {
            setMeta("max_frame_ns", m_maxFrameNs);
            m_writtenMaxFrameNs = m_maxFrameNs;
        }
        if (m_packed && m_maxSliceNs != m_writtenMaxSliceNs) {
            setMeta("max_slice_ns", m_maxSliceNs);
            m_writtenMaxSliceNs = m_maxSliceNs;
        }
        for (int k = 0; k < SpanEvent::kKinds; ++k) {
            if (m_maxSpanNs[std::size_t(k)] != m_writtenMaxSpanNs[std::size_t(k)]) {
                setMeta(std::string("max_span_ns.") + spanKindName(SpanEvent::Kind(k)),
                        m_maxSpanNs[std::size_t(k)]);
                m_writtenMaxSpanNs[std::size_t(k)] = m_maxSpanNs[std::size_t(k)];
            }
        }
        m_commit->run("commit failed");
    }

    void writeEnd(std::int64_t startNs, const SessionRecorder::End &end, std::uint64_t events)
    {
        m_begin->run("cannot begin a transaction");
        setMeta("end_ns", end.endNs);
        setMeta("duration_ns", end.endNs - startNs);
        setMeta("events_written", std::int64_t(events));
        if (end.finalLoss)
            setMeta("final_loss", *end.finalLoss);
        m_commit->run("commit failed");
    }

private:
    void prepareStatements()
    {
        m_frames = std::make_unique<BulkInsert>(m_db, "frames", EventRows::kFrameColumns);
        m_spans = std::make_unique<BulkInsert>(m_db, "spans", EventRows::kSpanColumns);
        m_memory = std::make_unique<BulkInsert>(m_db, "memory", EventRows::kMemoryColumns);
        m_metrics = std::make_unique<BulkInsert>(m_db, "metrics", EventRows::kMetricColumns);
        m_logs = std::make_unique<BulkInsert>(m_db, "logs", EventRows::kLogColumns);
        m_tensors = std::make_unique<BulkInsert>(m_db, "tensors", EventRows::kTensorColumns);
        if (m_packed) {
            m_frameSlices = std::make_unique<SliceInsert>(m_db, "frame_slices");
            m_spanSlices = std::make_unique<SliceInsert>(m_db, "span_slices");
            m_memorySlices = std::make_unique<SliceInsert>(m_db, "memory_slices");
        }
        m_meta = std::make_unique<Statement>(m_db, "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)");
        m_begin = std::make_unique<Statement>(m_db, "BEGIN");
        m_commit = std::make_unique<Statement>(m_db, "COMMIT");
    }

    void setMeta(const std::string &key, std::int64_t value)
    {
        m_meta->text(key);
        m_meta->i64(value);
        m_meta->run("writing meta");
    }

    void setMeta(const std::string &key, double value)
    {
        m_meta->text(key);
        m_meta->f64(value);
        m_meta->run("writing meta");
    }

    void setMeta(const std::string &key, const std::string &value)
    {
        m_meta->text(key);
        m_meta->text(value);
        m_meta->run("writing meta");
    }

    void exec(const char *sql)
    {
        char *message = nullptr;
        if (sqlite3_exec(m_db, sql, nullptr, nullptr, &message) != SQLITE_OK) {
            const std::string statement(sql);
            std::string reason = message ? message : sqlite3_errmsg(m_db);
            sqlite3_free(message);
            // "CREATE TABLE frames: ..." names the statement without its columns.
            std::size_t words = 0, cut = 0;
            while (cut < statement.size() && words < 3)
                words += statement[cut++] == ' ';
            throw SessionError(statement.substr(0, words == 3 ? cut - 1 : statement.size()) + ": " + reason);
        }
    }

    sqlite3 *m_db = nullptr;
    std::unique_ptr<BulkInsert> m_frames, m_spans, m_memory, m_metrics, m_logs, m_tensors;
    std::unique_ptr<SliceInsert> m_frameSlices, m_spanSlices, m_memorySlices; // version 4 on
    bool m_packed = false;
    std::int64_t m_maxSliceNs = 0, m_writtenMaxSliceNs = -1;
    std::unique_ptr<Statement> m_meta, m_begin, m_commit;
    std::int64_t m_frameId = 0; // frames have no rowid: ids in arrival order break ties of t_end
    std::int64_t m_maxFrameNs = 0, m_writtenMaxFrameNs = -1;
    std::array<std::int64_t, SpanEvent::kKinds> m_maxSpanNs{}, m_writtenMaxSpanNs{-1, -1, -1, -1, -1, -1};
};

SessionRecorder::SessionRecorder(const QString &path, const SessionHeader &header, bool overwrite,
                                 int schemaVersion)
    : m_path(path)
    , m_schemaVersion(schemaVersion)
{
    const std::string file = path.toStdString();
    if (schemaVersion != 3 && schemaVersion != kSessionSchemaVersion)
        throw SessionError(file + ": cannot write schema version " + std::to_string(schemaVersion));
    if (QFileInfo::exists(path) && !overwrite)
        throw SessionError(file + ": exists already (refusing to overwrite it)");
    // A stale -wal next to a fresh file would be replayed into it: remove
    // all three.
    for (const QString &suffix : {QString(), QStringLiteral("-wal"), QStringLiteral("-shm")}) {
        if (QFileInfo::exists(path + suffix) && !QFile::remove(path + suffix))
            throw SessionError(file + suffix.toStdString() + ": cannot remove the old file");
    }
    m_queue.frames.reserve(kBatchRows);

    std::promise<void> ready;
    std::future<void> started = ready.get_future();
    m_writer = std::thread([this, &header, &ready] { writerMain(header, &ready); });
    try {
        started.get();
    } catch (...) {
        m_writer.join();
        m_finished = true;
        throw;
    }
}

SessionRecorder::~SessionRecorder()
{
    try {
        close();
    } catch (const SessionError &) {
        // Reported through error() while the recorder lived; nothing to add.
    }
}

namespace {
constexpr std::int64_t kBoostAfterNs = 120'000'000; // commits are due every 100 ms

void setWriterPriority(std::thread::native_handle_type thread, bool idle)
{
    sched_param p{};
    ::pthread_setschedparam(thread, idle ? SCHED_IDLE : SCHED_OTHER, &p);
}
} // namespace

template <class T> void SessionRecorder::enqueue(std::vector<T> Batch::*queue, const T &event)
{
    bool full = false;
    {
        // The only work under the lock the writer shares: a copy into a
        // vector that keeps its capacity from batch to batch.
        std::lock_guard<std::mutex> lock(m_mutex);
        if (!m_accepting)
            return;
        (m_queue.*queue).push_back(event);
        full = ++m_queued == kBatchRows;
    }
    if (full) {
        // A full batch: the writer is needed now, not at the next idle
        // moment (on a busy machine an idle-priority thread may wait
        // until the 120 ms boost below).
        boostWriter();
        wakeWriter();
    } else if (!m_boosted.load(std::memory_order_relaxed) &&
               net::monotonicNs() - m_lastCommitNs.load(std::memory_order_relaxed) > kBoostAfterNs) {
        boostWriter(); // starved: back to a fair share
    }
}

void SessionRecorder::boostWriter()
{
    std::lock_guard<std::mutex> lock(m_priorityMutex);
    if (!m_boosted.load(std::memory_order_relaxed)) {
        setWriterPriority(m_writer.native_handle(), false);
        m_boosted.store(true, std::memory_order_relaxed);
    }
}

void SessionRecorder::wakeWriter()
{
    {
        std::lock_guard<std::mutex> lock(m_wakeMutex);
        m_kicked = true;
    }
    m_wake.notify_one();
}

void SessionRecorder::onFrame(const net::FrameEvent &event)
{
    enqueue(&Batch::frames, event);
}

void SessionRecorder::onSpan(const SpanEvent &event)
{
    enqueue(&Batch::spans, event);
}

void SessionRecorder::onMemory(const MemorySample &sample)
{
    enqueue(&Batch::memory, sample);
}

void SessionRecorder::onMetric(const MetricSample &sample)
{
    enqueue(&Batch::metrics, sample);
}

void SessionRecorder::onLog(const LogLine &line)
{
    enqueue(&Batch::logs, line);
}

void SessionRecorder::onTensor(const TensorRecord &record)
{
    enqueue(&Batch::tensors, record);
}

void SessionRecorder::finish(std::optional<double> finalLoss, std::optional<std::int64_t> endNs)
{
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        if (m_finished)
            return;
        m_finished = true;
        m_accepting = false;
        m_stopping = true;
        m_end.finalLoss = finalLoss;
        m_end.endNs = endNs ? *endNs : net::monotonicNs();
    }
    boostWriter(); // the caller waits for the writer
    wakeWriter();
    m_writer.join();
    const std::string failure = error();
    if (!failure.empty())
        throw SessionError(m_path.toStdString() + ": " + failure);
}

std::string SessionRecorder::error() const
{
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_error;
}

// Takes the queue, at normal priority while m_mutex is held. A full batch
// waiting (events come faster than a commit interval's worth) or finish()
// waiting on us: the writer stays at normal priority, as idle priority would
// only let the backlog grow.
SessionRecorder::Swap SessionRecorder::swapQueue(Batch &batch)
{
    std::lock_guard<std::mutex> priority(m_priorityMutex);
    const bool wasBoosted = m_boosted.load(std::memory_order_relaxed);
    if (!wasBoosted)
        setWriterPriority(::pthread_self(), false);
    Swap swap;
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        swap.behind = m_stopping || m_queued >= kBatchRows;
        swap.stopping = m_stopping;
        std::swap(batch, m_queue);
        m_queued = 0;
    }
    if (swap.behind)
        m_boosted.store(true, std::memory_order_relaxed);
    else if (!wasBoosted)
        setWriterPriority(::pthread_self(), true);
    return swap;
}

void SessionRecorder::writerMain(const SessionHeader &header, std::promise<void> *ready)
{
    // The writer yields the CPU to training: with a few cores, every burst of
    // SQLite work that preempts a node thread stalls every node waiting on it
    // in a collective. SCHED_IDLE runs it whenever a core would otherwise
    // idle (nodes waiting on the network leave plenty of such moments); when
    // the machine is saturated and commits fall behind, enqueue() raises it
    // to a fair share until it has caught up, and so does the writer itself
    // while a full batch is waiting at each swap (a burst of events faster
    // than idle moments can absorb) or finish() is waiting for it.
    setWriterPriority(::pthread_self(), true);
    m_lastCommitNs = net::monotonicNs();
    std::unique_ptr<SessionWriter> writer;
    try {
        writer = std::make_unique<SessionWriter>(m_path);
        writer->createSchema(header, m_schemaVersion);
    } catch (const SessionError &e) {
        writer.reset();
        ready->set_exception(std::make_exception_ptr(SessionError(m_path.toStdString() + ": " + e.what())));
        return;
    }
    const std::int64_t startNs = header.startNs; // `header` dies with the constructor's frame
    ready->set_value();

    Batch batch;
    batch.frames.reserve(kBatchRows);
    auto deadline = std::chrono::steady_clock::now() + kCommitInterval;
    for (;;) {
        {
            // Waiting takes a mutex of its own: m_mutex is never held by
            // this thread while it is at idle priority, where a busy machine
            // could keep it descheduled with the run's threads blocked on it.
            std::unique_lock<std::mutex> lock(m_wakeMutex);
            m_wake.wait_until(lock, deadline, [this] { return m_kicked; });
            m_kicked = false;
        }
        const Swap swap = swapQueue(batch);
        deadline = std::chrono::steady_clock::now() + kCommitInterval;
        const std::size_t rows = batch.size();
        try {
            if (rows)
                writer->write(batch);
            m_written.fetch_add(rows, std::memory_order_relaxed);
            m_lastCommitNs = net::monotonicNs();
            if (!swap.behind) { // caught up: back to the idle moments
                std::lock_guard<std::mutex> lock(m_priorityMutex);
                if (m_boosted.load(std::memory_order_relaxed)) {
                    setWriterPriority(::pthread_self(), true);
                    m_boosted.store(false, std::memory_order_relaxed);
                }
            }
            if (swap.stopping)
                writer->writeEnd(startNs, m_end, eventsWritten());
        } catch (const SessionError &e) {
            std::lock_guard<std::mutex> lock(m_mutex);
            m_error = e.what();
            m_accepting = false;
            m_queue.clear();
            break;
        }
        batch.clear();
        if (swap.stopping)
            break;
    }
    writer.reset();
}

} // namespace smol::engine
