#include "run_check.h"

#include "engine/trainer.h"
#include "net/device_mesh.h"
#include "run_config.h"

#include <QCoreApplication>

#include <stdexcept>

namespace smol::app {

namespace {

QString tr(const char *text)
{
    return QCoreApplication::translate("RunCheck", text);
}

const QStringList kModels{QStringLiteral("mlp"), QStringLiteral("gpt")};

// The engine's reason without the command line's "--mesh SPEC: " before it.
QString meshReason(const char *what)
{
    const QString why = QString::fromUtf8(what);
    const int at = int(why.indexOf(QLatin1String(": ")));
    return why.startsWith(QLatin1String("--mesh")) && at > 0 ? why.mid(at + 2) : why;
}

// A mesh: its shape (the product is the node count), then what the engine
// refuses before any node is waited for (engine::validateConfig: the dp
// axis's strategy, the axes the model cannot split). Each problem in one
// line, naming the mesh.
std::optional<RunProblem> checkMesh(const RunSettings &s)
{
    const QString spec = s.mesh.trimmed();
    net::DeviceMesh mesh;
    try {
        mesh = net::DeviceMesh::parse(spec.toStdString());
    } catch (const std::invalid_argument &e) {
        return RunProblem{tr("Mesh %1: %2").arg(spec, meshReason(e.what())), {}};
    }
    if (mesh.nodes() != s.nodes) {
        RunProblem p{tr("Mesh %1 has %2 nodes, not %3.").arg(spec).arg(mesh.nodes()).arg(s.nodes), {}};
        RunFix nodes{tr("Use %1 nodes").arg(mesh.nodes()), s};
        nodes.settings.nodes = mesh.nodes();
        p.fixes << nodes;
        return p;
    }
    const bool splitsAttention = mesh.size(net::MeshAxis::Tp) > 1 || mesh.size(net::MeshAxis::Cp) > 1;
    if (splitsAttention && s.model != QLatin1String("gpt")) {
        RunProblem p{tr("Mesh %1: tp and cp split the gpt's attention; the %2 has none.").arg(spec, s.model),
                     {}};
        RunFix gpt{tr("Use the gpt"), s};
        gpt.settings.model = QStringLiteral("gpt");
        p.fixes << gpt;
        return p;
    }
    try {
        engine::validateConfig(trainConfigOf(s));
    } catch (const std::invalid_argument &e) {
        return RunProblem{tr("Mesh %1: %2").arg(spec, meshReason(e.what())), {}};
    }
    return std::nullopt;
}

} // namespace

std::optional<RunProblem> checkRun(const RunSettings &s,
                                   const std::function<int(const QString &)> &layerCount)
{
    if (!s.mesh.trimmed().isEmpty())
        return checkMesh(s);
    if (s.strategy == QLatin1String("pipeline")) {
        const int layers = layerCount(s.model);
        if (layers > 0 && s.nodes > layers) {
            RunProblem p;
            p.text = tr("A pipeline puts a stage on each node: the %1 has %2 layers, too few for %3 stages.")
                         .arg(s.model)
                         .arg(layers)
                         .arg(s.nodes);
            RunFix fewer{tr("Use %1 nodes").arg(layers), s};
            fewer.settings.nodes = layers;
            p.fixes << fewer;
            for (const QString &other : kModels) {
                if (other == s.model || layerCount(other) < s.nodes)
                    continue;
                RunFix model{tr("Use the %1").arg(other), s};
                model.settings.model = other;
                p.fixes << model;
            }
            return p;
        }
        const qint64 m = std::max<qint64>(1, s.microBatches);
        if (s.globalBatch % m != 0) {
            RunProblem p;
            p.text = tr("%1 micro-batches do not divide the batch of %2.").arg(m).arg(s.globalBatch);
            qint64 fewer = std::min(m, s.globalBatch);
            while (fewer > 1 && s.globalBatch % fewer != 0)
                --fewer;
            RunFix micro{tr("Use %1 micro-batches").arg(fewer), s};
            micro.settings.microBatches = fewer;
            RunFix batch{tr("Use batch %1").arg((s.globalBatch + m - 1) / m * m), s};
            batch.settings.globalBatch = (s.globalBatch + m - 1) / m * m;
            p.fixes << micro << batch;
            return p;
        }
    }
    if (s.strategy == QLatin1String("tensor") && s.model != QLatin1String("gpt")) {
        RunProblem p;
        p.text =
            tr("Tensor parallelism splits the gpt's attention heads and MLP; the %1 has none.").arg(s.model);
        RunFix gpt{tr("Use the gpt"), s};
        gpt.settings.model = QStringLiteral("gpt");
        p.fixes << gpt;
        return p;
    }
    return std::nullopt;
}

} // namespace smol::app
