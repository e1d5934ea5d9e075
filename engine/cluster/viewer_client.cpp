// ViewerClient: the handshake and hello, then a reader thread that checks
// and decodes each message before its handler sees it.
#include "viewer_client.h"

#include "admission.h"
#include "viewer_protocol.h"

#include "engine/session/event_stream.h"
#include "net/control_channel.h"
#include "net/errors.h"

#include <QJsonDocument>

#include <atomic>
#include <cmath>
#include <mutex>
#include <thread>

namespace smol::engine {

namespace {

// What a coordinator may send a viewer: a batch's events are the largest.
constexpr std::uint32_t kMaxJson = 1u << 20;
constexpr std::uint64_t kMaxBlob = 64u << 20;

std::int64_t nsField(const QJsonObject &o, const char *key)
{
    bool ok = false;
    const std::int64_t v = o.value(QLatin1String(key)).toString().toLongLong(&ok);
    if (!ok)
        throw std::runtime_error(std::string("an events message without '") + key + "'");
    return v;
}

// A lesson step's text fields made printable; other fields as they are
// (numbers and flags; the panel checks what it uses).
QJsonObject printableLesson(const QJsonObject &in)
{
    QJsonObject out;
    for (auto it = in.begin(); it != in.end(); ++it) {
        if (it.key().size() > 64)
            continue;
        if (it.value().isString())
            out.insert(it.key(), printableText(it.value().toString(), 4000));
        else if (it.value().isDouble() || it.value().isBool())
            out.insert(it.key(), it.value());
    }
    return out;
}

} // namespace

struct ViewerClient::Private {
    ViewerClientOptions options;
    Handlers handlers;
    std::unique_ptr<net::ControlChannel> channel;
    std::thread reader;
    std::atomic<bool> closing{false};
    std::atomic<bool> open{true};
    std::atomic<bool> stopReading{false};
    std::atomic<std::uint64_t> received{0};
    int viewerId = -1;
    std::int64_t budget = 0;

    void dispatch(const net::ControlMessage &m);
    void readLoop();
    void handleEvents(const net::ControlMessage &m);
};

void ViewerClient::Private::handleEvents(const net::ControlMessage &m)
{
    ViewerBatch b;
    b.events = decodeEvents(m.blob);
    b.aggregated = m.json.value(QStringLiteral("aggregated")).toBool();
    if (b.aggregated)
        b.links = viewer::linksFromJson(m.json.value(QStringLiteral("links")).toArray());
    b.t0 = nsField(m.json, "t0");
    b.t1 = nsField(m.json, "t1");
    b.wireBytes = m.wireBytes;
    for (LogLine &l : b.events.logs)
        l.text = printableText(l.text, 2000);
    for (SpanEvent &s : b.events.spans)
        s.name = printableText(s.name, 200);
    for (MetricSample &s : b.events.metrics)
        s.name = printableText(s.name, 64);
    for (TensorRecord &t : b.events.tensors)
        t.name = printableText(t.name, 200);
    if (handlers.events)
        handlers.events(b);
}

void ViewerClient::Private::dispatch(const net::ControlMessage &m)
{
    const std::string type = m.type();
    if (type == "events") {
        handleEvents(m);
    } else if (type == "run") {
        const SessionHeader h = viewer::headerFromJson(m.json.value(QStringLiteral("header")).toObject());
        const QJsonObject config = QJsonDocument::fromJson(h.configJson).object();
        if (handlers.run)
            handlers.run(h, config);
    } else if (type == "nodes") {
        const QJsonValue nodes = m.json.value(QStringLiteral("nodes"));
        if (!nodes.isArray())
            throw std::runtime_error("a nodes message without a list");
        const std::vector<ViewerNode> list = viewer::nodesFromJson(nodes.toArray());
        if (handlers.nodes)
            handlers.nodes(list);
    } else if (type == "lesson") {
        if (handlers.lesson)
            handlers.lesson(printableLesson(m.json));
    } else if (type == "pause") {
        if (handlers.pause)
            handlers.pause(m.json.value(QStringLiteral("held")).toBool());
    } else if (type == "end") {
        if (handlers.end)
            handlers.end(m.json.value(QStringLiteral("ok")).toBool(),
                         printableText(m.json.value(QStringLiteral("summary")).toString().toStdString(), 2000));
    } else {
        throw std::runtime_error("the coordinator sent '" + printableText(type, 32) + "', which a viewer does not take");
    }
}

void ViewerClient::Private::readLoop()
{
    std::string why;
    try {
        for (;;) {
            while (stopReading && !closing)
                std::this_thread::sleep_for(std::chrono::milliseconds(50));
            if (closing)
                break;
            const net::ControlMessage m = channel->receive();
            received += m.wireBytes;
            dispatch(m);
        }
    } catch (const std::exception &e) {
        why = closing ? "closed" : printableText(std::string(e.what()), 300);
    }
    open = false;
    if (handlers.closed)
        handlers.closed(why.empty() ? "closed" : why);
}

ViewerClient::ViewerClient(const ViewerClientOptions &options, Handlers handlers)
    : d(std::make_unique<Private>())
{
    d->options = options;
    d->handlers = std::move(handlers);
    d->channel = net::ControlChannel::connect(options.host, options.port, options.token, options.timeout,
                                              options.receiveBuffer);
    d->channel->setReceiveLimits(kMaxJson, kMaxBlob);
    QJsonObject hello{{"type", "hello"}, {"role", "viewer"}, {"name", QString::fromStdString(options.name)}};
    if (options.node >= 0)
        hello.insert("node", options.node);
    d->channel->send(hello, {}, options.timeout);
    if (!d->channel->waitReadable(options.timeout))
        SMOL_THROW(net::NetError, "the coordinator did not welcome this viewer within " +
                            std::to_string(options.timeout.count() / 1000) + " s");
    const net::ControlMessage welcome = d->channel->receive();
    if (welcome.type() != "viewer_welcome") {
        const QString reason = welcome.json.value(QStringLiteral("reason")).toString();
        SMOL_THROW(net::NetError, "the coordinator refused this viewer: " +
                            printableText(reason.isEmpty() ? QString::fromStdString(welcome.type()) : reason, 200)
                                .toStdString());
    }
    d->viewerId = welcome.json.value(QStringLiteral("viewer")).toInt(-1);
    d->budget = std::int64_t(welcome.json.value(QStringLiteral("budget")).toDouble());
    d->reader = std::thread([this] { d->readLoop(); });
}

ViewerClient::~ViewerClient()
{
    close();
    if (d->reader.joinable())
        d->reader.join();
}

int ViewerClient::viewerId() const { return d->viewerId; }
std::int64_t ViewerClient::budgetBytesPerSecond() const { return d->budget; }

bool ViewerClient::sendPrediction(int step, double value)
{
    if (!d->open)
        return false;
    try {
        d->channel->send(QJsonObject{{"type", "predict"}, {"step", step}, {"value", value}}, {},
                         std::chrono::seconds(5));
        return true;
    } catch (const std::exception &) {
        return false;
    }
}

void ViewerClient::stopReading() { d->stopReading = true; }

void ViewerClient::close()
{
    d->closing = true;
    d->channel->close();
}

bool ViewerClient::isOpen() const { return d->open; }
std::uint64_t ViewerClient::bytesReceived() const { return d->received; }

} // namespace smol::engine
