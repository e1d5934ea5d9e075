#include "run_check.h"

#include <QCoreApplication>

namespace smol::app {

namespace {

QString tr(const char *text) { return QCoreApplication::translate("RunCheck", text); }

const QStringList kModels{QStringLiteral("mlp"), QStringLiteral("gpt")};

} // namespace

std::optional<RunProblem> checkRun(const RunSettings &s, const std::function<int(const QString &)> &layerCount)
{
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
        p.text = tr("Tensor parallelism splits the gpt's attention heads and MLP; the %1 has none.").arg(s.model);
        RunFix gpt{tr("Use the gpt"), s};
        gpt.settings.model = QStringLiteral("gpt");
        p.fixes << gpt;
        return p;
    }
    return std::nullopt;
}

} // namespace smol::app
