// The timeline's data, level of detail, painting and widget:
// - pairing: a frame's send and receive make one packet in either order;
//   unmatched sends are in flight;
// - level of detail: exact run counts for hand-made cases; on random data
//   the runs partition the packets, stay apart by at least minPx and are
//   at most width/minPx; spans collapse only when narrow;
// - the renderer draws arrows and counted blocks, and its hit test finds a
//   packet at its arrow's midpoint;
// - the widget: wheel zoom keeps the time under the pointer, drag pans,
//   Shift+drag zooms to the dragged range, Home fits, jumpToStep shows the
//   step, a click on an arrow emits activated() with that packet;
// - packets in flight: live, an unreceived send is drawn moving; in a
//   replay, a packet is in flight exactly while the playhead is between its
//   send start and its arrival;
// - the memory budget: a live run fed far past a small budget stays within
//   it (plus a block), keeps every newest event and drops the oldest in
//   chunks; lookups on what is kept equal a fresh TimelineData's fed only
//   those events; the history-start mark is reported and painted (and
//   nothing before it is hit); the widget moves its selection with the
//   events or clears it, and a replay (not live) is never trimmed.
// - memory lanes: the min/max envelope per pixel column equals a brute-force
//   pass over the samples (a million and more, some out of order, at zoom
//   levels from the whole run to a few ns per pixel); a hover returns the
//   sample and its bytes by category; a painted zero3-like sawtooth is
//   higher at the gathered instants, also when the teeth are narrower than a
//   pixel; strips leave lanes too thin for them; samples keep to the budget
//   and equal a fresh TimelineData's fed only the kept ones.
#include "widgets/paint/palette.h"
#include "widgets/timeline/timeline_data.h"
#include "widgets/timeline/timeline_hold.h"
#include "widgets/timeline/timeline_renderer.h"
#include "widgets/timeline/timeline_view.h"

#include <QFontMetricsF>
#include <QImage>
#include <QPainter>
#include <QSet>
#include <QSignalSpy>
#include <QTest>

#include <functional>
#include <limits>
#include <random>
#include <set>

using namespace smol::widgets;

Q_DECLARE_METATYPE(smol::widgets::TimelineHit)

namespace {

TimelineFrameSide side(bool send, int src, int dst, std::uint64_t seq, std::uint32_t tag, std::int64_t start,
                       std::int64_t end)
{
    TimelineFrameSide f;
    f.send = send;
    f.src = src;
    f.dst = dst;
    f.bytes = 1000;
    f.collective = 6;
    f.seq = seq;
    f.tag = tag;
    f.sendStartNs = start;
    if (send)
        f.sendCompleteNs = end;
    else
        f.recvCompleteNs = end;
    return f;
}

void addPacket(TimelineData &d, int src, int dst, std::int64_t start, std::int64_t flight, std::uint32_t tag = 0)
{
    d.addFrame(side(true, src, dst, 1, tag, start, start + flight / 2));
    d.addFrame(side(false, src, dst, 1, tag, start, start + flight));
}

TimeAxis axisOf(double nsPerPixel, std::int64_t start = 0, double width = 1000)
{
    TimeAxis a;
    a.startNs = start;
    a.nsPerPixel = nsPerPixel;
    a.width = width;
    return a;
}

using Batch = std::function<void(const std::vector<TimelineFrameSide> &, const std::vector<TimelineSpan> &)>;

// A 4-node ddp run as the live bridge delivers it, one batch per step
// (frames, then spans): forward and backward spans, two ring all-reduces of
// 2 (K-1) phases in which each node sends its chunk to the next in 4 frames
// (send and receive sides), collective, optimizer and step spans. Seeded:
// the same call makes the same events.
void liveRun(std::size_t frameSides, const Batch &batch)
{
    constexpr int kNodes = 4;
    std::mt19937 rng(11);
    std::uniform_int_distribution<int> jitter(0, 2000);
    std::int64_t t = 1'000'000'000;
    std::size_t sides = 0;
    std::uint64_t seq = 0;
    for (std::int64_t step = 0; sides < frameSides; ++step) {
        std::vector<TimelineFrameSide> frames;
        std::vector<TimelineSpan> spans;
        std::int64_t nodeT[kNodes];
        for (int r = 0; r < kNodes; ++r) {
            const std::int64_t f = 200'000 + 10 * jitter(rng), b = 300'000 + 10 * jitter(rng);
            spans.push_back(
                {r, TimelineSpanKind::Forward, QStringLiteral("forward"), t, t + f, step, 0, 0, 0});
            spans.push_back(
                {r, TimelineSpanKind::Backward, QStringLiteral("backward"), t + f, t + f + b, step, 0, 0, 0});
            nodeT[r] = t + f + b;
        }
        for (int bucket = 0; bucket < 2; ++bucket, ++seq) {
            const std::int64_t start = *std::max_element(nodeT, nodeT + kNodes);
            std::int64_t phaseT = start;
            for (int phase = 0; phase < 2 * (kNodes - 1); ++phase) {
                std::int64_t phaseEnd = phaseT;
                for (int r = 0; r < kNodes; ++r) {
                    std::int64_t s = phaseT + 10 * r;
                    for (std::uint32_t k = 0; k < 4; ++k) {
                        const std::uint32_t tag = std::uint32_t(phase) * 4 + k;
                        const std::int64_t sendEnd = s + 6'000 + jitter(rng);
                        const std::int64_t recvEnd = sendEnd + 2'500 + jitter(rng);
                        TimelineFrameSide send = side(true, r, (r + 1) % kNodes, seq, tag, s, sendEnd);
                        TimelineFrameSide recv = side(false, r, (r + 1) % kNodes, seq, tag, s, recvEnd);
                        send.bytes = recv.bytes = 16'000 + tag;
                        frames.push_back(send);
                        frames.push_back(recv);
                        phaseEnd = std::max(phaseEnd, recvEnd);
                        s = sendEnd;
                    }
                }
                phaseT = phaseEnd;
            }
            for (int r = 0; r < kNodes; ++r) {
                spans.push_back({r, TimelineSpanKind::Collective, QStringLiteral("bucket %1").arg(bucket),
                                 start, phaseT, step, 6, seq, 64'000});
                nodeT[r] = phaseT;
            }
        }
        std::int64_t end = 0;
        for (int r = 0; r < kNodes; ++r) {
            spans.push_back({r, TimelineSpanKind::Optimizer, QStringLiteral("sgd"), nodeT[r],
                             nodeT[r] + 50'000, step, 0, 0, 0});
            spans.push_back({r, TimelineSpanKind::Step, {}, t, nodeT[r] + 50'000 + r, step, 0, 0, 0});
            end = std::max(end, nodeT[r] + 50'000 + r);
        }
        t = end + 10'000;
        sides += frames.size();
        batch(frames, spans);
    }
}

void feed(TimelineData &d, const std::vector<TimelineFrameSide> &frames,
          const std::vector<TimelineSpan> &spans)
{
    for (const auto &f : frames)
        d.addFrame(f);
    for (const auto &s : spans)
        d.addSpan(s);
}

// The largest block a BlockList of the timeline takes (16 KiB of prefix sums).
constexpr std::size_t kBlockBytes = 16384;

bool samePacket(const TimelinePacket &a, const TimelinePacket &b)
{
    return a.sendStartNs == b.sendStartNs && a.sendEndNs == b.sendEndNs && a.recvEndNs == b.recvEndNs &&
           a.seq == b.seq && a.bytes == b.bytes && a.tag == b.tag && a.src == b.src && a.dst == b.dst &&
           a.collective == b.collective;
}

bool sameSpan(const TimelineData &da, const StoredSpan &a, const TimelineData &db, const StoredSpan &b)
{
    return a.startNs == b.startNs && a.endNs == b.endNs && a.step == b.step && a.seq == b.seq &&
           a.bytes == b.bytes && a.kind == b.kind && a.collective == b.collective &&
           da.name(a.name) == db.name(b.name);
}

bool sameItems(const std::vector<LodItem> &a, const std::vector<LodItem> &b)
{
    if (a.size() != b.size())
        return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (a[i].first != b[i].first || a[i].count != b[i].count || a[i].startNs != b[i].startNs ||
            a[i].endNs != b[i].endNs)
            return false;
    return true;
}

TimelineMemorySample memorySample(int node, std::int64_t t, std::int64_t params, std::int64_t comm = 0,
                                  int collective = 5, bool before = false)
{
    TimelineMemorySample m;
    m.node = node;
    m.tNs = t;
    m.step = 3;
    m.memory.params = params;
    m.memory.grads = 1 << 20;
    m.memory.optimizer = 2 << 20;
    m.memory.activations = 512 << 10;
    m.memory.comm = comm;
    m.memory.live = m.memory.params + m.memory.grads + m.memory.optimizer + m.memory.activations + m.memory.comm;
    m.memory.peak = m.memory.live + 1000;
    m.collective = collective;
    m.seq = 7;
    m.before = before;
    return m;
}

// A zero3-like sawtooth on `nodes` lanes: steps of 10 ms, each with four
// all-gathers in its first 2 ms (every 500 us); a gathered layer (3 MiB more
// params) is held for 90 us, [start + 10 us, start + 100 us), then freed.
constexpr std::int64_t kStepNs = 10'000'000, kToothEveryNs = 500'000, kUpNs = 10'000, kDownNs = 100'000;
constexpr std::int64_t kShard = 1 << 20, kLayer = 3 << 20;

QStringList kindNames()
{
    QStringList names;
    for (int k = 0; k <= 10; ++k)
        names << (k == 4   ? QStringLiteral("reduce-scatter")
                  : k == 5 ? QStringLiteral("all-gather")
                           : QStringLiteral("kind %1").arg(k));
    return names;
}

void addSawtooth(TimelineData &d, int nodes, int steps)
{
    d.setCollectiveNames(kindNames());
    std::uint64_t seq = 0;
    for (int step = 0; step < steps; ++step)
        for (int r = 0; r < nodes; ++r) {
            const std::int64_t s = step * kStepNs;
            d.addMemory(memorySample(r, s, kShard, 0, 0));
            for (int j = 0; j < 4; ++j, ++seq) {
                const std::int64_t t = s + j * kToothEveryNs;
                auto before = memorySample(r, t, kShard, kLayer, 5, true);
                auto after = memorySample(r, t + kUpNs, kShard + kLayer, 0, 5, false);
                auto freed = memorySample(r, t + kDownNs, kShard, 0, 4, true);
                before.seq = after.seq = freed.seq = seq;
                before.memory.comm = 0;
                d.addMemory(before);
                d.addMemory(after);
                d.addMemory(freed);
            }
        }
}

// The envelope by definition, a plain pass over the samples: column c holds
// the samples with time in [axis.time(x0 + c), axis.time(x0 + c + 1)) and
// the one in effect at its start, between the lane's first and last sample;
// min/max by total, the earliest on ties.
std::vector<TimelineData::MemoryRange> bruteEnvelope(const BlockList<StoredMemory> &v, const TimeAxis &axis,
                                                     double x0, int columns)
{
    std::vector<TimelineData::MemoryRange> out(static_cast<std::size_t>(columns));
    std::size_t k = 0;
    for (int c = 0; c < columns; ++c) {
        const std::int64_t b0 = axis.time(x0 + c), b1 = std::max(b0, axis.time(x0 + c + 1));
        while (k < v.size() && v[k].tNs < b0)
            ++k;
        std::size_t end = k;
        while (end < v.size() && v[end].tNs < b1)
            ++end;
        if (k >= v.size() || (k == 0 && end == 0))
            continue;
        TimelineData::MemoryRange &r = out[std::size_t(c)];
        const std::size_t from = k > 0 ? k - 1 : 0, to = std::max(end, from + 1);
        r.count = to - from;
        r.minTotal = std::numeric_limits<std::int64_t>::max();
        r.maxTotal = std::numeric_limits<std::int64_t>::min();
        for (std::size_t i = from; i < to; ++i) {
            const std::int64_t t = v[i].total();
            if (t < r.minTotal) {
                r.minTotal = t;
                r.minAt = i;
            }
            if (t > r.maxTotal) {
                r.maxTotal = t;
                r.maxAt = i;
            }
        }
    }
    return out;
}

QString sameRanges(const std::vector<TimelineData::MemoryRange> &a,
                   const std::vector<TimelineData::MemoryRange> &b)
{
    if (a.size() != b.size())
        return QStringLiteral("%1 columns, expected %2").arg(a.size()).arg(b.size());
    for (std::size_t c = 0; c < a.size(); ++c) {
        const auto &x = a[c], &y = b[c];
        if (x.count != y.count || (x.count > 0 && (x.minAt != y.minAt || x.maxAt != y.maxAt ||
                                                   x.minTotal != y.minTotal || x.maxTotal != y.maxTotal)))
            return QStringLiteral(
                       "column %1: count %2 min %3@%4 max %5@%6, expected count %7 min %8@%9 max %10@%11")
                .arg(c)
                .arg(x.count)
                .arg(x.minTotal)
                .arg(x.minAt)
                .arg(x.maxTotal)
                .arg(x.maxAt)
                .arg(y.count)
                .arg(y.minTotal)
                .arg(y.minAt)
                .arg(y.maxTotal)
                .arg(y.maxAt);
    }
    return {};
}

// A pixel of a memory strip: a category's colour, solid or faded over the background.
bool isMemoryPixel(const QColor &c)
{
    const Palette &pal = Palette::normal();
    for (MemoryCategory k : kMemoryCategories) {
        const QColor solid = pal.category(k);
        const double a = 105 / 255.0;
        const QColor faded(int(solid.red() * a + pal.background.red() * (1 - a)),
                           int(solid.green() * a + pal.background.green() * (1 - a)),
                           int(solid.blue() * a + pal.background.blue() * (1 - a)));
        for (const QColor &q : {solid, faded})
            if (std::abs(c.red() - q.red()) <= 6 && std::abs(c.green() - q.green()) <= 6 &&
                std::abs(c.blue() - q.blue()) <= 6)
                return true;
    }
    return false;
}

// The highest memory pixel of a column of a strip (its y), or the strip's
// bottom when the column is empty.
int memoryTop(const QImage &image, int x, const QRectF &strip)
{
    for (int y = int(std::ceil(strip.top())); y < int(strip.bottom()); ++y)
        if (isMemoryPixel(image.pixelColor(x, y)))
            return y;
    return int(strip.bottom());
}

} // namespace

class TimelineTest : public QObject {
    Q_OBJECT

private Q_SLOTS:
    // A step's peak is a mark over the step, not a sample: the stack keeps
    // its samples, the step gets [previous peak, its end) at its highest
    // total, the scale's query sees it, and a drop takes it with the rest.
    void stepPeaksAreMarksOverTheirStep()
    {
        TimelineData d;
        d.addMemory(memorySample(0, 1000, 100));
        d.addMemory(memorySample(0, 5000, 100));
        TimelineMemorySample peak = memorySample(0, 5000, 100);
        peak.memory.activations = 900;
        peak.step = 0;
        peak.stepPeak = true;
        d.addMemory(peak);
        peak.tNs = 9000;
        peak.step = 1;
        peak.memory.activations = 400;
        d.addMemory(peak);
        QCOMPARE(d.memorySampleCount(), std::size_t(2));
        QCOMPARE(d.stepPeaks(0).size(), std::size_t(2));
        QCOMPARE(d.stepPeaks(0)[0].startNs, std::int64_t(1000)); // the lane's first sample
        QCOMPARE(d.stepPeaks(0)[0].endNs, std::int64_t(5000));
        QCOMPARE(d.stepPeaks(0)[1].startNs, std::int64_t(5000));
        QCOMPARE(d.stepPeaks(0)[0].activations, std::int64_t(900));
        QCOMPARE(d.stepPeakIn(0, 0, 4000), peak.memory.stacked() + 500);
        QCOMPARE(d.stepPeakIn(0, 6000, 7000), peak.memory.stacked());
        QCOMPARE(d.stepPeakIn(0, 9000, 10000), std::int64_t(0));
        peak.tNs = 7000; // out of order: not a chain any more, dropped
        d.addMemory(peak);
        QCOMPARE(d.stepPeaks(0).size(), std::size_t(2));
    }

    void pairsSendsAndReceives()
    {
        TimelineData d;
        d.addFrame(side(true, 0, 1, 5, 0, 100, 150));  // send first
        d.addFrame(side(false, 1, 2, 5, 0, 120, 300)); // receive first
        d.addFrame(side(true, 2, 0, 5, 0, 130, 160));  // never received
        QCOMPARE(d.packetCount(), std::size_t(2));
        QCOMPARE(d.inFlightCount(), std::size_t(2)); // 0 -> 1 and 2 -> 0
        d.addFrame(side(false, 0, 1, 5, 0, 100, 400));
        d.addFrame(side(true, 1, 2, 5, 0, 120, 200));
        QCOMPARE(d.packetCount(), std::size_t(3));
        QCOMPARE(d.inFlightCount(), std::size_t(1));
        QCOMPARE(d.packets(0).size(), std::size_t(1));
        QCOMPARE(d.packets(0)[0].recvEndNs, std::int64_t(400));
        QCOMPARE(d.packets(1)[0].recvEndNs, std::int64_t(300));
        QVERIFY(!d.packets(2)[0].received());
        QCOMPARE(d.laneCount(), 3);
        QCOMPARE(d.beginNs(), std::int64_t(100));
        QCOMPARE(d.endNs(), std::int64_t(400));
        // Same link, two tags: each receive finds its own send.
        d.addFrame(side(true, 0, 1, 6, 1, 500, 510));
        d.addFrame(side(true, 0, 1, 6, 2, 520, 530));
        d.addFrame(side(false, 0, 1, 6, 2, 520, 700));
        d.addFrame(side(false, 0, 1, 6, 1, 500, 600));
        QCOMPARE(d.packets(0)[1].recvEndNs, std::int64_t(600));
        QCOMPARE(d.packets(0)[2].recvEndNs, std::int64_t(700));
        // Sends out of order stay sorted by send start.
        d.addFrame(side(true, 0, 1, 7, 0, 50, 60));
        QCOMPARE(d.packets(0).front().sendStartNs, std::int64_t(50));
        QVERIFY(std::is_sorted(d.packets(0).begin(), d.packets(0).end(),
                               [](const auto &a, const auto &b) { return a.sendStartNs < b.sendStartNs; }));
        // Frames a node sends itself (a backend's per-collective event) are not packets.
        d.addFrame(side(true, 1, 1, 8, 0, 10, 20));
        QCOMPARE(d.packetCount(), std::size_t(6));
        QCOMPARE(d.packetBytes(0, 0, 3), std::uint64_t(3000));
    }

    void collapsePacketCounts_data()
    {
        QTest::addColumn<QVector<qint64>>("starts");
        QTest::addColumn<double>("nsPerPixel");
        QTest::addColumn<QVector<int>>("runs");
        // minPx = 5 throughout.
        QTest::newRow("apart") << QVector<qint64>{0, 10, 20, 30} << 1.0 << QVector<int>{1, 1, 1, 1};
        QTest::newRow("clusters") << QVector<qint64>{0, 1, 2, 10, 20, 21, 40} << 1.0 << QVector<int>{3, 1, 2, 1};
        QTest::newRow("chain under minPx") << QVector<qint64>{0, 4, 8, 12, 16} << 1.0 << QVector<int>{5};
        QTest::newRow("exactly minPx apart") << QVector<qint64>{0, 5, 10} << 1.0 << QVector<int>{1, 1, 1};
        QTest::newRow("zoomed out 10x") << QVector<qint64>{0, 10, 20, 30, 100} << 10.0 << QVector<int>{4, 1};
        QTest::newRow("zoomed in 10x") << QVector<qint64>{0, 1, 2, 3} << 0.1 << QVector<int>{1, 1, 1, 1};
        QTest::newRow("one") << QVector<qint64>{7} << 1.0 << QVector<int>{1};
        QTest::newRow("same instant") << QVector<qint64>{3, 3, 3} << 1.0 << QVector<int>{3};
    }
    void collapsePacketCounts()
    {
        QFETCH(QVector<qint64>, starts);
        QFETCH(double, nsPerPixel);
        QFETCH(QVector<int>, runs);
        TimelineData d;
        std::uint32_t tag = 0;
        for (qint64 s : starts)
            addPacket(d, 0, 1, s, 3, tag++);
        const auto items = d.collapsePackets(0, axisOf(nsPerPixel), 0, 1000, 5);
        QVector<int> counts;
        for (const LodItem &it : items)
            counts.append(int(it.count));
        QCOMPARE(counts, runs);
    }

    void collapseRandomPackets()
    {
        std::mt19937 rng(3);
        std::exponential_distribution<double> gap(1.0 / 500);
        TimelineData d;
        std::int64_t t = 0;
        for (std::uint32_t i = 0; i < 200000; ++i) {
            t += std::int64_t(gap(rng));
            addPacket(d, 0, 1, t, 40000, i);
        }
        QCOMPARE(d.packetCount(), std::size_t(200000));
        const auto &v = d.packets(0);
        for (double nsPerPixel : {0.5, 10.0, 300.0, 5000.0, 60000.0, double(t) / 1000}) {
            const TimeAxis a = axisOf(nsPerPixel, t / 3);
            const std::int64_t t0 = a.startNs, t1 = a.endNs();
            const auto items = d.collapsePackets(0, a, t0, t1, 5);
            std::size_t total = 0, next = 0;
            for (std::size_t k = 0; k < items.size(); ++k) {
                const LodItem &it = items[k];
                if (k == 0)
                    next = it.first;
                QCOMPARE(it.first, next); // contiguous, in order
                next = it.first + it.count;
                total += it.count;
                for (std::size_t j = it.first + 1; j < it.first + it.count; ++j) // inside: under minPx apart
                    QVERIFY(a.x(v[j].sendStartNs) - a.x(v[j - 1].sendStartNs) < 5);
                if (k > 0) // between runs: at least minPx
                    QVERIFY(a.x(v[it.first].sendStartNs) - a.x(v[it.first - 1].sendStartNs) >= 5 - 1e-9);
            }
            // With a width cap, runs end once they span 40 px, and still
            // partition the packets.
            const auto capped = d.collapsePackets(0, a, t0, t1, 5, 40);
            std::size_t cappedTotal = 0;
            for (std::size_t k = 0; k < capped.size(); ++k) {
                cappedTotal += capped[k].count;
                QVERIFY(a.x(capped[k].endNs) - a.x(capped[k].startNs) <= 40);
                if (k > 0) {
                    QCOMPARE(capped[k].first, capped[k - 1].first + capped[k - 1].count);
                    const double gap = a.x(v[capped[k].first].sendStartNs) - a.x(capped[k - 1].startNs);
                    QVERIFY(gap >= 5 - 1e-9 || gap > 40 - 5); // apart, or the previous run was full
                }
            }
            QCOMPARE(cappedTotal, total);
            const auto lo = std::lower_bound(v.begin(), v.end(), t0, [](const auto &p, std::int64_t x) { return p.sendStartNs < x; });
            const auto hi = std::upper_bound(v.begin(), v.end(), t1, [](std::int64_t x, const auto &p) { return x < p.sendStartNs; });
            QCOMPARE(total, std::size_t(hi - lo));
            QVERIFY2(items.size() <= std::size_t(a.width / 5) + 2, qPrintable(QString::number(items.size())));
        }
    }

    void collapseSpans()
    {
        TimelineData d;
        auto span = [&](std::int64_t s, std::int64_t e) {
            d.addSpan(TimelineSpan{0, TimelineSpanKind::Backward, QStringLiteral("b"), s, e, 0, 0, 0, 0});
        };
        span(0, 2);     // narrow
        span(3, 4);     // narrow, starts 1 ns after: joins
        span(5, 6);     // joins
        span(10, 100);  // wide: alone
        span(101, 102); // narrow, alone (the next is 20 px away)
        span(122, 123);
        span(124, 125);
        const auto items = d.collapseSpans(0, TimelineData::Row::Compute, axisOf(1.0), 0, 1000, 3);
        QVector<int> counts;
        for (const LodItem &it : items)
            counts.append(int(it.count));
        QCOMPARE(counts, (QVector<int>{3, 1, 1, 2}));
        QCOMPARE(items[0].endNs, std::int64_t(6));
        // Zoomed in 10x nothing is narrow.
        QCOMPARE(d.collapseSpans(0, TimelineData::Row::Compute, axisOf(0.1), 0, 1000, 3).size(), std::size_t(7));
        // A chain of narrow spans: one block, or blocks of at most 10 px with a cap.
        TimelineData chain;
        for (int k = 0; k < 50; ++k)
            chain.addSpan(TimelineSpan{0, TimelineSpanKind::Forward, QStringLiteral("f"), 2 * k, 2 * k + 1, 0, 0, 0, 0});
        QCOMPARE(chain.collapseSpans(0, TimelineData::Row::Compute, axisOf(1.0), 0, 1000, 3).size(), std::size_t(1));
        const auto capped = chain.collapseSpans(0, TimelineData::Row::Compute, axisOf(1.0), 0, 1000, 3, 10);
        std::size_t held = 0;
        for (const LodItem &it : capped) {
            QVERIFY(it.endNs - it.startNs <= 10);
            held += it.count;
        }
        QCOMPARE(held, std::size_t(50));
        QVERIFY(capped.size() >= 9);
        // A window starting inside the wide span still shows it.
        const auto mid = d.collapseSpans(0, TimelineData::Row::Compute, axisOf(1.0, 50), 50, 1050, 3);
        QCOMPARE(mid.front().first, std::size_t(3));
    }

    void stepsAndJump()
    {
        TimelineData d;
        for (int node = 0; node < 2; ++node)
            for (int step = 0; step < 3; ++step)
                d.addSpan(TimelineSpan{node, TimelineSpanKind::Step, {}, 1000 * step + node * 10, 1000 * step + 900 + node,
                                       step, 0, 0, 0});
        QCOMPARE(d.stepStarts().size(), std::size_t(3));
        QCOMPARE(d.stepRange(1)->first, std::int64_t(1000));
        QCOMPARE(d.stepRange(1)->second, std::int64_t(1901));
        QVERIFY(!d.stepRange(7));
        QCOMPARE(d.stepAt(0, 1500), std::int64_t(1));
    }

    void rendererDrawsAndHits()
    {
        TimelineData d;
        d.setNodes({QStringLiteral("a"), QStringLiteral("b")});
        addPacket(d, 0, 1, 1'000, 2'000, 1);         // alone
        for (std::uint32_t i = 0; i < 50; ++i)        // a burst: one block
            addPacket(d, 1, 0, 100'000 + i * 10, 500, 100 + i);
        QImage image(800, 300, QImage::Format_ARGB32_Premultiplied);
        TimelineRenderer r;
        r.layout(QRectF(0, 0, 800, 300), d.laneCount());
        TimeAxis a;
        a.left = r.timeLeft();
        a.width = r.timeWidth();
        a.clampTo(d.beginNs(), d.endNs());
        a.fit();
        TimelineFrameStats stats;
        {
            QPainter p(&image);
            stats = r.paint(p, d, a, {});
        }
        QCOMPARE(stats.arrows, std::size_t(1));
        QCOMPARE(stats.packetRuns, std::size_t(1));
        QCOMPARE(stats.packetsInRuns, std::size_t(50));
        const TimelinePacket &pk = d.packets(0)[0];
        const QPointF mid((a.x(pk.sendStartNs) + a.x(pk.recvEndNs)) / 2, (r.packetY(0) + r.packetY(1)) / 2);
        const TimelineHit hit = r.hitTest(mid);
        QCOMPARE(int(hit.kind), int(TimelineHit::Kind::Packet));
        QCOMPARE(hit.lane, 0);
        QVERIFY(TimelineRenderer::describe(d, hit).contains(QStringLiteral("a → b")));
        const TimelineHit block = r.hitTest(QPointF(a.x(100'000) + 1, r.packetY(1)));
        QCOMPARE(int(block.kind), int(TimelineHit::Kind::PacketRun));
        QCOMPARE(block.count, std::size_t(50));
        QVERIFY(TimelineRenderer::describe(d, block).startsWith(QStringLiteral("50 packets")));
        // The arrow is drawn in the collective's colour somewhere along its line.
        bool coloured = false;
        for (double f = 0.2; f < 0.8 && !coloured; f += 0.05) {
            const QPointF q = QPointF(a.x(pk.sendStartNs), r.packetY(0)) * (1 - f) + QPointF(a.x(pk.recvEndNs), r.packetY(1)) * f;
            for (int dx = -1; dx <= 1; ++dx)
                for (int dy = -1; dy <= 1; ++dy)
                    if (image.pixelColor(int(q.x()) + dx, int(q.y()) + dy).blue() > 150 &&
                        image.pixelColor(int(q.x()) + dx, int(q.y()) + dy).red() < 100)
                        coloured = true;
        }
        QVERIFY(coloured);
    }

    // A class's 64 nodes in a short dock: every lane inside the picture, in
    // rank order, apart, hit by laneAt; names every few lanes.
    void manyLanesShrinkToFit_data()
    {
        QTest::addColumn<int>("lanes");
        QTest::addColumn<double>("height");
        QTest::addColumn<bool>("projector");
        QTest::newRow("4 lanes") << 4 << 300.0 << false;
        QTest::newRow("16 lanes, short dock") << 16 << 180.0 << false;
        QTest::newRow("32 lanes") << 32 << 300.0 << true;
        QTest::newRow("64 lanes") << 64 << 300.0 << false;
        QTest::newRow("64 lanes, projector") << 64 << 250.0 << true;
    }

    void manyLanesShrinkToFit()
    {
        QFETCH(int, lanes);
        QFETCH(double, height);
        QFETCH(bool, projector);
        TimelineData d;
        QStringList names;
        for (int i = 0; i < lanes; ++i)
            names << QStringLiteral("local-%1").arg(i);
        d.setNodes(names);
        for (int i = 0; i < lanes; ++i)
            addPacket(d, i, (i + 1) % lanes, 1'000 + i * 100, 2'000, std::uint32_t(i));
        TimelineRenderer r;
        r.setProjectorMode(projector);
        const QRectF picture(0, 0, 900, height);
        r.layout(picture, lanes);
        for (int lane = 0; lane < lanes; ++lane) {
            const QRectF l = r.laneRect(lane);
            QVERIFY2(picture.contains(l.adjusted(0, 0, 0, -0.01)), qPrintable(QStringLiteral("lane %1 outside").arg(lane)));
            QVERIFY(l.height() > 0);
            if (lane > 0)
                QVERIFY(l.top() >= r.laneRect(lane - 1).bottom() - 1e-9);
            QCOMPARE(r.laneAt(l.center().y()), lane);
            QVERIFY(r.rowRect(lane, TimelineData::Row::Compute).height() >= 1);
            QVERIFY(r.rowRect(lane, TimelineData::Row::Collective).top() >=
                    r.rowRect(lane, TimelineData::Row::Compute).bottom() - 1e-9);
        }
        // Every lane named while lanes are tall; thin ones every few, and
        // labels (11 px type at least) a line apart.
        if (lanes <= 4)
            QCOMPARE(r.laneLabelEvery(), 1);
        if (lanes >= 32)
            QVERIFY(r.laneLabelEvery() > 1);
        QVERIFY(r.laneLabelEvery() * r.laneRect(0).height() >= 11);
        QImage image(picture.size().toSize(), QImage::Format_ARGB32_Premultiplied);
        TimeAxis a;
        a.left = r.timeLeft();
        a.width = r.timeWidth();
        a.clampTo(d.beginNs(), d.endNs());
        a.fit();
        QPainter p(&image);
        const TimelineFrameStats stats = r.paint(p, d, a, {});
        QVERIFY(stats.arrows + stats.packetsInRuns == std::size_t(lanes));
    }

    void packetsInFlight()
    {
        TimelineData d;
        d.setNodes({QStringLiteral("a"), QStringLiteral("b"), QStringLiteral("c")});
        addPacket(d, 0, 1, 1'000, 10'000, 1);                      // received at 11 us
        d.addFrame(side(true, 1, 2, 2, 0, 5'000, 6'000));          // live: sent, not received
        QImage image(800, 300, QImage::Format_ARGB32_Premultiplied);
        TimelineRenderer r;
        r.layout(QRectF(0, 0, 800, 300), d.laneCount());
        TimeAxis a;
        a.left = r.timeLeft();
        a.width = r.timeWidth();
        a.clampTo(0, 20'000);
        a.fit();
        auto paint = [&](const TimelineOverlay &o) {
            QPainter p(&image);
            return r.paint(p, d, a, o);
        };
        // Live: the unreceived packet moves with "now"; the received one is an arrow.
        TimelineOverlay live;
        live.nowNs = 15'000;
        TimelineFrameStats s = paint(live);
        QCOMPARE(s.inFlight, std::size_t(1));
        QCOMPARE(s.arrows, std::size_t(1));
        // Replay: at 6 us the first packet is on its way (a dot along its arrow); at 12 us it has arrived.
        TimelineOverlay replay;
        replay.playheadNs = 6'000;
        QCOMPARE(paint(replay).inFlight, std::size_t(1));
        replay.playheadNs = 12'000;
        QCOMPARE(paint(replay).inFlight, std::size_t(0));
        replay.playheadNs = 500;
        QCOMPARE(paint(replay).inFlight, std::size_t(0));
    }

    void widgetInteraction()
    {
        TimelineView v;
        v.resize(900, 300);
        v.show();
        QVERIFY(QTest::qWaitForWindowExposed(&v));
        TimelineData &d = v.data();
        d.setNodes({QStringLiteral("n0"), QStringLiteral("n1")});
        for (int step = 0; step < 10; ++step) {
            const std::int64_t s0 = 1'000'000'000 + step * 10'000'000;
            for (int node = 0; node < 2; ++node)
                d.addSpan(TimelineSpan{node, TimelineSpanKind::Step, {}, s0, s0 + 9'000'000, step, 0, 0, 0});
            addPacket(d, 0, 1, s0 + 1'000'000, 3'000'000, std::uint32_t(step));
        }
        v.dataChanged();
        QTRY_VERIFY(v.lastStats().arrows > 0);
        const TimeAxis before = v.axis();
        QCOMPARE(before.startNs, std::int64_t(1'000'000'000)); // fitted
        // Wheel: zoom in x1.25 per notch, the time under the pointer stays.
        const QPointF at(500, 150);
        const std::int64_t anchor = v.axis().time(at.x());
        QWheelEvent wheel(at, v.mapToGlobal(at), QPoint(), QPoint(0, 240), Qt::NoButton, Qt::NoModifier, Qt::NoScrollPhase,
                          false);
        QApplication::sendEvent(&v, &wheel);
        QVERIFY(std::abs(v.axis().nsPerPixel - before.nsPerPixel / 1.5625) < 1e-6 * before.nsPerPixel);
        QVERIFY(std::abs(double(v.axis().time(at.x()) - anchor)) <= v.axis().nsPerPixel);
        QVERIFY(!v.isFollowing());
        // Drag right by 100 px: shows earlier time by 100 px' worth.
        const std::int64_t start = v.axis().startNs;
        QTest::mousePress(&v, Qt::LeftButton, {}, QPoint(400, 150));
        QTest::mouseMove(&v, QPoint(450, 150));
        QTest::mouseMove(&v, QPoint(500, 150));
        QTest::mouseRelease(&v, Qt::LeftButton, {}, QPoint(500, 150));
        QVERIFY(std::abs(double(start - v.axis().startNs) - 100 * v.axis().nsPerPixel) <= v.axis().nsPerPixel);
        // Shift+drag: zoom to the band.
        const std::int64_t b0 = v.axis().time(300), b1 = v.axis().time(600);
        QTest::mousePress(&v, Qt::LeftButton, Qt::ShiftModifier, QPoint(300, 150));
        QTest::mouseMove(&v, QPoint(450, 150));
        QTest::mouseMove(&v, QPoint(600, 150));
        QTest::mouseRelease(&v, Qt::LeftButton, Qt::ShiftModifier, QPoint(600, 150));
        QVERIFY(std::abs(double(v.axis().startNs - b0)) <= 2 * v.axis().nsPerPixel);
        QVERIFY(std::abs(double(v.axis().endNs() - b1)) <= 2 * v.axis().nsPerPixel);
        // Home fits everything again.
        QTest::keyClick(&v, Qt::Key_Home);
        QCOMPARE(v.axis().startNs, before.startNs);
        QCOMPARE(v.axis().nsPerPixel, before.nsPerPixel);
        // Jump to step 4: the step fills the view (with a little margin).
        QVERIFY(v.jumpToStep(4));
        QVERIFY(!v.jumpToStep(42));
        const auto r4 = *v.data().stepRange(4);
        QVERIFY(v.axis().startNs <= r4.first && v.axis().endNs() >= r4.second);
        QVERIFY(v.axis().spanNs() < 2 * (r4.second - r4.first));
        // Click the step's packet: activated() names it.
        v.repaint();
        const TimelinePacket &pk = v.data().packets(0)[4];
        const auto &ax = v.axis();
        QSignalSpy spy(&v, &TimelineView::activated);
        const QPoint mid(int((ax.x(pk.sendStartNs) + ax.x(pk.recvEndNs)) / 2), 0);
        // Find the arrow's y at that x by hit testing down the column.
        int y = -1;
        for (int yy = 0; yy < v.height() && y < 0; ++yy)
            if (v.hitAt(QPointF(mid.x(), yy)).kind == TimelineHit::Kind::Packet)
                y = yy;
        QVERIFY(y >= 0);
        QTest::mouseClick(&v, Qt::LeftButton, {}, QPoint(mid.x(), y));
        QCOMPARE(spy.count(), 1);
        const auto hit = spy.at(0).at(0).value<TimelineHit>();
        QCOMPARE(hit.first, std::size_t(4));
        QCOMPARE(v.selected().first, std::size_t(4));
        // Z zooms to it.
        QTest::keyClick(&v, Qt::Key_Z);
        QVERIFY(v.axis().startNs <= pk.sendStartNs && v.axis().endNs() >= pk.recvEndNs);
        QVERIFY(v.axis().spanNs() < 2 * (pk.recvEndNs - pk.sendStartNs));
        QVERIFY(!v.renderImage().isNull());
    }

    // 1M frame sides (about 60 MB unbounded) into a 4 MiB budget.
    void budgetKeepsNewestEvents()
    {
        constexpr std::size_t kBudget = std::size_t(4) << 20;
        constexpr std::size_t kSides = 1'000'000;
        TimelineData live;
        live.setMemoryBudget(kBudget);
        std::size_t maxHeld = 0, sends = 0, spans = 0;
        std::int64_t firstNs = -1;
        liveRun(kSides, [&](const auto &frames, const auto &batchSpans) {
            feed(live, frames, batchSpans);
            maxHeld = std::max(maxHeld, live.memoryBytes());
            sends += frames.size() / 2;
            for (const auto &sp : batchSpans)
                spans += sp.kind == TimelineSpanKind::Step ? 0 : 1;
            if (firstNs < 0)
                firstNs = batchSpans.front().startNs; // the first forward
        });
        QVERIFY(live.historyDropped());
        QCOMPARE(live.droppedBudget(), kBudget);
        QVERIFY2(maxHeld <= kBudget + kBlockBytes, qPrintable(QString::number(maxHeld)));
        // It holds what the budget allows, not much less.
        QVERIFY2(live.memoryBytes() >= kBudget - 2 * live.dropChunkBytes(),
                 qPrintable(QString::number(live.memoryBytes())));
        // Dropped a chunk at a time: ~60 MB through 256 KiB chunks is a few hundred drops, not one per event.
        QVERIFY2(live.dropGeneration() < 4 * 60'000'000 / live.dropChunkBytes(),
                 qPrintable(QString::number(live.dropGeneration())));
        const std::int64_t cut = live.historyStartNs();
        qInfo("kept %zu of %zu packets, %zu spans; peak %zu bytes (budget %zu), %llu drops",
              live.packetCount(), sends, live.spanCount(), maxHeld, kBudget,
              (unsigned long long)live.dropGeneration());
        QVERIFY(cut > firstNs);
        QCOMPARE(live.beginNs(), cut);
        QCOMPARE(live.packetCount() + live.droppedPackets(), sends);
        QVERIFY(live.droppedPackets() > sends / 2);
        QVERIFY(live.spanCount() + live.droppedSpans() >= spans); // straddling spans are kept, clipped
        QCOMPARE(live.originNs(), firstNs); // the ruler still counts from the run's start

        // A fresh TimelineData fed only what is kept: the same events, and the same answers.
        TimelineData kept;
        liveRun(kSides, [&](const auto &frames, const auto &batchSpans) {
            for (const auto &f : frames)
                if (f.sendStartNs >= cut)
                    kept.addFrame(f);
            for (TimelineSpan sp : batchSpans)
                if (std::max(sp.startNs, sp.endNs) >= cut) {
                    sp.startNs = std::max(sp.startNs, cut);
                    kept.addSpan(sp);
                }
        });
        QCOMPARE(live.packetCount(), kept.packetCount());
        QCOMPARE(live.spanCount(), kept.spanCount());
        QCOMPARE(live.endNs(), kept.endNs());
        QCOMPARE(live.inFlightCount(), std::size_t(0));
        QCOMPARE(live.laneCount(), kept.laneCount());
        QVERIFY(live.stepStarts() == kept.stepStarts());
        std::mt19937 rng(5);
        for (int lane = 0; lane < live.laneCount(); ++lane) {
            const auto &a = live.packets(lane), &b = kept.packets(lane);
            QCOMPARE(a.size(), b.size());
            for (std::size_t i = 0; i < a.size(); ++i)
                QVERIFY2(samePacket(a[i], b[i]),
                         qPrintable(QStringLiteral("lane %1 packet %2").arg(lane).arg(i)));
            QVERIFY(a.front().sendStartNs >= cut);
            for (int k = 0; k < 50; ++k) {
                const std::size_t first = std::uniform_int_distribution<std::size_t>(0, a.size() - 1)(rng);
                const std::size_t count = std::uniform_int_distribution<std::size_t>(1, 5000)(rng);
                QCOMPARE(live.packetBytes(lane, first, count), kept.packetBytes(lane, first, count));
            }
            for (auto row :
                 {TimelineData::Row::Compute, TimelineData::Row::Collective, TimelineData::Row::Pause}) {
                const auto &sa = live.spans(lane, row), &sb = kept.spans(lane, row);
                QCOMPARE(sa.size(), sb.size());
                for (std::size_t i = 0; i < sa.size(); ++i)
                    QVERIFY(sameSpan(live, sa[i], kept, sb[i]));
            }
            const double range = double(live.endNs() - cut);
            for (double across : {range, range / 50, 2e6, 50e3}) {
                for (double at : {0.0, 0.3, 0.97}) {
                    const TimeAxis axis = axisOf(across / 1000, cut + std::int64_t(at * (range - across)));
                    const std::int64_t t0 = axis.startNs, t1 = axis.endNs();
                    QVERIFY(sameItems(live.collapsePackets(lane, axis, t0, t1, 5, 64),
                                      kept.collapsePackets(lane, axis, t0, t1, 5, 64)));
                    for (auto row : {TimelineData::Row::Compute, TimelineData::Row::Collective})
                        QVERIFY(sameItems(live.collapseSpans(lane, row, axis, t0, t1, 3, 64),
                                          kept.collapseSpans(lane, row, axis, t0, t1, 3, 64)));
                }
            }
            for (int k = 0; k < 200; ++k) {
                const std::int64_t t =
                    cut + std::int64_t(std::uniform_real_distribution<double>(0, range)(rng));
                QCOMPARE(live.stepAt(lane, t), kept.stepAt(lane, t));
            }
        }
        for (const auto &[step, start] : kept.stepStarts())
            QVERIFY(live.stepRange(step) == kept.stepRange(step));
        QVERIFY(!live.stepRange(0)); // the first steps are gone
    }

    void historyMarkIsPainted()
    {
        TimelineData d;
        d.setMemoryBudget(TimelineData::kMinBudget);
        liveRun(200'000, [&](const auto &frames, const auto &spans) { feed(d, frames, spans); });
        QVERIFY(d.historyDropped());
        const QString text = TimelineRenderer::historyMarkText(d);
        QVERIFY2(text.startsWith(QStringLiteral("history before ")) &&
                     text.endsWith(QStringLiteral(" s dropped (budget 1.0 MiB)")),
                 qPrintable(text));
        QImage image(1000, 300, QImage::Format_ARGB32_Premultiplied);
        TimelineRenderer r;
        r.layout(QRectF(0, 0, 1000, 300), d.laneCount());
        TimeAxis a;
        a.left = r.timeLeft();
        a.width = r.timeWidth();
        a.clampTo(d.beginNs(), d.endNs());
        auto paint = [&] {
            QPainter p(&image);
            r.paint(p, d, a, {});
        };
        // Zoomed out, the kept range fills the view and the mark is its left edge.
        a.fit();
        QCOMPARE(a.startNs, d.historyStartNs());
        paint();
        QVERIFY(!r.historyMarkRect().isEmpty());
        QVERIFY(r.historyMarkRect().left() <= r.timeLeft() + 2);
        // Panned left as far as the view goes: the line is inside, the time before it hatched.
        a.panPixels(a.width);
        const double lineX = a.x(d.historyStartNs());
        QVERIFY(lineX > r.timeLeft() + 100);
        paint();
        const QRectF mark = r.historyMarkRect();
        QVERIFY(mark.left() <= lineX && mark.left() >= lineX - 3);
        QVERIFY(mark.width() > QFontMetricsF(QFont()).horizontalAdvance(QStringLiteral("history before")));
        const QColor line = Palette::normal().text;
        const int y = int(r.rowRect(1, TimelineData::Row::Compute).center().y());
        QCOMPARE(image.pixelColor(int(lineX), y).rgb(), line.rgb());
        QSet<QRgb> hatch;
        for (int x = int(r.timeLeft()) + 2; x < int(lineX) - 3; ++x)
            hatch.insert(image.pixelColor(x, y).rgb());
        QVERIFY2(hatch.size() >= 2, "the dropped history is hatched"); // a plain band would be one colour
        for (int yy = 0; yy < image.height(); yy += 3)
            QCOMPARE(int(r.hitTest(QPointF(lineX - 20, yy)).kind), int(TimelineHit::Kind::None));
        // Nothing dropped: no mark.
        TimelineData whole;
        liveRun(20'000, [&](const auto &frames, const auto &spans) { feed(whole, frames, spans); });
        QVERIFY(!whole.historyDropped());
        QVERIFY(TimelineRenderer::historyMarkText(whole).isEmpty());
        a.clampTo(whole.beginNs(), whole.endNs());
        a.fit();
        {
            QPainter p(&image);
            r.paint(p, whole, a, {});
        }
        QVERIFY(r.historyMarkRect().isEmpty());
    }

    // The envelope a lane draws, column by column, against a plain pass
    // over the samples: a lane past 2^20 samples (every group level in
    // use), some at the same instant, some out of order.
    void memoryEnvelopeMatchesBruteForce_data()
    {
        QTest::addColumn<int>("lane");
        QTest::addColumn<double>("across"); // of the lane's range, across 1000 px; > 1: ns
        QTest::addColumn<double>("at");     // where the view starts, of the range (may be < 0 or > 1)
        QTest::newRow("whole run") << 0 << 1.0 << 0.0;
        QTest::newRow("a tenth") << 0 << 0.1 << 0.45;
        QTest::newRow("a thousandth") << 0 << 0.001 << 0.7;
        QTest::newRow("a millionth") << 0 << 1e-6 << 0.3;
        QTest::newRow("2 us across") << 0 << 2000.0 << 0.61;
        QTest::newRow("50 ns across (0.05 ns per px)") << 0 << 50.0 << 0.2;
        QTest::newRow("left of the first sample") << 0 << 0.01 << -0.005;
        QTest::newRow("right of the last sample") << 0 << 0.01 << 0.995;
        QTest::newRow("beyond the data") << 0 << 0.01 << 1.5;
        QTest::newRow("small lane, whole") << 1 << 1.0 << 0.0;
        QTest::newRow("small lane, deep") << 1 << 20000.0 << 0.5;
    }
    void memoryEnvelopeMatchesBruteForce()
    {
        QFETCH(int, lane);
        QFETCH(double, across);
        QFETCH(double, at);
        static const TimelineData d = [] {
            TimelineData data;
            std::mt19937 rng(9);
            std::uniform_int_distribution<int> gap(0, 2000), noise(0, 4096);
            for (int l = 0; l < 2; ++l) {
                const std::size_t n = l == 0 ? (std::size_t(1) << 20) + 70'000 : 5'000;
                std::int64_t t = 1'000'000;
                std::vector<TimelineMemorySample> late;
                for (std::size_t i = 0; i < n; ++i) {
                    t += gap(rng) < 100 ? 0 : gap(rng); // some at the same instant
                    // A sawtooth with noise; the comm values repeat, so totals tie now and then.
                    auto m = memorySample(l, t, kShard + ((i / 7) % 2) * kLayer,
                                          std::int64_t(noise(rng) % 8) * 4096);
                    m.memory.activations = noise(rng) < 2048 ? 0 : 512 << 10;
                    if (i % 997 == 5) { // held back: added three samples later, out of order
                        late.push_back(m);
                        continue;
                    }
                    data.addMemory(m);
                    if (!late.empty() && i % 997 == 8) {
                        data.addMemory(late.back());
                        late.clear();
                    }
                }
            }
            return data;
        }();
        const auto &v = d.memory(lane);
        QVERIFY(
            std::is_sorted(v.begin(), v.end(), [](const auto &a, const auto &b) { return a.tNs < b.tNs; }));
        const double range = double(v.back().tNs - v.front().tNs);
        const double ns = across > 1 ? across : across * range;
        const TimeAxis axis = axisOf(std::max(TimeAxis::kMinNsPerPixel, ns / 1000),
                                     v.front().tNs + std::int64_t(at * range), 1000);
        const double x0 = 0;
        const auto got = d.memoryEnvelope(lane, axis, x0, 1000);
        const auto want = bruteEnvelope(v, axis, x0, 1000);
        const QString diff = sameRanges(got, want);
        QVERIFY2(diff.isEmpty(), qPrintable(diff));
        std::size_t filled = 0;
        for (const auto &c : want)
            filled += c.count > 0 ? 1 : 0;
        if (at >= 0 && at + across <= 1 && across <= 1)
            QCOMPARE(filled, std::size_t(1000)); // inside the data every column holds something
        if (at > 1.1)
            QCOMPARE(filled, std::size_t(0));
        // Any range, as a hover asks.
        std::mt19937 rng(int(1000 * at) + lane);
        for (int k = 0; k < 200; ++k) {
            const std::int64_t t0 =
                axis.startNs +
                std::int64_t(std::uniform_real_distribution<double>(0, 1000 * axis.nsPerPixel)(rng));
            const std::int64_t len =
                std::int64_t(std::uniform_real_distribution<double>(0, 50 * axis.nsPerPixel)(rng));
            const TimeAxis one = axisOf(double(std::max<std::int64_t>(len, 1)), t0, 1);
            const auto brute = bruteEnvelope(v, one, 0, 1);
            const auto r = d.memoryIn(lane, t0, t0 + std::max<std::int64_t>(len, 1));
            const QString rdiff = sameRanges({r}, brute);
            QVERIFY2(rdiff.isEmpty(), qPrintable(rdiff));
        }
    }

    // The sawtooth painted: higher at the gathered instants than between
    // them, whether a tooth is 18 px wide or far narrower than a pixel.
    void memorySawtoothPaints_data()
    {
        QTest::addColumn<double>("nsPerPixel");
        QTest::addColumn<qint64>("startNs");
        QTest::newRow("teeth 18 px wide") << 5'000.0 << qint64(3 * kStepNs - 20'000);
        QTest::newRow("teeth of 0.45 px, 4 per 10 px") << 200'000.0 << qint64(0);
        QTest::newRow("deep: a tooth across") << 150.0 << qint64(5 * kStepNs + kToothEveryNs);
    }
    void memorySawtoothPaints()
    {
        QFETCH(double, nsPerPixel);
        QFETCH(qint64, startNs);
        TimelineData d;
        d.setNodes({QStringLiteral("a"), QStringLiteral("b")});
        addSawtooth(d, 2, 20);
        QVERIFY(d.hasMemory());
        QCOMPARE(d.memorySampleCount(), std::size_t(2 * 20 * 13));
        QImage image(1000, 280, QImage::Format_ARGB32_Premultiplied);
        TimelineRenderer r;
        r.layout(QRectF(0, 0, 1000, 280), d.laneCount());
        TimeAxis a;
        a.left = r.timeLeft();
        a.width = r.timeWidth();
        a.clampTo(d.beginNs(), d.endNs());
        a.nsPerPixel = nsPerPixel;
        a.startNs = startNs;
        TimelineFrameStats stats;
        {
            QPainter p(&image);
            stats = r.paint(p, d, a, {});
        }
        QVERIFY(r.memoryShown());
        QVERIFY(stats.memoryColumns > 0);
        const std::int64_t peak = kShard + kLayer + (1 << 20) + (2 << 20) + (512 << 10);
        const std::int64_t baseline = peak - kLayer;
        for (int lane = 0; lane < 2; ++lane) // 7.5 MiB, rounded up to a quarter of 4 MiB's power
            QCOMPARE(r.memoryScale(lane), std::int64_t(8) << 20);
        // Where a pixel column must reach: the peak if it overlaps a tooth,
        // the baseline if no tooth is within a pixel of it.
        const auto toothNear = [&](std::int64_t t0, std::int64_t t1) {
            for (std::int64_t s = (std::max<std::int64_t>(t0, 0) / kStepNs) * kStepNs - kStepNs; s <= t1;
                 s += kStepNs)
                for (int j = 0; j < 4; ++j) {
                    const std::int64_t up = s + j * kToothEveryNs + kUpNs,
                                       down = s + j * kToothEveryNs + kDownNs;
                    if (t0 < down && t1 > up)
                        return true;
                }
            return false;
        };
        const std::int64_t last = d.memory(0).back().tNs;
        for (int lane = 0; lane < 2; ++lane) {
            const QRectF strip = r.memoryRect(lane);
            QVERIFY(strip.height() >= 20);
            QVERIFY(strip.top() >= r.rowRect(lane, TimelineData::Row::Collective).bottom());
            const double base = std::floor(strip.bottom());
            const int peakY =
                int(std::lround(base - strip.height() * double(peak) / double(r.memoryScale(lane))));
            const int baseY =
                int(std::lround(base - strip.height() * double(baseline) / double(r.memoryScale(lane))));
            QVERIFY(baseY - peakY >= 10);
            int peaks = 0, flats = 0;
            for (int x = int(std::ceil(r.timeLeft())) + 1; x < image.width() - 1; ++x) {
                const std::int64_t t0 = a.time(x), t1 = a.time(x + 1);
                if (t1 > last)
                    break;
                const int top = memoryTop(image, x, strip);
                if (toothNear(t0, t1)) {
                    QVERIFY2(
                        std::abs(top - peakY) <= 1,
                        qPrintable(QStringLiteral("x %1: top %2, peak at %3").arg(x).arg(top).arg(peakY)));
                    ++peaks;
                } else if (!toothNear(a.time(x - 1), a.time(x + 2))) {
                    QVERIFY2(std::abs(top - baseY) <= 1,
                             qPrintable(
                                 QStringLiteral("x %1: top %2, baseline at %3").arg(x).arg(top).arg(baseY)));
                    ++flats;
                }
            }
            QVERIFY2(peaks >= 4 && (flats >= 10 || nsPerPixel < 1000),
                     qPrintable(QStringLiteral("%1 peaks, %2 flats").arg(peaks).arg(flats)));
        }
    }

    // Each lane on its own scale: a node holding an eighth as much still
    // fills its strip, and its label says how much that is.
    void memoryScalesPerLane()
    {
        TimelineData d;
        addSawtooth(d, 1, 4);
        for (std::int64_t t = 0; t < 4 * kStepNs; t += kStepNs / 4)
            d.addMemory(memorySample(1, t, (t / (kStepNs / 4)) % 2 ? 1 << 20 : 0)); // 3.5 MiB, then 4.5 MiB
        QImage image(1000, 280, QImage::Format_ARGB32_Premultiplied);
        TimelineRenderer r;
        r.layout(QRectF(0, 0, 1000, 280), d.laneCount());
        TimeAxis a;
        a.left = r.timeLeft();
        a.width = r.timeWidth();
        a.clampTo(d.beginNs(), d.endNs());
        a.fit();
        {
            QPainter p(&image);
            r.paint(p, d, a, {});
        }
        QCOMPARE(r.memoryScale(0), std::int64_t(8) << 20);
        QCOMPARE(r.memoryScale(1), std::int64_t(5) << 20); // 4.5 MiB, to a quarter of 4 MiB
        // Lane 1's higher samples reach 4.5/5 of its strip, not 4.5/8.
        const QRectF strip = r.memoryRect(1);
        const int x = int(a.x(kStepNs / 4 + kStepNs / 8));
        const double height = std::floor(strip.bottom()) - memoryTop(image, x, strip);
        QVERIFY2(std::abs(height - strip.height() * 4.5 / 5) <= 1.5, qPrintable(QString::number(height)));
    }

    // A hover on a memory strip says what the node held at that instant.
    void memoryHoverGivesCategories()
    {
        TimelineData d;
        d.setNodes({QStringLiteral("a"), QStringLiteral("b")});
        addSawtooth(d, 2, 20);
        QImage image(1000, 280, QImage::Format_ARGB32_Premultiplied);
        TimelineRenderer r;
        r.layout(QRectF(0, 0, 1000, 280), d.laneCount());
        TimeAxis a;
        a.left = r.timeLeft();
        a.width = r.timeWidth();
        a.clampTo(d.beginNs(), d.endNs());
        a.nsPerPixel = 5'000;
        a.startNs = 3 * kStepNs - 20'000;
        {
            QPainter p(&image);
            r.paint(p, d, a, {});
        }
        // Inside the second tooth of step 3 on lane 1: the sample after its all-gather.
        const std::int64_t t = 3 * kStepNs + kToothEveryNs + 50'000;
        const QRectF strip = r.memoryRect(1);
        const TimelineHit hit = r.hitTest(QPointF(a.x(t), strip.bottom() - 2));
        QCOMPARE(int(hit.kind), int(TimelineHit::Kind::Memory));
        QCOMPARE(hit.lane, 1);
        QCOMPARE(hit.count, std::size_t(1));
        const StoredMemory &m = d.memory(1)[hit.first];
        QCOMPARE(m.tNs, 3 * kStepNs + kToothEveryNs + kUpNs);
        QCOMPARE(m.memory.params, kShard + kLayer);
        QCOMPARE(m.memory.grads, std::int64_t(1) << 20);
        QCOMPARE(m.memory.optimizer, std::int64_t(2) << 20);
        QCOMPARE(m.memory.activations, std::int64_t(512) << 10);
        QCOMPARE(m.memory.comm, std::int64_t(0));
        QVERIFY(!m.before);
        const QString text = TimelineRenderer::describe(d, hit);
        for (const QString &part :
             {QStringLiteral("memory of b at "), QStringLiteral("after all-gather #"),
              QStringLiteral("step 3"), QStringLiteral("params 4.0 MiB"), QStringLiteral("grads 1.0 MiB"),
              QStringLiteral("optimizer 2.0 MiB"), QStringLiteral("activations 512 KiB"),
              QStringLiteral("comm 0 B"), QStringLiteral("total 7.5 MiB"), QStringLiteral("held 90.0 µs")})
            QVERIFY2(text.contains(part), qPrintable(text));
        // Between teeth: the freed layer, before the reduce-scatter.
        const TimelineHit flat =
            r.hitTest(QPointF(a.x(3 * kStepNs + kToothEveryNs + 300'000), strip.bottom() - 2));
        QCOMPARE(int(flat.kind), int(TimelineHit::Kind::Memory));
        QCOMPARE(d.memory(1)[flat.first].memory.params, kShard);
        QVERIFY(TimelineRenderer::describe(d, flat).contains(QStringLiteral("before reduce-scatter #")));
        // Above the strip: not memory.
        QVERIFY(r.hitTest(QPointF(a.x(t), strip.top() - 3)).kind != TimelineHit::Kind::Memory);
        // Zoomed out, a column holds several samples: the highest, and the range.
        a.nsPerPixel = 200'000;
        a.startNs = 0;
        {
            QPainter p(&image);
            r.paint(p, d, a, {});
        }
        const TimelineHit many =
            r.hitTest(QPointF(a.x(2 * kStepNs + 2 * kToothEveryNs + kUpNs), r.memoryRect(0).center().y()));
        QCOMPARE(int(many.kind), int(TimelineHit::Kind::Memory));
        QVERIFY(many.count > 1);
        QCOMPARE(d.memory(0)[many.first].memory.params, kShard + kLayer);
        const QString manyText = TimelineRenderer::describe(d, many);
        QVERIFY2(manyText.contains(QStringLiteral("samples in this pixel")) &&
                     manyText.contains(QStringLiteral("to 7.5 MiB")),
                 qPrintable(manyText));
    }

    // Memory strips only where lanes are tall enough, and only with memory.
    void memoryStripsNeedRoom_data()
    {
        QTest::addColumn<int>("lanes");
        QTest::addColumn<double>("height");
        QTest::addColumn<bool>("withMemory");
        QTest::addColumn<bool>("shown");
        QTest::newRow("4 lanes") << 4 << 300.0 << true << true;
        QTest::newRow("8 lanes in 400 px") << 8 << 400.0 << true << true;
        // Thinner lanes keep a thin bar (4 nodes on a 1024x768 projector,
        // 64 in the docks of a 1024x768 projector and a 1600x1000 screen).
        QTest::newRow("4 lanes, 1024x768 projector") << 4 << 75.0 << true << true;
        QTest::newRow("32 lanes") << 32 << 600.0 << true << true;
        QTest::newRow("64 lanes") << 64 << 600.0 << true << true;
        QTest::newRow("64 lanes, 1024x768 projector") << 64 << 75.0 << true << true;
        QTest::newRow("64 lanes, 1600x1000") << 64 << 215.0 << true << true;
        QTest::newRow("4 lanes, no memory") << 4 << 300.0 << false << false;
    }
    void memoryStripsNeedRoom()
    {
        QFETCH(int, lanes);
        QFETCH(double, height);
        QFETCH(bool, withMemory);
        QFETCH(bool, shown);
        TimelineData d;
        for (int i = 0; i < lanes; ++i)
            addPacket(d, i, (i + 1) % lanes, 1'000 + i * 100, 2'000, std::uint32_t(i));
        if (withMemory)
            addSawtooth(d, lanes, 2);
        TimelineRenderer r;
        r.layout(QRectF(0, 0, 900, height), lanes);
        const double packetYBefore = r.packetY(0);
        QImage image(900, int(height), QImage::Format_ARGB32_Premultiplied);
        TimeAxis a;
        a.left = r.timeLeft();
        a.width = r.timeWidth();
        a.clampTo(d.beginNs(), d.endNs());
        a.fit();
        QPainter p(&image);
        const TimelineFrameStats stats = r.paint(p, d, a, {});
        QCOMPARE(r.memoryShown(), shown);
        QCOMPARE(stats.memoryColumns > 0, shown);
        QCOMPARE(r.memoryRect(0).isEmpty(), !shown);
        if (!shown) {
            QCOMPARE(r.packetY(0), packetYBefore); // the lanes as they were
            return;
        }
        QCOMPARE(r.memoryThin(), r.laneRect(0).height() < TimelineRenderer::kMinMemoryLaneHeight);
        const Palette &pal = Palette::forMode(false);
        std::set<QRgb> categories;
        for (MemoryCategory c : kMemoryCategories)
            categories.insert(pal.category(c).rgba());
        for (int lane = 0; lane < lanes; ++lane) { // in its lane, under the spans and the packet strip
            const QRectF m = r.memoryRect(lane);
            QVERIFY(m.height() >= std::min(1.0, r.laneRect(lane).height()) - 1e-9);
            QVERIFY(m.top() >= r.laneRect(lane).top() - 1e-9 && m.bottom() <= r.laneRect(lane).bottom() + 1e-9);
            if (!r.memoryUnderSpans()) {
                QVERIFY(m.top() > r.packetY(lane));
                QVERIFY(r.packetY(lane) > r.rowRect(lane, TimelineData::Row::Collective).top());
                QVERIFY(m.top() >= r.rowRect(lane, TimelineData::Row::Collective).bottom() - 1e-9);
            }
            // The bar is drawn: the lane's strip has pixels in the categories' colours.
            int coloured = 0;
            const int y = std::clamp(std::max(int(std::floor(m.bottom())) - 1, int(std::floor(m.top()))), 0,
                                     image.height() - 1); // its foot: filled wherever memory is in effect
            for (int x = int(r.timeLeft()) + 1; x < image.width(); ++x)
                coloured += categories.count(image.pixel(x, y)) > 0;
            QVERIFY2(coloured > 100, qPrintable(QStringLiteral("lane %1: %2 coloured pixels").arg(lane).arg(coloured)));
        }
    }

    // Memory samples keep to the budget, by the same rule as the events.
    void memoryKeepsToBudget()
    {
        constexpr std::size_t kBudget = std::size_t(4) << 20;
        TimelineData live;
        live.setMemoryBudget(kBudget);
        live.setCollectiveNames(kindNames());
        // Every collective span of the run brings a sample before and after
        // it on its node, with a sawtooth in params (the gathered layer).
        const auto samplesOf = [](const std::vector<TimelineSpan> &spans) {
            std::vector<TimelineMemorySample> out;
            for (const auto &sp : spans)
                if (sp.kind == TimelineSpanKind::Collective) {
                    out.push_back(memorySample(sp.node, sp.startNs, kShard, kLayer, sp.collective, true));
                    out.push_back(memorySample(sp.node, sp.endNs, kShard + kLayer, 0, sp.collective, false));
                }
            return out;
        };
        std::size_t maxHeld = 0, fed = 0;
        liveRun(600'000, [&](const auto &frames, const auto &spans) {
            feed(live, frames, spans);
            for (const auto &m : samplesOf(spans)) {
                live.addMemory(m);
                ++fed;
            }
            maxHeld = std::max(maxHeld, live.memoryBytes());
        });
        QVERIFY(live.historyDropped());
        QVERIFY2(maxHeld <= kBudget + kBlockBytes, qPrintable(QString::number(maxHeld)));
        const std::int64_t cut = live.historyStartNs();
        QCOMPARE(live.memorySampleCount() + live.droppedMemorySamples(), fed);
        QVERIFY(live.droppedMemorySamples() > fed / 2);
        // A sample for the dropped past is not kept.
        live.addMemory(memorySample(0, cut - 1, kShard));
        QCOMPARE(live.memorySampleCount() + live.droppedMemorySamples(), fed + 1);
        qInfo("kept %zu of %zu memory samples, peak %zu bytes (budget %zu)", live.memorySampleCount(), fed,
              maxHeld, kBudget);
        TimelineData kept;
        liveRun(600'000, [&](const auto &, const auto &spans) {
            for (const auto &m : samplesOf(spans))
                if (m.tNs >= cut)
                    kept.addMemory(m);
        });
        QCOMPARE(live.memorySampleCount(), kept.memorySampleCount());
        for (int lane = 0; lane < live.laneCount(); ++lane) {
            const auto &a = live.memory(lane), &b = kept.memory(lane);
            QCOMPARE(a.size(), b.size());
            QVERIFY(a.size() > 0);
            QVERIFY(a.front().tNs >= cut);
            for (std::size_t i = 0; i < a.size(); ++i)
                QVERIFY(a[i].tNs == b[i].tNs && a[i].total() == b[i].total() && a[i].before == b[i].before);
            const double range = double(live.endNs() - cut);
            for (double across : {range, range / 50, 2e6, 50e3})
                for (double at : {0.0, 0.3, 0.97}) {
                    const TimeAxis axis = axisOf(across / 1000, cut + std::int64_t(at * (range - across)));
                    const QString diff = sameRanges(live.memoryEnvelope(lane, axis, 0, 1000),
                                                    kept.memoryEnvelope(lane, axis, 0, 1000));
                    QVERIFY2(diff.isEmpty(), qPrintable(diff));
                    const QString brute =
                        sameRanges(live.memoryEnvelope(lane, axis, 0, 1000), bruteEnvelope(a, axis, 0, 1000));
                    QVERIFY2(brute.isEmpty(), qPrintable(brute));
                }
        }
        // Per lane, what left the front of its list (a selection's index moves by it).
        std::uint64_t listed = 0;
        for (int lane = 0; lane < live.laneCount(); ++lane)
            listed += live.memoryDroppedFrom(lane) + live.memory(lane).size();
        QCOMPARE(listed, std::uint64_t(fed));
    }

    // The widget: live it keeps to its budget and moves the selection with
    // its events (or clears it when they go); a replay is never trimmed.
    void viewBudgetAndSelection()
    {
        TimelineView v;
        v.resize(900, 300);
        v.show();
        QVERIFY(QTest::qWaitForWindowExposed(&v));
        QCOMPARE(v.data().memoryBudget(), std::size_t(0)); // not live yet
        v.setLive(true);
        QCOMPARE(v.liveMemoryBudget(), TimelineData::kDefaultLiveBudget);
        QCOMPARE(v.data().memoryBudget(), TimelineData::kDefaultLiveBudget);
        v.setLiveMemoryBudget(TimelineData::kMinBudget);
        QCOMPARE(v.data().memoryBudget(), TimelineData::kMinBudget);
        TimelineData &d = v.data();
        std::function<bool()> stop;
        auto run = [&](std::size_t sides) {
            liveRun(sides, [&](const auto &frames, const auto &spans) {
                if (stop && stop())
                    return;
                feed(d, frames, spans);
                v.dataChanged();
            });
        };
        // Select lane 0's newest packet, then feed until history is dropped but that packet is kept.
        run(10'000);
        QVERIFY(!d.historyDropped());
        const std::size_t newest = d.packets(0).size() - 1;
        const TimelinePacket chosen = d.packets(0)[newest];
        TimelineHit hit;
        hit.kind = TimelineHit::Kind::Packet;
        hit.lane = 0;
        hit.first = newest;
        hit.count = 1;
        hit.startNs = chosen.sendStartNs;
        v.select(hit);
        // Fresh runs restart their clock; continue after what is there.
        const std::int64_t offset = d.endNs() + 1'000'000 - 1'000'000'000;
        auto runOn = [&](std::size_t sides) {
            liveRun(sides, [&](std::vector<TimelineFrameSide> frames, std::vector<TimelineSpan> spans) {
                if (stop && stop())
                    return;
                for (auto &f : frames) {
                    f.sendStartNs += offset;
                    f.sendCompleteNs += f.send ? offset : 0;
                    f.recvCompleteNs += f.send ? 0 : offset;
                }
                for (auto &sp : spans) {
                    sp.startNs += offset;
                    sp.endNs += offset;
                    sp.step += 100'000;
                }
                feed(d, frames, spans);
                v.dataChanged();
            });
        };
        stop = [&] { return d.historyDropped(); };
        runOn(400'000);
        QVERIFY(d.historyDropped());
        QVERIFY(d.historyStartNs() <= chosen.sendStartNs);
        QCOMPARE(int(v.selected().kind), int(TimelineHit::Kind::Packet));
        QVERIFY(v.selected().first < newest); // moved with the dropped prefix
        QVERIFY(samePacket(d.packets(0)[v.selected().first], chosen));
        // Until the next paint the old picture's items are not hit (their indexes are stale).
        QCOMPARE(int(v.hitAt(QPointF(450, 150)).kind), int(TimelineHit::Kind::None));
        // Feed on until it is dropped: the selection goes with it.
        stop = [&] { return d.historyStartNs() > chosen.sendStartNs; };
        runOn(2'000'000);
        QVERIFY(d.historyStartNs() > chosen.sendStartNs);
        QCOMPARE(int(v.selected().kind), int(TimelineHit::Kind::None));
        QVERIFY(d.memoryBytes() <= TimelineData::kMinBudget + kBlockBytes);
        v.repaint();
        QVERIFY(v.axis().startNs >=
                d.historyStartNs() - v.axis().spanNs() / 4); // the kept range, a quarter width of slack

        // Not live (a replay): no budget, nothing dropped however much is loaded.
        v.clear();
        v.setLive(false);
        QCOMPARE(v.data().memoryBudget(), std::size_t(0));
        stop = {};
        run(200'000);
        QVERIFY(!d.historyDropped());
        QVERIFY(d.memoryBytes() > 4 * TimelineData::kMinBudget);
        QVERIFY(d.packetCount() >= std::size_t(100'000));
    }
    // Live: following shows the newest step and a half, packets apart; a
    // pause frames the collective before the hold (its packets drawn as
    // arrows, the hatch a minority of the width) and keeps it framed while
    // "now" runs on for a minute; resuming follows again, or not when the
    // user had left follow before the pause.
    void liveHoldFramesTheHeldCollective()
    {
        TimelineView v;
        v.resize(900, 300);
        v.show();
        QVERIFY(QTest::qWaitForWindowExposed(&v));
        v.setLive(true);
        TimelineData &d = v.data();
        d.setCollectiveNames(kindNames());
        std::int64_t now = 0;
        liveRun(20 * 384, [&](const std::vector<TimelineFrameSide> &frames, const std::vector<TimelineSpan> &spans) {
            feed(d, frames, spans);
            for (const auto &f : frames)
                now = std::max(now, f.recvCompleteNs);
            v.dataChanged();
            v.setNow(now + 20'000);
        });
        const auto steps = d.stepStarts();
        QCOMPARE(int(steps.size()), 20);
        const auto last = *d.stepRange(steps.rbegin()->first);
        const std::int64_t stepNs = last.second - last.first;
        // Following: a step and a half in view, not the whole run.
        QVERIFY(v.isFollowing());
        QVERIFY2(v.axis().spanNs() >= stepNs && v.axis().spanNs() <= 2 * stepNs,
                 qPrintable(QStringLiteral("%1 ns shown, steps of %2").arg(v.axis().spanNs()).arg(stepNs)));
        QVERIFY(v.axis().spanNs() < (d.endNs() - d.beginNs()) / 5);

        // The last collective before the hold: bucket 1 of the last step.
        const std::uint64_t heldSeq = 2 * 20 - 1;
        std::int64_t c0 = std::numeric_limits<std::int64_t>::max(), c1 = 0;
        std::size_t heldPackets = 0;
        for (int lane = 0; lane < d.laneCount(); ++lane)
            for (const TimelinePacket &pk : d.packets(lane))
                if (pk.seq == heldSeq) {
                    c0 = std::min(c0, pk.sendStartNs);
                    c1 = std::max(c1, pk.recvEndNs);
                    ++heldPackets;
                }
        QVERIFY(heldPackets > 0);
        TimelineHold hold;
        hold.atNs = now + 34'000'000; // the window learns of it a snapshot later
        hold.reason = QStringLiteral("pause");
        hold.collective = QStringLiteral("all-reduce");
        hold.name = QStringLiteral("bucket 0");
        hold.step = steps.rbegin()->first;
        v.setNow(hold.atNs);
        v.holdAt(hold);
        QVERIFY(v.isHolding());
        QVERIFY(!v.isFollowing());
        QVERIFY(v.holdText().contains(QStringLiteral("all-reduce 'bucket 0', step 19")));
        const TimeAxis framed = v.axis();
        for (int second = 1; second <= 60; ++second) { // a minute held: "now" runs on, nothing else comes
            v.setNow(hold.atNs + std::int64_t(second) * 1'000'000'000);
            v.dataChanged();
        }
        QCOMPARE(v.axis().startNs, framed.startNs);
        QCOMPARE(v.axis().nsPerPixel, framed.nsPerPixel);
        QVERIFY2(v.axis().startNs <= c0 && v.axis().endNs() >= c1,
                 qPrintable(QStringLiteral("view [%1, %2], collective [%3, %4]")
                                .arg(v.axis().startNs).arg(v.axis().endNs()).arg(c0).arg(c1)));
        // The hatch starts after the collective and takes under half the width.
        const TimelineFrameStats stats = [&] {
            (void)v.renderImage();
            return v.lastStats();
        }();
        QVERIFY2(stats.arrows >= heldPackets,
                 qPrintable(QStringLiteral("%1 arrows for %2 packets").arg(stats.arrows).arg(heldPackets)));
        QVERIFY(v.axis().x(d.endNs()) > v.axis().left + 0.5 * v.axis().width);
        QVERIFY(v.axis().x(d.endNs()) < v.axis().left + 0.95 * v.axis().width);
        // Resume: following again, at the zoom it had.
        v.setLivePause(TimelineOverlay::kNone);
        QVERIFY(!v.isHolding());
        QVERIFY(v.isFollowing());
        QVERIFY(v.holdText().isEmpty());
        QVERIFY(v.axis().endNs() >= d.endNs() && v.axis().startNs < d.endNs()); // the newest events
        QVERIFY(v.axis().spanNs() >= stepNs && v.axis().spanNs() <= 2 * stepNs);
        // Left follow before pausing: a pause frames, its end leaves the view where it is.
        QTest::keyClick(&v, Qt::Key_Home);
        QVERIFY(!v.isFollowing());
        v.holdAt(hold);
        const TimeAxis framedAgain = v.axis();
        v.releaseHold();
        QVERIFY(!v.isFollowing());
        QCOMPARE(v.axis().startNs, framedAgain.startNs);
        // The user's move during a pause stays until the pause ends.
        QTest::keyClick(&v, Qt::Key_End);
        QVERIFY(v.isFollowing());
        v.holdAt(hold);
        QTest::keyClick(&v, Qt::Key_Minus);
        const TimeAxis moved = v.axis();
        v.dataChanged();
        QCOMPARE(v.axis().nsPerPixel, moved.nsPerPixel);
        v.releaseHold();
        QVERIFY(v.isFollowing());
    }

    // Nodes report in batches: following stops where every lane has
    // reported (a lane ahead does not pull the others' unreported time
    // into view), at most maxLagNs behind the newest event; memory
    // samples (reported by another path, ahead) do not count.
    void followingStopsWhereEveryNodeReported()
    {
        TimelineData d;
        d.setNodes({QStringLiteral("n0"), QStringLiteral("n1")});
        for (int r = 0; r < 2; ++r)
            d.addSpan({r, TimelineSpanKind::Forward, QStringLiteral("forward"), 0, 1'000'000, 0, 0, 0, 0});
        QCOMPARE(reportedUntilNs(d, 10'000'000), std::int64_t(1'000'000));
        d.addSpan({0, TimelineSpanKind::Backward, QStringLiteral("backward"), 1'000'000, 3'000'000, 0, 0, 0, 0});
        QCOMPARE(reportedUntilNs(d, 10'000'000), std::int64_t(1'000'000)); // n1 has not reported past 1 ms
        QCOMPARE(reportedUntilNs(d, 500'000), std::int64_t(2'500'000));   // but lags at most that much
        addPacket(d, 1, 0, 2'000'000, 100'000);
        QCOMPARE(reportedUntilNs(d, 10'000'000), std::int64_t(2'000'000)); // its packet's send start
        d.addMemory(memorySample(1, 2'900'000, 1 << 20));
        QCOMPARE(reportedUntilNs(d, 10'000'000), std::int64_t(2'000'000));
    }

    // Replay: at a recorded pause (a minute long) the view frames the held
    // collective after it, with its packets, and not the pause's hatch.
    void replayHoldFramesTheRecordedCollective()
    {
        TimelineView v;
        v.resize(900, 300);
        v.setLive(false);
        TimelineData &d = v.data();
        d.setCollectiveNames(kindNames());
        d.setNodes({QStringLiteral("n0"), QStringLiteral("n1")});
        const std::int64_t p0 = 1'000'000'000, p1 = p0 + 60'000'000'000LL; // the pause
        for (int r = 0; r < 2; ++r) {
            d.addSpan({r, TimelineSpanKind::Forward, QStringLiteral("forward"), p0 - 2'000'000, p0, 3, 0, 0, 0});
            d.addSpan({r, TimelineSpanKind::Pause, QStringLiteral("pause"), p0, p1, 3, 5, 7, 4096});
            d.addSpan({r, TimelineSpanKind::Collective, QStringLiteral("params.fc2"), p1, p1 + 300'000, 3, 5, 7, 4096});
            d.addSpan({r, TimelineSpanKind::Forward, QStringLiteral("forward"), p1 + 300'000, p1 + 9'000'000, 3, 0, 0, 0});
        }
        for (std::uint32_t k = 0; k < 8; ++k) {
            TimelineFrameSide send = side(true, int(k % 2), int(1 - k % 2), 7, k, p1 + 20'000 + k * 30'000, 0);
            send.collective = 5;
            send.sendCompleteNs = send.sendStartNs + 5'000;
            TimelineFrameSide recv = send;
            recv.send = false;
            recv.recvCompleteNs = send.sendStartNs + 12'000;
            d.addFrame(send);
            d.addFrame(recv);
        }
        v.dataChanged();
        v.setFollowing(true);
        v.setPlayhead(p1 - 1); // "next collective" lands just before it
        TimelineHold hold;
        hold.atNs = p1 - 1;
        hold.reason = QStringLiteral("recorded pause");
        v.holdAt(hold);
        QVERIFY(!v.isFollowing());
        QVERIFY(v.holdText().isEmpty()); // a replay's pause is its recorded spans, not a live hatch
        QVERIFY(v.axis().startNs <= p1 && v.axis().endNs() >= p1 + 300'000);
        QVERIFY(v.axis().spanNs() < 1'000'000); // not the minute of pause
        QCOMPARE(v.renderImage().isNull(), false);
        QCOMPARE(v.lastStats().arrows, std::size_t(8));
        // A position in the middle of the pause frames the same collective.
        hold.atNs = p0 + 30'000'000'000LL;
        v.holdAt(hold);
        QVERIFY(v.axis().startNs <= p1 && v.axis().endNs() >= p1 + 300'000);
        v.releaseHold(); // leaving the pause: the playhead again
        QVERIFY(v.isFollowing());
    }
};

QTEST_MAIN(TimelineTest)
#include "tst_timeline.moc"
