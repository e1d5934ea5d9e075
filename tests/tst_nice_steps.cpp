// The 1-2-5 axis step (widgets/paint/nice_steps.h) every axis ticks at:
// the smallest 1, 2 or 5 x 10^k at or above a value, across magnitudes and
// at the boundaries, and the decimals a tick label needs for a step.
#include "widgets/paint/nice_steps.h"

#include <QTest>

#include <cmath>
#include <limits>

using namespace smol::widgets;

class TestNiceSteps : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void step_data()
    {
        QTest::addColumn<double>("atLeast");
        QTest::addColumn<double>("expected");
        QTest::newRow("exactly 1") << 1.0 << 1.0;
        QTest::newRow("just above 1") << 1.01 << 2.0;
        QTest::newRow("exactly 2") << 2.0 << 2.0;
        QTest::newRow("between 2 and 5") << 2.5 << 5.0;
        QTest::newRow("exactly 5") << 5.0 << 5.0;
        QTest::newRow("just above 5") << 5.2 << 10.0;
        QTest::newRow("9.9 rounds to the next decade") << 9.9 << 10.0;
        QTest::newRow("exactly 10") << 10.0 << 10.0;
        QTest::newRow("thousands") << 1234.0 << 2000.0;
        QTest::newRow("a third") << 0.3 << 0.5;
        QTest::newRow("0.68 MiB of 3.4 over 5 ticks") << 0.68 << 1.0;
        QTest::newRow("12 MiB over 5 ticks") << 2.4 << 5.0;
        QTest::newRow("small fraction") << 0.00042 << 0.0005;
        QTest::newRow("timeline ruler, 1.3 ms in ns") << 1.3e6 << 2e6;
        QTest::newRow("timeline ruler, 40 s in ns") << 4e10 << 5e10;
        QTest::newRow("zero: no axis") << 0.0 << 1.0;
        QTest::newRow("negative") << -3.0 << 1.0;
        QTest::newRow("NaN") << std::numeric_limits<double>::quiet_NaN() << 1.0;
    }
    void step()
    {
        QFETCH(double, atLeast);
        QFETCH(double, expected);
        const double s = niceStep(atLeast);
        QVERIFY2(std::abs(s - expected) <= 1e-12 * expected, qPrintable(QString::number(s, 'g', 17)));
        if (atLeast > 0) // never below the value asked for
            QVERIFY(s >= atLeast * (1 - 1e-12));
    }

    // For every 1-2-5 step from 1e-6 to 1e9: a step of its own, at least
    // the value, and less than 2.5 times it (the widest gap, 2 -> 5).
    void stepIsTightAcrossMagnitudes()
    {
        for (int e = -6; e <= 9; ++e)
            for (double m : {1.0, 1.5, 2.0, 3.7, 5.0, 7.1}) {
                const double v = m * std::pow(10.0, e);
                const double s = niceStep(v);
                QVERIFY2(s >= v * (1 - 1e-12) && s < 2.5 * v,
                         qPrintable(QStringLiteral("%1 -> %2").arg(v).arg(s)));
                const double mantissa = s / std::pow(10.0, std::floor(std::log10(s) + 1e-9));
                QVERIFY2(std::abs(mantissa - 1) < 1e-9 || std::abs(mantissa - 2) < 1e-9 ||
                             std::abs(mantissa - 5) < 1e-9,
                         qPrintable(QStringLiteral("%1 -> %2").arg(v).arg(s)));
            }
    }

    void decimals_data()
    {
        QTest::addColumn<double>("step");
        QTest::addColumn<int>("expected");
        QTest::newRow("1") << 1.0 << 0;
        QTest::newRow("5") << 5.0 << 0;
        QTest::newRow("20") << 20.0 << 0;
        QTest::newRow("0.5") << 0.5 << 1;
        QTest::newRow("0.2") << 0.2 << 1;
        QTest::newRow("0.1") << 0.1 << 1;
        QTest::newRow("0.05") << 0.05 << 2;
        QTest::newRow("0.001") << 0.001 << 3;
        QTest::newRow("zero") << 0.0 << 0;
    }
    void decimals()
    {
        QFETCH(double, step);
        QFETCH(int, expected);
        QCOMPARE(stepDecimals(step), expected);
    }
};

QTEST_GUILESS_MAIN(TestNiceSteps)
#include "tst_nice_steps.moc"
