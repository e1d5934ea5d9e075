// `smolctl bench train`. Rounds alternate the configurations so machine
// noise hits each alike; each figure is the median over rounds.
//
// The "attached" sink does what a session recorder does: copy every frame
// event (on the I/O threads), every span and every memory sample (before and
// after each collective, on the node threads) into buffers under a lock.
// "Detached" runs with no sink at all (one relaxed atomic load per frame).
//
// From the attached rounds' spans: the share of ddp's all-reduce time hidden
// under backward (the all-reduce spans run on each node's communication
// thread; the part of them inside that node's backward spans is hidden).
// Then the ratio ddp/single at global batches 64, 512 and 2048, and zero3/ddp
// on the gpt (2 nodes, its default global batch of 32). Then compression
// (compress_bench.h; alone with --compression).
#include "train_bench.h"
#include "step_clock.h"

#include "compress_bench.h"

#include "engine/trainer.h"

#include "engine/session/session_events.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <set>

namespace smol::engine {

namespace {

class RecordingSink : public SessionEventSink {
public:
    void onFrame(const net::FrameEvent &e) override
    {
        std::lock_guard lock(m_mutex);
        m_events.push_back(e);
    }
    void onSpan(const SpanEvent &s) override
    {
        std::lock_guard lock(m_mutex);
        m_spans.push_back(s);
    }
    // All-reduce nanoseconds inside a backward span of the same node, and in
    // all; and how many buckets (distinct all-reduce names) there were.
    struct Hidden {
        std::int64_t hiddenNs = 0, allNs = 0;
        std::size_t buckets = 0;
    };
    Hidden hiddenAllReduce()
    {
        std::lock_guard lock(m_mutex);
        std::map<int, std::vector<std::pair<std::int64_t, std::int64_t>>> backward;
        for (const SpanEvent &s : m_spans)
            if (s.kind == SpanEvent::Kind::Backward)
                backward[s.node].emplace_back(s.startNs, s.endNs);
        Hidden h;
        std::set<std::string> names;
        for (const SpanEvent &s : m_spans) {
            if (s.kind != SpanEvent::Kind::Collective || s.collective != net::CollectiveKind::AllReduce)
                continue;
            names.insert(s.name);
            h.allNs += s.endNs - s.startNs;
            for (const auto &[b0, b1] : backward[s.node])
                h.hiddenNs += std::max<std::int64_t>(0, std::min(b1, s.endNs) - std::max(b0, s.startNs));
        }
        h.buckets = names.size();
        return h;
    }
    void onMemory(const MemorySample &m) override
    {
        std::lock_guard lock(m_mutex);
        m_memory.push_back(m);
    }
    std::size_t frames()
    {
        std::lock_guard lock(m_mutex);
        return m_events.size();
    }
    std::size_t memorySamples()
    {
        std::lock_guard lock(m_mutex);
        return m_memory.size();
    }

private:
    std::mutex m_mutex;
    std::vector<net::FrameEvent> m_events;
    std::vector<SpanEvent> m_spans;
    std::vector<MemorySample> m_memory;
};

} // namespace

namespace {

struct TrainBenchArgs {
    std::int64_t steps = 200, batch = 64;
    int rounds = 3;
    bool compressionOnly = false;
};

// Returns the error, empty when `args` are good.
QString parseTrainBenchArgs(const QStringList &args, TrainBenchArgs &a)
{
    for (int i = 0; i < args.size(); ++i) {
        if (args[i] == "--compression") {
            a.compressionOnly = true;
            continue;
        }
        bool ok = i + 1 < args.size();
        const QString name = args[i];
        const qlonglong v = ok ? args[++i].toLongLong(&ok) : 0;
        if (ok && name == "--steps" && v >= 1 && v <= 1000000)
            a.steps = v;
        else if (ok && name == "--global-batch" && v >= 2 && v % 2 == 0 && v <= 65536)
            a.batch = v;
        else if (ok && name == "--rounds" && v >= 1 && v <= 100)
            a.rounds = int(v);
        else
            return "bad or unknown argument '" + name + "' (--steps K, --global-batch B (even), --rounds R, --compression)";
    }
    return {};
}

TrainConfig benchConfig(const TrainBenchArgs &a, const char *strategy, int nodes)
{
    TrainConfig c;
    c.strategy = strategy;
    c.nodes = nodes;
    c.steps = a.steps;
    c.globalBatch = a.batch;
    c.transport = net::TransportKind::Tcp;
    return c;
}

QString share(const RecordingSink::Hidden &h)
{
    return QString::number(h.allNs > 0 ? double(h.hiddenNs) / double(h.allNs) : 0, 'f', 2);
}

// 1. single against ddp at the bench's batch, ddp with the recording sink
// attached and detached, the share of all-reduce hidden. Returns ddp/single.
double benchDdpAndTrace(const TrainBenchArgs &a, QTextStream &out)
{
    std::vector<double> single, ddp, detached, attached;
    std::size_t events = 0, memorySamples = 0;
    RecordingSink::Hidden hidden;
    for (int r = 0; r < a.rounds; ++r) {
        single.push_back(runTraining(benchConfig(a, "single", 1)).samplesPerS);
        TrainConfig d = benchConfig(a, "ddp", 2);
        d.countBytes = false;
        const TrainSummary plain = runTraining(d);
        ddp.push_back(plain.samplesPerS);
        detached.push_back(1000 * plain.seconds / double(a.steps));
        RecordingSink sink;
        d.events = &sink;
        attached.push_back(1000 * runTraining(d).seconds / double(a.steps));
        events = sink.frames();
        memorySamples = sink.memorySamples();
        const RecordingSink::Hidden h = sink.hiddenAllReduce();
        hidden.hiddenNs += h.hiddenNs;
        hidden.allNs += h.allNs;
        hidden.buckets = h.buckets;
    }
    const double s = bench::median(single), p = bench::median(ddp), at = bench::median(attached), dt = bench::median(detached);
    out << "single (1 node)         samples/s: " << QString::number(s, 'f', 0) << "\n";
    out << "ddp (2 nodes)           samples/s: " << QString::number(p, 'f', 0) << "\n";
    out << "ratio ddp/single: " << QString::number(s > 0 ? p / s : 0, 'f', 2) << "\n";
    out << "ddp step time, trace sink detached: " << QString::number(dt, 'f', 3) << " ms\n";
    out << "ddp step time, trace sink attached: " << QString::number(at, 'f', 3) << " ms (" << events
        << " frame events and " << memorySamples << " memory samples at collectives recorded per run)\n";
    out << "trace overhead ratio attached/detached: " << QString::number(dt > 0 ? at / dt : 0, 'f', 3)
        << " (target <= 1.03)\n";
    out << "share of all-reduce time hidden under backward: " << share(hidden) << " (mlp, " << hidden.buckets
        << " bucket(s); the last one is complete only when backward is)\n";
    out.flush();
    return s > 0 ? p / s : 0;
}

// 2. ddp/single at global batches 64, 512 and 2048 (`atBatch` measured
// already at the bench's own batch).
void benchBatchLadder(const TrainBenchArgs &a, double atBatch, QTextStream &out)
{
    for (const std::int64_t b : {std::int64_t(64), std::int64_t(512), std::int64_t(2048)}) {
        double ratio = atBatch;
        if (b != a.batch) {
            std::vector<double> one, two;
            for (int r = 0; r < a.rounds; ++r) {
                TrainConfig c1 = benchConfig(a, "single", 1), c2 = benchConfig(a, "ddp", 2);
                c1.globalBatch = c2.globalBatch = b;
                // 400k samples at least: the first steps' warm-up (allocations,
                // first touches) would weigh on a short run.
                c1.steps = c2.steps = std::max<std::int64_t>(a.steps, 409600 / b);
                c2.countBytes = false;
                one.push_back(runTraining(c1).samplesPerS);
                two.push_back(runTraining(c2).samplesPerS);
            }
            ratio = bench::median(one) > 0 ? bench::median(two) / bench::median(one) : 0;
        }
        out << "ratio ddp/single at global batch " << b << ": " << QString::number(ratio, 'f', 2) << "\n";
        out.flush();
    }
}

// 3. zero3 against ddp on the gpt, and ddp's overlap there (2 buckets).
void benchGpt(const TrainBenchArgs &a, QTextStream &out)
{
    auto gpt = [&](const char *strategy) {
        TrainConfig c = benchConfig(a, strategy, 2);
        c.model.kind = "gpt";
        c.globalBatch = 32;
        c.steps = std::max<std::int64_t>(100, a.steps / 2);
        c.countBytes = false;
        return c;
    };
    std::vector<double> zero3, ddpGpt;
    for (int r = 0; r < a.rounds; ++r)
        for (const char *strategy : {"ddp", "zero3"})
            (strategy[0] == 'z' ? zero3 : ddpGpt).push_back(runTraining(gpt(strategy)).samplesPerS);
    const double z = bench::median(zero3), g = bench::median(ddpGpt);
    TrainConfig c = gpt("ddp");
    RecordingSink sink;
    c.events = &sink;
    runTraining(c);
    const RecordingSink::Hidden h = sink.hiddenAllReduce();
    out << "share of all-reduce time hidden under backward on gpt (2 nodes): " << share(h) << " (" << h.buckets
        << " buckets)\n";
    out << "zero3 (2 nodes, gpt)    samples/s: " << QString::number(z, 'f', 0) << "\n";
    out << "ddp (2 nodes, gpt)      samples/s: " << QString::number(g, 'f', 0) << "\n";
    out << "ratio zero3/ddp on gpt (2 nodes): " << QString::number(g > 0 ? z / g : 0, 'f', 2) << "\n";
    out.flush();
}

} // namespace

int runTrainBench(const QStringList &args, QTextStream &out, QTextStream &err)
{
    TrainBenchArgs a;
    if (const QString bad = parseTrainBenchArgs(args, a); !bad.isEmpty()) {
        err << "smolctl bench train: " << bad << "\n";
        return 2;
    }
    if (a.compressionOnly)
        return runCompressionBench(a.rounds, out, err);
    out << "# mlp, global batch " << a.batch << ", " << a.steps
        << " steps, one LibTorch thread per node, TCP loopback;\n"
        << "# median of " << a.rounds << " alternating rounds\n";
    out.flush();
    try {
        benchBatchLadder(a, benchDdpAndTrace(a, out), out);
        benchGpt(a, out);
    } catch (const std::exception &e) {
        err << "smolctl bench train: " << e.what() << "\n";
        return 1;
    }
    return runCompressionBench(a.rounds, out, err);
}

} // namespace smol::engine
