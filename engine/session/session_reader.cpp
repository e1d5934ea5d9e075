// SessionReader: validation on open, then every read is one prepared,
// forward-only query whose failures (prepare, bind, or a step that hits a
// damaged page) become SessionError, and whose values are range-checked as
// they are decoded. Column lists are explicit: a newer file's extra columns
// and tables are never read.
#include "session_reader.h"

#include "event_rows.h"
#include "session_reader_query.h"

#include <QFile>
#include <QFileInfo>

#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <utility>

namespace smol::engine {

namespace {

using namespace session_detail;

// The columns of each table are event_rows.h's. Version 1 kept per-step
// memory only: no collective boundary; version 2 no step peaks.
const char kMemoryColumnsV1[] =
    "t, node, step, params, grads, optimizer, activations, comm, live, peak, 0, 0, 0, 0";
const char kMemoryColumnsV2[] =
    "t, node, step, params, grads, optimizer, activations, comm, live, peak, collective, seq, before, 0";
constexpr int kSpanIdColumn = 9; // spans() reads "id" after the span's nine columns

// Each event table and its event-time column (indexed).
const std::pair<const char *, const char *> kEventTimes[] = {{"frames", "t_end"}, {"spans", "t_end"},
                                                             {"memory", "t"},     {"metrics", "t"},
                                                             {"logs", "t"},       {"tensors", "t"}};

// The tables schema version 1 has; a file of that version without one of
// them is damaged.
const char *const kTablesV1[] = {"run", "nodes", "frames", "spans", "memory", "metrics", "logs", "tensors"};
// ... and the ones version 4 added.
const char *const kTablesV4[] = {"frame_slices", "span_slices", "memory_slices"};
// Version 4 on, these tables stay empty: their events are in the slices.
bool isPackedTable(const char *table)
{
    return !std::strcmp(table, "frames") || !std::strcmp(table, "spans") || !std::strcmp(table, "memory");
}

} // namespace

std::uint64_t SessionInfo::events() const
{
    std::uint64_t n = framesSend + framesReceive + memory + metrics + logs + tensors;
    for (std::uint64_t s : spans)
        n += s;
    return n;
}

SessionReader::SessionReader(const QString &path)
    : m_path(path)
{
    const QFileInfo file(path);
    if (!file.exists())
        fail(QStringLiteral("no such file"));
    if (!file.isFile())
        fail(QStringLiteral("not a file"));
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly))
        fail(QStringLiteral("cannot read: %1").arg(f.errorString()));
    // Checked here rather than left to SQLite, which treats an empty file as
    // a new empty database.
    const QByteArray magic = f.read(16);
    if (magic.isEmpty())
        fail(QStringLiteral("empty file, not a session"));
    if (magic != QByteArray("SQLite format 3\0", 16))
        fail(QStringLiteral("not a session file (not an SQLite database)"));
    f.close();
    try {
        validate();
        readHeader();
    } catch (...) {
        closeConnections(); // the destructor does not run for a constructor that throws
        throw;
    }
}

SessionReader::~SessionReader()
{
    closeConnections();
}

void SessionReader::closeConnections()
{
    std::lock_guard<std::mutex> lock(m_mutex);
    for (auto &connection : m_connections)
        sqlite3_close_v2(connection.second); // v2: closes once a statement still alive is finalized
    m_connections.clear();
}

void SessionReader::fail(const QString &reason) const
{
    throw SessionError(QStringLiteral("%1: %2").arg(m_path, reason).toStdString());
}

sqlite3 *SessionReader::connection() const
{
    const std::thread::id me = std::this_thread::get_id();
    std::lock_guard<std::mutex> lock(m_mutex);
    for (const auto &connection : m_connections) {
        if (connection.first == me)
            return connection.second;
    }
    sqlite3 *db = nullptr;
    // NOMUTEX: a connection is used by the thread that opened it only.
    const int rc = sqlite3_open_v2(QFile::encodeName(m_path).constData(), &db,
                                   SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nullptr);
    if (rc != SQLITE_OK) {
        const QString why = db ? sqliteText(db) : QString::fromUtf8(sqlite3_errstr(rc));
        sqlite3_close_v2(db);
        fail(QStringLiteral("cannot open: %1").arg(why));
    }
    sqlite3_busy_timeout(db, 5000); // as Qt Sql's QSQLITE did: wait out a writer's checkpoint
    m_connections.emplace_back(me, db);
    return db;
}

void SessionReader::validate()
{
    std::set<QString> tables;
    Query q(*this, QStringLiteral("SELECT name FROM sqlite_master WHERE type = 'table'"));
    for (q.exec(); q.next();)
        tables.insert(QString::fromStdString(q.text(0)));
    if (tables.empty()) // what a truncated file, or one parted from its -wal, often looks like
        fail(QStringLiteral(
            "damaged or incomplete: an SQLite database without any table (truncated, or its -wal "
            "file missing?)"));
    const QString foreign =
        QStringLiteral("not a smolcluster session (an SQLite database without its tables)");
    if (!tables.count(QStringLiteral("meta")))
        fail(foreign);

    Query format(*this, QStringLiteral("SELECT value FROM meta WHERE key = 'format'"));
    if (!format.exec().next() || format.text(0) != "smolcluster-session")
        fail(foreign);
    Query version(*this, QStringLiteral("SELECT value FROM meta WHERE key = 'schema_version'"));
    bool ok = false;
    if (version.exec().next())
        m_version = QString::fromStdString(version.text(0)).toInt(&ok);
    if (!ok || m_version < 1)
        fail(QStringLiteral("damaged: no valid schema version"));
    if (m_version > kSessionSchemaVersion)
        fail(QStringLiteral("schema version %1 is newer than this build reads (%2); update smolcluster")
                 .arg(m_version)
                 .arg(kSessionSchemaVersion));
    for (const char *table : kTablesV1) {
        if (!tables.count(QString::fromLatin1(table)))
            fail(QStringLiteral("damaged: table '%1' is missing").arg(QLatin1String(table)));
    }
    for (const char *table : kTablesV4) {
        if (m_version >= 4 && !tables.count(QString::fromLatin1(table)))
            fail(QStringLiteral("damaged: table '%1' is missing").arg(QLatin1String(table)));
    }
}

void SessionReader::readHeader()
{
    Query run(*this,
              QStringLiteral("SELECT strategy, model, nodes, steps, start_ns, config_json, placement_json"
                             " FROM run WHERE id = 1"));
    if (!run.exec().next())
        fail(QStringLiteral("damaged: the run header is missing"));
    m_header.strategy = run.text(0);
    m_header.model = run.text(1);
    m_header.nodes = run.rank(2);
    m_header.steps = run.i64(3);
    m_header.startNs = run.i64(4);
    m_header.configJson = run.blob(5);
    m_header.placementJson = run.blob(6);

    Query nodes(*this, QStringLiteral("SELECT rank, name, host, role FROM nodes ORDER BY rank"));
    for (nodes.exec(); nodes.next();)
        m_header.nodeList.push_back({nodes.rank(0), nodes.text(1), nodes.text(2), nodes.text(3)});
}

bool SessionReader::isComplete() const
{
    return Query(*this, QStringLiteral("SELECT value FROM meta WHERE key = 'end_ns'")).scalar().has_value();
}

std::int64_t SessionReader::maxDuration(const QString &key, const char *table, int spanKind) const
{
    Query stored(*this, QStringLiteral("SELECT value FROM meta WHERE key = ?"));
    std::optional<std::int64_t> max = stored.bind(key).scalar();
    if (!max && packed()) // not recorded (no such events yet): measure
        max = slicedMaxDuration(spanKind);
    if (!max) {
        Query measured(
            *this, QStringLiteral("SELECT MAX(t_end - t_start) FROM %1%2")
                       .arg(QLatin1String(table),
                            spanKind >= 0 ? QStringLiteral(" WHERE kind = %1").arg(spanKind) : QString()));
        max = measured.scalar();
    }
    return std::max<std::int64_t>(0, max.value_or(0));
}

std::pair<std::int64_t, std::int64_t> SessionReader::timeRange() const
{
    std::int64_t first = m_header.startNs;
    std::int64_t last = m_header.startNs;
    // MIN or MAX alone over an indexed column is one index lookup.
    for (const auto &[table, column] : kEventTimes) {
        const QString from = QStringLiteral("(%1) FROM %2").arg(QLatin1String(column), QLatin1String(table));
        if (auto v = Query(*this, QStringLiteral("SELECT MIN") + from).scalar())
            first = std::min(first, *v);
        if (auto v = Query(*this, QStringLiteral("SELECT MAX") + from).scalar())
            last = std::max(last, *v);
    }
    if (packed())
        slicedTimeRange(first, last);
    if (auto end = Query(*this, QStringLiteral("SELECT value FROM meta WHERE key = 'end_ns'")).scalar())
        last = std::max(last, *end);
    return {first, last};
}

std::optional<std::int64_t> SessionReader::nextEventTime(std::int64_t tNs) const
{
    std::optional<std::int64_t> next = packed() ? slicedNextEventTime(tNs) : std::nullopt;
    for (const auto &[table, column] : kEventTimes) {
        if (packed() && isPackedTable(table))
            continue;
        Query q(*this, QStringLiteral("SELECT MIN(%1) FROM %2 WHERE %1 > ?")
                           .arg(QLatin1String(column), QLatin1String(table)));
        if (auto v = q.bind(qlonglong(tNs)).scalar())
            next = next ? std::min(*next, *v) : *v;
    }
    return next;
}

std::vector<net::FrameEvent> SessionReader::frames(std::int64_t t0, std::int64_t t1) const
{
    if (packed())
        return slicedFrames(t0, t1);
    const std::int64_t longest = maxDuration(QStringLiteral("max_frame_ns"), "frames", -1);
    Query q(*this,
            sql("SELECT %1 FROM frames WHERE t_end >= ? AND t_end <= ? AND t_start <= ? ORDER BY t_end, id",
                EventRows::kFrameColumns));
    q.bind(qlonglong(t0)).bind(qlonglong(saturatingAdd(t1, longest))).bind(qlonglong(t1));
    return q.readAll<net::FrameEvent>();
}

std::vector<SpanEvent> SessionReader::spans(std::int64_t t0, std::int64_t t1) const
{
    if (packed())
        return slicedSpans(t0, t1);
    // Per kind, so a long pause does not widen the scan for forward spans.
    struct Found {
        std::int64_t id;
        SpanEvent span;
    };
    std::vector<Found> found;
    for (int k = 0; k < SpanEvent::kKinds; ++k) {
        const std::int64_t longest =
            maxDuration(QStringLiteral("max_span_ns.%1").arg(QLatin1String(spanKindName(SpanEvent::Kind(k)))),
                        "spans", k);
        // The id after the span's columns: it breaks ties of t_end below.
        Query q(*this, sql("SELECT %1, id FROM spans"
                           " WHERE kind = ? AND t_start >= ? AND t_start <= ? AND t_end >= ?",
                           EventRows::kSpanColumns));
        q.bind(k).bind(qlonglong(saturatingSub(t0, longest))).bind(qlonglong(t1)).bind(qlonglong(t0)).exec();
        while (q.next())
            found.push_back({q.i64(kSpanIdColumn), q.read<SpanEvent>()});
    }
    std::sort(found.begin(), found.end(), [](const Found &a, const Found &b) {
        return a.span.endNs != b.span.endNs ? a.span.endNs < b.span.endNs : a.id < b.id;
    });
    std::vector<SpanEvent> out;
    out.reserve(found.size());
    for (Found &f : found)
        out.push_back(std::move(f.span));
    return out;
}

const char *SessionReader::memoryColumns() const
{
    return m_version >= 3 ? EventRows::kMemoryColumns : m_version == 2 ? kMemoryColumnsV2 : kMemoryColumnsV1;
}

std::vector<MemorySample> SessionReader::memory(std::int64_t t0, std::int64_t t1) const
{
    if (packed())
        return slicedMemory(t0, t1);
    Query q(*this, sql("SELECT %1 FROM memory WHERE t >= ? AND t <= ? ORDER BY t, id", memoryColumns()));
    q.bind(qlonglong(t0)).bind(qlonglong(t1));
    return q.readAll<MemorySample>();
}

std::vector<MetricSample> SessionReader::metrics(std::int64_t t0, std::int64_t t1,
                                                 const std::string &name) const
{
    Query q(*this,
            sql(name.empty() ? "SELECT %1 FROM metrics WHERE t >= ? AND t <= ? ORDER BY t, id"
                             : "SELECT %1 FROM metrics WHERE t >= ? AND t <= ? AND name = ? ORDER BY t, id",
                EventRows::kMetricColumns));
    q.bind(qlonglong(t0)).bind(qlonglong(t1));
    if (!name.empty())
        q.bind(QString::fromStdString(name));
    return q.readAll<MetricSample>();
}

std::vector<LogLine> SessionReader::logs(std::int64_t t0, std::int64_t t1) const
{
    Query q(*this, sql("SELECT %1 FROM logs WHERE t >= ? AND t <= ? ORDER BY t, id", EventRows::kLogColumns));
    q.bind(qlonglong(t0)).bind(qlonglong(t1));
    return q.readAll<LogLine>();
}

std::vector<TensorRecord> SessionReader::tensors(std::int64_t t0, std::int64_t t1) const
{
    Query q(*this,
            sql("SELECT %1 FROM tensors WHERE t >= ? AND t <= ? ORDER BY t, id", EventRows::kTensorColumns));
    q.bind(qlonglong(t0)).bind(qlonglong(t1));
    return q.readAll<TensorRecord>();
}

std::vector<TensorRecord> SessionReader::tensorsOfPause(std::uint64_t pauseId) const
{
    Query q(*this,
            sql("SELECT %1 FROM tensors WHERE pause_id = ? ORDER BY t, id", EventRows::kTensorColumns));
    q.bind(qlonglong(pauseId));
    return q.readAll<TensorRecord>();
}

SessionEvents SessionReader::eventsIn(std::int64_t after, std::int64_t upTo) const
{
    SessionEvents out;
    if (upTo <= after)
        return out;
    // Each table's events with event time in (after, upTo], in time order.
    auto read = [&](const char *table, const char *timeColumn, const char *columns, auto &out) {
        Query q(*this, QStringLiteral("SELECT %1 FROM %2 WHERE %3 > ? AND %3 <= ? ORDER BY %3, id")
                           .arg(QLatin1String(columns), QLatin1String(table), QLatin1String(timeColumn)));
        q.bind(qlonglong(after)).bind(qlonglong(upTo));
        q.readAll(out);
    };
    if (packed()) {
        slicedEventsIn(after, upTo, out);
    } else {
        read("frames", "t_end", EventRows::kFrameColumns, out.frames);
        read("spans", "t_end", EventRows::kSpanColumns, out.spans);
        read("memory", "t", memoryColumns(), out.memory);
    }
    read("metrics", "t", EventRows::kMetricColumns, out.metrics);
    read("logs", "t", EventRows::kLogColumns, out.logs);
    read("tensors", "t", EventRows::kTensorColumns, out.tensors);
    return out;
}

std::vector<MemorySample> SessionReader::latestMemory(std::int64_t tNs) const
{
    return newestMemoryPerNode(tNs, false);
}

std::vector<MemorySample> SessionReader::latestStepPeaks(std::int64_t tNs) const
{
    if (m_version < 3)
        return {};
    return newestMemoryPerNode(tNs, true);
}

std::vector<MemorySample> SessionReader::newestMemoryPerNode(std::int64_t tNs, bool stepPeaks) const
{
    if (packed())
        return slicedNewestMemory(tNs, stepPeaks);
    // Walk back from tNs until every rank of the header has been seen (or
    // the samples run out).
    std::set<int> missing;
    for (const SessionNode &n : m_header.nodeList)
        missing.insert(n.rank);
    const bool knownNodes = !missing.empty();
    std::map<int, MemorySample> latest;
    const QString kind = m_version < 3 ? QString()
                         : stepPeaks   ? QStringLiteral(" AND step_peak != 0")
                                       : QStringLiteral(" AND step_peak = 0");
    Query q(*this,
            sql("SELECT %1 FROM memory WHERE t <= ?%2 ORDER BY t DESC, id DESC", memoryColumns()).arg(kind));
    for (q.bind(qlonglong(tNs)).exec(); q.next();) {
        MemorySample m = q.read<MemorySample>();
        missing.erase(m.node);
        latest.emplace(m.node, std::move(m));
        if (knownNodes && missing.empty())
            break;
    }
    std::vector<MemorySample> out;
    for (auto &entry : latest)
        out.push_back(std::move(entry.second));
    return out;
}

std::optional<std::int64_t> SessionReader::stepStart(std::int64_t step) const
{
    std::optional<std::int64_t> span =
        packed() ? slicedStepStart(step)
                 : Query(*this, QStringLiteral("SELECT MIN(t_start) FROM spans WHERE step = ?"))
                       .bind(qlonglong(step))
                       .scalar();
    std::optional<std::int64_t> metric =
        Query(*this, QStringLiteral("SELECT MIN(t) FROM metrics WHERE step = ?"))
            .bind(qlonglong(step))
            .scalar();
    if (span && metric)
        return std::min(*span, *metric);
    return span ? span : metric;
}

std::vector<CollectiveBoundary> SessionReader::collectives() const
{
    if (packed())
        return slicedCollectives();
    Query q(*this, QStringLiteral("SELECT collective, seq, step, MIN(t_start) AS t0, MAX(t_end) FROM spans"
                                  " WHERE kind = %1 GROUP BY step, collective, seq ORDER BY t0")
                       .arg(int(SpanEvent::Kind::Collective)));
    q.exec();
    std::vector<CollectiveBoundary> out;
    while (q.next())
        out.push_back({q.collective(0), q.u64(1), q.i64(2), q.i64(3), q.i64(4)});
    return out;
}

void SessionReader::forEachFrame(const std::function<void(const net::FrameEvent &)> &fn) const
{
    if (packed())
        return forEachSlicedFrame(fn);
    Query(*this, sql("SELECT %1 FROM frames ORDER BY t_end, id", EventRows::kFrameColumns)).forEach(fn);
}

void SessionReader::forEachSpanByStart(const std::function<void(const SpanEvent &)> &fn) const
{
    if (packed())
        return forEachSlicedSpanByStart(fn);
    Query(*this, sql("SELECT %1 FROM spans ORDER BY t_start, id", EventRows::kSpanColumns)).forEach(fn);
}

void SessionReader::forEachMemory(const std::function<void(const MemorySample &)> &fn) const
{
    if (packed())
        return forEachSlicedMemory(fn);
    Query(*this, sql("SELECT %1 FROM memory ORDER BY t, id", memoryColumns())).forEach(fn);
}

void SessionReader::forEachMetric(const std::function<void(const MetricSample &)> &fn) const
{
    Query(*this, sql("SELECT %1 FROM metrics ORDER BY t, id", EventRows::kMetricColumns)).forEach(fn);
}

void SessionReader::forEachLog(const std::function<void(const LogLine &)> &fn) const
{
    Query(*this, sql("SELECT %1 FROM logs ORDER BY t, id", EventRows::kLogColumns)).forEach(fn);
}

// info()'s counts: frames per side and bytes per link, spans per kind, and
// the rows of the other event tables.
void SessionReader::countEvents(SessionInfo &info) const
{
    if (packed()) {
        countEventsTail(info);
        return;
    }
    // One pass over the frames: counts per side and bytes per link.
    Query frames(*this, QStringLiteral("SELECT src, dst, side, COUNT(*), SUM(bytes) FROM frames"
                                       " GROUP BY src, dst, side ORDER BY src, dst"));
    for (frames.exec(); frames.next();) {
        const std::uint64_t count = frames.u64(3);
        if (frames.i64(2) == 0) {
            info.framesSend += count;
            info.links.push_back({frames.rank(0), frames.rank(1), frames.u64(4), count});
        } else {
            info.framesReceive += count;
        }
    }
    Query spans(*this, QStringLiteral("SELECT kind, COUNT(*) FROM spans GROUP BY kind"));
    for (spans.exec(); spans.next();) {
        const std::int64_t kind = spans.i64(0);
        if (kind < 0 || kind >= SpanEvent::kKinds)
            fail(QStringLiteral("damaged: span kind %1 out of range").arg(kind));
        info.spans[std::size_t(kind)] = spans.u64(1);
    }
    countEventsTail(info);
}

// The counts of the tables no version packs, and (up to version 3) of memory.
void SessionReader::countEventsTail(SessionInfo &info) const
{
    // Rows of `table` where `where` holds.
    auto count = [this](const char *table, const char *where = "1") {
        return std::uint64_t(Query(*this, QStringLiteral("SELECT COUNT(*) FROM %1 WHERE %2")
                                              .arg(QLatin1String(table), QLatin1String(where)))
                                 .scalar()
                                 .value_or(0));
    };
    if (!packed()) {
        info.memory = count("memory");
        if (m_version >= 2)
            info.memoryAtCollectives = count("memory", "collective != 0");
        if (m_version >= 3)
            info.memoryStepPeaks = count("memory", "step_peak != 0");
    }
    info.metrics = count("metrics");
    info.logs = count("logs");
    info.tensors = count("tensors");
}

SessionInfo SessionReader::info() const
{
    SessionInfo info;
    info.schemaVersion = m_version;
    info.strategy = m_header.strategy;
    info.model = m_header.model;
    info.nodes = m_header.nodes;
    info.nodeList = m_header.nodeList;
    info.stepsPlanned = m_header.steps;
    info.startNs = m_header.startNs;

    countEvents(info);

    if (packed()) {
        std::set<std::int64_t> steps; // of the spans and the metrics
        slicedCount(info, steps);
        Query metricSteps(*this, QStringLiteral("SELECT DISTINCT step FROM metrics WHERE step >= 0"));
        for (metricSteps.exec(); metricSteps.next();)
            steps.insert(metricSteps.i64(0));
        info.stepsRecorded = std::int64_t(steps.size());
        info.lastStep = steps.empty() ? -1 : *steps.rbegin();
    } else {
        Query steps(*this,
                    QStringLiteral("SELECT COUNT(*), MAX(step) FROM (SELECT step FROM spans WHERE step >= 0"
                                   " UNION SELECT step FROM metrics WHERE step >= 0)"));
        if (steps.exec().next()) {
            info.stepsRecorded = steps.i64(0);
            info.lastStep = steps.isNull(1) ? -1 : steps.i64(1);
        }
    }

    Query loss(*this, QStringLiteral("SELECT value, step FROM metrics WHERE name = 'loss'"
                                     " ORDER BY node = -1 DESC, t DESC, id DESC LIMIT 1"));
    if (loss.exec().next()) {
        info.finalLoss = loss.isNull(0) ? std::numeric_limits<double>::quiet_NaN() : loss.f64(0);
        info.finalLossStep = loss.i64(1);
    }

    Query end(*this, QStringLiteral(
                         "SELECT key, value FROM meta WHERE key IN ('end_ns', 'duration_ns', 'final_loss')"));
    std::optional<std::int64_t> duration;
    for (end.exec(); end.next();) {
        const std::string key = end.text(0);
        if (key == "end_ns")
            info.complete = true;
        else if (key == "duration_ns")
            duration = end.i64(1);
        else if (key == "final_loss" && !info.finalLoss && !end.isNull(1))
            info.finalLoss = end.f64(1);
    }
    std::int64_t newest = m_header.startNs;
    for (const auto &[table, column] : kEventTimes) {
        if (auto v = Query(*this, QStringLiteral("SELECT MAX(%1) FROM %2")
                                      .arg(QLatin1String(column), QLatin1String(table)))
                         .scalar())
            newest = std::max(newest, *v);
    }
    if (packed()) {
        std::int64_t first = newest;
        slicedTimeRange(first, newest);
    }
    info.lastEventNs = newest;
    info.durationNs = info.complete && duration ? *duration : saturatingSub(newest, m_header.startNs);
    return info;
}

} // namespace smol::engine
