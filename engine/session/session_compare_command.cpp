// smolctl compare A B [--json]: arguments, the table and the JSON object;
// the figures come from measureRun/compareRuns (session_compare.cpp). The
// JSON keys are documented in docs/session-format.md §9.
#include "session_compare.h"

#include "session_reader.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <algorithm>
#include <cmath>

namespace smol::engine {

namespace {

const char kCompareUsage[] = R"(Usage: smolctl compare A.smolrec B.smolrec [--json]

Two recorded runs side by side: every configuration field that differs
(strategy, nodes, model, batch, optimizer, slowdowns, node names...), then
one row per figure with A's value, B's and B/A, every figure measured from
the events in the files:

  steps                  distinct step numbers among the step spans
  step time              per step, the earliest node's start to the latest
                         node's end; median and p95 (nearest rank)
  samples/s              the last samples_per_s metric the trainer recorded
  final loss             the last loss metric (cluster-wide first)
  test accuracy          the last test_accuracy metric (the final parameters
                         on the held-out set, after the run)
  pipeline bubble        pipeline runs: the share of each step after the
                         first, up to its optimizer, spent waiting in
                         collectives or pauses; mean over the stages
per node:
  bytes sent per step    payload bytes of the node's send frames that start
                         inside its step spans, over its step count; a step
                         span runs from the end of the node's previous step,
                         so work between steps (a --test-every evaluation)
                         counts in the next one, the final gather after the
                         last step in none
  bytes sent, whole run  every send frame of the node
  idle share             1 - time computing / (first step's start to last
                         step's end); computing = forward, backward and
                         optimizer spans minus the collectives and pauses
                         inside them (ddp's all-reduce waits in backward);
                         an emulated slowdown counts as computing
  memory                 params+grads+optimizer at step end (the largest over
                         the end-of-step samples), then each category and the
                         allocator's peak, the largest over all the node's
                         samples (zero3's gathered layers count in params)
and the largest loss difference over the steps both runs recorded.
A figure one run lacks (a node only A has, a bubble) is shown as "—" and
is null in --json.

Options:
  --json      one JSON object on one line (keys: docs/session-format.md)
  -h, --help  show this help

Exit code 0, 1 for a file that is missing, damaged or not a session (one
line on stderr), 2 for bad arguments.
)";

const char kNone[] = "\u2014";

} // namespace

QString formatValue(FigureUnit unit, std::optional<double> v)
{
    if (!v)
        return QString::fromUtf8(kNone);
    const double x = *v;
    switch (unit) {
    case FigureUnit::Count:
        return QString::number(x, 'f', 0);
    case FigureUnit::Seconds:
        return std::abs(x) >= 10 ? QString::number(x, 'f', 2) + QStringLiteral(" s")
                                 : QString::number(x * 1e3, 'f', 2) + QStringLiteral(" ms");
    case FigureUnit::PerSecond:
        return QString::number(x, 'f', 0);
    case FigureUnit::Bytes:
        if (std::abs(x) < 1024)
            return QString::number(x, 'f', 0) + QStringLiteral(" B");
        if (std::abs(x) < 1024 * 1024)
            return QString::number(x / 1024, 'f', 1) + QStringLiteral(" KiB");
        return QString::number(x / (1024 * 1024), 'f', 2) + QStringLiteral(" MiB");
    case FigureUnit::Share:
        return QString::number(100 * x, 'f', 1) + QStringLiteral(" %");
    case FigureUnit::Plain:
        break;
    }
    return QString::number(x, 'g', 6);
}

QString formatRatio(std::optional<double> r)
{
    if (!r)
        return QString::fromUtf8(kNone);
    return QString::number(*r, 'f', std::abs(*r) >= 100 ? 0 : 3);
}

namespace {

QString formatConfig(const QJsonValue &v)
{
    if (v.isUndefined())
        return QString::fromUtf8(kNone);
    if (v.isString())
        return v.toString().isEmpty() ? QStringLiteral("\"\"") : v.toString();
    if (v.isArray())
        return QStringLiteral("[]");
    return QString::fromUtf8(QJsonDocument(QJsonArray{v}).toJson(QJsonDocument::Compact)).mid(1).chopped(1);
}

QString runLine(const QString &file, const RunFigures &r)
{
    return QStringLiteral("%1: %2, %3, %4 nodes, %5 steps planned%6")
        .arg(file, QString::fromStdString(r.strategy), QString::fromStdString(r.model))
        .arg(r.nodes)
        .arg(r.stepsPlanned)
        .arg(r.complete ? QString() : QStringLiteral(" (interrupted)"));
}

void printComparison(QTextStream &out, const QString &fileA, const RunFigures &a, const QString &fileB,
                     const RunFigures &b, const SessionComparison &c)
{
    out << "A  " << runLine(fileA, a) << "\n";
    out << "B  " << runLine(fileB, b) << "\n\n";
    out << "config differences (A -> B)\n";
    if (c.configDifferences.empty())
        out << "  none\n";
    int keyWidth = 0;
    for (const auto &d : c.configDifferences)
        keyWidth = std::max(keyWidth, int(d.key.size()));
    for (const auto &d : c.configDifferences)
        out << "  " << QString::fromStdString(d.key).leftJustified(keyWidth + 2) << formatConfig(d.a)
            << " -> " << formatConfig(d.b) << "\n";
    out << "\n";

    auto row = [&out](const QString &label, const QString &va, const QString &vb, const QString &ratio) {
        out << label.leftJustified(38) << va.rightJustified(13) << vb.rightJustified(13)
            << ratio.rightJustified(9) << "\n";
    };
    auto figure = [&](const ComparedRow &r, const char *indent) {
        row(QLatin1String(indent) + QLatin1String(r.label), formatValue(r.unit, r.value.a),
            formatValue(r.unit, r.value.b), formatRatio(r.value.ratio()));
    };
    row(QStringLiteral("figure"), QStringLiteral("A"), QStringLiteral("B"), QStringLiteral("B/A"));
    for (const ComparedRow &r : c.run)
        figure(r, "");
    for (const auto &n : c.nodes) {
        out << "node " << n.rank << "\n";
        for (const ComparedRow &r : n.rows)
            figure(r, "  ");
    }
    out << "\n";
    if (c.lossDifference)
        out << "largest loss difference over " << c.lossDifference->commonSteps
            << " common steps: " << QString::number(c.lossDifference->largest, 'g', 4) << " (step "
            << c.lossDifference->step << ")\n";
    else
        out << "largest loss difference: " << QString::fromUtf8(kNone)
            << " (no step has a loss in both runs)\n";
}

QJsonValue jsonNumber(std::optional<double> v)
{
    return v && std::isfinite(*v) ? QJsonValue(*v) : QJsonValue(QJsonValue::Null);
}

QJsonObject jsonFigure(const ComparedFigure &f)
{
    return {{QStringLiteral("a"), jsonNumber(f.a)},
            {QStringLiteral("b"), jsonNumber(f.b)},
            {QStringLiteral("ratio"), jsonNumber(f.ratio())}};
}

QJsonObject jsonRun(const QString &file, const RunFigures &r)
{
    return {{QStringLiteral("file"), file},
            {QStringLiteral("strategy"), QString::fromStdString(r.strategy)},
            {QStringLiteral("model"), QString::fromStdString(r.model)},
            {QStringLiteral("nodes"), r.nodes},
            {QStringLiteral("steps_planned"), qint64(r.stepsPlanned)},
            {QStringLiteral("recorded"),
             r.complete ? QStringLiteral("complete") : QStringLiteral("interrupted")}};
}

QJsonObject comparisonJson(const QString &fileA, const RunFigures &a, const QString &fileB,
                           const RunFigures &b, const SessionComparison &c)
{
    QJsonArray differences;
    for (const auto &d : c.configDifferences) {
        auto orNull = [](const QJsonValue &v) { return v.isUndefined() ? QJsonValue(QJsonValue::Null) : v; };
        differences.append(QJsonObject{{QStringLiteral("key"), QString::fromStdString(d.key)},
                                       {QStringLiteral("a"), orNull(d.a)},
                                       {QStringLiteral("b"), orNull(d.b)}});
    }
    QJsonObject figures;
    for (const ComparedRow &r : c.run)
        figures[QLatin1String(r.key)] = jsonFigure(r.value);
    QJsonArray nodes;
    for (const auto &n : c.nodes) {
        QJsonObject node{{QStringLiteral("rank"), n.rank}};
        for (const ComparedRow &r : n.rows)
            node[QLatin1String(r.key)] = jsonFigure(r.value);
        nodes.append(node);
    }
    QJsonValue loss(QJsonValue::Null);
    if (c.lossDifference)
        loss = QJsonObject{{QStringLiteral("largest"), c.lossDifference->largest},
                           {QStringLiteral("step"), qint64(c.lossDifference->step)},
                           {QStringLiteral("common_steps"), qint64(c.lossDifference->commonSteps)}};
    return {{QStringLiteral("type"), QStringLiteral("compare")},
            {QStringLiteral("a"), jsonRun(fileA, a)},
            {QStringLiteral("b"), jsonRun(fileB, b)},
            {QStringLiteral("config_differences"), differences},
            {QStringLiteral("figures"), figures},
            {QStringLiteral("nodes"), nodes},
            {QStringLiteral("loss_difference"), loss}};
}

int usageError(QTextStream &err, const QString &why)
{
    err << "smolctl compare: " << why << " (see smolctl compare --help)\n";
    err.flush();
    return 2;
}

} // namespace

int runCompareCommand(const QStringList &args, QTextStream &out, QTextStream &err)
{
    QStringList files;
    bool json = false;
    for (const QString &arg : args) {
        if (arg == QLatin1String("-h") || arg == QLatin1String("--help")) {
            out << QString::fromUtf8(kCompareUsage);
            out.flush();
            return 0;
        }
        if (arg == QLatin1String("--json"))
            json = true;
        else if (arg.startsWith(QLatin1Char('-')))
            return usageError(err, QStringLiteral("unknown option '%1'").arg(arg));
        else
            files << arg;
    }
    if (files.size() != 2)
        return usageError(err, QStringLiteral("needs two session files, A and B (got %1)").arg(files.size()));
    try {
        // Both opened (and checked) before either is read whole.
        const SessionReader readerA(files[0]), readerB(files[1]);
        const RunFigures a = measureRun(readerA);
        const RunFigures b = measureRun(readerB);
        const SessionComparison c = compareRuns(a, b);
        if (json)
            out << QJsonDocument(comparisonJson(files[0], a, files[1], b, c)).toJson(QJsonDocument::Compact)
                << "\n";
        else
            printComparison(out, files[0], a, files[1], b, c);
        out.flush();
        return 0;
    } catch (const std::exception &e) {
        err << "smolctl compare: " << QString::fromStdString(e.what()).simplified() << "\n";
        err.flush();
        return 1;
    }
}

} // namespace smol::engine
