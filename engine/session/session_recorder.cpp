// SessionRecorder: queue on the callers' threads, SQL on one writer thread.
//
// The writer thread creates the file and its own QSqlDatabase connection
// (a Qt Sql connection is used only on the thread that made it), writes the
// schema and the header, then loops: wait until the commit interval has
// passed or a batch's worth of rows is queued, swap the queue for an empty
// one (the old buffers keep their capacity and come back next time), and
// write the batch in one transaction. Each table's INSERT is a prepared
// statement of 32 rows with named placeholders: Qt's positional bindValue()
// formats a placeholder name per value, which halved the throughput
// measured on this machine (~500k vs ~1M rows/s).
#include "session_recorder.h"

#include <QDateTime>
#include <QFile>
#include <QFileInfo>
#include <QSqlDatabase>
#include <QSqlError>
#include <QSqlQuery>
#include <QVariant>

#include <algorithm>
#include <array>
#include <memory>

#include <pthread.h>
#include <sched.h>

namespace smol::engine {

namespace {

constexpr int kRowsPerStatement = 32;
constexpr int kMaxColumns = 13;

std::atomic<int> g_connections{0};

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
    " collective INTEGER NOT NULL DEFAULT 0, seq INTEGER NOT NULL DEFAULT 0, before INTEGER NOT NULL DEFAULT 0)",
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

QString oneLine(const QSqlError &e)
{
    const QString text = e.text().simplified();
    return text.isEmpty() ? QStringLiteral("unknown SQLite error") : text;
}

QVariant text(const std::string &s)
{
    return QString::fromStdString(s);
}

// Unsigned 64-bit values are stored as their two's-complement int64: QSQLITE
// would bind a quint64 as text.
qlonglong u64(std::uint64_t v)
{
    return qlonglong(v);
}

// One table's INSERT: a 32-row statement for the bulk, a 1-row one for the
// tail, both prepared once.
class BulkInsert {
public:
    BulkInsert(const QSqlDatabase &db, const QString &table, const QStringList &columns)
        : m_columns(int(columns.size()))
        , m_many(db)
        , m_one(db)
    {
        QString many =
            QStringLiteral("INSERT INTO %1 (%2) VALUES ").arg(table, columns.join(QLatin1Char(',')));
        QString one = many;
        for (int r = 0; r < kRowsPerStatement; ++r) {
            QString row = QStringLiteral("(");
            for (int c = 0; c < m_columns; ++c) {
                m_names << QStringLiteral(":v%1").arg(r * m_columns + c);
                row += (c ? QStringLiteral(",") : QString()) + m_names.back();
            }
            row += QLatin1Char(')');
            many += (r ? QStringLiteral(",") : QString()) + row;
            if (r == 0)
                one += row;
        }
        if (!m_many.prepare(many) || !m_one.prepare(one))
            throw SessionError(QStringLiteral("cannot prepare INSERT INTO %1: %2")
                                   .arg(table, oneLine(m_many.lastError().isValid() ? m_many.lastError()
                                                                                    : m_one.lastError()))
                                   .toStdString());
    }

    // values(row, QVariant out[columns]) fills one row's values in column order.
    template <class Row, class Values> void insert(const std::vector<Row> &rows, Values values)
    {
        std::array<QVariant, kMaxColumns> v;
        std::size_t i = 0;
        for (; i + kRowsPerStatement <= rows.size(); i += kRowsPerStatement) {
            for (int r = 0; r < kRowsPerStatement; ++r) {
                values(rows[i + std::size_t(r)], v.data());
                for (int c = 0; c < m_columns; ++c)
                    m_many.bindValue(m_names[r * m_columns + c], v[std::size_t(c)]);
            }
            exec(m_many);
        }
        for (; i < rows.size(); ++i) {
            values(rows[i], v.data());
            for (int c = 0; c < m_columns; ++c)
                m_one.bindValue(m_names[c], v[std::size_t(c)]);
            exec(m_one);
        }
    }

private:
    static void exec(QSqlQuery &q)
    {
        if (!q.exec())
            throw SessionError(QStringLiteral("insert failed: %1").arg(oneLine(q.lastError())).toStdString());
    }

    int m_columns;
    QStringList m_names;
    QSqlQuery m_many;
    QSqlQuery m_one;
};

} // namespace

// The writer thread's side: the connection, its statements, and the running
// maxima of span and frame durations that window queries rely on.
class SessionWriter {
public:
    SessionWriter(const QString &path, const QString &connection)
        : m_connection(connection)
    {
        m_db = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), connection);
        m_db.setDatabaseName(path);
        if (!m_db.open())
            throw SessionError(
                QStringLiteral("cannot create: %1").arg(oneLine(m_db.lastError())).toStdString());
        exec(QStringLiteral("PRAGMA journal_mode=WAL"));
        exec(QStringLiteral("PRAGMA synchronous=NORMAL"));
        exec(QStringLiteral("PRAGMA application_id=0x534D4F4C")); // "SMOL"
        exec(QStringLiteral("PRAGMA cache_size=-16384"));         // 16 MiB: index pages stay hot
    }

    ~SessionWriter()
    {
        m_frames.reset();
        m_spans.reset();
        m_memory.reset();
        m_metrics.reset();
        m_logs.reset();
        m_tensors.reset();
        m_meta.reset();
        m_db.close();
        m_db = QSqlDatabase();
        QSqlDatabase::removeDatabase(m_connection);
    }

    void createSchema(const SessionHeader &h)
    {
        begin();
        for (const char *statement : kSchema)
            exec(QString::fromLatin1(statement));
        prepareStatements();
        setMeta(QStringLiteral("format"), QStringLiteral("smolcluster-session"));
        setMeta(QStringLiteral("schema_version"), kSessionSchemaVersion);
        setMeta(QStringLiteral("created_utc"), QDateTime::currentDateTimeUtc().toString(Qt::ISODate));

        QSqlQuery run(m_db);
        run.prepare(
            QStringLiteral("INSERT INTO run (id, strategy, model, nodes, steps, start_ns, config_json,"
                           " placement_json) VALUES (1, ?, ?, ?, ?, ?, ?, ?)"));
        run.addBindValue(text(h.strategy));
        run.addBindValue(text(h.model));
        run.addBindValue(h.nodes);
        run.addBindValue(qlonglong(h.steps));
        run.addBindValue(qlonglong(h.startNs));
        run.addBindValue(h.configJson);
        run.addBindValue(h.placementJson);
        check(run.exec(), run, "writing the header");

        QSqlQuery node(m_db);
        node.prepare(QStringLiteral("INSERT INTO nodes (rank, name, host, role) VALUES (?, ?, ?, ?)"));
        for (const SessionNode &n : h.nodeList) {
            node.bindValue(0, n.rank);
            node.bindValue(1, text(n.name));
            node.bindValue(2, text(n.host));
            node.bindValue(3, text(n.role));
            check(node.exec(), node, "writing the node list");
        }
        commit();
    }

    void write(const SessionRecorder::Batch &b)
    {
        begin();
        m_frames->insert(b.frames, [this](const net::FrameEvent &e, QVariant *v) {
            const std::int64_t end = eventTimeNs(e);
            m_maxFrameNs = std::max(m_maxFrameNs, end - e.sendStartNs);
            v[0] = qlonglong(end);
            v[1] = qlonglong(++m_frameId);
            v[2] = qlonglong(e.sendStartNs);
            v[3] = int(e.side);
            v[4] = e.src;
            v[5] = e.dst;
            v[6] = int(e.kind);
            v[7] = u64(e.seq);
            v[8] = qlonglong(e.tag);
            v[9] = u64(e.bytes);
        });
        m_spans->insert(b.spans, [this](const SpanEvent &e, QVariant *v) {
            auto &max = m_maxSpanNs[std::size_t(std::clamp(int(e.kind), 0, SpanEvent::kKinds - 1))];
            max = std::max(max, e.endNs - e.startNs);
            v[0] = qlonglong(e.startNs);
            v[1] = qlonglong(e.endNs);
            v[2] = e.node;
            v[3] = int(e.kind);
            v[4] = text(e.name);
            v[5] = qlonglong(e.step);
            v[6] = int(e.collective);
            v[7] = u64(e.seq);
            v[8] = u64(e.bytes);
        });
        m_memory->insert(b.memory, [](const MemorySample &m, QVariant *v) {
            v[0] = qlonglong(m.tNs);
            v[1] = m.node;
            v[2] = qlonglong(m.step);
            v[3] = qlonglong(m.params);
            v[4] = qlonglong(m.grads);
            v[5] = qlonglong(m.optimizer);
            v[6] = qlonglong(m.activations);
            v[7] = qlonglong(m.comm);
            v[8] = qlonglong(m.live);
            v[9] = qlonglong(m.peak);
            v[10] = int(m.collective);
            v[11] = u64(m.seq);
            v[12] = int(m.before);
        });
        m_metrics->insert(b.metrics, [](const MetricSample &m, QVariant *v) {
            v[0] = qlonglong(m.tNs);
            v[1] = qlonglong(m.step);
            v[2] = m.node;
            v[3] = text(m.name);
            v[4] = m.value; // SQLite stores NaN as NULL; the reader turns NULL back into NaN
        });
        m_logs->insert(b.logs, [](const LogLine &l, QVariant *v) {
            v[0] = qlonglong(l.tNs);
            v[1] = l.node;
            v[2] = text(l.text);
        });
        m_tensors->insert(b.tensors, [](const TensorRecord &t, QVariant *v) {
            v[0] = qlonglong(t.tNs);
            v[1] = u64(t.pauseId);
            v[2] = t.node;
            v[3] = qlonglong(t.step);
            v[4] = int(t.collective);
            v[5] = u64(t.seq);
            v[6] = text(t.name);
            v[7] = int(t.before);
            v[8] = t.snapshotJson;
        });
        // The maxima travel in the same transaction as the rows they cover,
        // so an interrupted file is consistent too.
        if (m_maxFrameNs != m_writtenMaxFrameNs) {
            setMeta(QStringLiteral("max_frame_ns"), qlonglong(m_maxFrameNs));
            m_writtenMaxFrameNs = m_maxFrameNs;
        }
        for (int k = 0; k < SpanEvent::kKinds; ++k) {
            if (m_maxSpanNs[std::size_t(k)] != m_writtenMaxSpanNs[std::size_t(k)]) {
                setMeta(QStringLiteral("max_span_ns.%1").arg(QLatin1String(spanKindName(SpanEvent::Kind(k)))),
                        qlonglong(m_maxSpanNs[std::size_t(k)]));
                m_writtenMaxSpanNs[std::size_t(k)] = m_maxSpanNs[std::size_t(k)];
            }
        }
        commit();
    }

    void writeEnd(std::int64_t startNs, const SessionRecorder::End &end, std::uint64_t events)
    {
        begin();
        setMeta(QStringLiteral("end_ns"), qlonglong(end.endNs));
        setMeta(QStringLiteral("duration_ns"), qlonglong(end.endNs - startNs));
        setMeta(QStringLiteral("events_written"), qlonglong(events));
        if (end.finalLoss)
            setMeta(QStringLiteral("final_loss"), *end.finalLoss);
        commit();
    }

private:
    void prepareStatements()
    {
        auto make = [this](const char *table, const char *columns) {
            return std::make_unique<BulkInsert>(m_db, QString::fromLatin1(table),
                                                QString::fromLatin1(columns).split(QLatin1Char(',')));
        };
        m_frames = make("frames", "t_end,id,t_start,side,src,dst,kind,seq,tag,bytes");
        m_spans = make("spans", "t_start,t_end,node,kind,name,step,collective,seq,bytes");
        m_memory = make("memory", "t,node,step,params,grads,optimizer,activations,comm,live,peak,collective,seq,before");
        m_metrics = make("metrics", "t,step,node,name,value");
        m_logs = make("logs", "t,node,text");
        m_tensors = make("tensors", "t,pause_id,node,step,collective,seq,name,before,snapshot_json");
        m_meta = std::make_unique<QSqlQuery>(m_db);
        m_meta->prepare(QStringLiteral("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)"));
    }

    void setMeta(const QString &key, const QVariant &value)
    {
        m_meta->bindValue(0, key);
        m_meta->bindValue(1, value);
        check(m_meta->exec(), *m_meta, "writing meta");
    }

    void exec(const QString &sql)
    {
        QSqlQuery q(m_db);
        if (!q.exec(sql))
            throw SessionError(QStringLiteral("%1: %2")
                                   .arg(sql.section(QLatin1Char(' '), 0, 2), oneLine(q.lastError()))
                                   .toStdString());
    }

    static void check(bool ok, const QSqlQuery &q, const char *what)
    {
        if (!ok)
            throw SessionError(std::string(what) + ": " + oneLine(q.lastError()).toStdString());
    }

    void begin()
    {
        if (!m_db.transaction())
            throw SessionError("cannot begin a transaction: " + oneLine(m_db.lastError()).toStdString());
    }

    void commit()
    {
        if (!m_db.commit())
            throw SessionError("commit failed: " + oneLine(m_db.lastError()).toStdString());
    }

    QString m_connection;
    QSqlDatabase m_db;
    std::unique_ptr<BulkInsert> m_frames, m_spans, m_memory, m_metrics, m_logs, m_tensors;
    std::unique_ptr<QSqlQuery> m_meta;
    std::int64_t m_frameId = 0; // frames have no rowid: ids in arrival order break ties of t_end
    std::int64_t m_maxFrameNs = 0, m_writtenMaxFrameNs = -1;
    std::array<std::int64_t, SpanEvent::kKinds> m_maxSpanNs{}, m_writtenMaxSpanNs{-1, -1, -1, -1, -1, -1};
};

SessionRecorder::SessionRecorder(const QString &path, const SessionHeader &header, bool overwrite)
    : m_path(path)
{
    const std::string file = path.toStdString();
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
    std::lock_guard<std::mutex> lock(m_mutex);
    if (!m_accepting)
        return;
    if (!m_boosted && m_queued > 0 && net::monotonicNs() - m_lastCommitNs.load(std::memory_order_relaxed) > kBoostAfterNs) {
        setWriterPriority(m_writer.native_handle(), false); // starved: back to a fair share
        m_boosted = true;
    }
    (m_queue.*queue).push_back(event);
    if (++m_queued == kBatchRows)
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
    m_wake.notify_one();
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

void SessionRecorder::writerMain(const SessionHeader &header, std::promise<void> *ready)
{
    // The writer yields the CPU to training: with a few cores, every burst of
    // SQLite work that preempts a node thread stalls every node waiting on it
    // in a collective. SCHED_IDLE runs it whenever a core would otherwise
    // idle (nodes waiting on the network leave plenty of such moments); when
    // the machine is saturated and commits fall behind, enqueue() raises it
    // to a fair share until it has caught up.
    setWriterPriority(::pthread_self(), true);
    m_lastCommitNs = net::monotonicNs();
    const QString connection = QStringLiteral("smol-session-writer-%1").arg(g_connections.fetch_add(1));
    std::unique_ptr<SessionWriter> writer;
    try {
        writer = std::make_unique<SessionWriter>(m_path, connection);
        writer->createSchema(header);
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
        bool stopping = false;
        {
            std::unique_lock<std::mutex> lock(m_mutex);
            m_wake.wait_until(lock, deadline, [this] { return m_stopping || m_queued >= kBatchRows; });
            std::swap(batch, m_queue);
            m_queued = 0;
            stopping = m_stopping;
        }
        deadline = std::chrono::steady_clock::now() + kCommitInterval;
        const std::size_t rows = batch.size();
        try {
            if (rows)
                writer->write(batch);
            m_written.fetch_add(rows, std::memory_order_relaxed);
            m_lastCommitNs = net::monotonicNs();
            {
                std::lock_guard<std::mutex> lock(m_mutex);
                if (m_boosted) {
                    setWriterPriority(::pthread_self(), true);
                    m_boosted = false;
                }
            }
            if (stopping)
                writer->writeEnd(startNs, m_end, eventsWritten());
        } catch (const SessionError &e) {
            std::lock_guard<std::mutex> lock(m_mutex);
            m_error = e.what();
            m_accepting = false;
            m_queue.clear();
            break;
        }
        batch.clear();
        if (stopping)
            break;
    }
    writer.reset();
}

} // namespace smol::engine
