// `smolctl bench train`. Rounds alternate the configurations so machine
// noise hits each alike; each figure is the median over rounds.
//
// The "attached" sink does what a session recorder does: copy every frame
// event (on the I/O threads), every span and every memory sample (before and
// after each collective, on the node threads) into buffers under a lock.
// "Detached" runs with no sink at all (one relaxed atomic load per frame).
#include "train_bench.h"

#include "trainer.h"

#include "engine/session/session_events.h"

#include <algorithm>
#include <mutex>

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
    for (int i = 0; i < args.size(); ++i) {
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
                << "' (--steps K, --global-batch B (even), --rounds R)\n";
            return 2;
        }
    }
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
    return 0;
}

} // namespace smol::engine
