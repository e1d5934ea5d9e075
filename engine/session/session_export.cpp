// Chrome trace and CSV exports: a buffered writer over QSaveFile, and one
// streamed pass per table. Packets become flows by matching each frame's
// send and receive sides as they stream by in time order; a side waits in
// a map until its partner arrives, so only frames in flight are held.
#include "session_export.h"

#include <QSaveFile>

#include <cmath>
#include <cstdio>
#include <deque>
#include <limits>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>
#include <utility>

namespace smol::engine {

namespace {

// a - b, saturated: a damaged file's extreme times must not overflow.
std::int64_t difference(std::int64_t a, std::int64_t b)
{
    std::int64_t r = 0;
    if (__builtin_sub_overflow(a, b, &r))
        return b < 0 ? std::numeric_limits<std::int64_t>::max() : std::numeric_limits<std::int64_t>::min();
    return r;
}

// Buffered output to a file that appears only when commit() succeeds.
class Output {
public:
    explicit Output(const QString &path)
        : m_file(path)
    {
        if (!m_file.open(QIODevice::WriteOnly))
            fail();
        m_buffer.reserve(kFlushBytes + 4096);
    }

    Output &operator<<(const char *s)
    {
        m_buffer += s;
        return *this;
    }

    Output &operator<<(const std::string &s)
    {
        m_buffer += s;
        return *this;
    }

    Output &operator<<(std::int64_t v)
    {
        char digits[24];
        const int n = std::snprintf(digits, sizeof digits, "%lld", static_cast<long long>(v));
        m_buffer.append(digits, std::size_t(n));
        return flushIfFull();
    }

    // A JSON string, quoted and escaped.
    Output &quoted(const std::string &s)
    {
        m_buffer += '"';
        for (const char c : s) {
            switch (c) {
            case '"':
                m_buffer += "\\\"";
                break;
            case '\\':
                m_buffer += "\\\\";
                break;
            case '\n':
                m_buffer += "\\n";
                break;
            case '\r':
                m_buffer += "\\r";
                break;
            case '\t':
                m_buffer += "\\t";
                break;
            default:
                if (static_cast<unsigned char>(c) < 0x20) {
                    char escaped[8];
                    std::snprintf(escaped, sizeof escaped, "\\u%04x", unsigned(c));
                    m_buffer += escaped;
                } else {
                    m_buffer += c;
                }
            }
        }
        m_buffer += '"';
        return flushIfFull();
    }

    // ns as decimal microseconds, exactly ("-12.345").
    Output &micros(std::int64_t ns)
    {
        const bool negative = ns < 0;
        const unsigned long long magnitude =
            negative ? 0ULL - static_cast<unsigned long long>(ns) : static_cast<unsigned long long>(ns);
        char digits[32];
        const int n = std::snprintf(digits, sizeof digits, "%s%llu.%03llu", negative ? "-" : "",
                                    magnitude / 1000, magnitude % 1000);
        m_buffer.append(digits, std::size_t(n));
        return flushIfFull();
    }

    Output &number(double v)
    {
        char digits[32];
        const int n = std::snprintf(digits, sizeof digits, "%.17g", v);
        m_buffer.append(digits, std::size_t(n));
        return flushIfFull();
    }

    void commit()
    {
        flush();
        if (!m_file.commit())
            fail();
    }

private:
    static constexpr std::size_t kFlushBytes = 1 << 20;

    Output &flushIfFull()
    {
        if (m_buffer.size() >= kFlushBytes)
            flush();
        return *this;
    }

    void flush()
    {
        if (m_file.write(m_buffer.data(), qint64(m_buffer.size())) != qint64(m_buffer.size()))
            fail();
        m_buffer.clear();
    }

    [[noreturn]] void fail()
    {
        throw SessionError(QStringLiteral("%1: cannot write: %2")
                               .arg(m_file.fileName(), m_file.errorString())
                               .toStdString());
    }

    QSaveFile m_file;
    std::string m_buffer;
};

// Threads of a node's process, in display order; lanes of a busy thread
// (overlapping spans) are threads kLaneStride apart.
enum Track { Steps = 1, Compute, Collectives, Pauses, Packets, Log, kTracks };
constexpr int kLaneStride = 10;

const char *trackName(int track)
{
    switch (track) {
    case Steps:
        return "steps";
    case Compute:
        return "compute";
    case Collectives:
        return "collectives";
    case Pauses:
        return "pauses";
    case Packets:
        return "packets";
    case Log:
        return "log";
    }
    return "?";
}

int trackOf(SpanEvent::Kind kind)
{
    switch (kind) {
    case SpanEvent::Kind::Step:
        return Steps;
    case SpanEvent::Kind::Collective:
        return Collectives;
    case SpanEvent::Kind::Pause:
        return Pauses;
    default:
        return Compute;
    }
}

class ChromeTraceWriter {
public:
    ChromeTraceWriter(const SessionReader &reader, const QString &path)
        : m_reader(reader)
        , m_out(path)
        , m_origin(reader.timeRange().first)
    {
    }

    void write()
    {
        m_out << "{\"traceEvents\":[\n";
        for (const SessionNode &n : m_reader.header().nodeList) {
            m_named.insert(n.rank);
            processMetadata(n.rank, n.name.empty() ? "node " + std::to_string(n.rank) : n.name);
        }
        m_reader.forEachSpanByStart([this](const SpanEvent &s) { span(s); });
        m_reader.forEachFrame([this](const net::FrameEvent &f) { frame(f); });
        m_reader.forEachMemory([this](const MemorySample &m) { memory(m); });
        m_reader.forEachMetric([this](const MetricSample &m) { metric(m); });
        m_reader.forEachLog([this](const LogLine &l) { log(l); });
        for (const TensorRecord &t : m_reader.tensors(std::numeric_limits<std::int64_t>::min(),
                                                      std::numeric_limits<std::int64_t>::max()))
            tensor(t);
        for (const auto &[pid, tid] : m_threads) {
            const int track = tid % kLaneStride;
            const int lane = tid / kLaneStride;
            std::string name = trackName(track);
            if (lane > 0)
                name += " (" + std::to_string(lane + 1) + ")";
            begin() << "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" << std::int64_t(pid)
                    << ",\"tid\":" << std::int64_t(tid) << ",\"args\":{\"name\":";
            m_out.quoted(name) << "}}";
            begin() << "{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":" << std::int64_t(pid)
                    << ",\"tid\":" << std::int64_t(tid) << ",\"args\":{\"sort_index\":" << std::int64_t(tid)
                    << "}}";
        }
        const SessionHeader &h = m_reader.header();
        m_out << "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"strategy\":";
        m_out.quoted(h.strategy) << ",\"model\":";
        m_out.quoted(h.model) << ",\"origin_ns\":" << m_origin << "}}\n";
        m_out.commit();
    }

private:
    Output &begin()
    {
        m_out << (m_first ? "" : ",\n");
        m_first = false;
        return m_out;
    }

    Output &ts(std::int64_t ns) { return m_out.micros(difference(ns, m_origin)); }

    // Names a process the first time one of its events is written; call it
    // before begin() of the event, as it writes the name events itself.
    int pid(int node)
    {
        const int p = node < 0 ? kChromeCoordinatorPid : node;
        if (m_named.insert(p).second)
            processMetadata(p, node < 0 ? std::string("coordinator") : "node " + std::to_string(node));
        return p;
    }

    void processMetadata(int p, const std::string &name)
    {
        begin() << "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" << std::int64_t(p)
                << ",\"args\":{\"name\":";
        m_out.quoted(name) << "}}";
        begin() << "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":" << std::int64_t(p)
                << ",\"args\":{\"sort_index\":" << std::int64_t(p) << "}}";
    }

    int tid(int p, int track, int lane = 0)
    {
        const int t = track + kLaneStride * lane;
        m_threads.insert({p, t});
        return t;
    }

    // The first lane of the node's track free at `start` (spans arrive in
    // start order), so slices on one thread never overlap.
    int lane(int p, int track, std::int64_t start, std::int64_t end)
    {
        std::vector<std::int64_t> &ends = m_laneEnds[{p, track}];
        std::size_t l = 0;
        while (l < ends.size() && ends[l] > start)
            ++l;
        if (l == ends.size())
            ends.push_back(0);
        ends[l] = std::max(start, end);
        return int(l);
    }

    void span(const SpanEvent &s)
    {
        const int p = pid(s.node);
        const int track = trackOf(s.kind);
        const int t = tid(p, track, lane(p, track, s.startNs, s.endNs));
        std::string name = s.name;
        if (name.empty())
            name = s.kind == SpanEvent::Kind::Collective ? net::collectiveName(s.collective)
                                                         : spanKindName(s.kind);
        begin() << "{\"ph\":\"X\",\"name\":";
        m_out.quoted(name) << ",\"cat\":\"" << spanKindName(s.kind) << "\",\"pid\":" << std::int64_t(p)
                           << ",\"tid\":" << std::int64_t(t) << ",\"ts\":";
        ts(s.startNs) << ",\"dur\":";
        m_out.micros(std::max<std::int64_t>(0, difference(s.endNs, s.startNs)))
            << ",\"args\":{\"step\":" << s.step;
        if (s.kind == SpanEvent::Kind::Collective || s.collective != net::CollectiveKind::None) {
            m_out << ",\"collective\":\"" << net::collectiveName(s.collective)
                  << "\",\"seq\":" << std::int64_t(s.seq) << ",\"bytes\":" << std::int64_t(s.bytes);
        }
        m_out << "}}";
    }

    void frame(const net::FrameEvent &f)
    {
        const bool send = f.side == net::FrameEvent::Side::Send;
        const int p = pid(send ? f.src : f.dst);
        const int t = tid(p, Packets);
        const std::int64_t at = send ? f.sendStartNs : f.recvCompleteNs;
        begin() << "{\"ph\":\"X\",\"name\":\"" << (send ? "send" : "recv")
                << "\",\"cat\":\"packet\",\"pid\":" << std::int64_t(p) << ",\"tid\":" << std::int64_t(t)
                << ",\"ts\":";
        ts(at) << ",\"dur\":0.001,\"args\":{\"" << (send ? "to" : "from")
               << "\":" << std::int64_t(send ? f.dst : f.src) << ",\"bytes\":" << std::int64_t(f.bytes)
               << ",\"collective\":\"" << net::collectiveName(f.kind) << "\",\"seq\":" << std::int64_t(f.seq)
               << ",\"tag\":" << std::int64_t(f.tag) << "}}";
        if (f.src == f.dst)
            return; // a backend's whole-collective event: no receiving side
        const Key key{f.src, f.dst, int(f.kind), f.seq, f.tag};
        Waiting &w = m_waiting[key];
        std::deque<std::int64_t> &partners = send ? w.receives : w.sends;
        if (partners.empty()) {
            (send ? w.sends : w.receives).push_back(at);
            return;
        }
        const std::int64_t sendStart = send ? at : partners.front();
        const std::int64_t recvComplete = send ? partners.front() : at;
        partners.pop_front();
        if (w.sends.empty() && w.receives.empty())
            m_waiting.erase(key);
        const std::int64_t id = ++m_flows;
        const int from = pid(f.src), to = pid(f.dst); // (naming a process writes an event: not mid-event)
        begin() << "{\"ph\":\"s\",\"name\":\"packet\",\"cat\":\"packet\",\"id\":" << id
                << ",\"pid\":" << std::int64_t(from) << ",\"tid\":" << std::int64_t(tid(from, Packets))
                << ",\"ts\":";
        ts(sendStart) << "}";
        begin() << "{\"ph\":\"f\",\"bp\":\"e\",\"name\":\"packet\",\"cat\":\"packet\",\"id\":" << id
                << ",\"pid\":" << std::int64_t(to) << ",\"tid\":" << std::int64_t(tid(to, Packets))
                << ",\"ts\":";
        ts(recvComplete) << "}";
    }

    // A step's peaks are a counter of their own: in `memory` they would read
    // as a spike at the step's end.
    void memory(const MemorySample &m)
    {
        const int p = pid(m.node);
        begin() << "{\"ph\":\"C\",\"name\":\"" << (m.stepPeak ? "memory step peak" : "memory")
                << "\",\"pid\":" << std::int64_t(p) << ",\"ts\":";
        ts(m.tNs) << ",\"args\":{\"params\":" << m.memory.params << ",\"grads\":" << m.memory.grads
                  << ",\"optimizer\":" << m.memory.optimizer << ",\"activations\":" << m.memory.activations
                  << ",\"comm\":" << m.memory.comm << "}}";
        if (m.stepPeak)
            return;
        begin() << "{\"ph\":\"C\",\"name\":\"live bytes\",\"pid\":" << std::int64_t(p) << ",\"ts\":";
        ts(m.tNs) << ",\"args\":{\"live\":" << m.memory.live << "}}";
    }

    void metric(const MetricSample &m)
    {
        if (!std::isfinite(m.value))
            return; // JSON has no NaN; the CSV export keeps them
        const int p = pid(m.node);
        begin() << "{\"ph\":\"C\",\"name\":";
        m_out.quoted(m.name) << ",\"pid\":" << std::int64_t(p) << ",\"ts\":";
        ts(m.tNs) << ",\"args\":{\"value\":";
        m_out.number(m.value) << "}}";
    }

    void log(const LogLine &l)
    {
        const int p = pid(l.node);
        const std::string name = l.text.size() > 80 ? l.text.substr(0, 77) + "..." : l.text;
        begin() << "{\"ph\":\"i\",\"s\":\"t\",\"name\":";
        // Cutting at byte 77 may split a UTF-8 character: go through QString,
        // which replaces the broken tail.
        m_out.quoted(QString::fromStdString(name).toStdString())
            << ",\"cat\":\"log\",\"pid\":" << std::int64_t(p) << ",\"tid\":" << std::int64_t(tid(p, Log))
            << ",\"ts\":";
        ts(l.tNs) << ",\"args\":{\"text\":";
        m_out.quoted(l.text) << "}}";
    }

    void tensor(const TensorRecord &r)
    {
        const int p = pid(r.node);
        begin() << "{\"ph\":\"i\",\"s\":\"t\",\"name\":\"tensor snapshot\",\"cat\":\"tensor\",\"pid\":"
                << std::int64_t(p) << ",\"tid\":" << std::int64_t(tid(p, Pauses)) << ",\"ts\":";
        ts(r.tNs) << ",\"args\":{\"pause\":" << std::int64_t(r.pauseId) << ",\"name\":";
        m_out.quoted(r.name) << ",\"step\":" << r.step << ",\"collective\":\""
                             << net::collectiveName(r.collective) << "\",\"seq\":" << std::int64_t(r.seq)
                             << ",\"before\":" << (r.before ? "true" : "false") << "}}";
    }

    using Key = std::tuple<int, int, int, std::uint64_t, std::uint32_t>; // src, dst, kind, seq, tag
    struct Waiting {
        std::deque<std::int64_t> sends;    // send start of sends still waiting for their receive
        std::deque<std::int64_t> receives; // receive completion of receives waiting for their send
    };

    const SessionReader &m_reader;
    Output m_out;
    const std::int64_t m_origin;
    bool m_first = true;
    std::set<int> m_named;
    std::set<std::pair<int, int>> m_threads;
    std::map<std::pair<int, int>, std::vector<std::int64_t>> m_laneEnds;
    std::map<Key, Waiting> m_waiting;
    std::int64_t m_flows = 0;
};

} // namespace

void exportChromeTrace(const SessionReader &reader, const QString &out)
{
    ChromeTraceWriter(reader, out).write();
}

void exportMetricsCsv(const SessionReader &reader, const QString &out)
{
    Output csv(out);
    csv << "t_s,step,node,name,value\n";
    const std::int64_t start = reader.header().startNs;
    reader.forEachMetric([&](const MetricSample &m) {
        const std::int64_t ns = difference(m.tNs, start);
        const unsigned long long magnitude =
            ns < 0 ? 0ULL - static_cast<unsigned long long>(ns) : static_cast<unsigned long long>(ns);
        char seconds[40];
        std::snprintf(seconds, sizeof seconds, "%s%llu.%09llu,", ns < 0 ? "-" : "", magnitude / 1000000000ULL,
                      magnitude % 1000000000ULL);
        csv << seconds << m.step << "," << std::int64_t(m.node) << ",";
        if (m.name.find_first_of(",\"\n\r") != std::string::npos) {
            std::string quoted = "\"";
            for (char c : m.name)
                quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
            csv << quoted << "\"";
        } else {
            csv << m.name;
        }
        csv << ",";
        if (std::isnan(m.value))
            csv << "nan";
        else
            csv.number(m.value);
        csv << "\n";
    });
    csv.commit();
}

} // namespace smol::engine
