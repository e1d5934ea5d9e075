// `smolctl bench session`: three measurements, each printed with its target.
//
// 1. Recording overhead: a ddp mlp run on 2 nodes (TCP loopback) with a
//    SessionRecorder attached (every frame, span, memory sample and metric
//    written to a real file) vs none, back to back in each round (the order
//    reversed every other round); the figure is the median over rounds of
//    the ratio of the two step times (target <= 1.03).
// 2. Write rate: 1M frame events handed to a SessionRecorder as fast as one
//    thread can, until finish() has committed them all: events per second
//    end to end (target >= 1M/s).
// 3. Read latency: that 1M-event file opened with SessionReader, then 20
//    random 1 s windows read (frames, spans, memory, metrics): median and
//    worst (target <= 50 ms). The events are spread at the rate the
//    recorded ddp run of (1) produced them (at least 10k events/s), so a
//    window holds what a real run's second holds.
#include "session_bench.h"
#include "step_clock.h"

#include "engine/session/session_reader.h"
#include "engine/session/session_recorder.h"
#include "engine/trainer.h"

#include <QDir>
#include <QElapsedTimer>
#include <QRandomGenerator>
#include <QTemporaryDir>

#include <algorithm>
#include <atomic>
#include <chrono>

namespace smol::engine {

namespace {

// Takes every event and drops it: what the engine's instrumentation costs
// without any writing.
class NullSink : public SessionEventSink {
public:
    void onFrame(const net::FrameEvent &) override { ++m_count; }
    void onSpan(const SpanEvent &) override { ++m_count; }
    void onMemory(const MemorySample &) override { ++m_count; }
    void onMetric(const MetricSample &) override { ++m_count; }

private:
    std::atomic<std::uint64_t> m_count{0};
};

SessionHeader headerFor(const std::string &strategy, int nodes, std::int64_t steps)
{
    SessionHeader h;
    h.configJson = "{}";
    h.strategy = strategy;
    h.model = "mlp";
    h.nodes = nodes;
    h.steps = steps;
    for (int r = 0; r < nodes; ++r)
        h.nodeList.push_back(SessionNode{r, "node " + std::to_string(r), "127.0.0.1", "worker"});
    h.startNs = net::monotonicNs();
    return h;
}

} // namespace

int runSessionBench(const QStringList &args, QTextStream &out, QTextStream &err)
{
    std::int64_t steps = 1500;
    int rounds = 7;
    std::int64_t events = 1000000;
    for (int i = 0; i < args.size(); ++i) {
        bool ok = i + 1 < args.size();
        const QString a = args[i];
        const qlonglong v = ok ? args[++i].toLongLong(&ok) : 0;
        if (ok && a == "--steps" && v >= 10 && v <= 1000000)
            steps = v;
        else if (ok && a == "--rounds" && v >= 1 && v <= 100)
            rounds = int(v);
        else if (ok && a == "--events" && v >= 1000 && v <= 100000000)
            events = v;
        else {
            err << "smolctl bench session: bad or unknown argument '" << a
                << "' (--steps K, --rounds R, --events N)\n";
            return 2;
        }
    }
    QTemporaryDir dir;
    if (!dir.isValid()) {
        err << "smolctl bench session: cannot create a temporary directory\n";
        return 1;
    }
    try {
        // 1. Overhead on a real run.
        TrainConfig c;
        c.strategy = "ddp";
        c.nodes = 2;
        c.steps = steps;
        c.globalBatch = 64;
        out << "# ddp mlp, 2 nodes, global batch 64, " << steps << " steps, TCP loopback; " << rounds
            << " rounds, each without / dropped / recorded back to back (order reversed every other round)\n";
        out.flush();
        std::vector<double> plain, nullSink, recorded, ratios;
        double eventRate = 0;
        for (int r = 0; r < rounds; ++r) {
            auto runPlain = [&] { plain.push_back(runTraining(c).seconds / double(steps)); };
            auto runRecorded = [&] {
                const QString path = dir.filePath(QString("run%1.smolrec").arg(r));
                SessionRecorder rec(path, headerFor("ddp", 2, steps));
                TrainConfig rc = c;
                rc.events = &rec;
                const TrainSummary s = runTraining(rc);
                recorded.push_back(s.seconds / double(steps));
                rec.finish(s.finalLoss);
                eventRate = std::max(eventRate, double(rec.eventsWritten()) / s.seconds);
            };
            const bool recordedFirst = r % 2 == 1;
            recordedFirst ? runRecorded() : runPlain();
            NullSink drop;
            TrainConfig nc = c;
            nc.events = &drop;
            nullSink.push_back(runTraining(nc).seconds / double(steps));
            recordedFirst ? runPlain() : runRecorded();
            ratios.push_back(recorded.back() / plain.back());
        }
        // The median of the rounds' ratios: each ratio sets two runs made
        // seconds apart side by side, so the load of a shared machine, which
        // drifts over a minute by more than the few per cent measured here,
        // mostly cancels.
        const double overhead = bench::median(ratios);
        out << "step time: " << QString::number(bench::median(plain) * 1e3, 'f', 3) << " ms without a recorder, "
            << QString::number(bench::median(nullSink) * 1e3, 'f', 3) << " ms with events taken and dropped, "
            << QString::number(bench::median(recorded) * 1e3, 'f', 3) << " ms recorded ("
            << QString::number(eventRate, 'f', 0) << " events/s)\n";
        out << "recording overhead (step time with / without): " << QString::number(overhead, 'f', 3)
            << " (target <= 1.03; median of the rounds' ratios, which ranged "
            << QString::number(*std::min_element(ratios.begin(), ratios.end()), 'f', 3) << " to "
            << QString::number(*std::max_element(ratios.begin(), ratios.end()), 'f', 3) << ")\n";
        out.flush();

        // 2. Write rate.
        const double density = std::max(10000.0, eventRate); // events per second of run time
        const QString big = dir.filePath("big.smolrec");
        const std::int64_t t0 = net::monotonicNs();
        QElapsedTimer wall;
        wall.start();
        {
            SessionRecorder rec(big, headerFor("ddp", 4, 1000));
            for (std::int64_t i = 0; i < events; ++i) {
                net::FrameEvent e;
                e.side = (i & 1) ? net::FrameEvent::Side::Receive : net::FrameEvent::Side::Send;
                e.src = int((i / 2) % 4);
                e.dst = int((i / 2 + 1) % 4);
                e.bytes = 262144;
                e.kind = net::CollectiveKind::AllReduce;
                e.seq = std::uint64_t(i / 16);
                e.tag = std::uint32_t(i % 8);
                const std::int64_t t = t0 + std::int64_t(double(i) * 1e9 / density);
                e.sendStartNs = t - 50000;
                e.sendCompleteNs = e.side == net::FrameEvent::Side::Send ? t : 0;
                e.recvCompleteNs = e.side == net::FrameEvent::Side::Receive ? t : 0;
                rec.onFrame(e);
            }
            rec.finish(std::nullopt, t0 + std::int64_t(double(events) * 1e9 / density));
        }
        const double writeSeconds = double(wall.nsecsElapsed()) / 1e9;
        out << "events written per second: " << QString::number(double(events) / writeSeconds, 'f', 0) << " ("
            << events << " frame events, committed, in " << QString::number(writeSeconds, 'f', 2)
            << " s; target >= 1000000)\n";
        out.flush();

        // 3. Open and read windows.
        wall.restart();
        SessionReader reader(big);
        const double openMs = double(wall.nsecsElapsed()) / 1e6;
        const auto [first, last] = reader.timeRange();
        std::vector<double> windowMs;
        std::size_t rows = 0;
        QRandomGenerator rng(7);
        for (int w = 0; w < 20; ++w) {
            const std::int64_t span = std::max<std::int64_t>(1, last - first - 1'000'000'000);
            const std::int64_t start = first + std::int64_t(rng.bounded(double(span)));
            wall.restart();
            rows += reader.frames(start, start + 1'000'000'000).size();
            rows += reader.spans(start, start + 1'000'000'000).size();
            rows += reader.memory(start, start + 1'000'000'000).size();
            rows += reader.metrics(start, start + 1'000'000'000).size();
            windowMs.push_back(double(wall.nsecsElapsed()) / 1e6);
        }
        const double worst = *std::max_element(windowMs.begin(), windowMs.end());
        out << "1M-event session (" << QString::number(density, 'f', 0)
            << " events per recorded second): open " << QString::number(openMs, 'f', 1) << " ms; 1 s window ("
            << rows / 20 << " rows) median " << QString::number(bench::median(windowMs), 'f', 1) << " ms, worst "
            << QString::number(worst, 'f', 1) << " ms (target <= 50 ms)\n";
        out << "session bench: overhead " << QString::number(overhead, 'f', 3) << ", write "
            << QString::number(double(events) / writeSeconds, 'f', 0) << " events/s, window worst "
            << QString::number(openMs + worst, 'f', 1) << " ms incl. open\n";
    } catch (const std::exception &e) {
        err << "smolctl bench session: " << e.what() << "\n";
        return 1;
    }
    return 0;
}

} // namespace smol::engine
