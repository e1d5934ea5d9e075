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
//   send start and its arrival.
#include "widgets/timeline_data.h"
#include "widgets/timeline_renderer.h"
#include "widgets/timeline_view.h"

#include <QImage>
#include <QPainter>
#include <QSignalSpy>
#include <QTest>

#include <random>

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

} // namespace

class TimelineTest : public QObject {
    Q_OBJECT

private Q_SLOTS:
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
};

QTEST_MAIN(TimelineTest)
#include "tst_timeline.moc"
