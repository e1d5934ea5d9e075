// Three live charts of a run, for the projector: the loss (a "train" line
// with one point per step and a sparse "test" line), samples per second per
// step, and the bytes each node sent per second (one line per rank, in the
// rank's colour; above kMaxRankLines ranks, three lines instead: the most,
// the mean and the least any node sent at each step, so a class's 64 nodes
// make a readable chart with a legend of three). The figures come from the engine bridge as StepPoints; the
// panel plots them as given and keeps every one of them in a MetricsModel
// (metricsModel(), for a table or a CSV export).
//
// Cost per addStep: one QXYSeries::append per line and an axis update only
// when a point falls outside the current range (the range then grows to the
// next "nice" bound, so that happens a few times per decade of steps). Qt
// Charts recomputes a line's whole geometry on every append, so many steps
// at once (a replay rebuilding its charts after a seek) go through
// addSteps(): one append per line for all of them. Coalescing updates to
// <= 30 Hz is the caller's job. To keep painting cheap
// over long runs a line holds at most kMaxPoints points: when it exceeds
// that, every other point is dropped (decimation), so old steps are drawn at
// half the resolution of new ones; the MetricsModel keeps them all.
#pragma once

#include "widgets/cluster_state.h"

#include <QWidget>

#include <cstdint>
#include <vector>

QT_BEGIN_NAMESPACE
class QChart;
class QChartView;
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

private:
    // One chart: its view, axes and the extent of the data plotted on it.
    struct Plot {
        QChartView *view = nullptr;
        QValueAxis *x = nullptr;
        QValueAxis *y = nullptr;
        bool includeZero = false; // rates start at 0; the loss axis hugs the data
        bool empty = true;
        double xMin = 0, xMax = 0, yMin = 0, yMax = 0;
        double yScale = 1; // the bytes chart shows kB/s, MB/s...: value / yScale
        QString yTitle;
    };

    Plot makePlot(const QString &title, const QString &yTitle, bool includeZero);
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
