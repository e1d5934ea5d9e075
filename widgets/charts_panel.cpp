#include "charts_panel.h"

#include "widgets/metrics_model.h"
#include "widgets/paint/nice_steps.h"
#include "widgets/shard_map.h" // rankColor

#include <QChart>
#include <QChartView>
#include <QGridLayout>
#include <QLegend>
#include <QLineSeries>
#include <QValueAxis>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace smol::widgets {

namespace {

const QColor kTrainColour(0x2c, 0x3e, 0x50);
const QColor kTestColour(0xd6, 0x27, 0x28);
const QColor kSamplesColour(0x2e, 0x7d, 0x32);

struct NiceRange {
    double min = 0;
    double max = 1;
    double step = 0.2;
};

// A range on tick boundaries that contains [lo, hi] with about five ticks;
// a single value gets a window around it instead of a zero-width axis.
NiceRange niceRange(double lo, double hi, bool includeZero)
{
    if (includeZero) {
        lo = std::min(lo, 0.0);
        hi = std::max(hi, 0.0);
    }
    if (!(hi > lo)) {
        if (lo == 0) {
            hi = 1;
        } else {
            const double pad = std::abs(lo) * 0.1;
            lo -= pad;
            hi += pad;
            if (includeZero) {
                lo = std::min(lo, 0.0);
                hi = std::max(hi, 0.0);
            }
        }
    }
    NiceRange r;
    r.step = niceStep((hi - lo) / 5);
    r.min = std::floor(lo / r.step) * r.step;
    r.max = std::ceil(hi / r.step) * r.step;
    if (r.max <= hi - r.step * 1e-9) // floating point: never cut the largest value off
        r.max += r.step;
    return r;
}

QString labelFormat(double step)
{
    return QStringLiteral("%.%1f").arg(stepDecimals(step));
}

void applyRange(QValueAxis *axis, const NiceRange &r)
{
    axis->setRange(r.min, r.max);
    axis->setTickCount(int(std::lround((r.max - r.min) / r.step)) + 1);
    axis->setLabelFormat(labelFormat(r.step));
}

// Keeps every other point, always the newest: halves a line that grew past
// kMaxPoints so painting stays cheap; the MetricsModel keeps every step.
// Every other point, always keeping the newest.
QList<QPointF> decimated(const QList<QPointF> &points)
{
    QList<QPointF> kept;
    kept.reserve(points.size() / 2 + 1);
    for (qsizetype i = (points.size() - 1) % 2; i < points.size(); i += 2)
        kept.append(points[i]);
    return kept;
}

} // namespace

ChartsPanel::ChartsPanel(QWidget *parent)
    : QWidget(parent)
    , m_model(new MetricsModel(this))
{
    m_loss = makePlot(tr("Loss"), tr("loss"), false);
    m_throughput = makePlot(tr("Samples/s"), tr("samples/s"), true);
    m_bytes = makePlot(tr("Sent per node"), tr("B/s"), true);

    m_trainLoss = new QLineSeries(this);
    m_trainLoss->setName(tr("train"));
    addSeries(m_loss, m_trainLoss, kTrainColour);
    m_testLoss = new QLineSeries(this);
    m_testLoss->setName(tr("test"));
    m_testLoss->setPointsVisible(true);
    addSeries(m_loss, m_testLoss, kTestColour);
    m_samples = new QLineSeries(this);
    m_samples->setName(tr("samples/s"));
    addSeries(m_throughput, m_samples, kSamplesColour);
    m_throughput.view->chart()->legend()->hide();

    auto *layout = new QGridLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->setSpacing(4);
    // One row: the charts share the height a dock along the window's bottom has.
    layout->addWidget(m_loss.view, 0, 0);
    layout->addWidget(m_throughput.view, 0, 1);
    layout->addWidget(m_bytes.view, 0, 2);
    layout->setRowStretch(0, 1);

    applyStyle();
}

ChartsPanel::~ChartsPanel() = default;

ChartsPanel::Plot ChartsPanel::makePlot(const QString &title, const QString &yTitle, bool includeZero)
{
    Plot plot;
    auto *chart = new QChart;
    chart->setTitle(title);
    chart->setMargins(QMargins(4, 4, 4, 4));
    chart->setBackgroundRoundness(0);
    chart->legend()->setAlignment(Qt::AlignTop);
    plot.x = new QValueAxis(chart);
    plot.x->setTitleText(tr("step"));
    plot.y = new QValueAxis(chart);
    plot.y->setTitleText(yTitle);
    chart->addAxis(plot.x, Qt::AlignBottom);
    chart->addAxis(plot.y, Qt::AlignLeft);
    plot.view = new QChartView(chart, this);
    plot.view->setRenderHint(QPainter::Antialiasing);
    plot.includeZero = includeZero;
    plot.yTitle = yTitle;
    resetAxes(plot);
    return plot;
}

void ChartsPanel::addSeries(Plot &plot, QXYSeries *series, const QColor &colour)
{
    plot.view->chart()->addSeries(series);
    series->attachAxis(plot.x);
    series->attachAxis(plot.y);
    series->setColor(colour);
}

QChart *ChartsPanel::lossChart() const
{
    return m_loss.view->chart();
}

QChart *ChartsPanel::throughputChart() const
{
    return m_throughput.view->chart();
}

QChart *ChartsPanel::bytesChart() const
{
    return m_bytes.view->chart();
}

QLineSeries *ChartsPanel::bytesSeries(int rank) const
{
    return rank >= 0 && std::size_t(rank) < m_bytesPerRank.size() ? m_bytesPerRank[std::size_t(rank)]
                                                                  : nullptr;
}

QList<QLineSeries *> ChartsPanel::bytesLines() const
{
    QList<QLineSeries *> lines;
    for (QLineSeries *s : m_bytesGrouped ? m_bytesGroups : m_bytesPerRank)
        lines << s;
    return lines;
}

void ChartsPanel::groupBytes()
{
    for (QLineSeries *series : m_bytesPerRank) {
        m_bytes.view->chart()->removeSeries(series);
        delete series;
    }
    m_bytesPerRank.clear();
    m_bytesGrouped = true;
    // Darkest the most, lightest the least, the mean in a colour of its own.
    const std::pair<QString, QColor> groups[] = {{tr("max"), QColor(0x08, 0x45, 0x94)},
                                                 {tr("mean"), QColor(0xd5, 0x5e, 0x00)},
                                                 {tr("min"), QColor(0x6b, 0xae, 0xd6)}};
    for (const auto &[name, colour] : groups) {
        auto *series = new QLineSeries(this);
        series->setName(name);
        addSeries(m_bytes, series, colour);
        m_bytesGroups.push_back(series);
    }
    applyStyle();
    QVector<StepPoint> all;
    for (const StepPoint &p : m_model->points())
        all.append(p);
    plotBytesGroups(all);
}

void ChartsPanel::plotBytesGroups(const QVector<StepPoint> &points)
{
    QList<QPointF> most, mean, least;
    for (const StepPoint &point : points) {
        double hi = -std::numeric_limits<double>::infinity(), lo = -hi, sum = 0;
        int n = 0;
        for (double v : point.bytesPerSecondPerNode)
            if (std::isfinite(v)) {
                hi = std::max(hi, v);
                lo = std::min(lo, v);
                sum += v;
                ++n;
            }
        if (n == 0)
            continue;
        const double x = double(point.step);
        most.append(QPointF(x, hi / m_bytes.yScale));
        mean.append(QPointF(x, sum / n / m_bytes.yScale));
        least.append(QPointF(x, lo / m_bytes.yScale));
    }
    plot(m_bytes, m_bytesGroups[0], most);
    plot(m_bytes, m_bytesGroups[1], mean);
    plot(m_bytes, m_bytesGroups[2], least);
}

void ChartsPanel::setRankNames(const QStringList &names)
{
    if (names == m_rankNames)
        return;
    m_rankNames = names;
    for (std::size_t r = 0; r < m_bytesPerRank.size(); ++r)
        m_bytesPerRank[r]->setName(int(r) < names.size() && !names[int(r)].isEmpty() ? names[int(r)]
                                                                                      : tr("rank %1").arg(r));
}

QLineSeries *ChartsPanel::ensureBytesSeries(int rank)
{
    while (m_bytesPerRank.size() <= std::size_t(rank)) {
        const int r = int(m_bytesPerRank.size());
        auto *series = new QLineSeries(this);
        series->setName(r < m_rankNames.size() && !m_rankNames[r].isEmpty() ? m_rankNames[r] : tr("rank %1").arg(r));
        addSeries(m_bytes, series, rankColor(r));
        m_bytesPerRank.push_back(series);
        applyStyle(); // a new line gets this mode's pen
    }
    return m_bytesPerRank[std::size_t(rank)];
}

void ChartsPanel::addStep(const StepPoint &point)
{
    addSteps({point});
}

void ChartsPanel::addSteps(const QVector<StepPoint> &points)
{
    if (points.isEmpty())
        return;
    double largest = 0;
    int ranks = 0;
    for (const StepPoint &point : points) {
        m_model->addStep(point);
        ranks = std::max(ranks, int(point.bytesPerSecondPerNode.size()));
        for (double v : point.bytesPerSecondPerNode)
            if (std::isfinite(v))
                largest = std::max(largest, std::abs(v));
    }
    if (largest / m_bytes.yScale >= 1000)
        chooseByteUnit(largest);
    if (!m_bytesGrouped && m_model->nodeColumnCount() > kMaxRankLines) {
        groupBytes(); // draws these points too
        ranks = 0;
    } else if (m_bytesGrouped) {
        plotBytesGroups(points);
        ranks = 0;
    }
    QList<QPointF> loss, samples;
    std::vector<QList<QPointF>> bytes(static_cast<std::size_t>(ranks));
    for (const StepPoint &point : points) {
        const double x = double(point.step);
        loss.append(QPointF(x, point.loss));
        samples.append(QPointF(x, point.samplesPerSecond));
        for (int r = 0; r < ranks && r < point.bytesPerSecondPerNode.size(); ++r)
            bytes[std::size_t(r)].append(QPointF(x, point.bytesPerSecondPerNode[r] / m_bytes.yScale));
    }
    plot(m_loss, m_trainLoss, loss);
    plot(m_throughput, m_samples, samples);
    for (int r = 0; r < ranks; ++r)
        plot(m_bytes, ensureBytesSeries(r), bytes[std::size_t(r)]);
}

void ChartsPanel::addComparisonSteps(const QVector<StepPoint> &points)
{
    if (!m_bLoss) {
        auto dashed = [this](Plot &plot, const QString &name, QColor colour) {
            auto *series = new QLineSeries(this);
            series->setName(name);
            addSeries(plot, series, colour.lighter(220));
            QPen pen = series->pen();
            pen.setStyle(Qt::DashLine);
            pen.setWidthF(m_projector ? 4 : 2);
            series->setPen(pen);
            return series;
        };
        m_bLoss = dashed(m_loss, tr("B loss"), kTrainColour);
        m_bSamples = dashed(m_throughput, tr("B samples/s"), kSamplesColour);
        m_bBytes = dashed(m_bytes, tr("B, mean per node"), Qt::darkGray);
        m_samples->setName(tr("A samples/s"));
        m_throughput.view->chart()->legend()->show();
    }
    QList<QPointF> loss, samples, bytes;
    for (const StepPoint &point : points) {
        loss.append(QPointF(double(point.step), point.loss));
        samples.append(QPointF(double(point.step), point.samplesPerSecond));
        if (!point.bytesPerSecondPerNode.isEmpty()) {
            double sum = 0;
            for (double v : point.bytesPerSecondPerNode)
                sum += v;
            bytes.append(QPointF(double(point.step), sum / double(point.bytesPerSecondPerNode.size()) / m_bytes.yScale));
        }
    }
    plot(m_loss, m_bLoss, loss);
    plot(m_throughput, m_bSamples, samples);
    plot(m_bytes, m_bBytes, bytes);
}

void ChartsPanel::clearComparison()
{
    if (m_bLoss) {
        m_bLoss->clear();
        m_bSamples->clear();
        m_bBytes->clear();
    }
}

void ChartsPanel::removeComparison()
{
    if (!m_bLoss)
        return;
    for (auto [plot, series] :
         {std::pair{&m_loss, m_bLoss}, std::pair{&m_throughput, m_bSamples}, std::pair{&m_bytes, m_bBytes}}) {
        plot->view->chart()->removeSeries(series);
        delete series;
    }
    m_bLoss = m_bSamples = m_bBytes = nullptr;
    m_samples->setName(tr("samples/s"));
    m_throughput.view->chart()->legend()->hide();
}

void ChartsPanel::addTestPoint(std::int64_t step, double value)
{
    plot(m_loss, m_testLoss, double(step), value);
}

void ChartsPanel::plot(Plot &plot, QXYSeries *series, double x, double y)
{
    this->plot(plot, series, QList<QPointF>{QPointF(x, y)});
}

void ChartsPanel::plot(Plot &plot, QXYSeries *series, const QList<QPointF> &points)
{
    QList<QPointF> finite;
    finite.reserve(points.size());
    for (const QPointF &p : points)
        if (std::isfinite(p.x()) && std::isfinite(p.y()))
            finite.append(p);
    if (finite.isEmpty())
        return;
    // One replace, not append: Qt 6.4's QXYSeries::append(list) still
    // rebuilds the line's geometry once per point.
    QList<QPointF> all = series->points();
    all.append(finite);
    while (all.size() > kMaxPoints)
        all = decimated(all);
    series->replace(all);
    const bool first = plot.empty;
    for (const QPointF &p : finite) {
        if (plot.empty) {
            plot.xMin = plot.xMax = p.x();
            plot.yMin = plot.yMax = p.y();
            plot.empty = false;
        } else {
            plot.xMin = std::min(plot.xMin, p.x());
            plot.xMax = std::max(plot.xMax, p.x());
            plot.yMin = std::min(plot.yMin, p.y());
            plot.yMax = std::max(plot.yMax, p.y());
        }
    }
    if (first || plot.xMin < plot.x->min() || plot.xMax > plot.x->max())
        applyRange(plot.x, niceRange(plot.xMin, plot.xMax, true));
    if (first || plot.yMin < plot.y->min() || plot.yMax > plot.y->max())
        applyRange(plot.y, niceRange(plot.yMin, plot.yMax, plot.includeZero));
}

void ChartsPanel::resetAxes(Plot &plot)
{
    plot.empty = true;
    plot.xMin = plot.xMax = plot.yMin = plot.yMax = 0;
    applyRange(plot.x, niceRange(0, 1, true));
    applyRange(plot.y, niceRange(0, 1, true));
}

void ChartsPanel::chooseByteUnit(double largest)
{
    static const struct {
        double scale;
        const char *unit;
    } kUnits[] = {{1, "B/s"}, {1e3, "kB/s"}, {1e6, "MB/s"}, {1e9, "GB/s"}};
    std::size_t u = 0;
    while (u + 1 < std::size(kUnits) && largest >= kUnits[u + 1].scale)
        ++u;
    if (kUnits[u].scale <= m_bytes.yScale)
        return;
    // Rare (at most three times a run): rescale the lines already drawn.
    const double ratio = m_bytes.yScale / kUnits[u].scale;
    for (QLineSeries *series : bytesLines()) {
        QList<QPointF> points = series->points();
        for (QPointF &p : points)
            p.setY(p.y() * ratio);
        series->replace(points);
    }
    m_bytes.yMin *= ratio;
    m_bytes.yMax *= ratio;
    m_bytes.yScale = kUnits[u].scale;
    m_bytes.y->setTitleText(QString::fromLatin1(kUnits[u].unit));
    if (!m_bytes.empty)
        applyRange(m_bytes.y, niceRange(m_bytes.yMin, m_bytes.yMax, true));
}

void ChartsPanel::clear()
{
    m_model->clear();
    m_trainLoss->clear();
    m_testLoss->clear();
    m_samples->clear();
    clearComparison();
    for (QLineSeries *series : bytesLines()) {
        m_bytes.view->chart()->removeSeries(series);
        delete series;
    }
    m_bytesPerRank.clear();
    m_bytesGroups.clear();
    m_bytesGrouped = false;
    m_bytes.yScale = 1;
    m_bytes.y->setTitleText(m_bytes.yTitle);
    for (Plot *plot : {&m_loss, &m_throughput, &m_bytes})
        resetAxes(*plot);
}

void ChartsPanel::setProjectorMode(bool on)
{
    if (on == m_projector)
        return;
    m_projector = on;
    applyStyle();
}

void ChartsPanel::applyStyle()
{
    QFont base = font();
    QFont title = base;
    title.setBold(true);
    QFont labels = base;
    if (m_projector) {
        // Fixed sizes: the window may already have enlarged the inherited font.
        title.setPointSizeF(18);
        base.setPointSizeF(14);
        labels.setPointSizeF(13);
    } else {
        title.setPointSizeF(base.pointSizeF() * 1.15);
    }
    const qreal pen = m_projector ? 4 : 2;

    for (const Plot *plot : {&m_loss, &m_throughput, &m_bytes}) {
        QChart *chart = plot->view->chart();
        chart->setTitleFont(title);
        chart->legend()->setFont(base);
        for (QValueAxis *axis : {plot->x, plot->y}) {
            axis->setLabelsFont(labels);
            axis->setTitleFont(base);
        }
        const auto series = chart->series();
        for (QAbstractSeries *s : series) {
            auto *xy = qobject_cast<QXYSeries *>(s);
            if (!xy)
                continue;
            QPen p = xy->pen();
            p.setWidthF(pen);
            xy->setPen(p);
        }
    }
    m_testLoss->setMarkerSize(m_projector ? 8 : 5);
}

} // namespace smol::widgets
