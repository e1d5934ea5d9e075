// smolctl info and smolctl export: argument parsing and printing only; the
// figures come from SessionReader::info(), the files from session_export.
#include "session_commands.h"

#include "session_export.h"
#include "session_reader.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <cmath>
#include <optional>

namespace smol::engine {

namespace {

const char kInfoUsage[] = R"(Usage: smolctl info FILE.smolrec [--json]

What a session file holds: strategy, model, nodes, steps, duration, events
by kind, bytes sent per link (from the send side of every frame) and the
final loss (the last "loss" metric, cluster-wide first). A file without the
end marker (its recording process was killed) says "interrupted".

Options:
  --json      one JSON object on one line instead of the table
  -h, --help  show this help

Exit code 0, 1 for a file that is missing, damaged or not a session, 2 for
bad arguments.
)";

const char kExportUsage[] = R"(Usage: smolctl export FILE.smolrec [--chrome-trace OUT.json] [--csv OUT.csv]

  --chrome-trace OUT.json  Chrome Trace Event JSON for Perfetto
                           (ui.perfetto.dev) or chrome://tracing: a process
                           per node, compute and collective spans, every
                           packet as an arrow from sender to receiver, memory
                           counters (docs/session-format.md)
  --csv OUT.csv            the metrics: t_s,step,node,name,value
  -h, --help               show this help

At least one output. Outputs are written whole or not at all. Exit code 0,
1 for a session that cannot be read or an output that cannot be written, 2
for bad arguments.
)";

bool isHelp(const QString &a)
{
    return a == QLatin1String("-h") || a == QLatin1String("--help");
}

int usageError(QTextStream &err, const char *command, const QString &why)
{
    err << "smolctl " << command << ": " << why << " (see smolctl " << command << " --help)\n";
    err.flush();
    return 2;
}

int fileError(QTextStream &err, const char *command, const std::exception &e)
{
    err << "smolctl " << command << ": " << QString::fromStdString(e.what()).simplified() << "\n";
    err.flush();
    return 1;
}

QString mib(std::uint64_t bytes)
{
    return QString::number(double(bytes) / (1024.0 * 1024.0), 'f', 2) + QStringLiteral(" MiB");
}

QString seconds(std::int64_t ns)
{
    return QString::number(double(ns) / 1e9, 'f', 3) + QStringLiteral(" s");
}

QJsonObject infoJson(const QString &file, const SessionInfo &i)
{
    QJsonObject o;
    o[QStringLiteral("type")] = QStringLiteral("info");
    o[QStringLiteral("file")] = file;
    o[QStringLiteral("schema_version")] = i.schemaVersion;
    o[QStringLiteral("recorded")] = i.complete ? QStringLiteral("complete") : QStringLiteral("interrupted");
    o[QStringLiteral("strategy")] = QString::fromStdString(i.strategy);
    o[QStringLiteral("model")] = QString::fromStdString(i.model);
    o[QStringLiteral("nodes")] = i.nodes;
    QJsonArray nodes;
    for (const SessionNode &n : i.nodeList) {
        nodes.append(QJsonObject{{QStringLiteral("rank"), n.rank},
                                 {QStringLiteral("name"), QString::fromStdString(n.name)},
                                 {QStringLiteral("host"), QString::fromStdString(n.host)},
                                 {QStringLiteral("role"), QString::fromStdString(n.role)}});
    }
    o[QStringLiteral("node_list")] = nodes;
    o[QStringLiteral("steps_planned")] = qint64(i.stepsPlanned);
    o[QStringLiteral("steps_recorded")] = qint64(i.stepsRecorded);
    o[QStringLiteral("last_step")] = qint64(i.lastStep);
    o[QStringLiteral("start_ns")] = qint64(i.startNs);
    o[QStringLiteral("duration_ns")] = qint64(i.durationNs);
    QJsonObject spans;
    for (int k = 0; k < SpanEvent::kKinds; ++k)
        spans[QLatin1String(spanKindName(SpanEvent::Kind(k)))] = qint64(i.spans[std::size_t(k)]);
    o[QStringLiteral("events")] = QJsonObject{
        {QStringLiteral("total"), qint64(i.events())},
        {QStringLiteral("frames_send"), qint64(i.framesSend)},
        {QStringLiteral("frames_receive"), qint64(i.framesReceive)},
        {QStringLiteral("spans"), spans},
        {QStringLiteral("memory"), qint64(i.memory)},
        {QStringLiteral("memory_at_collectives"), qint64(i.memoryAtCollectives)},
        {QStringLiteral("memory_step_peaks"), qint64(i.memoryStepPeaks)},
        {QStringLiteral("metrics"), qint64(i.metrics)},
        {QStringLiteral("logs"), qint64(i.logs)},
        {QStringLiteral("tensors"), qint64(i.tensors)},
    };
    QJsonArray links;
    for (const SessionLink &l : i.links) {
        links.append(QJsonObject{{QStringLiteral("src"), l.src},
                                 {QStringLiteral("dst"), l.dst},
                                 {QStringLiteral("bytes"), qint64(l.bytes)},
                                 {QStringLiteral("frames"), qint64(l.frames)}});
    }
    o[QStringLiteral("links")] = links;
    if (i.finalLoss && std::isfinite(*i.finalLoss))
        o[QStringLiteral("final_loss")] = *i.finalLoss;
    else
        o[QStringLiteral("final_loss")] = QJsonValue(QJsonValue::Null);
    o[QStringLiteral("final_loss_step")] = qint64(i.finalLossStep);
    return o;
}

void printInfo(QTextStream &out, const QString &file, const SessionInfo &i)
{
    auto row = [&out](const char *label, const QString &value) {
        out << QString::fromLatin1(label).leftJustified(12) << value << "\n";
    };
    row("session", QStringLiteral("%1 (schema version %2)").arg(file).arg(i.schemaVersion));
    row("recorded", i.complete ? QStringLiteral("complete")
                               : QStringLiteral("interrupted (no end marker: the recording stopped early)"));
    row("strategy", QString::fromStdString(i.strategy));
    row("model", QString::fromStdString(i.model));
    QStringList nodes;
    for (const SessionNode &n : i.nodeList) {
        QString node = QStringLiteral("%1 %2").arg(n.rank).arg(QString::fromStdString(n.name));
        if (!n.role.empty() || !n.host.empty())
            node += QStringLiteral(" (%1%2%3)")
                        .arg(QString::fromStdString(n.role), n.role.empty() || n.host.empty() ? "" : " on ",
                             QString::fromStdString(n.host));
        nodes << node;
    }
    row("nodes",
        QString::number(i.nodes) + (nodes.isEmpty() ? QString() : QStringLiteral(": ") + nodes.join(", ")));
    row("steps", QStringLiteral("%1 planned, %2 recorded%3")
                     .arg(i.stepsPlanned)
                     .arg(i.stepsRecorded)
                     .arg(i.lastStep >= 0 ? QStringLiteral(" (last %1)").arg(i.lastStep) : QString()));
    row("duration",
        seconds(i.durationNs) + (i.complete ? QString() : QStringLiteral(" (to the last event)")));
    row("events", QString::number(i.events()));
    row("  frames", QStringLiteral("%1 sent, %2 received").arg(i.framesSend).arg(i.framesReceive));
    QStringList spans;
    for (int k = 0; k < SpanEvent::kKinds; ++k)
        spans << QStringLiteral("%1 %2")
                     .arg(QLatin1String(spanKindName(SpanEvent::Kind(k))))
                     .arg(i.spans[std::size_t(k)]);
    row("  spans", spans.join(", "));
    row("  memory", QStringLiteral("%1 (%2 at collective boundaries, %3 step peaks)")
                        .arg(i.memory)
                        .arg(i.memoryAtCollectives)
                        .arg(i.memoryStepPeaks));
    row("  metrics", QString::number(i.metrics));
    row("  logs", QString::number(i.logs));
    row("  tensors", QString::number(i.tensors));
    out << "bytes per link (send side)\n";
    if (i.links.empty())
        out << "  none\n";
    for (const SessionLink &l : i.links) {
        out << "  " << QStringLiteral("%1 -> %2").arg(l.src).arg(l.dst).leftJustified(10)
            << QStringLiteral("%1 (%2 B in %3 frames)").arg(mib(l.bytes)).arg(l.bytes).arg(l.frames) << "\n";
    }
    if (!i.finalLoss)
        row("final loss", QStringLiteral("none recorded"));
    else if (i.finalLossStep >= 0)
        row("final loss", QStringLiteral("%1 (step %2)").arg(*i.finalLoss, 0, 'g', 6).arg(i.finalLossStep));
    else
        row("final loss", QString::number(*i.finalLoss, 'g', 6));
}

} // namespace

int runInfoCommand(const QStringList &args, QTextStream &out, QTextStream &err)
{
    QString file;
    bool json = false;
    for (const QString &a : args) {
        if (isHelp(a)) {
            out << kInfoUsage;
            return 0;
        }
        if (a == QLatin1String("--json"))
            json = true;
        else if (a.startsWith(QLatin1Char('-')))
            return usageError(err, "info", QStringLiteral("unknown option '%1'").arg(a));
        else if (!file.isEmpty())
            return usageError(err, "info", QStringLiteral("one session file at a time"));
        else
            file = a;
    }
    if (file.isEmpty())
        return usageError(err, "info", QStringLiteral("missing FILE"));
    try {
        const SessionReader reader(file);
        const SessionInfo info = reader.info();
        if (json)
            out << QJsonDocument(infoJson(file, info)).toJson(QJsonDocument::Compact) << "\n";
        else
            printInfo(out, file, info);
        out.flush();
        return 0;
    } catch (const std::exception &e) {
        return fileError(err, "info", e);
    }
}

int runExportCommand(const QStringList &args, QTextStream &out, QTextStream &err)
{
    QString file, chrome, csv;
    for (int i = 0; i < args.size(); ++i) {
        const QString &a = args[i];
        if (isHelp(a)) {
            out << kExportUsage;
            return 0;
        }
        if (a == QLatin1String("--chrome-trace") || a == QLatin1String("--csv")) {
            if (i + 1 >= args.size() || args[i + 1].isEmpty())
                return usageError(err, "export", QStringLiteral("%1 needs an output file").arg(a));
            (a == QLatin1String("--csv") ? csv : chrome) = args[++i];
        } else if (a.startsWith(QLatin1Char('-'))) {
            return usageError(err, "export", QStringLiteral("unknown option '%1'").arg(a));
        } else if (!file.isEmpty()) {
            return usageError(err, "export", QStringLiteral("one session file at a time"));
        } else {
            file = a;
        }
    }
    if (file.isEmpty())
        return usageError(err, "export", QStringLiteral("missing FILE"));
    if (chrome.isEmpty() && csv.isEmpty())
        return usageError(err, "export",
                          QStringLiteral("nothing to export: give --chrome-trace OUT.json and/or "
                                         "--csv OUT.csv"));
    try {
        const SessionReader reader(file);
        if (!chrome.isEmpty()) {
            exportChromeTrace(reader, chrome);
            out << "wrote " << chrome << "\n";
        }
        if (!csv.isEmpty()) {
            exportMetricsCsv(reader, csv);
            out << "wrote " << csv << "\n";
        }
        out.flush();
        return 0;
    } catch (const std::exception &e) {
        return fileError(err, "export", e);
    }
}

} // namespace smol::engine
