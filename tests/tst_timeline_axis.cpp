// The timeline's time <-> pixel maths (widgets/timeline_axis.h), data
// driven: mapping both ways, zooming about the pointer, showing a range,
// panning and the clamps that keep the view on the data.
#include "widgets/timeline/timeline_axis.h"

#include <QTest>

using smol::widgets::TimeAxis;

class TimelineAxisTest : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void mapping_data()
    {
        QTest::addColumn<qint64>("start");
        QTest::addColumn<double>("nsPerPixel");
        QTest::addColumn<double>("left");
        QTest::addColumn<qint64>("t");
        QTest::addColumn<double>("x");
        QTest::newRow("origin") << qint64(0) << 1.0 << 0.0 << qint64(0) << 0.0;
        QTest::newRow("1 ns/px") << qint64(0) << 1.0 << 0.0 << qint64(250) << 250.0;
        QTest::newRow("label column") << qint64(0) << 1.0 << 118.0 << qint64(250) << 368.0;
        QTest::newRow("1 ms/px") << qint64(5'000'000'000) << 1e6 << 100.0 << qint64(5'500'000'000) << 600.0;
        QTest::newRow("before start") << qint64(1000) << 10.0 << 50.0 << qint64(500) << 0.0;
        QTest::newRow("sub-ns pixels") << qint64(100) << 0.25 << 0.0 << qint64(110) << 40.0;
        QTest::newRow("large clock") << qint64(9'000'000'000'000'000'000) << 1000.0 << 0.0
                                     << qint64(9'000'000'000'001'920'000) << 1920.0;
    }
    void mapping()
    {
        QFETCH(qint64, start);
        QFETCH(double, nsPerPixel);
        QFETCH(double, left);
        QFETCH(qint64, t);
        QFETCH(double, x);
        TimeAxis a;
        a.startNs = start;
        a.nsPerPixel = nsPerPixel;
        a.left = left;
        a.width = 1920;
        QCOMPARE(a.x(t), x);
        QCOMPARE(a.time(x), t);
        // Round trip within half a pixel's time.
        QVERIFY(std::abs(double(a.time(a.x(t) + 0.3) - t) - 0.3 * nsPerPixel) <= 0.5 + 1e-9);
    }

    void zoomAt_data()
    {
        QTest::addColumn<double>("nsPerPixel");
        QTest::addColumn<double>("px");
        QTest::addColumn<double>("factor");
        QTest::addColumn<double>("expectedNsPerPixel");
        QTest::newRow("in x2 at centre") << 1000.0 << 1060.0 << 2.0 << 500.0;
        QTest::newRow("in x2 at left edge") << 1000.0 << 100.0 << 2.0 << 500.0;
        QTest::newRow("out x2 at right") << 1000.0 << 2019.0 << 0.5 << 2000.0;
        QTest::newRow("out past the limit") << 900'000.0 << 500.0 << 0.01 << 10e9 / 1920;
        QTest::newRow("in past the limit") << 1.0 << 500.0 << 1000.0 << TimeAxis::kMinNsPerPixel;
        QTest::newRow("no-op") << 1000.0 << 700.0 << 1.0 << 1000.0;
    }
    void zoomAt()
    {
        QFETCH(double, nsPerPixel);
        QFETCH(double, px);
        QFETCH(double, factor);
        QFETCH(double, expectedNsPerPixel);
        TimeAxis a;
        a.left = 100;
        a.width = 1920;
        a.clampTo(0, 10'000'000'000); // 10 s of data
        a.nsPerPixel = nsPerPixel;
        a.centreOn(5'000'000'000);
        const std::int64_t anchor = a.time(px);
        a.zoomAt(px, factor);
        QVERIFY2(std::abs(a.nsPerPixel - expectedNsPerPixel) <= 1e-9 * expectedNsPerPixel,
                 qPrintable(QString::number(a.nsPerPixel)));
        if (a.nsPerPixel < a.maxNsPerPixel()) // at full zoom-out the range is centred instead
            QVERIFY2(std::abs(double(a.time(px) - anchor)) <= std::max(1.0, a.nsPerPixel),
                     qPrintable(QStringLiteral("anchor moved by %1 ns").arg(a.time(px) - anchor)));
    }

    void showRange_data()
    {
        QTest::addColumn<qint64>("t0");
        QTest::addColumn<qint64>("t1");
        QTest::addColumn<double>("x0");
        QTest::addColumn<double>("x1");
        QTest::newRow("one second") << qint64(2'000'000'000) << qint64(3'000'000'000) << 100.0 << 2020.0;
        QTest::newRow("one step") << qint64(4'000'000'000) << qint64(4'013'500'000) << 100.0 << 2020.0;
        QTest::newRow("reversed") << qint64(3'000'000'000) << qint64(2'000'000'000) << 100.0 << 2020.0;
        QTest::newRow("whole run") << qint64(0) << qint64(10'000'000'000) << 100.0 << 2020.0;
        // 10 ns on 1920 px is deeper than the limit: centred at 20 px/ns.
        QTest::newRow("too short") << qint64(5'000'000'000) << qint64(5'000'000'010) << 960.0 << 1160.0;
    }
    void showRange()
    {
        QFETCH(qint64, t0);
        QFETCH(qint64, t1);
        QFETCH(double, x0);
        QFETCH(double, x1);
        TimeAxis a;
        a.left = 100;
        a.width = 1920;
        a.clampTo(0, 10'000'000'000);
        a.showRange(t0, t1);
        QVERIFY2(std::abs(a.x(std::min(t0, t1)) - x0) <= 0.5, qPrintable(QString::number(a.x(std::min(t0, t1)))));
        QVERIFY2(std::abs(a.x(std::max(t0, t1)) - x1) <= 0.5, qPrintable(QString::number(a.x(std::max(t0, t1)))));
    }

    void panAndClamp_data()
    {
        QTest::addColumn<double>("dx");
        QTest::addColumn<qint64>("expectedStart");
        // 1 s across 1000 px from t = 4 s; data 0..10 s; slack a quarter width (250 ms).
        QTest::newRow("drag right 100 px") << 100.0 << qint64(3'900'000'000);
        QTest::newRow("drag left 100 px") << -100.0 << qint64(4'100'000'000);
        QTest::newRow("far before the data") << 1e6 << qint64(-250'000'000);
        QTest::newRow("far past the data") << -1e6 << qint64(9'250'000'000);
    }
    void panAndClamp()
    {
        QFETCH(double, dx);
        QFETCH(qint64, expectedStart);
        TimeAxis a;
        a.left = 0;
        a.width = 1000;
        a.clampTo(0, 10'000'000'000);
        a.showRange(4'000'000'000, 5'000'000'000);
        a.panPixels(dx);
        QCOMPARE(a.startNs, expectedStart);
    }

    void followKeepsTheNewestInView()
    {
        TimeAxis a;
        a.left = 0;
        a.width = 1000;
        a.clampTo(0, 20'000'000'000);
        a.showRange(0, 1'000'000'000);
        a.follow(1'500'000'000, 50);
        QCOMPARE(a.x(1'500'000'000), 950.0);
        const std::int64_t before = a.startNs;
        a.follow(1'200'000'000, 50); // already in view: nothing moves
        QCOMPARE(a.startNs, before);
    }
};

QTEST_GUILESS_MAIN(TimelineAxisTest)
#include "tst_timeline_axis.moc"
