// SessionReader's internals, shared by session_reader.cpp (versions 1-3 and
// everything not packed) and session_reader_slices.cpp (the packed slices of
// version 4): the prepared, forward-only Query that turns every SQLite
// failure and every out-of-range value into SessionError, and a few helpers.
// Not part of the library's interface.
#pragma once

#include "event_rows.h"
#include "session_reader.h"

#include <QString>

#include <sqlite3.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace smol::engine {

namespace session_detail {

inline QString sqliteText(sqlite3 *db)
{
    const QString text = QString::fromUtf8(db ? sqlite3_errmsg(db) : "").simplified();
    return text.isEmpty() ? QStringLiteral("unknown error") : text;
}

// a + b and a - b, saturated: a damaged file's extreme times must not overflow.
inline std::int64_t saturatingAdd(std::int64_t a, std::int64_t b)
{
    std::int64_t r = 0;
    if (__builtin_add_overflow(a, b, &r))
        return b > 0 ? std::numeric_limits<std::int64_t>::max() : std::numeric_limits<std::int64_t>::min();
    return r;
}

inline std::int64_t saturatingSub(std::int64_t a, std::int64_t b)
{
    std::int64_t r = 0;
    if (__builtin_sub_overflow(a, b, &r))
        return b < 0 ? std::numeric_limits<std::int64_t>::max() : std::numeric_limits<std::int64_t>::min();
    return r;
}

inline QString sql(const char *format, const char *columns)
{
    return QString::fromLatin1(format).arg(QLatin1String(columns));
}
} // namespace session_detail

class SessionReader::Query {
public:
    Query(const SessionReader &reader, const QString &sql)
        : m_reader(reader)
        , m_db(reader.connection())
    {
        const QByteArray text = sql.toUtf8();
        if (sqlite3_prepare_v2(m_db, text.constData(), int(text.size()), &m_stmt, nullptr) != SQLITE_OK ||
            !m_stmt)
            damaged();
    }
    Query(Query &&other) noexcept
        : m_reader(other.m_reader)
        , m_db(other.m_db)
        , m_stmt(std::exchange(other.m_stmt, nullptr))
        , m_next(other.m_next)
    {
    }
    ~Query() { sqlite3_finalize(m_stmt); }
    Query(const Query &) = delete;
    Query &operator=(const Query &) = delete;

    Query &bind(std::int64_t value)
    {
        if (sqlite3_bind_int64(m_stmt, ++m_next, value) != SQLITE_OK)
            damaged();
        return *this;
    }

    Query &bind(const QString &value)
    {
        const QByteArray text = value.toUtf8();
        if (sqlite3_bind_text(m_stmt, ++m_next, text.constData(), int(text.size()), SQLITE_TRANSIENT) !=
            SQLITE_OK)
            damaged();
        return *this;
    }

    // The statement runs on the first next(); errors surface there.
    Query &exec()
    {
        sqlite3_reset(m_stmt);
        return *this;
    }

    bool next()
    {
        const int rc = sqlite3_step(m_stmt);
        if (rc == SQLITE_ROW)
            return true;
        if (rc == SQLITE_DONE)
            return false;
        damaged();
    }

    bool isNull(int c) const { return sqlite3_column_type(m_stmt, c) == SQLITE_NULL; }
    std::int64_t i64(int c) const { return sqlite3_column_int64(m_stmt, c); }
    std::uint64_t u64(int c) const { return std::uint64_t(i64(c)); }
    double f64(int c) const { return sqlite3_column_double(m_stmt, c); }
    std::string text(int c) const
    {
        const auto *p = reinterpret_cast<const char *>(sqlite3_column_text(m_stmt, c));
        return p ? std::string(p, std::size_t(sqlite3_column_bytes(m_stmt, c))) : std::string();
    }
    QByteArray blob(int c) const
    {
        if (isNull(c))
            return QByteArray();
        const auto *p = static_cast<const char *>(sqlite3_column_blob(m_stmt, c));
        return QByteArray(p ? p : "", sqlite3_column_bytes(m_stmt, c));
    }

    // A blob column's bytes without a copy, valid until the next step.
    std::pair<const char *, std::size_t> bytes(int c) const
    {
        const auto *p = static_cast<const char *>(sqlite3_column_blob(m_stmt, c));
        const int n = sqlite3_column_bytes(m_stmt, c);
        return {p ? p : "", p && n > 0 ? std::size_t(n) : 0};
    }

    // A rank: -1 (cluster / coordinator) or a non-negative int.
    int rank(int c) const
    {
        const std::int64_t v = i64(c);
        if (v < -1 || v > INT_MAX)
            m_reader.fail(QStringLiteral("damaged: rank %1 out of range").arg(v));
        return int(v);
    }

    net::CollectiveKind collective(int c) const
    {
        const std::int64_t v = i64(c);
        if (v < 0 || v > 255 || !net::isValidCollectiveKind(std::uint8_t(v)))
            m_reader.fail(QStringLiteral("damaged: collective kind %1 out of range").arg(v));
        return net::CollectiveKind(v);
    }

    // The current row as an event of type E, read by its walk (event_rows.h).
    template <class E> E read() const
    {
        if constexpr (std::is_same_v<E, net::FrameEvent>) {
            return frame();
        } else {
            E e;
            RowReader r{*this};
            EventRows::row(r, e);
            return e;
        }
    }

    // Frames carry their event time and id beside the fields.
    net::FrameEvent frame() const
    {
        net::FrameEvent e;
        std::int64_t end = 0, id = 0;
        RowReader r{*this};
        EventRows::frame(r, e, end, id);
        (e.side == net::FrameEvent::Side::Send ? e.sendCompleteNs : e.recvCompleteNs) = end;
        return e;
    }

    // Runs the query and reads its rows as events of type E, into `out`
    // or handed to `fn` one by one.
    template <class E> std::vector<E> readAll()
    {
        std::vector<E> out;
        readAll<E>(out);
        return out;
    }
    template <class E> void readAll(std::vector<E> &out)
    {
        for (exec(); next();)
            out.push_back(read<E>());
    }
    template <class E> void forEach(const std::function<void(const E &)> &fn)
    {
        for (exec(); next();)
            fn(read<E>());
    }

    // The single value of a one-row query; nullopt for no row or NULL.
    std::optional<std::int64_t> scalar()
    {
        exec();
        if (!next() || isNull(0))
            return std::nullopt;
        return i64(0);
    }

    [[noreturn]] void damaged() const
    {
        m_reader.fail(
            QStringLiteral("damaged or unreadable (SQLite: %1)").arg(session_detail::sqliteText(m_db)));
    }

private:
    // A row of an event table as decoded values: the reading side of
    // event_rows.h's walks, each call reading the next column, range-checked.
    struct RowReader {
        const Query &q;
        int c = 0;
        void i64(std::int64_t &v) { v = q.i64(c++); }
        void u64(std::uint64_t &v) { v = q.u64(c++); }
        void f64(double &v) // SQLite stores a NaN as NULL
        {
            v = q.isNull(c) ? std::numeric_limits<double>::quiet_NaN() : q.f64(c);
            ++c;
        }
        void text(std::string &v) { v = q.text(c++); }
        void blob(QByteArray &v) { v = q.blob(c++); }
        void flag(bool &v) { v = q.i64(c++) != 0; }
        void rank(int &v) { v = q.rank(c++); }
        void collective(net::CollectiveKind &v) { v = q.collective(c++); }
        void anyKind(net::CollectiveKind &v)
        {
            const int kind = int(q.i64(c++));
            v = net::isValidCollectiveKind(std::uint8_t(kind)) ? net::CollectiveKind(kind)
                                                               : net::CollectiveKind::None;
        }
        void spanKind(SpanEvent::Kind &v)
        {
            const std::int64_t kind = q.i64(c++);
            if (kind < 0 || kind >= SpanEvent::kKinds)
                q.m_reader.fail(QStringLiteral("damaged: span kind %1 out of range").arg(kind));
            v = SpanEvent::Kind(kind);
        }
        void side(net::FrameEvent::Side &v)
        {
            const std::int64_t side = q.i64(c++);
            if (side != 0 && side != 1)
                q.m_reader.fail(QStringLiteral("damaged: frame side %1 out of range").arg(side));
            v = net::FrameEvent::Side(side);
        }
        void tag(std::uint32_t &v)
        {
            const std::int64_t tag = q.i64(c++);
            if (tag < 0 || tag > std::int64_t(UINT32_MAX))
                q.m_reader.fail(QStringLiteral("damaged: frame tag %1 out of range").arg(tag));
            v = std::uint32_t(tag);
        }
    };

    const SessionReader &m_reader;
    sqlite3 *m_db;
    sqlite3_stmt *m_stmt = nullptr;
    int m_next = 0; // the last bound parameter
};

} // namespace smol::engine
