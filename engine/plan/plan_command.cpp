// `smolctl plan`: parse train's run settings (parseRunOptions, the same
// option table), predict (predictRun), print; with --check, run and measure
// (measureRun) and print each figure beside its prediction (compareRun).
#include "plan_command.h"

#include "plan_check.h"
#include "run_prediction.h"

#include "engine/train_command.h"
#include "engine/trainer.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace smol::engine {

const char kPlanUsage[] = R"(Usage: smolctl plan [TRAIN SETTINGS] [--check] [--json]

What a run will hold and send, per node, before it runs: the model states
between steps by category (params, grads, optimizer: the strategy's closed
forms, or each rank's plan on a --mesh), the activations at the end of its
forward pass (the model's closed form), and the bytes it sends per optimizer
step (and per sample; on a mesh, by axis), each with the formula it used.

Takes the run settings `smolctl train` takes (see `smolctl train --help`):
--strategy, --nodes, --model, --mesh, --global-batch, --accumulate,
--recompute, --optimizer, --micro-batches, --schedule, --placement,
--n-layer, --n-head, --n-embd, --block-size, --corpus, --seed, ...

Options:
  --check      run it too, in this process (5 steps unless --steps says),
               and print each figure predicted, measured and their ratio
               (measured / predicted); exit 1 when a model-state or byte
               figure is more than 5% off (the activations' error is
               printed and never fails the check)
  --json       one JSON object instead of text
  -h, --help   show this help

Exit code 0; 1 when the run fails or a figure is off; 2 on bad arguments.
)";

namespace {

using plan::FigureCheck;
using plan::RunPrediction;

QString bytesText(double bytes)
{
    return QString::number(bytes / (1024.0 * 1024.0), 'f', 3) + " MiB (" + QString::number(bytes, 'f', 0) + " B)";
}

void printNode(const plan::NodePrediction &n, std::int64_t samplesPerStep, QTextStream &out)
{
    out << QString::fromStdString(n.label) << ":\n";
    if (n.held)
        out << "  params       " << bytesText(double(n.held->params)) << "\n"
            << "  grads        " << bytesText(double(n.held->grads)) << "\n"
            << "  optimizer    " << bytesText(double(n.held->optimizer)) << "\n"
            << "  model states " << bytesText(double(n.held->total())) << "\n";
    else
        out << "  model states no closed form\n";
    out << "  activations  " << (n.activations ? bytesText(double(*n.activations)) : "no closed form") << "\n";
    if (!n.bytesPerStep) {
        out << "  sent a step  no closed form\n";
        return;
    }
    out << "  sent a step  " << bytesText(*n.bytesPerStep) << ", "
        << QString::number(*n.bytesPerStep / double(samplesPerStep), 'f', 1) << " B a sample\n";
    for (const auto &[axis, bytes] : n.bytesByAxis)
        out << "    " << QString::fromStdString(axis) << "         " << bytesText(bytes) << "\n";
}

void printPlan(const RunPrediction &p, QTextStream &out)
{
    out << "plan: " << QString::fromStdString(p.strategy)
        << (p.mesh.empty() ? QString() : " on mesh " + QString::fromStdString(p.mesh)) << " on " << p.nodes
        << " node(s), model " << QString::fromStdString(p.model) << " (P = " << p.params << " parameters), "
        << p.samplesPerStep << " samples a step\n";
    out << "formulas:\n";
    for (const std::string &f : p.formulas)
        out << "  " << QString::fromStdString(f) << "\n";
    for (const plan::NodePrediction &n : p.ranks)
        printNode(n, p.samplesPerStep, out);
    if (p.bytes)
        out << "bytes a step: mean " << bytesText(p.bytes->mean) << ", busiest " << bytesText(p.bytes->busiest)
            << "; a sample: mean " << QString::number(p.bytes->mean / double(p.samplesPerStep), 'f', 1) << " B\n";
}

QJsonValue optionalNumber(const std::optional<double> &v)
{
    return v ? QJsonValue(*v) : QJsonValue();
}

QJsonObject planJson(const RunPrediction &p)
{
    QJsonArray ranks, formulas;
    for (const plan::NodePrediction &n : p.ranks) {
        QJsonObject axes;
        for (const auto &[axis, bytes] : n.bytesByAxis)
            axes.insert(QString::fromStdString(axis), bytes);
        QJsonObject o{{"rank", n.rank},
                      {"label", QString::fromStdString(n.label)},
                      {"activations", optionalNumber(n.activations ? std::optional<double>(double(*n.activations))
                                                                   : std::nullopt)},
                      {"bytes_per_step", optionalNumber(n.bytesPerStep)},
                      {"bytes_per_sample", optionalNumber(n.bytesPerStep ? std::optional<double>(
                                                                               *n.bytesPerStep / double(p.samplesPerStep))
                                                                         : std::nullopt)},
                      {"bytes_per_step_by_axis", axes}};
        if (n.held) {
            o.insert("params", double(n.held->params));
            o.insert("grads", double(n.held->grads));
            o.insert("optimizer", double(n.held->optimizer));
            o.insert("model_states", double(n.held->total()));
        }
        ranks.append(o);
    }
    for (const std::string &f : p.formulas)
        formulas.append(QString::fromStdString(f));
    QJsonObject o{{"type", "plan"},
                  {"strategy", QString::fromStdString(p.strategy)},
                  {"model", QString::fromStdString(p.model)},
                  {"nodes", p.nodes},
                  {"param_count", double(p.params)},
                  {"samples_per_step", double(p.samplesPerStep)},
                  {"per_node", ranks},
                  {"formulas", formulas}};
    if (!p.mesh.empty())
        o.insert("mesh", QString::fromStdString(p.mesh));
    if (p.bytes)
        o.insert("bytes_per_step", QJsonObject{{"mean", p.bytes->mean}, {"busiest", p.bytes->busiest}});
    return o;
}

QJsonArray checkJson(const std::vector<FigureCheck> &checks)
{
    QJsonArray a;
    for (const FigureCheck &f : checks)
        a.append(QJsonObject{{"figure", QString::fromStdString(f.figure)},
                             {"predicted", f.predicted},
                             {"measured", f.measured},
                             {"ratio", std::isfinite(f.ratio()) ? QJsonValue(f.ratio()) : QJsonValue()},
                             {"checked", f.checked},
                             {"off", f.off()}});
    return a;
}

int bad(QTextStream &err, const QString &why)
{
    err << "smolctl plan: " << why << "\n";
    err.flush();
    return 2;
}

// --check: the run, its figures beside the prediction's; 1 when one is off.
int check(const TrainConfig &c, const RunPrediction &p, bool json, QTextStream &out, QTextStream &err)
{
    plan::MeasuredRun measured;
    try {
        measured = plan::measureRun(c);
    } catch (const std::invalid_argument &e) {
        return bad(err, e.what());
    } catch (const std::exception &e) {
        err << "smolctl plan: the run failed: " << e.what() << "\n";
        return 1;
    }
    const std::vector<FigureCheck> checks = plan::compareRun(p, measured);
    const auto off = std::count_if(checks.begin(), checks.end(), [](const FigureCheck &f) { return f.off(); });
    if (json) {
        QJsonObject o = planJson(p);
        o.insert("steps", double(measured.steps));
        o.insert("check", checkJson(checks));
        o.insert("off", double(off));
        out << QJsonDocument(o).toJson(QJsonDocument::Compact) << "\n";
    } else {
        out << "plan --check: " << QString::fromStdString(p.strategy)
            << (p.mesh.empty() ? QString() : " on mesh " + QString::fromStdString(p.mesh)) << " on " << p.nodes
            << " node(s), model " << QString::fromStdString(p.model) << " (P = " << p.params << "), "
            << measured.steps << " steps measured\n";
        for (const std::string &f : p.formulas)
            out << "  " << QString::fromStdString(f) << "\n";
        for (const FigureCheck &f : checks)
            out << QString::fromStdString(plan::checkLine(f)) << "\n";
        out << (off ? QString::number(off) + " figure(s) off by more than 5%" : QString("every checked figure within 5%"))
            << "\n";
    }
    out.flush();
    return off ? 1 : 0;
}

} // namespace

int runPlanCommand(const QStringList &args, QTextStream &out, QTextStream &err)
{
    bool checking = false, json = false;
    QStringList rest;
    for (const QString &a : args) {
        if (a == "-h" || a == "--help") {
            out << kPlanUsage;
            return 0;
        }
        if (a == "--check")
            checking = true;
        else if (a == "--json")
            json = true;
        else
            rest << a;
    }
    TrainConfig c;
    if (const QString why = parseRunOptions(rest, c); !why.isEmpty())
        return bad(err, why);
    if (checking && !rest.contains("--steps"))
        c.steps = 5;
    RunPrediction p;
    try {
        p = plan::predictRun(c);
    } catch (const std::invalid_argument &e) {
        return bad(err, e.what());
    } catch (const std::exception &e) {
        err << "smolctl plan: " << e.what() << "\n";
        return 1;
    }
    if (checking)
        return check(c, p, json, out, err);
    if (json)
        out << QJsonDocument(planJson(p)).toJson(QJsonDocument::Compact) << "\n";
    else
        printPlan(p, out);
    out.flush();
    return 0;
}

} // namespace smol::engine
