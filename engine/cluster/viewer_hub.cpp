// ViewerHub: batches, budgets, a queue and a writer per viewer, and the
// predictions viewers send. The order of what a viewer gets is the order of
// the hub's calls: control messages that must follow the events before them
// (a pause, the run's end) first flush the pending batch.
#include "viewer_hub.h"

#include "admission.h"
#include "viewer_client.h" // LinkAggregate
#include "viewer_protocol.h"

#include "engine/session/event_stream.h"
#include "net/control_channel.h"
#include "net/trace.h"

#include <QJsonDocument>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <thread>

namespace smol::engine {

namespace {

using Clock = std::chrono::steady_clock;

// Events the run may pile up between two batches before the newest are
// counted rather than kept (a batch is sent every 100 ms; this is far more
// than a run makes in that time).
constexpr std::size_t kMaxPendingEvents = 200000;
constexpr std::size_t kMaxHistory = 100000; // cluster-wide metrics kept for viewers who arrive late

// The history full: each metric keeps every other sample of its own (its
// first stays), so a viewer who arrives an hour in still gets the whole
// run's curves, coarser in their older part, and the history stays bounded.
void thinHistory(std::vector<MetricSample> &history)
{
    std::map<std::string, std::size_t> seen;
    std::vector<MetricSample> kept;
    kept.reserve(history.size() / 2 + 64);
    for (MetricSample &m : history)
        if (seen[m.name]++ % 2 == 0)
            kept.push_back(std::move(m));
    history.swap(kept);
}
constexpr std::uint32_t kMaxViewerJson = 4096;
constexpr int kTiers = 4; // ViewerHub::encodeBatch
// A viewer's budget may be spent this far ahead (a token bucket's depth).
constexpr double kBurstSeconds = 0.5;

// A message encoded once, however many viewers it goes to.
struct Message {
    QByteArray json;
    QByteArray blob;
    std::size_t bytes = 0;
};

Message messageOf(const QJsonObject &json, const QByteArray &blob = {})
{
    const QByteArray body = QJsonDocument(json).toJson(QJsonDocument::Compact);
    return Message{body, blob, 16 + std::size_t(body.size()) + std::size_t(blob.size())};
}

std::vector<LinkAggregate> linkTotals(const std::vector<net::FrameEvent> &frames)
{
    std::map<std::pair<int, int>, LinkAggregate> by;
    for (const net::FrameEvent &f : frames) {
        if (f.side != net::FrameEvent::Side::Send)
            continue; // each frame once, by its sender
        LinkAggregate &l = by[{f.src, f.dst}];
        l.src = f.src;
        l.dst = f.dst;
        l.bytes += f.bytes;
        ++l.frames;
    }
    std::vector<LinkAggregate> out;
    for (auto &[key, l] : by)
        out.push_back(l);
    return out;
}

} // namespace

std::size_t ViewerHub::Encoded::wireBytes() const
{
    return 16 + std::size_t(QJsonDocument(json).toJson(QJsonDocument::Compact).size()) + std::size_t(blob.size());
}

// Tier 1: frames as per-link totals, memory at step ends only. Tier 2: and
// only step and pause spans. Tier 3: and per node only its newest step span,
// memory sample and metric of each name (the cluster-wide metrics, logs and
// tensors whole): a batch of a size set by the nodes, not the run's speed.
SessionEvents ViewerHub::thinned(const SessionEvents &events, int tier)
{
    SessionEvents kept;
    kept.logs = events.logs;
    kept.tensors = events.tensors;
    for (const SpanEvent &s : events.spans)
        if (tier < 2 || s.kind == SpanEvent::Kind::Step || s.kind == SpanEvent::Kind::Pause)
            kept.spans.push_back(s);
    for (const MemorySample &m : events.memory)
        if (m.collective == net::CollectiveKind::None)
            kept.memory.push_back(m);
    kept.metrics = events.metrics;
    if (tier < 3)
        return kept;
    // The newest of each (node, kind or name), in the order they came.
    auto newest = [](auto &list, auto key) {
        std::map<decltype(key(list.front())), std::size_t> last;
        for (std::size_t i = 0; i < list.size(); ++i)
            last[key(list[i])] = i;
        std::vector<std::remove_reference_t<decltype(list.front())>> out;
        for (std::size_t i = 0; i < list.size(); ++i)
            if (last[key(list[i])] == i)
                out.push_back(list[i]);
        list.swap(out);
    };
    if (!kept.spans.empty())
        newest(kept.spans, [](const SpanEvent &s) {
            return std::make_pair(s.node, s.kind == SpanEvent::Kind::Pause ? std::int64_t(-1 - s.startNs) : std::int64_t(0));
        });
    if (!kept.memory.empty())
        newest(kept.memory, [](const MemorySample &m) { return std::make_pair(m.node, int(m.stepPeak)); });
    std::vector<MetricSample> cluster, perNode;
    for (const MetricSample &m : kept.metrics)
        (m.node == -1 ? cluster : perNode).push_back(m);
    if (!perNode.empty())
        newest(perNode, [](const MetricSample &m) { return std::make_pair(m.node, m.name); });
    kept.metrics = std::move(cluster);
    kept.metrics.insert(kept.metrics.end(), perNode.begin(), perNode.end());
    return kept;
}

ViewerHub::Encoded ViewerHub::encodeBatch(const SessionEvents &events, int tier, std::int64_t t0, std::int64_t t1)
{
    SessionEvents kept;
    const SessionEvents *send = &events;
    if (tier > 0) {
        kept = thinned(events, tier);
        send = &kept;
    }
    QJsonObject json{{"type", "events"},
                     {"frames", double(send->frames.size())},
                     {"spans", double(send->spans.size())},
                     {"memory", double(send->memory.size())},
                     {"metrics", double(send->metrics.size())},
                     {"logs", double(send->logs.size())},
                     {"tensors", double(send->tensors.size())},
                     {"aggregated", tier > 0},
                     {"tier", tier},
                     {"t0", QString::number(t0)},
                     {"t1", QString::number(t1)}};
    if (tier > 0)
        json.insert("links", viewer::linksToJson(linkTotals(events.frames)));
    return Encoded{json, encodeEvents(*send)};
}

struct ViewerHub::Private {
    struct Viewer {
        int id = -1;
        std::string name, host;
        int node = -1;
        std::unique_ptr<net::ControlChannel> channel;
        std::thread reader, writer;
        std::mutex mutex;
        std::condition_variable cv;
        std::deque<Message> queue; // under mutex
        std::size_t queuedBytes = 0;
        bool dead = false;
        double credit = 0; // budget bytes it may still be sent (ticker only)
        std::atomic<std::uint64_t> sent{0};
        double predictTokens = viewer::kMaxPredictionsPerSecond; // reader only
        Clock::time_point lastPredict = Clock::now();
        int refusals = 0;
        std::string label() const { return "viewer " + std::to_string(id) + " '" + name + "' (" + host + ")"; }
    };

    std::function<void(const std::string &)> log;
    std::function<std::vector<ClusterNode>()> nodesNow;
    std::atomic<std::int64_t> budget{viewer::kDefaultBudgetBytesPerSecond};
    RefusalLog refusals{std::chrono::seconds(10)};

    mutable std::mutex mutex; // viewers, the state late viewers are given, pending, sinks
    std::list<std::shared_ptr<Viewer>> viewers;
    int nextId = 0;
    std::function<void(const Prediction &)> predictionSink;
    QJsonObject lastRun, lastLesson, lastEnd;
    QJsonArray lastNodes;
    bool held = false;
    std::vector<MetricSample> history;
    SessionEvents pending;
    std::uint64_t overflow = 0; // events not kept since the last batch
    std::int64_t batchStartNs = net::monotonicNs();

    std::mutex tickMutex; // one batch or control broadcast at a time: the viewers' order
    std::condition_variable wake;
    bool stopping = false; // under mutex
    std::thread ticker;

    template <class E> void append(std::vector<E> &to, const E &e)
    {
        std::lock_guard lock(mutex);
        if (pending.size() >= kMaxPendingEvents) {
            ++overflow;
            return;
        }
        to.push_back(e);
    }

    std::vector<std::shared_ptr<Viewer>> snapshot() const
    {
        std::lock_guard lock(mutex);
        return {viewers.begin(), viewers.end()};
    }

    // Ends a viewer's stream; `why` goes in the line (none: the hub's end).
    void drop(Viewer &v, const std::string &why, const char *verb = " dropped: ")
    {
        {
            std::lock_guard lock(v.mutex);
            if (v.dead)
                return;
            v.dead = true;
            v.queue.clear();
            v.queuedBytes = 0;
        }
        v.cv.notify_all();
        v.channel->close();
        if (!why.empty())
            log(v.label() + verb + why);
    }

    void enqueue(Viewer &v, const Message &m)
    {
        std::string why;
        {
            std::lock_guard lock(v.mutex);
            if (v.dead)
                return;
            if (v.queue.size() >= viewer::kMaxQueuedMessages || v.queuedBytes + m.bytes > viewer::kMaxQueuedBytes)
                why = std::to_string(v.queue.size()) + " messages (" + std::to_string(v.queuedBytes >> 10) +
                      " KiB) behind: it stopped reading, or its link is too slow for the stream";
            else {
                v.queue.push_back(m);
                v.queuedBytes += m.bytes;
            }
        }
        if (!why.empty())
            drop(v, why);
        else
            v.cv.notify_one();
    }

    void writeLoop(Viewer *v)
    {
        for (;;) {
            Message m;
            {
                std::unique_lock lock(v->mutex);
                v->cv.wait(lock, [&] { return v->dead || !v->queue.empty(); });
                if (v->dead)
                    return;
                m = std::move(v->queue.front());
                v->queue.pop_front();
                v->queuedBytes -= m.bytes;
            }
            try {
                v->channel->sendEncoded(m.json, m.blob, viewer::kStallTimeout);
                v->sent += m.bytes;
            } catch (const std::exception &e) {
                drop(*v, "stalled: its socket took nothing for " + std::to_string(viewer::kStallTimeout.count() / 1000) +
                             " s (" + e.what() + ")");
                return;
            }
        }
    }

    void readLoop(Viewer *v);
    bool acceptPrediction(Viewer &v, const net::ControlMessage &m, std::string &why);
    void tick();
    void sendBatch(const std::vector<std::shared_ptr<Viewer>> &to, const SessionEvents &batch, std::int64_t t0,
                   std::int64_t t1, double seconds);
    void broadcast(const QJsonObject &json, bool flushFirst);
    void reap();
};

void ViewerHub::Private::readLoop(Viewer *v)
{
    for (;;) {
        net::ControlMessage m;
        try {
            m = v->channel->receive();
        } catch (const std::exception &e) {
            // Closed on this side (a drop, or the writer's send that timed
            // out, which closes the channel before the writer says why):
            // the writer or the drop says it. Otherwise the viewer left.
            if (v->channel->isOpen())
                drop(*v, printableText(std::string(e.what()), 120), " left: ");
            return;
        }
        std::string why;
        if (acceptPrediction(*v, m, why))
            continue;
        const std::string line = refusals.refuse(v->host, "viewer " + std::to_string(v->id) + ": " + why, Clock::now());
        if (!line.empty())
            log(line);
        if (++v->refusals >= viewer::kMaxRefusals) {
            drop(*v, std::to_string(v->refusals) + " refused messages");
            return;
        }
    }
}

// A viewer's message: a prediction for the lesson step the teacher shows,
// with a finite value, at most kMaxPredictionsPerSecond a second.
bool ViewerHub::Private::acceptPrediction(Viewer &v, const net::ControlMessage &m, std::string &why)
{
    if (m.type() != "predict") {
        why = "a viewer may send only predictions, not '" + printableText(m.type(), 32) + "'";
        return false;
    }
    const auto now = Clock::now();
    v.predictTokens = std::min<double>(viewer::kMaxPredictionsPerSecond,
                                       v.predictTokens + viewer::kMaxPredictionsPerSecond *
                                                             std::chrono::duration<double>(now - v.lastPredict).count());
    v.lastPredict = now;
    if (v.predictTokens < 1) {
        why = "predictions faster than " + std::to_string(viewer::kMaxPredictionsPerSecond) + " a second";
        return false;
    }
    v.predictTokens -= 1;
    const QJsonValue step = m.json.value(QStringLiteral("step")), value = m.json.value(QStringLiteral("value"));
    const double s = step.toDouble(-1), x = value.toDouble(std::nan(""));
    if (!step.isDouble() || s != std::floor(s) || s < 0 || s >= viewer::kMaxLessonSteps) {
        why = "a prediction's step is not a lesson step";
        return false;
    }
    if (!value.isDouble() || !std::isfinite(x) || std::abs(x) > viewer::kMaxPredictionMagnitude) {
        why = "a prediction's value is not a finite number";
        return false;
    }
    std::function<void(const Prediction &)> sink;
    {
        std::lock_guard lock(mutex);
        const QJsonValue shown = lastLesson.value(QStringLiteral("index"));
        if (!shown.isDouble() || shown.toInt() != int(s)) {
            why = "a prediction for step " + std::to_string(int(s)) + ", which the lesson does not show";
            return false;
        }
        sink = predictionSink;
    }
    if (sink)
        sink(Prediction{v.id, v.name, v.host, v.node, int(s), x});
    return true;
}

void ViewerHub::Private::sendBatch(const std::vector<std::shared_ptr<Viewer>> &to, const SessionEvents &batch,
                                   std::int64_t t0, std::int64_t t1, double seconds)
{
    std::optional<Message> tiers[kTiers];
    auto tier = [&](int k) -> const Message & {
        if (!tiers[k]) {
            Encoded e = encodeBatch(batch, k, t0, t1);
            tiers[k] = messageOf(e.json, e.blob);
        }
        return *tiers[k];
    };
    const double perSecond = double(budget.load());
    for (const auto &v : to) {
        v->credit = std::min(perSecond * kBurstSeconds, v->credit + perSecond * seconds);
        int k = 0;
        while (k < kTiers - 1 && double(tier(k).bytes) > v->credit)
            ++k;
        const Message &m = tier(k);
        v->credit = std::max(-perSecond, v->credit - double(m.bytes));
        enqueue(*v, m);
    }
}

void ViewerHub::Private::reap()
{
    std::vector<std::shared_ptr<Viewer>> gone;
    {
        std::lock_guard lock(mutex);
        for (auto it = viewers.begin(); it != viewers.end();) {
            bool dead = false;
            {
                std::lock_guard vl((*it)->mutex);
                dead = (*it)->dead;
            }
            if (dead) {
                gone.push_back(*it);
                it = viewers.erase(it);
            } else
                ++it;
        }
    }
    for (const auto &v : gone) {
        v->reader.join();
        v->writer.join();
    }
}

// One batch: the nodes if they changed, then the events since the last.
void ViewerHub::Private::tick()
{
    std::lock_guard order(tickMutex);
    reap();
    const QJsonArray nodes = nodesNow ? viewer::nodesToJson(nodesNow()) : QJsonArray();
    SessionEvents batch;
    std::uint64_t lost = 0;
    std::int64_t t0 = 0;
    const std::int64_t t1 = net::monotonicNs();
    bool nodesChanged = false;
    {
        std::lock_guard lock(mutex);
        std::swap(batch, pending);
        std::swap(lost, overflow);
        t0 = batchStartNs;
        batchStartNs = t1;
        nodesChanged = nodes != lastNodes;
        if (nodesChanged)
            lastNodes = nodes;
    }
    if (lost)
        log("viewers: " + std::to_string(lost) + " events in 100 ms were more than a batch keeps; not sent");
    const auto to = snapshot();
    if (to.empty())
        return;
    if (nodesChanged) {
        const Message m = messageOf(QJsonObject{{"type", "nodes"}, {"nodes", nodes}});
        for (const auto &v : to)
            enqueue(*v, m);
    }
    if (batch.size() > 0)
        sendBatch(to, batch, t0, t1, double(t1 - t0) / 1e9);
}

// A control message to every viewer; `flushFirst`: after the events pending
// before it (a pause or the run's end follows what led to it).
void ViewerHub::Private::broadcast(const QJsonObject &json, bool flushFirst)
{
    std::lock_guard order(tickMutex);
    const auto to = snapshot();
    if (flushFirst) {
        SessionEvents batch;
        std::int64_t t0 = 0;
        const std::int64_t t1 = net::monotonicNs();
        {
            std::lock_guard lock(mutex);
            std::swap(batch, pending);
            t0 = batchStartNs;
            batchStartNs = t1;
        }
        if (!to.empty() && batch.size() > 0)
            sendBatch(to, batch, t0, t1, double(t1 - t0) / 1e9);
    }
    const Message m = messageOf(json);
    for (const auto &v : to)
        enqueue(*v, m);
}

ViewerHub::ViewerHub(std::function<void(const std::string &)> log, std::function<std::vector<ClusterNode>()> nodes)
    : d(std::make_unique<Private>())
{
    d->log = std::move(log);
    d->nodesNow = std::move(nodes);
    d->ticker = std::thread([this] {
        std::unique_lock lock(d->mutex);
        while (!d->stopping) {
            d->wake.wait_for(lock, viewer::kBatchInterval);
            if (d->stopping)
                break;
            lock.unlock();
            d->tick();
            lock.lock();
        }
    });
}

ViewerHub::~ViewerHub()
{
    {
        std::lock_guard lock(d->mutex);
        d->stopping = true;
    }
    d->wake.notify_all();
    d->ticker.join();
    for (const auto &v : d->snapshot())
        d->drop(*v, std::string());
    d->reap();
}

void ViewerHub::setBudget(std::int64_t bytesPerSecond)
{
    d->budget = std::max<std::int64_t>(1024, bytesPerSecond);
}

void ViewerHub::setPredictionSink(std::function<void(const Prediction &)> sink)
{
    std::lock_guard lock(d->mutex);
    d->predictionSink = std::move(sink);
}

bool ViewerHub::add(std::unique_ptr<net::ControlChannel> channel, const std::string &name, const std::string &host,
                    int node)
{
    auto v = std::make_shared<Private::Viewer>();
    v->name = printableText(name, kMaxNodeNameChars);
    v->host = host;
    v->node = node;
    v->channel = std::move(channel);
    v->channel->setReceiveLimits(kMaxViewerJson, 0);
    // A small kernel buffer: a viewer that stops reading backs up into its
    // queue within seconds, where it is seen and dropped (and 256 viewers
    // cost the kernel at most 256 x 2 x 32 KiB).
    v->channel->setKernelBuffer(/*send=*/true, 32 * 1024);
    v->credit = double(d->budget.load()) * kBurstSeconds;
    std::vector<Message> catchUp;
    {
        std::lock_guard order(d->tickMutex); // nothing broadcast between the catch-up and the stream
        std::lock_guard lock(d->mutex);
        if (d->stopping || int(d->viewers.size()) >= viewer::kMaxViewers) {
            v->channel->close();
            return false;
        }
        v->id = d->nextId++;
        catchUp.push_back(messageOf(QJsonObject{{"type", "viewer_welcome"},
                                                {"viewer", v->id},
                                                {"budget", double(d->budget.load())},
                                                {"batch_ms", int(viewer::kBatchInterval.count())}}));
        if (!d->lastRun.isEmpty())
            catchUp.push_back(messageOf(d->lastRun));
        if (!d->lastNodes.isEmpty())
            catchUp.push_back(messageOf(QJsonObject{{"type", "nodes"}, {"nodes", d->lastNodes}}));
        if (!d->lastLesson.isEmpty())
            catchUp.push_back(messageOf(d->lastLesson));
        if (d->held)
            catchUp.push_back(messageOf(QJsonObject{{"type", "pause"}, {"held", true}}));
        if (!d->history.empty()) {
            SessionEvents past;
            past.metrics = d->history;
            const Encoded e = encodeBatch(past, 0, d->history.front().tNs, d->history.back().tNs);
            catchUp.push_back(messageOf(e.json, e.blob));
        }
        if (!d->lastEnd.isEmpty())
            catchUp.push_back(messageOf(d->lastEnd));
        for (const Message &m : catchUp) {
            v->queue.push_back(m);
            v->queuedBytes += m.bytes;
        }
        d->viewers.push_back(v);
        Private::Viewer *raw = v.get();
        raw->writer = std::thread([this, raw] { d->writeLoop(raw); });
        raw->reader = std::thread([this, raw] { d->readLoop(raw); });
    }
    d->log(v->label() + " is watching" + (node >= 0 ? " (its machine is node " + std::to_string(node) + ")" : ""));
    return true;
}

int ViewerHub::count() const
{
    std::lock_guard lock(d->mutex);
    return int(d->viewers.size());
}

std::vector<std::pair<int, std::uint64_t>> ViewerHub::bytesSent() const
{
    std::vector<std::pair<int, std::uint64_t>> out;
    for (const auto &v : d->snapshot())
        out.emplace_back(v->id, v->sent.load());
    return out;
}

void ViewerHub::runStarted(const SessionHeader &header)
{
    const QJsonObject json{{"type", "run"}, {"header", viewer::headerToJson(header)}};
    {
        std::lock_guard lock(d->mutex);
        d->lastRun = json;
        d->lastEnd = QJsonObject();
        d->history.clear();
        d->held = false;
        d->pending.clear();
    }
    d->broadcast(json, false);
}

void ViewerHub::runEnded(bool ok, const std::string &summary)
{
    const QJsonObject json{{"type", "end"}, {"ok", ok}, {"summary", QString::fromStdString(summary)}};
    {
        std::lock_guard lock(d->mutex);
        d->lastEnd = json;
        d->held = false;
    }
    d->broadcast(json, true);
}

void ViewerHub::setHeld(bool held)
{
    {
        std::lock_guard lock(d->mutex);
        if (d->held == held)
            return;
        d->held = held;
    }
    d->broadcast(QJsonObject{{"type", "pause"}, {"held", held}}, true);
}

void ViewerHub::publishLesson(const QJsonObject &lesson)
{
    QJsonObject json = lesson;
    json.insert("type", "lesson");
    {
        std::lock_guard lock(d->mutex);
        d->lastLesson = lesson.isEmpty() ? QJsonObject() : json;
    }
    d->broadcast(json, false);
}

void ViewerHub::onFrame(const net::FrameEvent &e) { d->append(d->pending.frames, e); }
void ViewerHub::onSpan(const SpanEvent &s) { d->append(d->pending.spans, s); }
void ViewerHub::onMemory(const MemorySample &m) { d->append(d->pending.memory, m); }
void ViewerHub::onLog(const LogLine &l) { d->append(d->pending.logs, l); }
void ViewerHub::onTensor(const TensorRecord &t) { d->append(d->pending.tensors, t); }

void ViewerHub::onMetric(const MetricSample &m)
{
    d->append(d->pending.metrics, m);
    if (m.node == -1) {
        std::lock_guard lock(d->mutex);
        if (d->history.size() >= kMaxHistory)
            thinHistory(d->history);
        d->history.push_back(m);
    }
}

} // namespace smol::engine
