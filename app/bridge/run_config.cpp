#include "run_config.h"

#include "engine/trainer.h"

#include <algorithm>
#include <stdexcept>

namespace smol::app {

engine::TrainConfig trainConfigOf(const RunSettings &s)
{
    engine::TrainConfig c;
    c.strategy = s.strategy.toStdString();
    c.nodes = s.nodes;
    c.model.kind = s.model.toStdString();
    c.steps = s.steps;
    c.globalBatch = s.globalBatch;
    c.seed = s.seed;
    c.optimizer.kind =
        s.optimizer == "adam" ? engine::OptimizerConfig::Kind::Adam : engine::OptimizerConfig::Kind::Sgd;
    c.optimizer.lr = s.lr;
    c.placement = s.placement.toStdString();
    c.microBatches = std::max<qint64>(1, s.microBatches);
    c.schedule = s.schedule == QLatin1String("gpipe") ? engine::PipelineSchedule::GPipe
                                                      : engine::PipelineSchedule::OneFOneB;
    c.backend = s.backend == QLatin1String("gloo") ? engine::TrainConfig::Backend::Gloo
                                                   : engine::TrainConfig::Backend::Ours;
    c.mesh = s.mesh.trimmed().toStdString();
    // The window and the lessons give parsed values; a bad one runs plain.
    try {
        c.compression = engine::parseCompression(s.compression.toStdString());
    } catch (const std::invalid_argument &) {
        c.compression = {};
    }
    c.compression.startStep = s.compressStart;
    c.allReduce = s.allReduce.toStdString();
    if (!engine::parseRecompute(s.recompute.toStdString(), &c.model.recompute))
        c.model.recompute = engine::Recompute::None;
    c.accumulate = std::max<qint64>(1, s.accumulate);
    if (!engine::parsePrecision(s.precision.toStdString(), &c.model.precision))
        c.model.precision = engine::Precision::Fp32;
    c.testEvery = s.testEvery >= 0
                      ? s.testEvery
                      : std::max<std::int64_t>(1, s.steps / 25); // ~25 points on the chart's test curve
    return c;
}

std::optional<engine::plan::RunPrediction> predictionOf(const RunSettings &settings, QString *why)
{
    try {
        return engine::plan::predictRun(trainConfigOf(settings));
    } catch (const std::exception &e) {
        if (why)
            *why = QString::fromUtf8(e.what());
        return std::nullopt;
    }
}

RunSettings runSettingsOf(const engine::TrainConfig &c)
{
    RunSettings s;
    s.strategy = QString::fromStdString(c.strategy);
    s.model = QString::fromStdString(c.model.kind);
    s.nodes = c.nodes;
    s.steps = c.steps;
    s.globalBatch = c.globalBatch;
    s.seed = c.seed;
    s.optimizer = c.optimizer.kind == engine::OptimizerConfig::Kind::Adam ? QStringLiteral("adam")
                                                                          : QStringLiteral("sgd");
    s.lr = c.optimizer.lr;
    s.placement = QString::fromStdString(c.placement);
    s.microBatches = c.microBatches;
    s.schedule =
        c.schedule == engine::PipelineSchedule::GPipe ? QStringLiteral("gpipe") : QStringLiteral("1f1b");
    s.backend =
        c.backend == engine::TrainConfig::Backend::Gloo ? QStringLiteral("gloo") : QStringLiteral("ours");
    s.mesh = QString::fromStdString(c.mesh);
    s.compression = QString::fromStdString(c.compression.text());
    s.compressStart = c.compression.startStep;
    s.allReduce = QString::fromStdString(c.allReduce);
    s.recompute = QString::fromLatin1(engine::recomputeName(c.model.recompute));
    s.accumulate = c.accumulate;
    s.precision = QString::fromLatin1(engine::precisionName(c.model.precision));
    return s;
}

} // namespace smol::app
