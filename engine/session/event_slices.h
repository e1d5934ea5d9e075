// EventSlices: the packed rows of schema version 4 (docs/session-format.md
// §2, "Slices"). Frames, spans and memory samples, the bulk of a run, are
// stored as one row per time slice (at most kSliceNs of event time, at most
// kSliceEvents events) whose `events` blob holds the slice's records back to
// back, each laid out by its table's walk in event_rows.h (one fact, one
// place: a column added to a walk is a field added to the record). Writing
// one row per ~1000 events instead of one B-tree insert per event is what
// keeps the recorder's writer thread off the training threads' cores.
//
// Record encoding, little-endian, per walk call:
//   i64, u64, f64   8 bytes          flag        1 byte (0 / 1)
//   rank            int32 (>= -1)    tag         uint32
//   collective, anyKind, spanKind, side          1 byte each
//   text            uint32 length, then the bytes (no terminator)
//   blob            int32 length (-1: null), then the bytes
// A frame's record is its t_end followed by EventRows::frameBody (the id of
// the unpacked table is the record's place in the file instead).
//
// decode() treats the blob as untrusted: every read is bounds-checked, the
// count is checked against the blob's length before anything is allocated,
// kinds and ranks are range-checked, and the records must end exactly at the
// blob's end. Any violation throws SessionError with a one-line reason
// (the reader prefixes the file and slice).
#pragma once

#include "event_rows.h"
#include "session_events.h"

#include <QByteArray>

#include <climits>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "event_slices.h copies little-endian records with memcpy"
#endif

namespace smol::engine {

// When an event starts: a frame's send start, a span's start, a sample's
// instant. Slices keep the smallest (t_start_min) so windows can skip them.
inline std::int64_t startTimeNs(const net::FrameEvent &e)
{
    return e.sendStartNs;
}
inline std::int64_t startTimeNs(const SpanEvent &e)
{
    return e.startNs;
}
inline std::int64_t startTimeNs(const MemorySample &e)
{
    return e.tNs;
}

struct EventSlices {
    static constexpr std::int64_t kSliceNs = 100'000'000; // event time covered by one slice, at most
    static constexpr std::size_t kSliceEvents = 4096;
    // The columns a slice row is written with (id is the rowid).
    static constexpr char kColumns[] = "t_min, t_max, t_start_min, count, events";

    // The smallest record of each kind: a count above blob size / this is a lie.
    template <class E> static constexpr std::size_t minRecordBytes()
    {
        if constexpr (std::is_same_v<E, net::FrameEvent>)
            return 8 + 8 + 1 + 4 + 4 + 1 + 8 + 4 + 8; // 46
        else if constexpr (std::is_same_v<E, SpanEvent>)
            return 8 + 8 + 4 + 1 + 4 + 8 + 1 + 8 + 8; // 50, with an empty name
        else
            return 8 + 4 + 8 + 7 * 8 + 1 + 8 + 1 + 1; // 87
    }

    // Appends one event's record to `out`.
    template <class E> static void append(std::string &out, const E &e)
    {
        Writer w{out};
        if constexpr (std::is_same_v<E, net::FrameEvent>) {
            w.i64(eventTimeNs(e));
            EventRows::frameBody(w, e);
        } else {
            EventRows::row(w, e);
        }
    }

    // Decodes `count` records from the blob [data, data + size) onto `out`.
    template <class E>
    static void decode(const char *data, std::size_t size, std::int64_t count, std::vector<E> &out)
    {
        if (count < 0 || std::uint64_t(count) > size / minRecordBytes<E>())
            throw SessionError("claims " + std::to_string(count) + " records in " + std::to_string(size) +
                               " bytes");
        out.reserve(out.size() + std::size_t(count));
        Reader r{data, data + size};
        for (std::int64_t i = 0; i < count; ++i) {
            E e;
            if constexpr (std::is_same_v<E, net::FrameEvent>) {
                std::int64_t end = 0;
                r.i64(end);
                EventRows::frameBody(r, e);
                (e.side == net::FrameEvent::Side::Send ? e.sendCompleteNs : e.recvCompleteNs) = end;
            } else {
                EventRows::row(r, e);
            }
            out.push_back(std::move(e));
        }
        if (r.p != r.end)
            throw SessionError(std::to_string(r.end - r.p) + " bytes after its " + std::to_string(count) +
                               " records");
    }

private:
    struct Writer {
        std::string &out;
        template <class T> void put(T v)
        {
            char bytes[sizeof(T)];
            std::memcpy(bytes, &v, sizeof(T));
            out.append(bytes, sizeof(T));
        }
        void i64(std::int64_t v) { put(v); }
        void u64(std::uint64_t v) { put(v); }
        void f64(double v) { put(v); }
        void text(const std::string &v)
        {
            put(std::uint32_t(v.size()));
            out.append(v);
        }
        void blob(const QByteArray &v)
        {
            put(std::int32_t(v.isNull() ? -1 : v.size()));
            out.append(v.constData(), std::size_t(v.size()));
        }
        void flag(bool v) { put(std::uint8_t(v ? 1 : 0)); }
        void rank(int v) { put(std::int32_t(v)); }
        void collective(net::CollectiveKind v) { put(std::uint8_t(v)); }
        void anyKind(net::CollectiveKind v) { put(std::uint8_t(v)); }
        void spanKind(SpanEvent::Kind v) { put(std::uint8_t(v)); }
        void side(net::FrameEvent::Side v) { put(std::uint8_t(v)); }
        void tag(std::uint32_t v) { put(v); }
    };

    // The reading side: each call takes the next field, or throws.
    struct Reader {
        const char *p;
        const char *end;
        template <class T> T get()
        {
            if (std::size_t(end - p) < sizeof(T))
                throw SessionError("a record runs past the end of the blob");
            T v;
            std::memcpy(&v, p, sizeof(T));
            p += sizeof(T);
            return v;
        }
        const char *take(std::size_t n)
        {
            if (std::size_t(end - p) < n)
                throw SessionError("a " + std::to_string(n) + "-byte field runs past the end of the blob");
            const char *at = p;
            p += n;
            return at;
        }
        void i64(std::int64_t &v) { v = get<std::int64_t>(); }
        void u64(std::uint64_t &v) { v = get<std::uint64_t>(); }
        void f64(double &v) { v = get<double>(); }
        void text(std::string &v)
        {
            const std::uint32_t n = get<std::uint32_t>();
            v.assign(take(n), n);
        }
        void blob(QByteArray &v)
        {
            const std::int32_t n = get<std::int32_t>();
            if (n < -1)
                throw SessionError("blob length " + std::to_string(n));
            v = n < 0 ? QByteArray() : QByteArray(take(std::size_t(n)), n);
        }
        void flag(bool &v) { v = get<std::uint8_t>() != 0; }
        void rank(int &v)
        {
            const std::int32_t r = get<std::int32_t>();
            if (r < -1)
                throw SessionError("rank " + std::to_string(r) + " out of range");
            v = r;
        }
        void collective(net::CollectiveKind &v)
        {
            const std::uint8_t k = get<std::uint8_t>();
            if (!net::isValidCollectiveKind(k))
                throw SessionError("collective kind " + std::to_string(k) + " out of range");
            v = net::CollectiveKind(k);
        }
        void anyKind(net::CollectiveKind &v) // a newer file's kind is not an error (event_rows.h)
        {
            const std::uint8_t k = get<std::uint8_t>();
            v = net::isValidCollectiveKind(k) ? net::CollectiveKind(k) : net::CollectiveKind::None;
        }
        void spanKind(SpanEvent::Kind &v)
        {
            const std::uint8_t k = get<std::uint8_t>();
            if (k >= SpanEvent::kKinds)
                throw SessionError("span kind " + std::to_string(k) + " out of range");
            v = SpanEvent::Kind(k);
        }
        void side(net::FrameEvent::Side &v)
        {
            const std::uint8_t s = get<std::uint8_t>();
            if (s > 1)
                throw SessionError("frame side " + std::to_string(s) + " out of range");
            v = net::FrameEvent::Side(s);
        }
        void tag(std::uint32_t &v) { v = get<std::uint32_t>(); }
    };
};

} // namespace smol::engine
