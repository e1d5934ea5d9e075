#include "charts_panel.h"

#include "widgets/metrics_model.h"
#include "widgets/paint/nice_steps.h"
#include "widgets/shard_map.h" // rankColor

#include <QChart>
#include <QChartView>
#include <QEvent>
#include <QFontMetricsF>
#include <QGridLayout>
#include <QLabel>
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

// A range on tick boundaries that contains [lo, hi] with at most
// `intervals` tick intervals (about that many) of at least `minStep` (1 on
// a step axis: no "0.5" step); a single value gets a window around it
// instead of a zero-width axis.
NiceRange niceRange(double lo, double hi, bool includeZero, int intervals = 5, double minStep = 0)
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
    intervals = std::max(1, intervals);
    NiceRange r;
    r.step = std::max(minStep, niceStep((hi - lo) / intervals));
    for (int tries = 0; tries < 8; ++tries) {
        r.min = std::floor(lo / r.step) * r.step;
        r.max = std::ceil(hi / r.step) * r.step;
        if (r.max <= hi - r.step * 1e-9) // floating point: never cut the largest value off
            r.max += r.step;
        if (std::lround((r.max - r.min) / r.step) <= intervals)
            break;
        r.step = niceStep(r.step * 1.0001); // the next 1-2-5 step
    }
    return r;
}

// The step axis: whole steps, from 0.
NiceRange stepRange(bool empty, double lo, double hi, int intervals)
{
    return empty ? niceRange(0, 1, true, intervals, 1) : niceRange(lo, hi, true, intervals, 1);
}

QString labelFormat(double step, const QString &suffix = {})
{
    return QStringLiteral("%.%1f").arg(stepDecimals(step)) + suffix;
}

QString tickText(double value, double step, const QString &suffix)
{
    return QString::number(value, 'f', stepDecimals(step)) + suffix;
}

void applyRange(QValueAxis *axis, const NiceRange &r, const QString &suffix = {})
{
    axis->setRange(r.min, r.max);
    axis->setTickCount(int(std::lround((r.max - r.min) / r.step)) + 1);
    axis->setLabelFormat(labelFormat(r.step, suffix));
}

// A label that wraps and takes the width its grid column gives it (never
// asks for more: a long legend must not widen its chart).
QLabel *wrappingLabel(QWidget *parent)
{
    auto *label = new QLabel(parent);
    label->setWordWrap(true);
    label->setTextFormat(Qt::RichText);
    QSizePolicy policy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    policy.setHeightForWidth(true);
    label->setSizePolicy(policy);
    return label;
}

// Halves a line that grew past kMaxPoints, so painting stays cheap and its
// memory bounded while it still spans the whole run: the first and the
// newest points stay; between them each bucket of 4 points becomes its
// lowest and its highest, in step order (a spike or a dip survives any
// number of halvings; the old part ends up at a coarser resolution than the
// new). A bucket of fewer than 4 at the end stays as it is.
QList<QPointF> decimated(const QList<QPointF> &points)
{
    if (points.size() < 6)
        return points;
    QList<QPointF> kept;
    kept.reserve(points.size() / 2 + 2);
    kept.append(points.first());
    const qsizetype last = points.size() - 1;
    qsizetype i = 1;
    for (; i + 4 <= last; i += 4) {
        const auto lessY = [](const QPointF &a, const QPointF &b) { return a.y() < b.y(); };
        const auto [lo, hi] = std::minmax_element(points.begin() + i, points.begin() + i + 4, lessY);
        kept.append(lo < hi ? *lo : *hi);
        kept.append(lo < hi ? *hi : *lo);
    }
    for (; i <= last; ++i)
        kept.append(points[i]);
    return kept;
}

} // namespace

ChartsPanel::ChartsPanel(QWidget *parent)
    : QWidget(parent)
    , m_model(new MetricsModel(this))
{
    m_loss = makePlot(tr("Loss"), QString(), false);
    m_throughput = makePlot(tr("Samples/s"), QString(), true);
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

    auto *layout = new QGridLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->setHorizontalSpacing(4);
    layout->setVerticalSpacing(0);
    // One row of charts (they share the height a dock along the window's
    // bottom has): titles above, plots, legends below, in equal columns.
    int column = 0;
    for (Plot *plot : {&m_loss, &m_throughput, &m_bytes}) {
        layout->addWidget(plot->title, 0, column);
        layout->addWidget(plot->view, 1, column);
        layout->addWidget(plot->legend, 2, column);
        layout->setColumnStretch(column++, 1);
    }
    layout->setRowStretch(1, 1);
    // One white card per chart: the labels on the plots' background.
    setAutoFillBackground(true);
    QPalette p = palette();
    p.setColor(QPalette::Window, Qt::white);
    p.setColor(QPalette::WindowText, Qt::black);
    setPalette(p);

    applyStyle();
}

ChartsPanel::~ChartsPanel() = default;

ChartsPanel::Plot ChartsPanel::makePlot(const QString &title, const QString &yTitle, bool includeZero)
{
    Plot plot;
    auto *chart = new QChart;
    chart->setMargins(QMargins(4, 2, 8, 2));
    chart->setBackgroundRoundness(0);
    chart->legend()->hide(); // ours, below the plot, wraps instead of eliding
    plot.x = new QValueAxis(chart);
    plot.x->setTitleText(tr("step"));
    plot.y = new QValueAxis(chart);
    plot.y->setTitleText(yTitle);
    plot.y->setTitleVisible(false); // the unit is in the chart's title
    chart->addAxis(plot.x, Qt::AlignBottom);
    chart->addAxis(plot.y, Qt::AlignLeft);
    plot.view = new QChartView(chart, this);
    plot.view->setRenderHint(QPainter::Antialiasing);
    plot.view->setMinimumSize(80, 50);
    plot.title = wrappingLabel(this);
    plot.title->setAlignment(Qt::AlignHCenter | Qt::AlignBottom);
    plot.legend = wrappingLabel(this);
    plot.legend->setAlignment(Qt::AlignHCenter | Qt::AlignTop);
    plot.legend->installEventFilter(this); // a new width: what the legend has room for
    plot.view->installEventFilter(this);   // a new size: fewer or more ticks
    connect(chart, &QChart::plotAreaChanged, this, [this, chart] {
        if (Plot *p = plotOf(chart))
            fitTicks(*p);
    });
    plot.includeZero = includeZero;
    plot.titleText = title;
    plot.yTitle = yTitle;
    resetAxes(plot);
    return plot;
}

ChartsPanel::Plot *ChartsPanel::plotOf(const QChart *chart)
{
    return const_cast<Plot *>(std::as_const(*this).plotOf(chart));
}

const ChartsPanel::Plot *ChartsPanel::plotOf(const QChart *chart) const
{
    for (const Plot *plot : {&m_loss, &m_throughput, &m_bytes})
        if (plot->view && plot->view->chart() == chart)
            return plot;
    return nullptr;
}

QLabel *ChartsPanel::titleLabel(const QChart *chart) const
{
    const Plot *plot = plotOf(chart);
    return plot ? plot->title : nullptr;
}

QLabel *ChartsPanel::legendLabel(const QChart *chart) const
{
    const Plot *plot = plotOf(chart);
    return plot ? plot->legend : nullptr;
}

QStringList ChartsPanel::legendEntries(const QChart *chart) const
{
    const Plot *plot = plotOf(chart);
    return plot && !plot->legend->isHidden() ? plot->legendEntries : QStringList();
}

bool ChartsPanel::eventFilter(QObject *watched, QEvent *event)
{
    if (event->type() == QEvent::Resize)
        for (Plot *plot : {&m_loss, &m_throughput, &m_bytes}) {
            if (watched == plot->legend)
                updateLegend(*plot);
            else if (watched == plot->view)
                fitTicks(*plot);
        }
    return QWidget::eventFilter(watched, event);
}

void ChartsPanel::updateTitle(Plot &plot)
{
    // The unit whole on one line: "MB/s" broken after its "/" reads as two
    // words (a word joiner forbids that break).
    QString unit = plot.y->titleText().toHtmlEscaped();
    unit.replace(QLatin1Char('/'), QStringLiteral("/\u2060"));
    plot.title->setText(unit.isEmpty() ? plot.titleText.toHtmlEscaped()
                                       : tr("%1, %2").arg(plot.titleText.toHtmlEscaped(), unit));
}

// "■ name" per line, as many as fit in kLegendLines lines at the label's
// width, then "+N more"; wraps only between entries. A chart of one line
// has no legend: its title names it.
void ChartsPanel::updateLegend(Plot &plot)
{
    QList<QXYSeries *> lines;
    const auto series = plot.view->chart()->series();
    for (QAbstractSeries *s : series)
        if (auto *xy = qobject_cast<QXYSeries *>(s))
            lines << xy;
    plot.legendEntries.clear();
    if (lines.size() < 2) {
        plot.legend->clear();
        plot.legend->hide();
        return;
    }
    const QFontMetricsF fm(plot.legend->font());
    const double room = std::max(40, plot.legend->width() - 4);
    const double gap = fm.horizontalAdvance(QStringLiteral("\u00a0\u00a0 "));
    const auto entryWidth = [&](const QString &text) { return fm.horizontalAdvance(QStringLiteral("\u25a0\u00a0") + text); };
    // How many of the first `n` entries, plus "+rest more" when n < all, fit.
    const auto fits = [&](int n) {
        int rows = 1;
        double x = 0;
        for (int i = 0; i <= n; ++i) {
            const bool more = i == n;
            if (more && n == lines.size())
                break;
            const double w = more ? fm.horizontalAdvance(tr("+%1 more").arg(lines.size() - n))
                                  : entryWidth(lines[i]->name());
            if (x > 0 && x + gap + w > room) {
                ++rows;
                x = w;
            } else {
                x += (x > 0 ? gap : 0) + w;
            }
        }
        return rows <= kLegendLines;
    };
    int shown = int(lines.size());
    while (shown > 1 && !fits(shown))
        --shown;
    QStringList html;
    for (int i = 0; i < shown; ++i) {
        const QString name = lines[i]->name().isEmpty() ? tr("line %1").arg(i + 1) : lines[i]->name();
        plot.legendEntries << name;
        html << QStringLiteral("<span style=\"color:%1\">\u25a0</span>\u00a0%2")
                    .arg(lines[i]->color().name(), name.toHtmlEscaped().replace(QLatin1Char(' '), QChar::Nbsp));
    }
    if (shown < lines.size()) {
        plot.legendEntries << tr("+%1 more").arg(lines.size() - shown);
        html << plot.legendEntries.last().toHtmlEscaped().replace(QLatin1Char(' '), QChar::Nbsp);
    }
    plot.legend->setText(html.join(QStringLiteral("\u00a0\u00a0 ")));
    plot.legend->show();
}

void ChartsPanel::addSeries(Plot &plot, QXYSeries *series, const QColor &colour)
{
    plot.view->chart()->addSeries(series);
    series->attachAxis(plot.x);
    series->attachAxis(plot.y);
    series->setColor(colour);
    updateLegend(plot);
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
    updateLegend(m_bytes);
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


// The largest finite samples/s of `points` (0: none), what the axis scales to.
static double fastestOf(const QVector<StepPoint> &points)
{
    double fastest = 0;
    for (const StepPoint &point : points)
        if (std::isfinite(point.samplesPerSecond))
            fastest = std::max(fastest, std::abs(point.samplesPerSecond));
    return fastest;
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
    chooseSamplesScale(fastestOf(points));
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
        samples.append(QPointF(x, point.samplesPerSecond / m_throughput.yScale));
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
        updateLegend(m_throughput);
    }
    chooseSamplesScale(fastestOf(points));
    QList<QPointF> loss, samples, bytes;
    for (const StepPoint &point : points) {
        loss.append(QPointF(double(point.step), point.loss));
        samples.append(QPointF(double(point.step), point.samplesPerSecond / m_throughput.yScale));
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
    for (Plot *plot : {&m_loss, &m_throughput, &m_bytes})
        updateLegend(*plot);
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
        applyXRange(plot);
    if (first || plot.yMin < plot.y->min() || plot.yMax > plot.y->max())
        applyYRange(plot);
}

void ChartsPanel::applyXRange(Plot &plot)
{
    plot.xIntervals = xIntervalsThatFit(plot);
    applyRange(plot.x, stepRange(plot.empty, plot.xMin, plot.xMax, plot.xIntervals));
}

void ChartsPanel::applyYRange(Plot &plot)
{
    if (plot.empty)
        applyRange(plot.y, niceRange(0, 1, true, plot.yIntervals), plot.ySuffix);
    else
        applyRange(plot.y, niceRange(plot.yMin, plot.yMax, plot.includeZero, plot.yIntervals), plot.ySuffix);
}

void ChartsPanel::resetAxes(Plot &plot)
{
    plot.empty = true;
    plot.xMin = plot.xMax = plot.yMin = plot.yMax = 0;
    applyXRange(plot);
    applyYRange(plot);
}

// Qt Charts elides a tick label that is wider than its share of the axis:
// the most x ticks (up to six intervals) whose labels, each with a gap of
// two characters, fit the plot's width for the data plotted now (five
// before the plot has a size). It depends only on the data and the plot's
// width, so a new count cannot flip the next one back.
int ChartsPanel::xIntervalsThatFit(const Plot &plot) const
{
    const QRectF area = plot.view->chart()->plotArea();
    if (area.width() < 1)
        return 5;
    const QFontMetricsF fm(plot.x->labelsFont());
    for (int n = 6; n > 1; --n) {
        const NiceRange r = stepRange(plot.empty, plot.xMin, plot.xMax, n);
        const int ticks = int(std::lround((r.max - r.min) / r.step));
        double widest = 0;
        for (int i = 0; i <= ticks; ++i)
            widest = std::max(widest, fm.horizontalAdvance(tickText(r.min + i * r.step, r.step, QString())));
        if (area.width() / std::max(1, ticks) >= widest + 2 * fm.averageCharWidth())
            return n;
    }
    return 1;
}

// A new plot size: as many ticks as fit now (on the y axis, a label and a
// third of another's height between ticks). The x axis title ("step")
// shows only on a plot tall enough to spare it a line.
void ChartsPanel::fitTicks(Plot &plot)
{
    const QRectF area = plot.view->chart()->plotArea();
    if (area.width() < 1 || area.height() < 1)
        return;
    const QFontMetricsF fm(plot.y->labelsFont());
    const int yIntervals = std::clamp(int(area.height() / (1.3 * fm.height())), 1, 5);
    plot.x->setTitleVisible(plot.view->height() >= 11 * QFontMetricsF(plot.x->titleFont()).height());
    if (xIntervalsThatFit(plot) != plot.xIntervals)
        applyXRange(plot);
    if (yIntervals != plot.yIntervals) {
        plot.yIntervals = yIntervals;
        applyYRange(plot);
    }
}

void ChartsPanel::rescale(Plot &plot, const QList<QXYSeries *> &lines, double newScale)
{
    const double ratio = plot.yScale / newScale;
    for (QXYSeries *series : lines) {
        if (!series)
            continue;
        QList<QPointF> points = series->points();
        for (QPointF &p : points)
            p.setY(p.y() * ratio);
        series->replace(points);
    }
    plot.yMin *= ratio;
    plot.yMax *= ratio;
    plot.yScale = newScale;
    if (!plot.empty)
        applyYRange(plot);
}

void ChartsPanel::chooseSamplesScale(double largest)
{
    // "8k" where "8000" would need room a third of a projector lacks.
    const double scale = largest >= 1e6 ? 1e6 : largest >= 1e3 ? 1e3 : 1;
    if (scale <= m_throughput.yScale)
        return;
    m_throughput.ySuffix = scale >= 1e6 ? QStringLiteral("M") : QStringLiteral("k");
    rescale(m_throughput, {m_samples, m_bSamples}, scale);
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
    QList<QXYSeries *> lines;
    for (QLineSeries *series : bytesLines())
        lines << series;
    lines << m_bBytes;
    m_bytes.y->setTitleText(QString::fromLatin1(kUnits[u].unit));
    updateTitle(m_bytes);
    rescale(m_bytes, lines, kUnits[u].scale);
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
    updateTitle(m_bytes);
    m_throughput.yScale = 1;
    m_throughput.ySuffix.clear();
    for (Plot *plot : {&m_loss, &m_throughput, &m_bytes}) {
        resetAxes(*plot);
        updateLegend(*plot);
    }
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
        title.setPointSizeF(15);
        base.setPointSizeF(14);
        labels.setPointSizeF(13);
    } else {
        title.setPointSizeF(base.pointSizeF() * 1.15);
    }
    const qreal pen = m_projector ? 4 : 2;

    for (Plot *plot : {&m_loss, &m_throughput, &m_bytes}) {
        QChart *chart = plot->view->chart();
        plot->title->setFont(title);
        plot->legend->setFont(base);
        // A line each at least: a wrapped label's own minimum is its height
        // at a narrow width, which would make the docked panel demand more
        // height than a 768 px window has; the layout gives them their
        // height for the width they get.
        plot->title->setMinimumHeight(QFontMetrics(title).height());
        plot->legend->setMinimumHeight(QFontMetrics(base).height());
        updateTitle(*plot);
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
    for (Plot *plot : {&m_loss, &m_throughput, &m_bytes}) {
        updateLegend(*plot);
        fitTicks(*plot);
    }
}

} // namespace smol::widgets
