#include "timeline_bench.h"

#include "resident_memory.h"

#include "engine/session/session_reader.h"
#include "app/feed/timeline_feed.h"
#include "widgets/paint/palette.h"
#include "widgets/timeline/timeline_renderer.h"

#include <QElapsedTimer>
#include <QImage>
#include <QPainter>

#include <algorithm>
#include <functional>
#include <random>
#include <vector>

namespace smol::app {

namespace {

const char kUsage[] =
    R"(Usage: smolctl bench timeline [--packets N] [--memory-samples M] [--nodes K] [--frames F]
                             [--recording FILE] [--live-sides S]

Loads N packets (default 1000000) over K nodes (default 8) into the GUI's
timeline data, the same way the window does (each packet as a send and a
receive event, paired), then paints the timeline with the window's renderer
into a 1920x1080 QImage, offscreen: F frames (default 12) at each of full
zoom-out, mid zoom (a 1/100 of the run) and deep zoom (100 us across), at
evenly spread positions. Prints each level's median and worst frame, what
was drawn, and the memory the loaded events take (their data structures,
and the process's resident-memory growth while loading).

The events are generated: a ddp-like run (forward, backward, optimizer, two
ring all-reduces per step, each chunk sent in 4 frames; seeded jitter),
with M memory samples (default 1000000) spread evenly over the nodes and
steps in a zero3-like sawtooth: through each step's forward and backward,
all-gathers each sampled before (the shard, the buffer in comm) and after
(the layer held in params), activations rising then falling, grads rising.
The timeline draws them as a memory strip per lane. --memory-samples 0
leaves them out. --recording FILE paints a recorded session instead.

Then a long live run under the live view's default memory budget: S frame
sides (default 90000000: 45M packets, what an hour of a 4-node ddp run
sends at the 0.7 MB/s the unbounded timeline grew by, 2.5 GB unbounded)
over 4 nodes, fed the same way, step by step, with ddp-like memory samples
(before and after each all-reduce, 4 per node and step). Prints the held memory by
the data's own count and the process's resident growth, their peaks, what
was kept, and the feed's cost per frame side before the first drop and
after (drops included); `timeline live memory MB: X (budget Y)`.
--live-sides 0 skips it.

Targets: worst frame <= 16 ms; loaded events <= 200 MB; live memory within
the budget.
Last line: `timeline worst frame ms: X`.
)";

// Memory samples alongside the generated run.
struct MemoryShape {
    enum class Kind { None, Zero3, Ddp } kind = Kind::None;
    std::uint64_t samples = 0; // Zero3: in all (spread evenly over nodes and steps)
};

widgets::TimelineMemorySample memorySample(int node, std::int64_t t, std::int64_t step, int collective,
                                           std::uint64_t seq, bool before)
{
    return widgets::TimelineMemorySample{node, t, step, {}, collective, seq, before};
}

void finish(widgets::TimelineMemorySample &m)
{
    net::MemoryByCategory &b = m.memory;
    b.live = b.params + b.grads + b.optimizer + b.activations + b.comm;
    b.peak = b.live;
}

// A ddp-like run: per step forward, backward, optimizer, and two ring
// all-reduces of 14 phases (2 (K-1)); in each phase every node sends its
// chunk to the next in 4 frames.
// `afterStep(packets so far)` runs after each step's events (may be empty).
void generate(widgets::TimelineData &data, std::uint64_t packets, int nodes, MemoryShape memory = {},
              const std::function<void(std::uint64_t)> &afterStep = {})
{
    // Zero3: this many samples per node and step (an even number: a
    // before and an after per all-gather), until the total is reached.
    const std::uint64_t packetsPerStep = std::uint64_t(2 * 2 * (nodes - 1) * nodes * 4);
    const std::uint64_t steps = (packets + packetsPerStep - 1) / packetsPerStep;
    const std::uint64_t slots = steps * std::uint64_t(nodes);
    const std::uint64_t perSlot = (memory.samples + slots - 1) / slots;
    const std::uint64_t perNodeStep = memory.kind == MemoryShape::Kind::Zero3 ? (perSlot + 1) / 2 * 2 : 0;
    std::uint64_t memoryMade = 0, memorySeq = 0;
    constexpr std::int64_t kShard = 2'000'000, kLayer = 6'000'000, kOptimizer = 4'000'000;
    constexpr std::int64_t kActivations = 3'000'000, kGrads = 2'000'000;
    std::mt19937_64 rng(7);
    std::uniform_int_distribution<int> jitter(0, 20000);
    data.setCollectiveNames(collectiveNames());
    QStringList names;
    for (int r = 0; r < nodes; ++r)
        names.append(QStringLiteral("node %1").arg(r));
    data.setNodes(names);
    const std::uint32_t frameBytes = 65536;
    const std::int64_t frameNs = 60000, latencyNs = 25000;
    std::int64_t t = 1'000'000'000;
    std::uint64_t made = 0, seq = 0;
    for (std::int64_t step = 0; made < packets; ++step) {
        const std::int64_t stepStart = t;
        std::vector<std::int64_t> nodeT(std::size_t(nodes), t);
        for (int r = 0; r < nodes; ++r) {
            std::int64_t &nt = nodeT[std::size_t(r)];
            const std::int64_t f = 2'000'000 + jitter(rng) * 10, b = 3'000'000 + jitter(rng) * 10;
            data.addSpan({r, widgets::TimelineSpanKind::Forward, QStringLiteral("forward"), nt, nt + f, step, 0, 0, 0});
            nt += f;
            data.addSpan({r, widgets::TimelineSpanKind::Backward, QStringLiteral("backward"), nt, nt + b, step, 0, 0, 0});
            nt += b;
            // Zero3's sawtooth over [stepStart, nt): each all-gather sampled
            // before (the shard; the buffer in comm) and, 40% of its slot
            // later, after (the layer held in params until the next one).
            const std::uint64_t gathers = std::min(perNodeStep, memory.samples - memoryMade) / 2;
            for (std::uint64_t g = 0; g < gathers; ++g, ++memorySeq) {
                const double f = double(g) / double(gathers); // through the step
                const std::int64_t slot = (nt - stepStart) / std::int64_t(gathers);
                const std::int64_t at = stepStart + std::int64_t(f * double(nt - stepStart));
                const bool forward = f < 0.4;
                const double act = forward ? f / 0.4 : (1 - f) / 0.6;
                auto before = memorySample(r, at, step, 5, memorySeq, true);
                before.memory.params = kShard;
                before.memory.comm = kLayer;
                before.memory.optimizer = kOptimizer;
                before.memory.activations = std::int64_t(act * kActivations);
                before.memory.grads = forward ? 0 : std::int64_t((f - 0.4) / 0.6 * kGrads);
                auto after = before;
                after.tNs = at + slot * 2 / 5;
                after.before = false;
                after.memory.params = kShard + kLayer;
                after.memory.comm = 0;
                finish(before);
                finish(after);
                data.addMemory(before);
                data.addMemory(after);
                memoryMade += 2;
            }
        }
        for (int bucket = 0; bucket < 2 && made < packets; ++bucket, ++seq) {
            std::int64_t start = *std::max_element(nodeT.begin(), nodeT.end());
            std::vector<std::int64_t> phaseT(std::size_t(nodes), start);
            for (int phase = 0; phase < 2 * (nodes - 1) && made < packets; ++phase) {
                std::vector<std::int64_t> arrive(std::size_t(nodes), 0);
                for (int r = 0; r < nodes && made < packets; ++r) {
                    const int dst = (r + 1) % nodes;
                    std::int64_t s = phaseT[std::size_t(r)];
                    for (int k = 0; k < 4 && made < packets; ++k, ++made) {
                        const std::int64_t sendEnd = s + frameNs + jitter(rng);
                        const std::uint32_t tag = std::uint32_t(phase * 4 + k);
                        data.addFrame({true, r, dst, frameBytes, 6, seq, tag, s, sendEnd, 0});
                        const std::int64_t recvEnd = sendEnd + latencyNs + jitter(rng);
                        data.addFrame({false, r, dst, frameBytes, 6, seq, tag, s, 0, recvEnd});
                        arrive[std::size_t(dst)] = std::max(arrive[std::size_t(dst)], recvEnd);
                        s = sendEnd;
                    }
                }
                for (int r = 0; r < nodes; ++r)
                    phaseT[std::size_t(r)] = std::max(phaseT[std::size_t(r)], arrive[std::size_t(r)]);
            }
            for (int r = 0; r < nodes; ++r) {
                data.addSpan({r, widgets::TimelineSpanKind::Collective, QStringLiteral("bucket %1").arg(bucket), start,
                              phaseT[std::size_t(r)], step, 6, seq, std::uint64_t(frameBytes) * 4 * std::uint64_t(nodes)});
                nodeT[std::size_t(r)] = phaseT[std::size_t(r)];
                // Ddp: flat, the bucket's buffer in comm while it runs.
                if (memory.kind == MemoryShape::Kind::Ddp) {
                    for (bool before : {true, false}) {
                        auto m =
                            memorySample(r, before ? start : phaseT[std::size_t(r)], step, 6, seq, before);
                        m.memory.params = m.memory.grads = kShard;
                        m.memory.optimizer = 2 * kShard;
                        m.memory.comm = before ? kShard / 2 : 0;
                        finish(m);
                        data.addMemory(m);
                    }
                }
            }
        }
        std::int64_t end = 0;
        for (int r = 0; r < nodes; ++r) {
            std::int64_t &nt = nodeT[std::size_t(r)];
            data.addSpan({r, widgets::TimelineSpanKind::Optimizer, QStringLiteral("sgd"), nt, nt + 500'000, step, 0, 0, 0});
            nt += 500'000;
            data.addSpan({r, widgets::TimelineSpanKind::Step, QString(), stepStart, nt, step, 0, 0, 0});
            end = std::max(end, nt);
        }
        t = end + 100'000;
        if (afterStep)
            afterStep(made);
    }
}

// The live view's picture of a long run: generated steps into a
// TimelineData with the live default budget, measured as it goes.
// Returns whether the held memory stayed within the budget plus a block.
bool runLive(std::uint64_t sides, QTextStream &out)
{
    constexpr int kLiveNodes = 4;
    const std::size_t budget = widgets::TimelineData::kDefaultLiveBudget;
    std::int64_t rssPeak = 0;
    std::size_t heldPeak = 0;
    double firstDropS = -1;
    std::uint64_t firstDropSides = 0, nextCheck = 0;
    QElapsedTimer clock;
    {
        widgets::TimelineData data;
        data.setMemoryBudget(budget);
        const std::int64_t rssBefore = residentBytes();
        clock.start();
        generate(data, sides / 2, kLiveNodes, {MemoryShape::Kind::Ddp, 0}, [&](std::uint64_t made) {
            if (firstDropS < 0 && data.historyDropped()) {
                firstDropS = double(clock.nsecsElapsed()) / 1e9;
                firstDropSides = 2 * made;
            }
            if (made < nextCheck)
                return;
            nextCheck = made + 100'000; // every 100k packets: reading /proc costs a little
            heldPeak = std::max(heldPeak, data.memoryBytes());
            rssPeak = std::max(rssPeak, residentBytes() - rssBefore);
        });
        const double totalS = double(clock.nsecsElapsed()) / 1e9;
        data.packetBytes(0, 0, 1);
        const std::size_t held = data.memoryBytes();
        const std::int64_t rss = residentBytes() - rssBefore;
        heldPeak = std::max(heldPeak, held);
        rssPeak = std::max(rssPeak, rss);
        const double keptS = double(data.endNs() - data.beginNs()) / 1e9;
        const double runS = double(data.endNs() - data.originNs()) / 1e9;
        out << "# live: " << sides << " frame sides (" << (data.packetCount() + data.droppedPackets())
            << " packets) over " << kLiveNodes << " nodes, " << QString::number(runS, 'f', 0)
            << " s of run, under the live budget " << widgets::formatBytes(std::int64_t(budget)) << Qt::endl;
        out << "live: kept " << data.packetCount() << " packets, " << data.spanCount() << " spans and "
            << data.memorySampleCount() << " memory samples (the last " << QString::number(keptS, 'f', 1)
            << " s), dropped " << data.droppedPackets() << " packets, " << data.droppedSpans()
            << " spans and " << data.droppedMemorySamples() << " memory samples in " << data.dropGeneration()
            << " drops of ~" << widgets::formatBytes(std::int64_t(data.dropChunkBytes())) << "; "
            << widgets::TimelineRenderer::historyMarkText(data) << Qt::endl;
        out << "live: held " << QString::number(double(held) / 1e6, 'f', 1) << " MB (peak "
            << QString::number(double(heldPeak) / 1e6, 'f', 1) << "), resident growth "
            << QString::number(double(rss) / 1e6, 'f', 1) << " MB (peak "
            << QString::number(double(rssPeak) / 1e6, 'f', 1) << ")" << Qt::endl;
        if (firstDropS > 0 && firstDropSides < sides)
            out << "live feed: " << QString::number(firstDropS * 1e9 / double(firstDropSides), 'f', 1)
                << " ns per frame side before the first drop, "
                << QString::number((totalS - firstDropS) * 1e9 / double(sides - firstDropSides), 'f', 1)
                << " after (drops included)" << Qt::endl;
        out << "timeline live memory MB: " << QString::number(double(held) / 1e6, 'f', 1) << " (budget "
            << QString::number(double(budget) / 1e6, 'f', 1) << "); resident growth "
            << QString::number(double(rss) / 1e6, 'f', 1) << " MB" << Qt::endl;
        return heldPeak <= budget + 16384;
    }
}

struct Level {
    const char *name;
    double fraction; // of the whole range across the width; < 0: absolute ns
    double ns;
};

} // namespace

int runTimelineBench(const QStringList &args, QTextStream &out, QTextStream &err)
{
    std::uint64_t packets = 1'000'000;
    std::uint64_t memorySamples = 1'000'000;
    int nodes = 8;
    int frames = 12;
    std::uint64_t liveSides = 90'000'000;
    QString session;
    for (int i = 0; i < args.size(); ++i) {
        const QString &a = args[i];
        const bool hasValue = i + 1 < args.size();
        bool ok = true;
        if (a == QLatin1String("-h") || a == QLatin1String("--help")) {
            out << kUsage;
            return 0;
        } else if (a == QLatin1String("--packets") && hasValue) {
            packets = args[++i].toULongLong(&ok);
            ok = ok && packets >= 1 && packets <= 50'000'000;
        } else if (a == QLatin1String("--memory-samples") && hasValue) {
            memorySamples = args[++i].toULongLong(&ok);
            ok = ok && memorySamples <= 50'000'000;
        } else if (a == QLatin1String("--nodes") && hasValue) {
            nodes = args[++i].toInt(&ok);
            ok = ok && nodes >= 2 && nodes <= 64;
        } else if (a == QLatin1String("--frames") && hasValue) {
            frames = args[++i].toInt(&ok);
            ok = ok && frames >= 1 && frames <= 1000;
        } else if (a == QLatin1String("--live-sides") && hasValue) {
            liveSides = args[++i].toULongLong(&ok);
            ok = ok && liveSides <= 1'000'000'000;
        } else if (a == QLatin1String("--recording") && hasValue) {
            session = args[++i];
        } else {
            err << "smolctl: bench timeline: bad or incomplete option '" << a << "' (try --help)" << Qt::endl;
            return 2;
        }
        if (!ok) {
            err << "smolctl: bench timeline: bad value for " << a
                << " (--packets 1..50000000, --memory-samples 0..50000000, --nodes 2..64, --frames 1..1000, "
                   "--live-sides 0..1000000000)"
                << Qt::endl;
            return 2;
        }
    }

    widgets::TimelineData data;
    const std::int64_t rssBefore = residentBytes();
    QElapsedTimer load;
    load.start();
    if (session.isEmpty()) {
        generate(data, packets, nodes,
                 {memorySamples > 0 ? MemoryShape::Kind::Zero3 : MemoryShape::Kind::None, memorySamples});
        out << "# " << data.packetCount() << " packets and " << data.memorySampleCount()
            << " memory samples over " << nodes
            << " nodes, generated (ddp-like ring all-reduce, zero3-like memory sawtooth, " << data.spanCount()
            << " spans, " << data.stepStarts().size() << " steps, "
            << QString::number(double(data.endNs() - data.beginNs()) / 1e9, 'f', 2) << " s of run)"
            << Qt::endl;
    } else {
        try {
            engine::SessionReader reader(session);
            loadTimeline(reader, data);
        } catch (const std::exception &e) {
            err << "smolctl: bench timeline: " << e.what() << Qt::endl;
            return 1;
        }
        out << "# " << session << ": " << data.packetCount() << " packets over " << data.laneCount()
            << " nodes, " << data.spanCount() << " spans, " << data.memorySampleCount() << " memory samples"
            << Qt::endl;
    }
    const double loadS = double(load.nsecsElapsed()) / 1e9;
    data.packetBytes(0, 0, 1); // build the tooltips' byte index too: it is part of what the window holds
    const std::int64_t rssGrowth = residentBytes() - rssBefore;
    const double structMb = double(data.memoryBytes()) / 1e6;
    const double rssMb = double(rssGrowth) / 1e6;
    out << "loaded in " << QString::number(loadS, 'f', 2) << " s; memory for the loaded events: "
        << QString::number(structMb, 'f', 1) << " MB in data structures, resident growth "
        << QString::number(rssMb, 'f', 1) << " MB (target <= 200 MB)" << Qt::endl;
    if (data.packetCount() == 0) {
        err << "smolctl: bench timeline: no packets to paint" << Qt::endl;
        return 1;
    }

    QImage image(1920, 1080, QImage::Format_ARGB32_Premultiplied);
    image.fill(Qt::white); // like a window's backing store: allocated and touched before the first frame
    widgets::TimelineRenderer renderer;
    renderer.layout(QRectF(0, 0, image.width(), image.height()), data.laneCount());
    widgets::TimeAxis axis;
    axis.left = renderer.timeLeft();
    axis.width = renderer.timeWidth();
    axis.clampTo(data.beginNs(), data.endNs());

    const Level levels[] = {{"full zoom-out", 1.0, 0}, {"mid zoom (1/100 of the run)", 0.01, 0}, {"deep zoom (100 us)", -1, 100'000}};
    double worstAll = 0;
    const double range = double(data.endNs() - data.beginNs());
    for (const Level &level : levels) {
        std::vector<double> ms;
        widgets::TimelineFrameStats last;
        for (int f = 0; f < frames; ++f) {
            const double across = level.fraction > 0 ? range * level.fraction : level.ns;
            const double centre = double(data.beginNs()) + range * (double(f) + 0.5) / double(frames);
            if (level.fraction >= 1)
                axis.fit();
            else
                axis.showRange(std::int64_t(centre - across / 2), std::int64_t(centre + across / 2));
            QElapsedTimer t;
            t.start();
            {
                QPainter p(&image);
                last = renderer.paint(p, data, axis, {});
            }
            ms.push_back(double(t.nsecsElapsed()) / 1e6);
        }
        std::sort(ms.begin(), ms.end());
        const double worst = ms.back();
        worstAll = std::max(worstAll, worst);
        out << level.name << ": median " << QString::number(ms[ms.size() / 2], 'f', 2) << " ms, worst "
            << QString::number(worst, 'f', 2) << " ms over " << frames
            << " frames (last frame: " << last.arrows << " arrows, " << last.packetRuns << " blocks holding "
            << last.packetsInRuns << " packets, " << last.spans << " spans, " << last.spanRuns
            << " span blocks, " << last.memoryColumns << " memory columns)" << Qt::endl;
    }
    const bool liveWithin = liveSides == 0 || runLive(liveSides, out);
    out << "targets: worst frame <= 16 ms: " << (worstAll <= 16 ? "met" : "NOT met")
        << "; memory <= 200 MB: " << (std::max(structMb, rssMb) <= 200 ? "met" : "NOT met");
    if (liveSides > 0)
        out << "; live memory within its budget: " << (liveWithin ? "met" : "NOT met");
    out << Qt::endl;
    out << "timeline worst frame ms: " << QString::number(worstAll, 'f', 2) << Qt::endl;
    return 0;
}

} // namespace smol::app
