#include "config_json.h"

#include "engine/compression_config.h"

#include <QJsonArray>
#include <QJsonDocument>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace smol::engine {

namespace {

// 64-bit integers travel as decimal strings: JSON numbers are doubles.
QString bigInt(std::uint64_t v) { return QString::number(v); }

std::int64_t integer(const QJsonObject &o, const char *key, std::int64_t fallback)
{
    const QJsonValue v = o.value(QLatin1String(key));
    if (v.isUndefined())
        return fallback;
    if (!v.isDouble())
        throw std::invalid_argument(std::string("config field '") + key + "' is not a number");
    return std::int64_t(v.toDouble());
}

double number(const QJsonObject &o, const char *key, double fallback)
{
    const QJsonValue v = o.value(QLatin1String(key));
    if (v.isUndefined())
        return fallback;
    if (!v.isDouble())
        throw std::invalid_argument(std::string("config field '") + key + "' is not a number");
    return v.toDouble();
}

std::string text(const QJsonObject &o, const char *key, const std::string &fallback)
{
    const QJsonValue v = o.value(QLatin1String(key));
    if (v.isUndefined())
        return fallback;
    if (!v.isString())
        throw std::invalid_argument(std::string("config field '") + key + "' is not a string");
    return v.toString().toStdString();
}

} // namespace

QJsonObject configToJson(const TrainConfig &c)
{
    QJsonObject model{{"kind", QString::fromStdString(c.model.kind)},
                      {"n_layer", double(c.model.nLayer)},
                      {"n_head", double(c.model.nHead)},
                      {"n_embd", double(c.model.nEmbd)},
                      {"block_size", double(c.model.blockSize)},
                      {"recompute", recomputeName(c.model.recompute)},
                      {"precision", precisionName(c.model.precision)}};
    QJsonObject optimizer{{"kind", optimizerName(c.optimizer.kind)},
                          {"lr", c.optimizer.lr},
                          {"beta1", c.optimizer.beta1},
                          {"beta2", c.optimizer.beta2},
                          {"eps", c.optimizer.eps}};
    QJsonArray behaviour;
    for (const NodeBehaviour &b : c.behaviour)
        behaviour.append(QJsonObject{{"slowdown", b.slowdown},
                                     {"leave_after", double(b.leaveAfter)},
                                     {"join_after_ms", double(b.joinAfterMs)}});
    QJsonArray links;
    for (const TrainConfig::Link &l : c.links)
        links.append(QJsonObject{{"a", l.a},
                                 {"b", l.b},
                                 {"bits_per_s", l.limit.bitsPerSecond},
                                 {"latency_ns", double(l.limit.latency.count())}});
    return QJsonObject{{"strategy", QString::fromStdString(c.strategy)},
                       {"nodes", c.nodes},
                       {"model", model},
                       {"corpus", QString::fromStdString(c.corpus)},
                       {"steps", double(c.steps)},
                       {"global_batch", double(c.globalBatch)},
                       {"accumulate", double(c.accumulate)},
                       {"seed", bigInt(c.seed)},
                       {"optimizer", optimizer},
                       {"bucket_bytes", double(c.bucketBytes)},
                       {"compress", QString::fromStdString(c.compression.text())},
                       {"compress_start", double(c.compression.startStep)},
                       {"allreduce", QString::fromStdString(c.allReduce)},
                       {"max_staleness", double(c.maxStaleness)},
                       {"behaviour", behaviour},
                       {"links", links},
                       {"placement", QString::fromStdString(c.placement)},
                       {"micro_batches", double(c.microBatches)},
                       {"schedule", pipelineScheduleName(c.schedule)},
                       {"mesh", QString::fromStdString(c.mesh)},
                       {"test_every", double(c.testEvery)},
                       {"backend", c.backend == TrainConfig::Backend::Gloo ? "gloo" : "ours"}};
}

TrainConfig configFromJson(const QJsonObject &o)
{
    TrainConfig c;
    c.strategy = text(o, "strategy", c.strategy);
    c.nodes = int(integer(o, "nodes", c.nodes));
    const QJsonObject model = o.value(QLatin1String("model")).toObject();
    c.model.kind = text(model, "kind", c.model.kind);
    c.model.nLayer = integer(model, "n_layer", c.model.nLayer);
    c.model.nHead = integer(model, "n_head", c.model.nHead);
    c.model.nEmbd = integer(model, "n_embd", c.model.nEmbd);
    c.model.blockSize = integer(model, "block_size", c.model.blockSize);
    const std::string recompute = text(model, "recompute", "none");
    if (!parseRecompute(recompute, &c.model.recompute))
        throw std::invalid_argument("config field 'model.recompute' is '" + recompute + "'");
    const std::string precision = text(model, "precision", "fp32");
    if (!parsePrecision(precision, &c.model.precision))
        throw std::invalid_argument("config field 'model.precision' is '" + precision + "'");
    c.corpus = text(o, "corpus", c.corpus);
    c.steps = integer(o, "steps", c.steps);
    c.globalBatch = integer(o, "global_batch", c.globalBatch);
    c.accumulate = integer(o, "accumulate", c.accumulate);
    bool ok = true;
    const QString seed = o.value(QLatin1String("seed")).toString(QStringLiteral("0"));
    c.seed = seed.toULongLong(&ok);
    if (!ok)
        throw std::invalid_argument("config field 'seed' is not an unsigned integer");
    const QJsonObject optimizer = o.value(QLatin1String("optimizer")).toObject();
    const std::string kind = text(optimizer, "kind", "sgd");
    if (kind != "sgd" && kind != "adam")
        throw std::invalid_argument("config field 'optimizer.kind' is '" + kind + "'");
    c.optimizer.kind = kind == "adam" ? OptimizerConfig::Kind::Adam : OptimizerConfig::Kind::Sgd;
    c.optimizer.lr = number(optimizer, "lr", c.optimizer.lr);
    c.optimizer.beta1 = number(optimizer, "beta1", c.optimizer.beta1);
    c.optimizer.beta2 = number(optimizer, "beta2", c.optimizer.beta2);
    c.optimizer.eps = number(optimizer, "eps", c.optimizer.eps);
    c.bucketBytes = integer(o, "bucket_bytes", c.bucketBytes);
    c.compression = parseCompression(text(o, "compress", "none"));
    c.compression.startStep = integer(o, "compress_start", c.compression.startStep);
    c.allReduce = text(o, "allreduce", "");
    c.maxStaleness = integer(o, "max_staleness", c.maxStaleness);
    for (const QJsonValue &v : o.value(QLatin1String("behaviour")).toArray()) {
        const QJsonObject b = v.toObject();
        NodeBehaviour nb;
        nb.slowdown = number(b, "slowdown", 1);
        nb.leaveAfter = integer(b, "leave_after", -1);
        nb.joinAfterMs = integer(b, "join_after_ms", 0);
        c.behaviour.push_back(nb);
    }
    for (const QJsonValue &v : o.value(QLatin1String("links")).toArray()) {
        const QJsonObject l = v.toObject();
        TrainConfig::Link link;
        link.a = int(integer(l, "a", 0));
        link.b = int(integer(l, "b", 1));
        link.limit.bitsPerSecond = number(l, "bits_per_s", 0);
        link.limit.latency = std::chrono::nanoseconds(integer(l, "latency_ns", 0));
        c.links.push_back(link);
    }
    c.placement = text(o, "placement", c.placement);
    c.microBatches = integer(o, "micro_batches", c.microBatches);
    c.mesh = text(o, "mesh", "");
    const std::string schedule = text(o, "schedule", "1f1b");
    c.schedule = schedule == "gpipe" ? PipelineSchedule::GPipe : PipelineSchedule::OneFOneB;
    c.testEvery = integer(o, "test_every", 0);
    const std::string backend = text(o, "backend", "ours");
    if (backend != "ours" && backend != "gloo")
        throw std::invalid_argument("config field 'backend' is '" + backend + "'");
    c.backend = backend == "gloo" ? TrainConfig::Backend::Gloo : TrainConfig::Backend::Ours;
    c.countBytes = true;
    return c;
}

std::string nodeRole(const std::string &strategy, int rank)
{
    if (strategy == "syncps" || strategy == "edp")
        return rank == 0 ? "server" : "worker";
    if (strategy == "pipeline")
        return "stage " + std::to_string(rank);
    if (strategy == "tensor")
        return "shard " + std::to_string(rank);
    return "worker";
}

SessionHeader sessionHeaderFor(const TrainConfig &c, const std::string &host)
{
    SessionHeader h;
    h.configJson = QJsonDocument(configToJson(c)).toJson(QJsonDocument::Compact);
    h.strategy = c.strategy;
    h.model = c.model.kind;
    h.nodes = c.nodes;
    h.steps = c.steps;
    for (int r = 0; r < c.nodes; ++r)
        h.nodeList.push_back(SessionNode{r, "node " + std::to_string(r), host, nodeRole(c.strategy, r)});
    h.startNs = net::monotonicNs();
    return h;
}

QJsonObject memoryToJson(const net::MemoryByCategory &m)
{
    return QJsonObject{{"params", double(m.params)},
                       {"grads", double(m.grads)},
                       {"optimizer", double(m.optimizer)},
                       {"activations", double(m.activations)},
                       {"comm", double(m.comm)},
                       {"live", double(m.live)},
                       {"peak", double(m.peak)}};
}

net::MemoryByCategory memoryFromJson(const QJsonObject &o)
{
    // From the network: a missing, negative or non-finite field reads as 0,
    // and none exceeds 2^53 bytes (what a double holds exactly).
    auto bytes = [&](const char *key) -> std::int64_t {
        const double v = o.value(QLatin1String(key)).toDouble();
        return std::isfinite(v) && v > 0 ? std::int64_t(std::min(v, 9007199254740992.0)) : 0;
    };
    net::MemoryByCategory m;
    m.params = bytes("params");
    m.grads = bytes("grads");
    m.optimizer = bytes("optimizer");
    m.activations = bytes("activations");
    m.comm = bytes("comm");
    m.live = bytes("live");
    m.peak = bytes("peak");
    return m;
}

} // namespace smol::engine
