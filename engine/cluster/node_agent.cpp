// A cluster node's agent (node_agent.h): joins the coordinator, then obeys
// its control connection. The control loop answers pings, hands `assign` to
// a new epoch thread (node_epoch.cpp) and the epoch's set-up messages,
// collective answers and rendezvous replies to whoever waits for them
// (node_remote_calls.cpp), and ends the epoch on `abort`, the agent on
// `kill` or `shutdown`. A heartbeat thread beats and sends the trace batches
// (frame events, spans and memory samples since the last batch).
#include "node_agent_private.h"

#include "admission.h"
#include "config_json.h"
#include "state_blob.h"

#include "net/errors.h"

#include <QHostInfo>

#include <algorithm>

#include <unistd.h>

namespace smol::engine {

namespace node {

namespace {

// The training data and vocabulary size, shared by the agents of one process
// (the window's local nodes are threads of it): 64 local nodes each reading
// their own copy of Fashion-MNIST spent some 20 s in page faults and file
// copies before the first step. Held weakly: it lives while an agent keeps it.
std::pair<std::shared_ptr<const DataSource>, std::int64_t> sharedTrainingData(const std::string &key,
                                                                            TrainConfig &config)
{
    static std::mutex mutex;
    static std::map<std::string, std::pair<std::weak_ptr<const DataSource>, std::int64_t>> shared;
    std::lock_guard lock(mutex); // the first agent loads, the others wait for its copy
    auto &[weak, vocab] = shared[key];
    if (std::shared_ptr<const DataSource> data = weak.lock()) {
        config.model.vocabSize = vocab;
        return {data, vocab};
    }
    std::shared_ptr<const DataSource> data = loadTrainingData(config);
    weak = data;
    vocab = config.model.vocabSize;
    return {data, vocab};
}

constexpr std::chrono::milliseconds kJoinRetries{3000}; // how long a refused join is tried again

} // namespace

int Agent::run()
{
    m_channel = connectToCoordinator();
    std::string name = m_opts.name;
    if (name.empty())
        name = QHostInfo::localHostName().toStdString() + "-" + std::to_string(::getpid());
    QJsonObject hello{{"type", "hello"},
                      {"name", QString::fromStdString(name)},
                      {"host", QHostInfo::localHostName()},
                      {"pid", double(::getpid())},
                      {"version", 1}};
    if (!m_opts.advertise.empty())
        hello.insert("advertise", QString::fromStdString(m_opts.advertise));
    m_channel->send(hello);
    m_heartbeat = std::thread([this] { heartbeatLoop(); });
    int code = 1;
    try {
        code = controlLoop();
    } catch (const std::exception &e) {
        log(std::string("coordinator connection ended: ") + e.what());
        code = 1;
    }
    abortEpoch(-1);
    m_stop = true;
    m_stopCv.notify_all();
    m_channel->close();
    if (m_heartbeat.joinable())
        m_heartbeat.join();
    if (m_epochThread.joinable())
        m_epochThread.join();
    m_finishedTransport.reset();
    return code;
}

// A busy coordinator (its handshakes in progress at their limit, or a
// port not yet open) closes or refuses at once: try again for a few
// seconds. A wrong token is not retried.
std::unique_ptr<net::ControlChannel> Agent::connectToCoordinator()
{
    const auto giveUp = std::chrono::steady_clock::now() +
                        std::min<std::chrono::milliseconds>(m_opts.connectTimeout, kJoinRetries);
    std::chrono::milliseconds pause{50};
    for (;;) {
        try {
            return net::ControlChannel::connect(m_opts.host, m_opts.port, m_opts.token,
                                                m_opts.connectTimeout);
        } catch (const net::AuthError &) {
            throw;
        } catch (const net::NetError &) {
            if (std::chrono::steady_clock::now() + pause >= giveUp)
                throw;
        }
        std::this_thread::sleep_for(pause);
        pause = std::min(pause * 2, std::chrono::milliseconds(1000));
    }
}

// Printed here and sent up to the coordinator's log.
void Agent::log(const std::string &text)
{
    if (m_log)
        m_log(text);
    if (m_channel && m_channel->isOpen())
        sendQuietly(QJsonObject{{"type", "log"}, {"text", QString::fromStdString(text)}});
}

// Sends that may fail because the coordinator vanished: the control loop
// notices that on its own, so the epoch thread just carries on.
void Agent::sendQuietly(const QJsonObject &json, const QByteArray &blob)
{
    try {
        m_channel->send(json, blob);
    } catch (const std::exception &) {
    }
}

int Agent::controlLoop()
{
    for (;;) {
        net::ControlMessage m = m_channel->receive();
        const std::string type = m.type();
        const int epoch = m.json.value(QStringLiteral("epoch")).toInt();
        if (type == "ping") {
            m_channel->send(QJsonObject{{"type", "pong"},
                                        {"t0", m.json.value(QStringLiteral("t0"))},
                                        {"tn", QString::number(net::monotonicNs())}});
        } else if (type == "welcome") {
            const int node = m.json.value(QStringLiteral("node")).toInt(-1);
            log("joined the coordinator at " + m_opts.host + ":" + std::to_string(m_opts.port) + " as node " +
                std::to_string(node));
            if (m_opts.joined && node >= 0)
                m_opts.joined(node);
        } else if (type == "assign") {
            startEpoch(m);
        } else if (type == "peers") {
            std::lock_guard lock(m_mutex);
            if (epoch == m_epoch) {
                std::vector<std::pair<std::string, std::uint16_t>> peers;
                for (const QJsonValue &v : m.json.value(QStringLiteral("peers")).toArray()) {
                    const QJsonObject p = v.toObject();
                    peers.emplace_back(p.value(QStringLiteral("host")).toString().toStdString(),
                                       std::uint16_t(p.value(QStringLiteral("port")).toInt()));
                }
                m_peers = peers;
                m_cv.notify_all();
            }
        } else if (type == "start") {
            std::lock_guard lock(m_mutex);
            if (epoch == m_epoch) {
                m_started = true;
                m_cv.notify_all();
            }
        } else if (type == "coll_go" || type == "coll_hold") {
            std::lock_guard lock(m_mutex);
            if (epoch == m_epoch) {
                const std::uint64_t id = m.json.value(QStringLiteral("call")).toString().toULongLong();
                m_replies[id] = CallReply{type, m.json.value(QStringLiteral("stepped")).toBool(), m.blob};
                m_cv.notify_all();
            }
        } else if (type == "hold_waits") { // a pause holds the cluster: no receive times out meanwhile
            std::lock_guard lock(m_mutex);
            if (epoch == m_epoch && m_transport)
                m_transport->holdWaits(m.json.value(QStringLiteral("held")).toBool());
        } else if (type == "store_reply") {
            std::lock_guard lock(m_mutex);
            if (epoch == m_epoch) {
                const std::uint64_t id = m.json.value(QStringLiteral("call")).toString().toULongLong();
                m_storeReplies[id] = std::move(m);
                m_cv.notify_all();
            }
        } else if (type == "abort") {
            abortEpoch(epoch);
        } else if (type == "kill") {
            if (!m_opts.inProcess)
                std::_Exit(137); // as abrupt as kill -9: no goodbye on any socket
            if (m_log)
                m_log("killed by the coordinator");
            m_channel->close(); // like a dead process: not another word, not even "failed"
            return 1;
        } else if (type == "shutdown") {
            return 0;
        } else if (type == "refused") { // the coordinator's reason, said once before it closes
            SMOL_THROW(net::AuthError, "the coordinator refused this node: " +
                                 printableText(m.json.value(QStringLiteral("reason")).toString().toStdString(), 200));
        } else {
            log("ignoring an unknown control message '" + type + "'");
        }
    }
}

void Agent::startEpoch(const net::ControlMessage &m)
{
    Assignment a;
    a.epoch = m.json.value(QStringLiteral("epoch")).toInt();
    a.rank = m.json.value(QStringLiteral("rank")).toInt();
    a.world = m.json.value(QStringLiteral("world")).toInt();
    a.firstStep = std::int64_t(m.json.value(QStringLiteral("first_step")).toDouble());
    a.diskEvery = std::int64_t(m.json.value(QStringLiteral("checkpoint_every")).toDouble());
    a.recoveryEvery = std::int64_t(m.json.value(QStringLiteral("recovery_every")).toDouble(1));
    a.keepEvery = std::max<std::int64_t>(0, std::int64_t(m.json.value(QStringLiteral("keep_every")).toDouble()));
    a.keepInterval = std::chrono::milliseconds(
        std::clamp<std::int64_t>(std::int64_t(m.json.value(QStringLiteral("keep_ms")).toDouble(10000)), 0, 86400000));
    a.remoteBreakpoints = m.json.value(QStringLiteral("breakpoints")).toBool();
    a.record = m.json.value(QStringLiteral("record")).toBool();
    a.glooBind = m.json.value(QStringLiteral("gloo_bind")).toString().toStdString();
    if (m_epochThread.joinable()) { // a previous epoch still running is over
        abortEpoch(-1);
        m_epochThread.join();
    }
    {
        std::lock_guard lock(m_mutex);
        m_finishedTransport.reset();
    }
    try {
        a.config = configFromJson(m.json.value(QStringLiteral("config")).toObject());
        if (!m.blob.isEmpty())
            a.initial = unpackState(m.blob, m.json.value(QStringLiteral("moments")).toBool());
    } catch (const std::exception &e) {
        sendQuietly(
            QJsonObject{{"type", "failed"}, {"epoch", a.epoch}, {"error", e.what()}, {"ckpt_steps", -1}});
        return;
    }
    {
        std::lock_guard lock(m_mutex);
        m_epoch = a.epoch;
        m_rank = a.rank;
        m_spans = QJsonArray();
        m_memory = QJsonArray();
        m_aborted = false;
        m_started = false;
        m_peers.reset();
    }
    m_epochThread = std::thread([this, a = std::move(a)]() mutable { epochMain(std::move(a)); });
}

void Agent::abortEpoch(int epoch)
{
    std::lock_guard lock(m_mutex);
    if (epoch >= 0 && epoch != m_epoch)
        return;
    m_aborted = true;
    if (m_transport)
        m_transport->abort();
    m_cv.notify_all();
}

void Agent::heartbeatLoop()
{
    auto nextBeat = std::chrono::steady_clock::now();
    while (!m_stop) {
        {
            std::unique_lock lock(m_stopMutex);
            m_stopCv.wait_for(lock, std::chrono::milliseconds(100), [&] { return bool(m_stop); });
        }
        if (m_stop)
            break;
        flushTrace();
        if (std::chrono::steady_clock::now() >= nextBeat) {
            nextBeat += m_opts.heartbeatInterval;
            sendQuietly(QJsonObject{{"type", "hb"}, {"tn", QString::number(net::monotonicNs())}});
        }
    }
}

// Frames (packed, in the blob) and spans (JSON) since the last batch.
void Agent::flushTrace()
{
    QByteArray batch;
    QJsonArray spans;
    int epoch = 0;
    int rank = -1;
    QJsonArray memory;
    {
        std::lock_guard lock(m_mutex);
        if (!m_telemetry)
            return;
        batch = m_telemetry->take();
        spans.swap(m_spans);
        memory.swap(m_memory);
        epoch = m_epoch;
        rank = m_rank;
    }
    if (!batch.isEmpty() || !spans.isEmpty() || !memory.isEmpty())
        sendQuietly(
            QJsonObject{
                {"type", "trace"}, {"epoch", epoch}, {"rank", rank}, {"spans", spans}, {"memory", memory}},
            batch);
}

// [t, step, collective, seq, before, params, grads, optimizer,
// activations, comm, live, peak]; 64-bit values as text.
void Agent::addMemory(const MemorySnapshot &m)
{
    const net::MemoryByCategory &b = m.memory;
    const QJsonArray a{QString::number(net::monotonicNs()),
                       double(m.step),
                       int(m.kind),
                       QString::number(m.seq),
                       m.before,
                       QString::number(b.params),
                       QString::number(b.grads),
                       QString::number(b.optimizer),
                       QString::number(b.activations),
                       QString::number(b.comm),
                       QString::number(b.live),
                       QString::number(b.peak)};
    std::lock_guard lock(m_mutex);
    m_memory.append(a);
}

void Agent::addSpan(const SpanEvent &s)
{
    const QJsonArray a{int(s.kind),
                       QString::fromStdString(s.name),
                       QString::number(s.startNs),
                       QString::number(s.endNs),
                       double(s.step),
                       int(s.collective),
                       QString::number(s.seq),
                       double(s.bytes)};
    std::lock_guard lock(m_mutex);
    m_spans.append(a);
}

std::shared_ptr<const DataSource> Agent::dataFor(TrainConfig &config)
{
    const std::string key = config.model.kind + "|" + std::to_string(config.seed) + "|" + config.corpus +
                            "|" + std::to_string(config.model.blockSize);
    auto it = m_data.find(key);
    if (it == m_data.end())
        it = m_data.emplace(key, sharedTrainingData(key, config)).first;
    config.model.vocabSize = it->second.second;
    return it->second.first;
}

// Until `pred` holds (under m_mutex), the coordinator aborts the epoch, or 60 s.
void Agent::waitFor(const std::function<bool()> &pred, const char *what)
{
    std::unique_lock lock(m_mutex);
    if (!m_cv.wait_for(lock, std::chrono::seconds(60), [&] { return m_aborted || pred(); }))
        throw std::runtime_error(std::string("timed out waiting for ") + what);
    if (m_aborted)
        throw std::runtime_error("aborted by the coordinator");
}

} // namespace node

int runNodeAgent(const NodeAgentOptions &options, const std::function<void(const std::string &)> &log)
{
    node::Agent agent(options, log);
    return agent.run();
}

} // namespace smol::engine
