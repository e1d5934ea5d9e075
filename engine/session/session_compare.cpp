// The figures of one run measured from its events (measureRun) and two runs
// set side by side (compareRuns). What each figure counts:
// docs/session-format.md §9; the command is session_compare_command.cpp.
#include "session_compare.h"
#include "span_time.h"

#include "session_reader.h"

#include "engine/strategies/strategy_registry.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace smol::engine {

namespace {

using spantime::contains;
using spantime::Interval;
using spantime::Intervals;
using spantime::merged;
using spantime::overlap;

std::optional<double> median(std::vector<double> v)
{
    if (v.empty())
        return std::nullopt;
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Nearest rank: the smallest value with at least 95 % of them at or below it.
std::optional<double> p95(std::vector<double> v)
{
    if (v.empty())
        return std::nullopt;
    std::sort(v.begin(), v.end());
    return v[std::size_t(std::ceil(0.95 * double(v.size()))) - 1];
}

// ---- configuration ----------------------------------------------------------

void flatten(const QJsonValue &v, const std::string &key, std::map<std::string, QJsonValue> &out)
{
    if (v.isObject()) {
        const QJsonObject o = v.toObject();
        for (auto it = o.begin(); it != o.end(); ++it)
            flatten(*it, key.empty() ? it.key().toStdString() : key + "." + it.key().toStdString(), out);
    } else if (v.isArray()) {
        const QJsonArray a = v.toArray();
        if (a.isEmpty())
            out.emplace(key, QJsonArray());
        for (int i = 0; i < a.size(); ++i)
            flatten(a[i], key + "[" + std::to_string(i) + "]", out);
    } else {
        out.emplace(key, v);
    }
}

std::map<std::string, QJsonValue> flatConfig(const SessionHeader &h)
{
    std::map<std::string, QJsonValue> c{{"strategy", QString::fromStdString(h.strategy)},
                                        {"model", QString::fromStdString(h.model)},
                                        {"nodes", h.nodes},
                                        {"steps", qint64(h.steps)}};
    // The header already says these; config_json repeats them.
    const std::set<std::string> repeated{"strategy", "nodes", "steps", "model.kind"};
    QJsonParseError error{};
    const QJsonDocument doc = QJsonDocument::fromJson(h.configJson, &error);
    if (!h.configJson.isEmpty() && error.error != QJsonParseError::NoError)
        c.emplace("config_json", QString::fromUtf8(h.configJson));
    std::map<std::string, QJsonValue> fromJson;
    flatten(doc.object(), {}, fromJson);
    for (auto &[key, value] : fromJson)
        if (!repeated.count(key))
            c.emplace(key, value);
    for (const SessionNode &n : h.nodeList) {
        const std::string node = "node[" + std::to_string(n.rank) + "].";
        c.emplace(node + "name", QString::fromStdString(n.name));
        c.emplace(node + "host", QString::fromStdString(n.host));
        c.emplace(node + "role", QString::fromStdString(n.role));
    }
    return c;
}

// ---- one node's spans --------------------------------------------------------

struct NodeSpans {
    Intervals steps, compute, waits; // merged once collected
    std::size_t stepCount = 0;
    // By step number: the step span and the start of its first optimizer span.
    std::map<std::int64_t, Interval> stepByNumber;
    std::map<std::int64_t, std::int64_t> optimizerStart;
};

bool isCompute(SpanEvent::Kind k)
{
    return k == SpanEvent::Kind::Forward || k == SpanEvent::Kind::Backward || k == SpanEvent::Kind::Optimizer;
}

// Not in compute spans between the first step's start and the last step's
// end; waits inside compute spans (ddp all-reduces inside backward) are idle.
std::optional<double> idleShare(const NodeSpans &s)
{
    const auto busy = spantime::busyTime(s.steps, s.compute, s.waits);
    if (!busy)
        return std::nullopt;
    return busy->idleShare();
}

// The share of each step (after the first, which also warms up) from its
// start to its optimizer spent waiting in collectives or pauses.
std::optional<double> bubbleOf(const NodeSpans &s)
{
    double sum = 0;
    int count = 0;
    for (const auto &[step, span] : s.stepByNumber) {
        if (step == s.stepByNumber.begin()->first && s.stepByNumber.size() > 1)
            continue;
        const auto opt = s.optimizerStart.find(step);
        const std::int64_t end = opt != s.optimizerStart.end() && opt->second > span.first
                                     ? std::min(opt->second, span.second)
                                     : span.second;
        if (end <= span.first)
            continue;
        sum += double(overlap(Intervals{{span.first, end}}, s.waits)) / double(end - span.first);
        ++count;
    }
    return count ? std::optional<double>(sum / count) : std::nullopt;
}

std::optional<double> latestMetric(const std::vector<MetricSample> &metrics, const char *name)
{
    const MetricSample *best = nullptr;
    for (const MetricSample &m : metrics) {
        if (m.name != name || !std::isfinite(m.value))
            continue;
        // Cluster-wide ones first, then the newest.
        if (!best || (m.node == -1) > (best->node == -1) ||
            ((m.node == -1) == (best->node == -1) && m.tNs >= best->tNs))
            best = &m;
    }
    return best ? std::optional<double>(best->value) : std::nullopt;
}

std::optional<double> ratioOf(std::optional<double> a, std::optional<double> b)
{
    if (!a || !b || *a == 0)
        return std::nullopt;
    return *b / *a;
}

// ---- measureRun's steps ------------------------------------------------------

std::set<int> headerRanks(const SessionHeader &header)
{
    std::set<int> ranks;
    for (int i = 0; i < header.nodes; ++i)
        ranks.insert(i);
    for (const SessionNode &n : header.nodeList)
        ranks.insert(n.rank);
    return ranks;
}

std::map<int, NodeSpans> collectSpans(const SessionEvents &events, std::set<int> &ranks,
                                      std::map<std::int64_t, Interval> &stepExtent)
{
    std::map<int, NodeSpans> spans;
    for (const SpanEvent &e : events.spans) {
        if (e.node < 0)
            continue;
        ranks.insert(e.node);
        NodeSpans &s = spans[e.node];
        if (e.kind == SpanEvent::Kind::Step) {
            s.steps.push_back({e.startNs, e.endNs});
            ++s.stepCount;
            s.stepByNumber[e.step] = {e.startNs, e.endNs};
            if (e.step >= 0) {
                auto [it, fresh] = stepExtent.emplace(e.step, Interval{e.startNs, e.endNs});
                if (!fresh)
                    it->second = {std::min(it->second.first, e.startNs), std::max(it->second.second, e.endNs)};
            }
        } else if (isCompute(e.kind)) {
            s.compute.push_back({e.startNs, e.endNs});
            if (e.kind == SpanEvent::Kind::Optimizer) {
                auto [it, fresh] = s.optimizerStart.emplace(e.step, e.startNs);
                if (!fresh)
                    it->second = std::min(it->second, e.startNs);
            }
        } else {
            s.waits.push_back({e.startNs, e.endNs});
        }
    }
    for (auto &[rank, s] : spans) {
        s.steps = merged(s.steps);
        s.compute = merged(s.compute);
        s.waits = merged(s.waits);
    }
    return spans;
}

// Steps: the distinct step numbers of the step spans (of the metrics when a
// run recorded no spans); their times, each step's extent over the nodes.
void measureSteps(const std::map<std::int64_t, Interval> &stepExtent, const SessionEvents &events, RunFigures &r)
{
    std::vector<double> stepTimes;
    std::set<std::int64_t> stepNumbers;
    for (const auto &[step, extent] : stepExtent) {
        stepTimes.push_back(double(extent.second - extent.first) / 1e9);
        stepNumbers.insert(step);
    }
    if (stepNumbers.empty())
        for (const MetricSample &m : events.metrics)
            if (m.step >= 0)
                stepNumbers.insert(m.step);
    r.steps = double(stepNumbers.size());
    r.stepTimeMedianS = median(stepTimes);
    r.stepTimeP95S = p95(stepTimes);
}

// Bytes: every send frame, and those that start inside the sender's steps;
// with them, each node's idle share.
void measureBytes(const SessionEvents &events, const std::map<int, NodeSpans> &spans, std::set<int> &ranks,
                  RunFigures &r)
{
    std::map<int, std::uint64_t> sent, sentInSteps;
    for (const net::FrameEvent &f : events.frames) {
        if (f.side != net::FrameEvent::Side::Send || f.src < 0)
            continue;
        ranks.insert(f.src);
        sent[f.src] += f.bytes;
        const auto s = spans.find(f.src);
        if (s != spans.end() && contains(s->second.steps, f.sendStartNs))
            sentInSteps[f.src] += f.bytes;
    }
    for (int rank : ranks) {
        NodeFigures &n = r.byNode[rank];
        n.bytesSent = double(sent[rank]);
        const auto s = spans.find(rank);
        if (s != spans.end() && s->second.stepCount > 0) {
            n.bytesSentPerStep = double(sentInSteps[rank]) / double(s->second.stepCount);
            n.idleShare = idleShare(s->second);
        } else if (*r.steps > 0) {
            n.bytesSentPerStep = double(sent[rank]) / *r.steps;
        }
    }
}

void measureMemory(const SessionEvents &events, RunFigures &r)
{
    for (const MemorySample &m : events.memory) {
        if (m.node < 0)
            continue;
        NodeFigures &n = r.byNode[m.node];
        auto raise = [](std::optional<double> &to, double v) { to = to ? std::max(*to, v) : v; };
        raise(n.params, double(m.memory.params));
        raise(n.grads, double(m.memory.grads));
        raise(n.optimizer, double(m.memory.optimizer));
        raise(n.activations, double(m.memory.activations));
        raise(n.comm, double(m.memory.comm));
        raise(n.peak, double(m.memory.peak));
        if (m.collective == net::CollectiveKind::None && !m.stepPeak)
            raise(n.heldAtStepEnd, double(m.memory.params + m.memory.grads + m.memory.optimizer));
    }
}

// The mean of the stages' bubbles; none when no stage has one.
std::optional<double> meanBubble(const std::map<int, NodeSpans> &spans)
{
    double sum = 0;
    int count = 0;
    for (const auto &[rank, s] : spans) {
        if (const auto b = bubbleOf(s)) {
            sum += *b;
            ++count;
        }
    }
    return count ? std::optional<double>(sum / count) : std::nullopt;
}

// Loss per step: the cluster-wide value, else the mean of the nodes'.
void measureLoss(const SessionEvents &events, RunFigures &r)
{
    std::map<std::int64_t, std::pair<double, int>> nodeLoss;
    for (const MetricSample &m : events.metrics) {
        if (m.name != "loss" || m.step < 0 || !std::isfinite(m.value))
            continue;
        if (m.node == -1) {
            r.lossByStep[m.step] = m.value;
        } else {
            auto &[sum, count] = nodeLoss[m.step];
            sum += m.value;
            ++count;
        }
    }
    for (const auto &[step, loss] : nodeLoss)
        r.lossByStep.emplace(step, loss.first / loss.second);
    r.finalLoss = latestMetric(events.metrics, "loss");
    r.testAccuracy = latestMetric(events.metrics, "test_accuracy");
    r.samplesPerS = latestMetric(events.metrics, "samples_per_s");
}

} // namespace

std::optional<double> ComparedFigure::ratio() const
{
    return ratioOf(a, b);
}

// The life of one measurement, in steps:
//   1. the run's ranks: the header's and any node that left an event;
//   2. each node's spans, merged, and each step's extent over the nodes;
//   3. steps and step times from those extents;
//   4. bytes: each node's send frames, and those inside its steps;
//   5. memory: the largest of each category over the node's samples;
//   6. the bubble, for a strategy whose stages wait for each other;
//   7. loss per step and the trainer's last metrics.
RunFigures measureRun(const SessionHeader &header, const SessionEvents &events)
{
    RunFigures r;
    r.strategy = header.strategy;
    r.model = header.model;
    r.nodes = header.nodes;
    r.stepsPlanned = header.steps;
    r.config = flatConfig(header);

    std::set<int> ranks = headerRanks(header);
    std::map<std::int64_t, Interval> stepExtent; // step number -> [earliest start, latest end] over nodes
    const std::map<int, NodeSpans> spans = collectSpans(events, ranks, stepExtent);
    measureSteps(stepExtent, events, r);
    measureBytes(events, spans, ranks, r);
    measureMemory(events, r);
    const StrategyDescription *strategy = describeStrategy(header.strategy);
    if (strategy && strategy->measuresBubble())
        r.bubble = meanBubble(spans);
    measureLoss(events, r);
    return r;
}

RunFigures measureRun(const SessionReader &reader)
{
    SessionEvents events;
    reader.forEachFrame([&](const net::FrameEvent &e) { events.frames.push_back(e); });
    reader.forEachSpanByStart([&](const SpanEvent &e) { events.spans.push_back(e); });
    reader.forEachMemory([&](const MemorySample &e) { events.memory.push_back(e); });
    reader.forEachMetric([&](const MetricSample &e) { events.metrics.push_back(e); });
    RunFigures r = measureRun(reader.header(), events);
    r.complete = reader.isComplete();
    return r;
}

namespace {

// Every configuration field that differs: the header's fields first (in the
// order a run is described), then config_json's, then the nodes'.
std::vector<SessionComparison::ConfigDifference> configDifferences(const RunFigures &a, const RunFigures &b)
{
    std::set<std::string> keys;
    for (const auto &[key, value] : a.config)
        keys.insert(key);
    for (const auto &[key, value] : b.config)
        keys.insert(key);
    std::vector<std::string> ordered(keys.begin(), keys.end());
    auto rank = [](const std::string &key) {
        static const std::vector<std::string> header{"strategy", "model", "nodes", "steps"};
        const auto it = std::find(header.begin(), header.end(), key);
        if (it != header.end())
            return int(it - header.begin());
        return key.rfind("node[", 0) == 0 ? 6 : 5;
    };
    std::stable_sort(ordered.begin(), ordered.end(),
                     [&](const std::string &x, const std::string &y) { return rank(x) < rank(y); });
    std::vector<SessionComparison::ConfigDifference> out;
    for (const std::string &key : ordered) {
        const auto ia = a.config.find(key), ib = b.config.find(key);
        const QJsonValue va = ia != a.config.end() ? ia->second : QJsonValue(QJsonValue::Undefined);
        const QJsonValue vb = ib != b.config.end() ? ib->second : QJsonValue(QJsonValue::Undefined);
        if (va != vb)
            out.push_back({key, va, vb});
    }
    return out;
}

// The figure table's compare rows of one scope; rank: the node's (Node scope).
std::vector<ComparedRow> comparedRows(FigureScope scope, const RunFigures &a, const RunFigures &b, int rank = -1)
{
    std::vector<ComparedRow> rows;
    for (const Figure &f : figureTable())
        if (f.compareKey && f.scope == scope)
            rows.push_back({f.compareKey, f.label, f.unit, {f.of(a, rank), f.of(b, rank)}});
    return rows;
}

std::optional<SessionComparison::LossDifference> largestLossDifference(const RunFigures &a, const RunFigures &b)
{
    std::optional<SessionComparison::LossDifference> out;
    for (const auto &[step, lossA] : a.lossByStep) {
        const auto ib = b.lossByStep.find(step);
        if (ib == b.lossByStep.end())
            continue;
        if (!out)
            out = SessionComparison::LossDifference{};
        auto &d = *out;
        ++d.commonSteps;
        const double diff = std::abs(ib->second - lossA);
        if (d.step < 0 || diff > d.largest) {
            d.largest = diff;
            d.step = step;
        }
    }
    return out;
}

} // namespace

SessionComparison compareRuns(const RunFigures &a, const RunFigures &b)
{
    SessionComparison c;
    c.configDifferences = configDifferences(a, b);
    c.run = comparedRows(FigureScope::Run, a, b);
    std::set<int> ranks;
    for (const auto &[rank, n] : a.byNode)
        ranks.insert(rank);
    for (const auto &[rank, n] : b.byNode)
        ranks.insert(rank);
    for (int rank : ranks)
        c.nodes.push_back({rank, comparedRows(FigureScope::Node, a, b, rank)});
    c.lossDifference = largestLossDifference(a, b);
    return c;
}

} // namespace smol::engine
