// Events to bytes and back, each kind walked by its EventRows row.
#include "event_stream.h"

#include "event_rows.h"
#include "net/dtype.h"

#include <QtEndian>

#include <climits>
#include <cstring>
#include <string>

namespace smol::engine {

namespace {

constexpr char kMagic[4] = {'S', 'M', 'E', 'V'};

struct Writer {
    QByteArray &out;
    void raw64(std::uint64_t v)
    {
        char b[8];
        qToLittleEndian<std::uint64_t>(v, b);
        out.append(b, 8);
    }
    void u32(std::uint32_t v)
    {
        char b[4];
        qToLittleEndian<std::uint32_t>(v, b);
        out.append(b, 4);
    }
    void i64(const std::int64_t &v) { raw64(std::uint64_t(v)); }
    void u64(const std::uint64_t &v) { raw64(v); }
    void f64(const double &v)
    {
        std::uint64_t bits = 0;
        std::memcpy(&bits, &v, 8);
        raw64(bits);
    }
    void bytes(const char *p, std::size_t n)
    {
        u32(std::uint32_t(n));
        out.append(p, qsizetype(n));
    }
    void text(const std::string &v) { bytes(v.data(), std::min(v.size(), kMaxStreamText)); }
    void blob(const QByteArray &v) { bytes(v.constData(), std::size_t(v.size())); }
    void flag(const bool &v) { out.append(char(v ? 1 : 0)); }
    void rank(const int &v) { raw64(std::uint64_t(std::int64_t(v))); }
    void collective(const net::CollectiveKind &v) { raw64(std::uint64_t(v)); }
    void anyKind(const net::CollectiveKind &v) { raw64(std::uint64_t(v)); }
    void spanKind(const SpanEvent::Kind &v) { raw64(std::uint64_t(v)); }
    void side(const net::FrameEvent::Side &v) { raw64(std::uint64_t(v)); }
    void tag(const std::uint32_t &v) { raw64(v); }
};

struct Reader {
    const QByteArray &in;
    std::size_t at = 0;

    [[noreturn]] static void fail(const std::string &why)
    {
        throw SessionError("event batch damaged: " + why);
    }
    const char *take(std::size_t n)
    {
        if (n > std::size_t(in.size()) - at)
            fail("it ends inside a row");
        const char *p = in.constData() + at;
        at += n;
        return p;
    }
    std::uint64_t raw64() { return qFromLittleEndian<std::uint64_t>(take(8)); }
    std::uint32_t u32() { return qFromLittleEndian<std::uint32_t>(take(4)); }
    std::int64_t ranged(std::int64_t lo, std::int64_t hi, const char *what)
    {
        const auto v = std::int64_t(raw64());
        if (v < lo || v > hi)
            fail(std::string(what) + " " + std::to_string(v) + " out of range");
        return v;
    }
    void i64(std::int64_t &v) { v = std::int64_t(raw64()); }
    void u64(std::uint64_t &v) { v = raw64(); }
    void f64(double &v)
    {
        const std::uint64_t bits = raw64();
        std::memcpy(&v, &bits, 8);
    }
    std::size_t length(std::size_t max, const char *what)
    {
        const std::uint32_t n = u32();
        if (n > max)
            fail(std::string(what) + " of " + std::to_string(n) + " bytes");
        return n;
    }
    void text(std::string &v)
    {
        const std::size_t n = length(kMaxStreamText, "a text");
        v.assign(take(n), n);
    }
    void blob(QByteArray &v)
    {
        const std::size_t n = length(kMaxStreamBlob, "a blob");
        v = QByteArray(take(n), qsizetype(n));
    }
    void flag(bool &v)
    {
        const char c = *take(1);
        if (c != 0 && c != 1)
            fail("a flag that is neither 0 nor 1");
        v = c == 1;
    }
    void rank(int &v) { v = int(ranged(-1, INT_MAX, "rank")); }
    void collective(net::CollectiveKind &v)
    {
        const auto k = ranged(0, 255, "collective kind");
        if (!net::isValidCollectiveKind(std::uint8_t(k)))
            fail("collective kind " + std::to_string(k) + " unknown");
        v = net::CollectiveKind(k);
    }
    void anyKind(net::CollectiveKind &v)
    {
        const auto k = std::int64_t(raw64());
        v = k >= 0 && k <= 255 && net::isValidCollectiveKind(std::uint8_t(k)) ? net::CollectiveKind(k)
                                                                              : net::CollectiveKind::None;
    }
    void spanKind(SpanEvent::Kind &v) { v = SpanEvent::Kind(ranged(0, SpanEvent::kKinds - 1, "span kind")); }
    void side(net::FrameEvent::Side &v) { v = net::FrameEvent::Side(ranged(0, 1, "frame side")); }
    void tag(std::uint32_t &v) { v = std::uint32_t(ranged(0, UINT32_MAX, "frame tag")); }
};

template <class E> void writeAll(Writer &w, const std::vector<E> &events)
{
    for (const E &e : events)
        EventRows::row(w, e);
}

template <class E> void readAll(Reader &r, std::vector<E> &out, std::size_t n)
{
    out.resize(n);
    for (E &e : out)
        EventRows::row(r, e);
}

} // namespace

QByteArray encodeEvents(const SessionEvents &events)
{
    QByteArray out;
    out.reserve(qsizetype(64 + events.size() * 64));
    out.append(kMagic, 4);
    Writer w{out};
    for (std::size_t n : {events.frames.size(), events.spans.size(), events.memory.size(), events.metrics.size(),
                          events.logs.size(), events.tensors.size()})
        w.u32(std::uint32_t(n));
    for (const net::FrameEvent &e : events.frames) {
        std::int64_t end = eventTimeNs(e), id = 0;
        EventRows::frame(w, e, end, id);
    }
    writeAll(w, events.spans);
    writeAll(w, events.memory);
    writeAll(w, events.metrics);
    writeAll(w, events.logs);
    writeAll(w, events.tensors);
    return out;
}

SessionEvents decodeEvents(const QByteArray &bytes)
{
    Reader r{bytes};
    if (std::memcmp(r.take(4), kMagic, 4) != 0)
        Reader::fail("not an event batch");
    std::size_t counts[6];
    std::size_t total = 0;
    for (std::size_t &n : counts) {
        n = r.u32();
        total += n;
    }
    // Every row takes at least 8 bytes: a count the bytes cannot hold is a lie.
    if (total > kMaxStreamEvents || total > (std::size_t(bytes.size()) - r.at) / 8)
        Reader::fail("it claims " + std::to_string(total) + " events in " + std::to_string(bytes.size()) + " bytes");
    SessionEvents out;
    out.frames.resize(counts[0]);
    for (net::FrameEvent &e : out.frames) {
        std::int64_t end = 0, id = 0;
        EventRows::frame(r, e, end, id);
        (e.side == net::FrameEvent::Side::Send ? e.sendCompleteNs : e.recvCompleteNs) = end;
    }
    readAll(r, out.spans, counts[1]);
    readAll(r, out.memory, counts[2]);
    readAll(r, out.metrics, counts[3]);
    readAll(r, out.logs, counts[4]);
    readAll(r, out.tensors, counts[5]);
    if (r.at != std::size_t(bytes.size()))
        Reader::fail(std::to_string(std::size_t(bytes.size()) - r.at) + " bytes after the last row");
    return out;
}

} // namespace smol::engine
