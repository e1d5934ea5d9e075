// ChartsPanel and the MetricsModel behind it: rows and node columns as steps
// arrive, raw values for sorting, the table's row budget, decimation of
// long runs (min/max per bucket: spikes survive), axes that contain
// the data (and never collapse), NaN losses left out, and a picture that is
// not blank; readable in a third of a projector (no elided tick, title or
// axis label; every legend entry named, "+N more" past two lines).
// SMOL_SAVE_PNG=1 saves the projector-mode panel to /tmp/charts.png.
#include "widgets/charts_panel.h"
#include "widgets/metrics_model.h"

#include <QAbstractItemModelTester>
#include <QChart>
#include <QGraphicsScene>
#include <QGraphicsTextItem>
#include <QImage>
#include <QLabel>
#include <QLineSeries>
#include <QLocale>
#include <QSignalSpy>
#include <QTest>
#include <QValueAxis>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

using smol::widgets::ChartsPanel;
using smol::widgets::MetricsModel;
using smol::widgets::StepPoint;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

StepPoint point(std::int64_t step, double loss, int nodes = 3)
{
    StepPoint p;
    p.step = step;
    p.seconds = 0.05 * double(step);
    p.loss = loss;
    p.samplesPerSecond = 2000 + 300 * std::sin(double(step) / 40);
    for (int r = 0; r < nodes; ++r)
        p.bytesPerSecondPerNode << 4.0e6 * (r + 1) + 1.0e5 * std::cos(double(step) / 25 + r);
    return p;
}

double loss(std::int64_t step)
{
    return 0.35 + 2.0 * std::exp(-double(step) / 600) + 0.05 * std::sin(double(step) / 7);
}

QValueAxis *axis(QChart *chart, Qt::Orientation orientation)
{
    const auto axes = chart->axes(orientation);
    return axes.isEmpty() ? nullptr : qobject_cast<QValueAxis *>(axes.first());
}

// The axes of `chart` contain every point of every line on it.
void verifyAxesContain(QChart *chart)
{
    QValueAxis *x = axis(chart, Qt::Horizontal);
    QValueAxis *y = axis(chart, Qt::Vertical);
    QVERIFY(x && y);
    QVERIFY(x->max() > x->min());
    QVERIFY(y->max() > y->min());
    const auto lines = chart->series();
    for (QAbstractSeries *s : lines) {
        const auto *line = qobject_cast<QXYSeries *>(s);
        QVERIFY(line);
        const QList<QPointF> points = line->points();
        for (const QPointF &p : points) {
            QVERIFY2(std::isfinite(p.y()), qPrintable(line->name()));
            QVERIFY2(p.x() >= x->min() && p.x() <= x->max(), qPrintable(QString::number(p.x())));
            QVERIFY2(p.y() >= y->min() && p.y() <= y->max(), qPrintable(QString::number(p.y())));
        }
    }
}

// Every text Qt Charts draws on `chart` (tick labels, axis titles, the
// title): none elided. Qt Charts elides with "..." when a text has no room.
void verifyNothingElided(QChart *chart)
{
    QVERIFY(chart->scene());
    int texts = 0;
    const auto items = chart->scene()->items();
    for (QGraphicsItem *item : items) {
        auto *text = dynamic_cast<QGraphicsTextItem *>(item);
        if (!text || !text->isVisible() || text->toPlainText().isEmpty())
            continue;
        const QString t = text->toPlainText();
        QVERIFY2(!t.contains(QLatin1String("...")) && !t.contains(QChar(0x2026)), qPrintable(t + " is elided"));
        ++texts;
    }
    QVERIFY2(texts >= 4, "no tick labels drawn"); // two axes, two ticks each at least
}

// The panel's title and legend labels have room for their wrapped text,
// and the legend names every line of `chart` (or all but the "+N more").
void verifyLegendAndTitle(ChartsPanel &panel, QChart *chart)
{
    for (QLabel *l : {panel.titleLabel(chart), panel.legendLabel(chart)}) {
        QVERIFY(l);
        if (!l->isVisible())
            continue;
        QVERIFY(l->wordWrap());
        QVERIFY2(l->height() >= l->heightForWidth(l->width()) - 1, qPrintable(l->text()));
        QVERIFY2(l->geometry().right() <= panel.width(), qPrintable(l->text()));
    }
    QVERIFY(!panel.titleLabel(chart)->text().isEmpty());
    const QStringList entries = panel.legendEntries(chart);
    const qsizetype lines = chart->series().size();
    if (lines < 2) {
        QVERIFY(entries.isEmpty()); // the title names a chart's only line
        return;
    }
    QVERIFY2(!entries.isEmpty(), "a chart of several lines has no legend");
    for (const QString &e : entries)
        QVERIFY(!e.trimmed().isEmpty());
    if (entries.last().startsWith(QLatin1Char('+'))) {
        const int more = entries.last().section(QLatin1Char(' '), 0, 0).mid(1).toInt();
        QCOMPARE(entries.size() - 1 + more, lines);
    } else {
        QCOMPARE(entries.size(), lines);
    }
    for (int i = 0; i < entries.size() && !entries[i].startsWith(QLatin1Char('+')); ++i)
        QCOMPARE(entries[i], static_cast<QXYSeries *>(chart->series()[i])->name());
}

} // namespace

class TestChartsPanel : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() { QLocale::setDefault(QLocale(QLocale::English, QLocale::UnitedStates)); }

    void modelRowsAndNodeColumns()
    {
        MetricsModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        QCOMPARE(model.columnCount(), int(MetricsModel::NUM_COLUMNS));

        QSignalSpy columns(&model, &QAbstractItemModel::columnsInserted);
        model.addStep(point(0, kNaN, 2));
        model.addStep(point(1, 2.25, 2));
        QCOMPARE(model.rowCount(), 2);
        QCOMPARE(model.columnCount(), MetricsModel::NUM_COLUMNS + 2);
        QCOMPARE(columns.count(), 1);

        model.addStep(point(2, 2.0, 4)); // two more nodes joined
        QCOMPARE(model.columnCount(), MetricsModel::NUM_COLUMNS + 4);
        QCOMPARE(columns.count(), 2);
        model.addStep(point(3, 1.9, 1)); // fewer reported: no columns removed
        QCOMPARE(model.columnCount(), MetricsModel::NUM_COLUMNS + 4);

        QCOMPARE(model.headerData(MetricsModel::Loss, Qt::Horizontal).toString(), QStringLiteral("Loss"));
        QCOMPARE(model.headerData(MetricsModel::NUM_COLUMNS + 3, Qt::Horizontal).toString(),
                 QStringLiteral("node 3 B/s"));
        QCOMPARE(model.data(model.index(1, MetricsModel::Step)).toString(), QStringLiteral("1"));
        QCOMPARE(model.data(model.index(1, MetricsModel::Loss)).toString(), QStringLiteral("2.25"));
        QCOMPARE(model.data(model.index(0, MetricsModel::Loss)).toString(), QString()); // NaN: no text
        QCOMPARE(model.data(model.index(3, MetricsModel::NUM_COLUMNS + 2)).toString(), QString());

        QSignalSpy resets(&model, &QAbstractItemModel::modelReset);
        model.clear();
        QCOMPARE(resets.count(), 1);
        QCOMPARE(model.rowCount(), 0);
        QCOMPARE(model.columnCount(), int(MetricsModel::NUM_COLUMNS));
        model.addStep(point(0, 1.0, 3));
        QCOMPARE(model.columnCount(), MetricsModel::NUM_COLUMNS + 3);
    }

    void sortRoleHoldsRawValues()
    {
        MetricsModel model;
        model.addStep(point(7, kNaN, 2));
        model.addStep(point(8, 1.5, 2));
        const auto raw = [&](int row, int column) {
            return model.data(model.index(row, column), MetricsModel::SortRole);
        };
        QCOMPARE(raw(1, MetricsModel::Step).toLongLong(), 8LL);
        QCOMPARE(raw(1, MetricsModel::Loss).toDouble(), 1.5);
        QVERIFY(!raw(0, MetricsModel::Loss).isValid());
        QCOMPARE(raw(1, MetricsModel::NUM_COLUMNS + 1).toDouble(), point(8, 1.5, 2).bytesPerSecondPerNode[1]);
        QCOMPARE(raw(1, MetricsModel::Seconds).toDouble(), 0.4);
    }

    void longRunIsDecimated()
    {
        ChartsPanel panel;
        const int steps = 10000;
        for (int s = 0; s < steps; ++s)
            panel.addStep(point(s, loss(s)));
        QCOMPARE(panel.metricsModel()->rowCount(), steps); // the model keeps every step

        QList<QXYSeries *> lines{panel.trainLossSeries(), panel.samplesSeries()};
        for (int r = 0; r < 3; ++r)
            lines << panel.bytesSeries(r);
        QVERIFY(!panel.bytesSeries(3));
        for (QXYSeries *line : lines) {
            QVERIFY(line);
            QVERIFY2(line->count() <= ChartsPanel::kMaxPoints, qPrintable(line->name()));
            QVERIFY2(line->count() >= ChartsPanel::kMaxPoints / 2, qPrintable(line->name()));
            QCOMPARE(line->points().first().x(), 0.0);              // the start
            QCOMPARE(line->points().last().x(), double(steps - 1)); // and the newest step survive
        }
        verifyAxesContain(panel.lossChart());
        verifyAxesContain(panel.throughputChart());
        verifyAxesContain(panel.bytesChart());
        QVERIFY(axis(panel.lossChart(), Qt::Horizontal)->max() >= steps - 1);
        QCOMPARE(axis(panel.bytesChart(), Qt::Vertical)->titleText(), QStringLiteral("MB/s"));
    }

    // The metrics table's budget: fed twice its rows and more, it keeps at
    // most kMaxRows, the newest step last, the oldest ones gone.
    void metricsModelKeepsItsBudget()
    {
        MetricsModel model;
        const std::int64_t fed = 2 * std::int64_t(MetricsModel::kMaxRows) + 7;
        std::size_t maxRows = 0;
        for (std::int64_t s = 0; s < fed; ++s) {
            model.addStep(point(s, loss(int(s % 10000)), 2));
            maxRows = std::max(maxRows, std::size_t(model.rowCount()));
        }
        QVERIFY2(maxRows <= MetricsModel::kMaxRows, qPrintable(QString::number(maxRows)));
        QVERIFY(std::size_t(model.rowCount()) > MetricsModel::kMaxRows - MetricsModel::kDropRows);
        const auto stepAt = [&](int row) {
            return model.data(model.index(row, MetricsModel::Step), MetricsModel::SortRole).toLongLong();
        };
        QCOMPARE(stepAt(model.rowCount() - 1), fed - 1); // the newest kept
        QCOMPARE(stepAt(0), fed - model.rowCount());     // the oldest dropped, in order
        QCOMPARE(model.droppedRows() + std::size_t(model.rowCount()), std::size_t(fed));
        model.clear();
        QCOMPARE(model.droppedRows(), std::size_t(0));
    }

    // A line halved many times still spans the run and keeps its extremes
    // (a spike early on, a dip later): min/max per bucket, not every other point.
    void decimationKeepsTheExtremes()
    {
        ChartsPanel panel;
        const int steps = 200'000;
        const int spikeAt = 1235, dipAt = 150'001;
        QVector<StepPoint> batch;
        for (int s = 0; s < steps; ++s) {
            batch.append(point(s, s == spikeAt ? 50.0 : s == dipAt ? 0.01 : 1.0 + 0.001 * (s % 3), 1));
            if (batch.size() == 5000)
                panel.addSteps(std::exchange(batch, {}));
        }
        panel.addSteps(batch);
        const QList<QPointF> line = panel.trainLossSeries()->points();
        QVERIFY2(line.size() <= ChartsPanel::kMaxPoints, qPrintable(QString::number(line.size())));
        QVERIFY(line.size() >= ChartsPanel::kMaxPoints / 2);
        QCOMPARE(line.first().x(), 0.0);
        QCOMPARE(line.last().x(), double(steps - 1));
        const auto byY = [](const QPointF &a, const QPointF &b) { return a.y() < b.y(); };
        QCOMPARE(std::max_element(line.begin(), line.end(), byY)->x(), double(spikeAt));
        QCOMPARE(std::min_element(line.begin(), line.end(), byY)->x(), double(dipAt));
        QVERIFY(std::is_sorted(line.begin(), line.end(), [](const QPointF &a, const QPointF &b) {
            return a.x() < b.x();
        }));
    }

    void nanLossesAreSkipped()
    {
        ChartsPanel panel;
        int finite = 0;
        for (int s = 0; s < 30; ++s) {
            const bool missing = s % 3 == 0;
            panel.addStep(point(s, missing ? kNaN : loss(s)));
            finite += missing ? 0 : 1;
        }
        panel.addTestPoint(10, kNaN);
        panel.addTestPoint(20, 1.75);
        QCOMPARE(panel.trainLossSeries()->count(), finite);
        QCOMPARE(panel.testLossSeries()->count(), 1);
        QCOMPARE(panel.samplesSeries()->count(), 30); // the other figures are all there
        QCOMPARE(panel.metricsModel()->rowCount(), 30);
        verifyAxesContain(panel.lossChart());
    }

    void onePointDoesNotCollapseTheAxes_data()
    {
        QTest::addColumn<double>("value");
        QTest::newRow("zero") << 0.0;
        QTest::newRow("typical loss") << 2.302585;
        QTest::newRow("negative") << -4.0;
        QTest::newRow("huge") << 1.0e12;
    }

    void onePointDoesNotCollapseTheAxes()
    {
        QFETCH(double, value);
        ChartsPanel panel;
        StepPoint p = point(0, value, 1);
        p.samplesPerSecond = value;
        p.bytesPerSecondPerNode = {std::abs(value)};
        panel.addStep(p);
        verifyAxesContain(panel.lossChart());
        verifyAxesContain(panel.throughputChart());
        verifyAxesContain(panel.bytesChart());
    }

    void axesGrowWithTheData()
    {
        ChartsPanel panel;
        panel.addStep(point(0, 2.0));
        QValueAxis *x = axis(panel.lossChart(), Qt::Horizontal);
        QSignalSpy rescaled(x, &QValueAxis::rangeChanged);
        for (int s = 1; s <= 1000; ++s)
            panel.addStep(point(s, loss(s)));
        QVERIFY(x->max() >= 1000);
        // Nice bounds, grown a step of ticks at a time: a few rescales, not one per point.
        QVERIFY2(rescaled.count() < 30, qPrintable(QString::number(rescaled.count())));
        verifyAxesContain(panel.lossChart());
    }

    // Up to kMaxRankLines ranks a line each; more: max, mean and min over the
    // ranks at each step, also for the steps drawn before a rank joined.
    void manyNodesAreGrouped_data()
    {
        QTest::addColumn<int>("nodes");
        QTest::newRow("8 nodes") << 8;
        QTest::newRow("9 nodes") << 9;
        QTest::newRow("64 nodes") << 64;
    }

    void manyNodesAreGrouped()
    {
        QFETCH(int, nodes);
        ChartsPanel panel;
        panel.addStep(point(0, 2.0, std::min(nodes, 4))); // a smaller world first (a re-formed run grows)
        for (int s = 1; s < 40; ++s)
            panel.addStep(point(s, loss(s), nodes));
        const QList<QLineSeries *> lines = panel.bytesLines();
        QCOMPARE(panel.bytesChart()->series().size(), lines.size());
        if (nodes <= ChartsPanel::kMaxRankLines) {
            QVERIFY(!panel.bytesGrouped());
            QCOMPARE(lines.size(), nodes);
            QVERIFY(panel.bytesSeries(nodes - 1));
            return;
        }
        QVERIFY(panel.bytesGrouped());
        QCOMPARE(lines.size(), 3);
        QVERIFY(!panel.bytesSeries(0));
        QCOMPARE(lines[0]->name(), QStringLiteral("max"));
        QCOMPARE(lines[2]->name(), QStringLiteral("min"));
        // Every step on every line, max >= mean >= min, in the chart's unit.
        const QVector<double> first = point(0, 2.0, std::min(nodes, 4)).bytesPerSecondPerNode;
        const double unit = lines[0]->at(0).y() / *std::max_element(first.begin(), first.end());
        QVERIFY2(qFuzzyCompare(unit, 1e-6), qPrintable(QString::number(unit))); // MB/s for these rates
        for (QLineSeries *line : lines)
            QCOMPARE(line->count(), 40);
        for (int i = 0; i < 40; ++i) {
            QVERIFY(lines[0]->at(i).y() >= lines[1]->at(i).y());
            QVERIFY(lines[1]->at(i).y() >= lines[2]->at(i).y());
            const QVector<double> v = point(i, 1.0, i == 0 ? std::min(nodes, 4) : nodes).bytesPerSecondPerNode;
            QVERIFY(qFuzzyCompare(lines[0]->at(i).y(), *std::max_element(v.begin(), v.end()) * unit));
            QVERIFY(qFuzzyCompare(lines[2]->at(i).y(), *std::min_element(v.begin(), v.end()) * unit));
        }
        verifyAxesContain(panel.bytesChart());
        panel.clear();
        QVERIFY(!panel.bytesGrouped());
        QVERIFY(panel.bytesLines().isEmpty());
    }

    void clearEmptiesEverything()
    {
        ChartsPanel panel;
        for (int s = 0; s < 50; ++s)
            panel.addStep(point(s, loss(s)));
        panel.addTestPoint(40, 0.9);
        panel.clear();
        QCOMPARE(panel.trainLossSeries()->count(), 0);
        QCOMPARE(panel.testLossSeries()->count(), 0);
        QCOMPARE(panel.samplesSeries()->count(), 0);
        QVERIFY(!panel.bytesSeries(0));
        QCOMPARE(panel.metricsModel()->rowCount(), 0);
        QCOMPARE(axis(panel.bytesChart(), Qt::Vertical)->titleText(), QStringLiteral("B/s"));
        panel.addStep(point(0, 1.0, 2)); // and it works again
        QCOMPARE(panel.bytesSeries(1)->count(), 1);
    }

    // A third of a 1024x768 projector beside the lesson panel (the charts
    // dock there is about 720x230), a whole one, and a 1600 px desktop: no
    // text elided, legends named by the nodes' rank-first names, a legend
    // of 16 nodes' max/mean/min or of 8 nodes in two lines.
    void readableWhenSmall_data()
    {
        QTest::addColumn<QSize>("size");
        QTest::addColumn<bool>("projector");
        QTest::addColumn<int>("nodes");
        QTest::addColumn<int>("steps");
        QTest::newRow("projector beside a lesson, 4 nodes") << QSize(720, 230) << true << 4 << 30;
        QTest::newRow("projector beside a lesson, 8 nodes") << QSize(720, 230) << true << 8 << 2000;
        QTest::newRow("projector beside a lesson, 16 nodes") << QSize(720, 230) << true << 16 << 300;
        QTest::newRow("projector beside a lesson, 64 nodes") << QSize(720, 230) << true << 64 << 30;
        QTest::newRow("projector, 4 nodes, 12000 steps") << QSize(1020, 230) << true << 4 << 12000;
        QTest::newRow("1600 desktop, 8 nodes") << QSize(1590, 330) << false << 8 << 300;
        QTest::newRow("1600 desktop, 64 nodes") << QSize(1590, 330) << false << 64 << 300;
    }

    void readableWhenSmall()
    {
        QFETCH(QSize, size);
        QFETCH(bool, projector);
        QFETCH(int, nodes);
        QFETCH(int, steps);
        ChartsPanel panel;
        panel.setProjectorMode(projector);
        QStringList names;
        for (int r = 0; r < nodes; ++r)
            names << (r % 2 ? QStringLiteral("%1 \u00b7 pi-%2").arg(r).arg(r + 1) : QStringLiteral("local-%1").arg(r));
        panel.setRankNames(names);
        panel.resize(size);
        panel.show();
        QVERIFY(QTest::qWaitForWindowExposed(&panel));
        QVector<StepPoint> points;
        for (int s = 0; s < steps; ++s) {
            StepPoint p = point(s, loss(s), nodes);
            p.samplesPerSecond = 8000 + 500 * std::sin(double(s) / 9); // "8k", not "8000"
            points << p;
        }
        panel.addSteps(points);
        panel.addTestPoint(steps / 2, 1.5);
        QTest::qWait(100); // the layout settles, the ticks fit the plot
        QCOMPARE(panel.size(), size);
        for (QChart *chart : {panel.lossChart(), panel.throughputChart(), panel.bytesChart()}) {
            verifyNothingElided(chart);
            verifyLegendAndTitle(panel, chart);
            if (QTest::currentTestFailed())
                QFAIL(qPrintable(chart->series().first()->name()));
        }
        QVERIFY(axis(panel.throughputChart(), Qt::Vertical)->labelFormat().endsWith(QLatin1Char('k')));
        // The unit in the title, kept whole by a word joiner after its "/".
        QVERIFY(panel.titleLabel(panel.bytesChart())->text().remove(QChar(0x2060)).contains(QStringLiteral("MB/s")));
        const QStringList bytes = panel.legendEntries(panel.bytesChart());
        if (nodes <= ChartsPanel::kMaxRankLines) {
            QCOMPARE(bytes.first(), names.first());
            QVERIFY2(bytes.size() >= std::min(nodes, 3), qPrintable(bytes.join(QLatin1Char(','))));
        } else {
            QCOMPARE(bytes, (QStringList{QStringLiteral("max"), QStringLiteral("mean"), QStringLiteral("min")}));
        }
        if (qEnvironmentVariableIsSet("SMOL_SAVE_PNG"))
            QVERIFY(panel.grab().save(QStringLiteral("/tmp/charts-%1x%2-%3.png").arg(size.width()).arg(size.height()).arg(nodes)));
    }

    void rendersNonBlank()
    {
        ChartsPanel panel;
        panel.setProjectorMode(true);
        panel.resize(1400, 900);
        for (int s = 0; s <= 1200; ++s) {
            panel.addStep(point(s, loss(s), 4));
            if (s % 100 == 0 && s > 0)
                panel.addTestPoint(s, loss(s) + 0.12);
        }
        panel.show();
        QVERIFY(QTest::qWaitForWindowExposed(&panel));
        QTest::qWait(50); // let the charts lay out
        const QImage image = panel.grab().toImage();
        QVERIFY(!image.isNull());

        // The train line's colour shows up, and the picture is not one flat colour.
        const QRgb train = panel.trainLossSeries()->color().rgb();
        int trainPixels = 0;
        QSet<QRgb> colours;
        for (int y = 0; y < image.height(); y += 2)
            for (int x = 0; x < image.width(); x += 2) {
                const QRgb c = image.pixel(x, y);
                colours.insert(c);
                trainPixels += c == train;
            }
        QVERIFY2(trainPixels > 200, qPrintable(QString::number(trainPixels)));
        QVERIFY(colours.size() > 50);

        if (qEnvironmentVariableIsSet("SMOL_SAVE_PNG"))
            QVERIFY(image.save(QStringLiteral("/tmp/charts.png")));
    }
};

QTEST_MAIN(TestChartsPanel)
#include "tst_charts_panel.moc"
