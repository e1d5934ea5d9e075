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

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

} // namespace

int runTrainBench(const QStringList &args, QTextStream &out, QTextStream &err)
{
    std::int64_t steps = 200, batch = 64;
    int rounds = 3;
    bool compressionOnly = false;
    for (int i = 0; i < args.size(); ++i) {
        if (args[i] == "--compression") {
            compressionOnly = true;
            continue;
        }
        bool ok = i + 1 < args.size();
        const QString a = args[i];
        const qlonglong v = ok ? args[++i].toLongLong(&ok) : 0;
        if (ok && a == "--steps" && v >= 1 && v <= 1000000)
            steps = v;
        else if (ok && a == "--global-batch" && v >= 2 && v % 2 == 0 && v <= 65536)
            batch = v;
        else if (ok && a == "--rounds" && v >= 1 && v <= 100)
            rounds = int(v);
        else {
            err << "smolctl bench train: bad or unknown argument '" << a
                << "' (--steps K, --global-batch B (even), --rounds R, --compression)\n";
            return 2;
        }
    }
    if (compressionOnly)
        return runCompressionBench(rounds, out, err);
    auto config = [&](const char *strategy, int nodes) {
        TrainConfig c;
        c.strategy = strategy;
        c.nodes = nodes;
        c.steps = steps;
        c.globalBatch = batch;
        c.transport = net::TransportKind::Tcp;
        return c;
    };
    out << "# mlp, global batch " << batch << ", " << steps << " steps, one LibTorch thread per node, TCP loopback;\n"
        << "# median of " << rounds << " alternating rounds\n";
    out.flush();
    std::vector<double> single, ddp, detached, attached;
    std::size_t events = 0, memorySamples = 0;
    RecordingSink::Hidden hidden;
    try {
        for (int r = 0; r < rounds; ++r) {
            single.push_back(runTraining(config("single", 1)).samplesPerS);
            TrainConfig d = config("ddp", 2);
            d.countBytes = false;
            const TrainSummary plain = runTraining(d);
            ddp.push_back(plain.samplesPerS);
            detached.push_back(1000 * plain.seconds / double(steps));
            RecordingSink sink;
            d.events = &sink;
            attached.push_back(1000 * runTraining(d).seconds / double(steps));
            events = sink.frames();
            memorySamples = sink.memorySamples();
            const RecordingSink::Hidden h = sink.hiddenAllReduce();
            hidden.hiddenNs += h.hiddenNs;
            hidden.allNs += h.allNs;
            hidden.buckets = h.buckets;
        }
    } catch (const std::exception &e) {
        err << "smolctl bench train: " << e.what() << "\n";
        return 1;
    }
    const double s = median(single), p = median(ddp), a = median(attached), dt = median(detached);
    out << "single (1 node)         samples/s: " << QString::number(s, 'f', 0) << "\n";
    out << "ddp (2 nodes)           samples/s: " << QString::number(p, 'f', 0) << "\n";
    out << "ratio ddp/single: " << QString::number(s > 0 ? p / s : 0, 'f', 2) << "\n";
    out << "ddp step time, trace sink detached: " << QString::number(dt, 'f', 3) << " ms\n";
    out << "ddp step time, trace sink attached: " << QString::number(a, 'f', 3) << " ms (" << events
        << " frame events and " << memorySamples << " memory samples at collectives recorded per run)\n";
    out << "trace overhead ratio attached/detached: " << QString::number(dt > 0 ? a / dt : 0, 'f', 3)
        << " (target <= 1.03)\n";
    const auto share = [](const RecordingSink::Hidden &h) {
        return QString::number(h.allNs > 0 ? double(h.hiddenNs) / double(h.allNs) : 0, 'f', 2);
    };
    out << "share of all-reduce time hidden under backward: " << share(hidden) << " (mlp, " << hidden.buckets
        << " bucket(s); the last one is complete only when backward is)\n";
    out.flush();

    // The ladder of global batches, then zero3 against ddp on the gpt.
    try {
        for (const std::int64_t b : {std::int64_t(64), std::int64_t(512), std::int64_t(2048)}) {
            double ratio = s > 0 ? p / s : 0;
            if (b != batch) {
                std::vector<double> one, two;
                for (int r = 0; r < rounds; ++r) {
                    TrainConfig c1 = config("single", 1), c2 = config("ddp", 2);
                    c1.globalBatch = c2.globalBatch = b;
                    // 400k samples at least: the first steps' warm-up (allocations,
                    // first touches) would weigh on a short run.
                    c1.steps = c2.steps = std::max<std::int64_t>(steps, 409600 / b);
                    c2.countBytes = false;
                    one.push_back(runTraining(c1).samplesPerS);
                    two.push_back(runTraining(c2).samplesPerS);
                }
                ratio = median(one) > 0 ? median(two) / median(one) : 0;
            }
            out << "ratio ddp/single at global batch " << b << ": " << QString::number(ratio, 'f', 2) << "\n";
            out.flush();
        }
        std::vector<double> zero3, ddpGpt;
        for (int r = 0; r < rounds; ++r) {
            for (const char *strategy : {"ddp", "zero3"}) {
                TrainConfig c = config(strategy, 2);
                c.model.kind = "gpt";
                c.globalBatch = 32;
                c.steps = std::max<std::int64_t>(100, steps / 2);
                c.countBytes = false;
                (strategy[0] == 'z' ? zero3 : ddpGpt).push_back(runTraining(c).samplesPerS);
            }
        }
        const double z = median(zero3), g = median(ddpGpt);
        { // ddp's overlap where there is more than one bucket to overlap
            TrainConfig c = config("ddp", 2);
            c.model.kind = "gpt";
            c.globalBatch = 32;
            c.steps = std::max<std::int64_t>(100, steps / 2);
            RecordingSink sink;
            c.events = &sink;
            runTraining(c);
            const RecordingSink::Hidden h = sink.hiddenAllReduce();
            out << "share of all-reduce time hidden under backward on gpt (2 nodes): " << share(h) << " ("
                << h.buckets << " buckets)\n";
        }
        out << "zero3 (2 nodes, gpt)    samples/s: " << QString::number(z, 'f', 0) << "\n";
        out << "ddp (2 nodes, gpt)      samples/s: " << QString::number(g, 'f', 0) << "\n";
        out << "ratio zero3/ddp on gpt (2 nodes): " << QString::number(g > 0 ? z / g : 0, 'f', 2) << "\n";
    } catch (const std::exception &e) {
        err << "smolctl bench train: " << e.what() << "\n";
        return 1;
    }
    out.flush();
    return runCompressionBench(rounds, out, err);
}

} // namespace smol::engine
