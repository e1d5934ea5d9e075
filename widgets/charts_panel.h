// Three live charts of a run, for the projector: the loss (a "train" line
// with one point per step and a sparse "test" line), samples per second per
// step, and the bytes each node sent per second (one line per rank, in the
// rank's colour; above kMaxRankLines ranks, three lines instead: the most,
// the mean and the least any node sent at each step, so a class's 64 nodes
// make a readable chart with a legend of three). The figures come from the
// engine bridge as StepPoints; the panel plots them as given and keeps the
// newest MetricsModel::kMaxRows of them in a MetricsModel (metricsModel(),
// for a table or a CSV export).
//
// Readable in a third of a 1024 px projector (issue 25): each chart's title
// (with its unit: "Sent per node, MB/s") and legend are word-wrapped labels
// above and below the plot, never elided; the plot itself shows no axis
// titles but "step", and that only when it is tall enough; the ticks are as
// many as their labels have room for, and large rates read "8k", not
// "8000". A legend names every line in at most kLegendLines lines, then
// "+N more".
//
// Cost per addStep: one QXYSeries::append per line and an axis update only
// when a point falls outside the current range (the range then grows to the
// next "nice" bound, so that happens a few times per decade of steps). Qt
// Charts recomputes a line's whole geometry on every append, so many steps
// at once (a replay rebuilding its charts after a seek) go through
// addSteps(): one append per line for all of them. Coalescing updates to
// <= 30 Hz is the caller's job. To keep painting cheap and memory bounded
// over long runs (a 90-minute class is ~1M steps) a line holds at most
// kMaxPoints points, the budget: when it exceeds that, it is halved, each
// bucket of 4 points becoming its lowest and highest (the first and newest
// points kept), so the line still spans the whole run with its spikes, the
// old steps at a coarser resolution than the new.
#pragma once

#include "widgets/cluster_state.h"

#include <QWidget>

#include <cstdint>
#include <vector>

QT_BEGIN_NAMESPACE
class QChart;
class QChartView;
class QLabel;
class QLineSeries;
class QValueAxis;
class QXYSeries;
QT_END_NAMESPACE

namespace smol::widgets {

class MetricsModel;

class ChartsPanel : public QWidget {
    Q_OBJECT

public:
    static constexpr int kMaxPoints = 2000;
    static constexpr int kMaxRankLines = 8;
    static constexpr int kLegendLines = 2;

    explicit ChartsPanel(QWidget *parent = nullptr);
    ~ChartsPanel() override;

    // One completed step. Non-finite values (a NaN loss before the first
    // evaluation) are not plotted.
    void addStep(const StepPoint &point);
    // The same for many steps, in order, with one update per line.
    void addSteps(const QVector<StepPoint> &points);
    // A test-set figure at `step`, on the loss chart's "test" line.
    void addTestPoint(std::int64_t step, double value);
    void clear();

    // A second run beside the first (File > Compare with...): its loss and
    // samples/s as dashed, lighter lines named "B loss" and "B samples/s"
    // on the same charts, by step. clear() empties them too;
    // clearComparison() only them, removeComparison() takes them off.
    void addComparisonSteps(const QVector<StepPoint> &points);
    void clearComparison();
    void removeComparison();
    QLineSeries *comparisonLossSeries() const { return m_bLoss; }
    QLineSeries *comparisonSamplesSeries() const { return m_bSamples; }
    QLineSeries *comparisonBytesSeries() const { return m_bBytes; }

    // Larger type and thicker lines for a classroom projector.
    void setProjectorMode(bool on);
    // The legend's name of each rank's bytes line (displayName(): the
    // cluster view's name for that node); "rank N" without one.
    void setRankNames(const QStringList &names);
    bool projectorMode() const { return m_projector; }

    MetricsModel *metricsModel() const { return m_model; }

    // For tests and screenshots.
    QChart *lossChart() const;
    QChart *throughputChart() const;
    QChart *bytesChart() const;
    QLineSeries *trainLossSeries() const { return m_trainLoss; }
    QLineSeries *testLossSeries() const { return m_testLoss; }
    QLineSeries *samplesSeries() const { return m_samples; }
    // Rank r's bytes/s line (nullptr before a step reported rank r, and
    // when the chart shows max/mean/min instead).
    QLineSeries *bytesSeries(int rank) const;
    // Every line on the bytes chart: one per rank, or max, mean and min.
    QList<QLineSeries *> bytesLines() const;
    bool bytesGrouped() const { return m_bytesGrouped; }
    // The title and legend labels of `chart` (one of the three above).
    QLabel *titleLabel(const QChart *chart) const;
    QLabel *legendLabel(const QChart *chart) const;
    // What the legend of `chart` names, in order ("+3 more" last when not
    // every line fits); empty when the legend is hidden (one line, named by
    // the title).
    QStringList legendEntries(const QChart *chart) const;

protected:
    bool eventFilter(QObject *watched, QEvent *event) override;

private:
    // One chart: its view, axes and the extent of the data plotted on it.
    struct Plot {
        QChartView *view = nullptr;
        QValueAxis *x = nullptr;
        QValueAxis *y = nullptr;
        QLabel *title = nullptr;
        QLabel *legend = nullptr;
        QStringList legendEntries; // as shown
        bool includeZero = false; // rates start at 0; the loss axis hugs the data
        bool empty = true;
        double xMin = 0, xMax = 0, yMin = 0, yMax = 0;
        // Plotted values are value / yScale: the bytes chart in kB/s, MB/s...
        // (named in the title), samples/s in thousands ("8k": ySuffix).
        double yScale = 1;
        QString ySuffix;
        QString titleText; // without the unit
        QString yTitle;    // the unit: in the title, the axis title hidden
        // As many tick intervals as the plot has room for labels (set from
        // the plot area; recomputed when it changes).
        int xIntervals = 5, yIntervals = 5;
    };

    Plot makePlot(const QString &title, const QString &yTitle, bool includeZero);
    Plot *plotOf(const QChart *chart);
    const Plot *plotOf(const QChart *chart) const;
    void updateTitle(Plot &plot);
    void updateLegend(Plot &plot);
    // Tick counts from the plot area and label sizes; re-ranges when they change.
    void fitTicks(Plot &plot);
    int xIntervalsThatFit(const Plot &plot) const;
    void applyXRange(Plot &plot);
    void applyYRange(Plot &plot);
    // Samples/s chart only: plain, k or M for the largest value.
    void chooseSamplesScale(double largest);
    // Divides every plotted y of `lines` by newScale / plot.yScale.
    void rescale(Plot &plot, const QList<QXYSeries *> &lines, double newScale);
    void addSeries(Plot &plot, QXYSeries *series, const QColor &colour);
    // Appends (x, y) unless y is not finite, decimates, grows the axes.
    void plot(Plot &plot, QXYSeries *series, double x, double y);
    // The same for many points (the non-finite ones skipped), one append.
    void plot(Plot &plot, QXYSeries *series, const QList<QPointF> &points);
    void growAxes(Plot &plot);
    void resetAxes(Plot &plot);
    // Bytes chart only: pick B/s, kB/s, MB/s or GB/s for the largest value.
    void chooseByteUnit(double largest);
    void applyStyle();
    QLineSeries *ensureBytesSeries(int rank);
    // Per-rank lines out, max/mean/min lines in, drawn from every step so far.
    void groupBytes();
    void plotBytesGroups(const QVector<StepPoint> &points);

    MetricsModel *m_model = nullptr;
    Plot m_loss;
    Plot m_throughput;
    Plot m_bytes;
    QLineSeries *m_trainLoss = nullptr;
    QLineSeries *m_testLoss = nullptr;
    QLineSeries *m_samples = nullptr;
    QLineSeries *m_bLoss = nullptr;    // the compared run's, while one is open
    QLineSeries *m_bSamples = nullptr;
    QLineSeries *m_bBytes = nullptr; // the compared run's bytes/s, the mean per node
    std::vector<QLineSeries *> m_bytesPerRank;
    QStringList m_rankNames;
    std::vector<QLineSeries *> m_bytesGroups; // max, mean, min
    bool m_bytesGrouped = false;
    bool m_projector = false;
};

} // namespace smol::widgets
