#include "class_answers.h"

#include <QRegularExpression>

#include <algorithm>
#include <cmath>

namespace smol::app {

void ClassAnswers::add(int viewer, const QString &name, int step, double value)
{
    if (!std::isfinite(value))
        return;
    m_answers[{step, viewer}] = Answer{name, value};
}

void ClassAnswers::clear() { m_answers.clear(); }

int ClassAnswers::count(int step) const
{
    int n = 0;
    for (const auto &[key, a] : m_answers)
        n += key.first == step;
    return n;
}

ClassSummary ClassAnswers::summarize(int step, double measured, double tolerance, bool absolute) const
{
    ClassSummary s;
    for (const auto &[key, a] : m_answers)
        if (key.first == step)
            s.answers.append({a.name, a.value});
    std::sort(s.answers.begin(), s.answers.end(), [](const auto &x, const auto &y) {
        return x.second != y.second ? x.second < y.second : x.first < y.first;
    });
    s.answered = int(s.answers.size());
    if (s.answered == 0)
        return s;
    const int n = s.answered;
    s.median = n % 2 ? s.answers[n / 2].second : (s.answers[n / 2 - 1].second + s.answers[n / 2].second) / 2;
    const double allowed = absolute ? tolerance : tolerance * std::max(std::abs(measured), 1e-12);
    for (const auto &a : s.answers)
        s.within += std::abs(a.second - measured) <= allowed;
    s.low = s.answers.front().second;
    s.high = s.answers.back().second;
    const int bins = s.high > s.low ? kBins : 1;
    s.histogram = QVector<int>(bins, 0);
    for (const auto &a : s.answers) {
        const int bin = bins == 1 ? 0 : int((a.second - s.low) / (s.high - s.low) * bins);
        s.histogram[std::clamp(bin, 0, bins - 1)] += 1;
    }
    return s;
}

QString histogramText(const QVector<int> &histogram)
{
    static const QString kBlocks = QStringLiteral("▁▂▃▄▅▆▇█");
    const int most = histogram.isEmpty() ? 0 : *std::max_element(histogram.begin(), histogram.end());
    QString out;
    for (int count : histogram)
        out += count == 0 ? QStringLiteral("·") : QString(kBlocks[std::min(7, (count * 8 - 1) / most)]);
    return out;
}

QString classAnswersText(const ClassSummary &s, LessonUnit unit, int maxNames)
{
    if (s.answered == 0)
        return QStringLiteral("0 answers");
    QString text = QStringLiteral("%1 answer%2, median %3, %4 within tolerance")
                       .arg(s.answered)
                       .arg(s.answered == 1 ? "" : "s")
                       .arg(formatLessonValue(s.median, unit))
                       .arg(s.within);
    QStringList names;
    for (int i = 0; i < s.answers.size() && i < maxNames; ++i)
        names << QStringLiteral("%1 %2").arg(s.answers[i].first, formatLessonValue(s.answers[i].second, unit));
    if (s.answers.size() > maxNames)
        names << QStringLiteral("+%1 more").arg(s.answers.size() - maxNames);
    return text + QStringLiteral(" (%1)").arg(names.join(QStringLiteral(", ")));
}

std::optional<double> parseLessonValue(const QString &text, LessonUnit unit)
{
    static const QRegularExpression re(QStringLiteral(R"(^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-z%/]*)\s*$)"));
    const QRegularExpressionMatch m = re.match(QString(text).remove(QLatin1Char(',')));
    if (!m.hasMatch())
        return std::nullopt;
    double v = m.captured(1).toDouble();
    const QString suffix = m.captured(2).toLower();
    if (unit == LessonUnit::Percent)
        return suffix.isEmpty() || suffix == QLatin1String("%") ? std::optional<double>(v / 100) : std::nullopt;
    if (unit == LessonUnit::Bytes) {
        static const QStringList prefixes = {QStringLiteral("k"), QStringLiteral("m"), QStringLiteral("g"),
                                             QStringLiteral("t")};
        if (suffix.isEmpty() || suffix == QLatin1String("b"))
            return v;
        const int p = int(prefixes.indexOf(suffix.left(1)));
        if (p < 0 || suffix.size() > 3 || (suffix.size() > 1 && !suffix.endsWith(QLatin1Char('b'))))
            return std::nullopt;
        return v * std::pow(1024.0, p + 1);
    }
    if (unit == LessonUnit::Seconds && suffix == QLatin1String("ms"))
        return v / 1000;
    if (suffix.isEmpty() || (unit == LessonUnit::Ratio && suffix == QLatin1String("x")) ||
        (unit == LessonUnit::Seconds && suffix == QLatin1String("s")) ||
        (unit == LessonUnit::Rate && suffix.startsWith(QLatin1String("samples"))))
        return v;
    return std::nullopt;
}

namespace {
const std::pair<LessonUnit, const char *> kUnitNames[] = {
    {LessonUnit::Plain, "plain"},     {LessonUnit::Bytes, "bytes"}, {LessonUnit::Ratio, "ratio"},
    {LessonUnit::Percent, "percent"}, {LessonUnit::Rate, "rate"},   {LessonUnit::Seconds, "seconds"},
    {LessonUnit::Count, "count"}};
} // namespace

QString lessonUnitName(LessonUnit unit)
{
    for (const auto &[u, name] : kUnitNames)
        if (u == unit)
            return QLatin1String(name);
    return QStringLiteral("plain");
}

LessonUnit lessonUnitFromName(const QString &name)
{
    for (const auto &[u, n] : kUnitNames)
        if (name == QLatin1String(n))
            return u;
    return LessonUnit::Plain;
}

} // namespace smol::app
