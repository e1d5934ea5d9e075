#include "node_agent.h"

#include "config_json.h"
#include "state_blob.h"
#include "telemetry.h"

#include "engine/blas_threads.h"
#include "engine/breakpoints.h"
#include "engine/gloo_communicator.h"
#include "engine/hook_chain.h"
#include "engine/memory_tracker.h"
#include "engine/span_hook.h"
#include "engine/trainer.h"
#include "net/communicator.h"
#include "net/control_channel.h"
#include "net/errors.h"
#include "net/tcp_transport.h"
#include "net/trace.h"

#include <QHostAddress>
#include <QHostInfo>
#include <QJsonArray>
#include <QNetworkInterface>

#include <condition_variable>
#include <cstring>
#include <map>
#include <numeric>
#include <mutex>
#include <optional>
#include <thread>
#include <unistd.h>

namespace smol::engine {

namespace {

constexpr std::chrono::milliseconds kJoinRetries{3000}; // how long a refused join is tried again

QJsonObject memoryJson(const NodeMemory &m)
{
    return QJsonObject{{"params", double(m.params)}, {"grads", double(m.grads)},
                       {"optimizer", double(m.optimizer)}, {"activations", double(m.activations)},
                       {"comm", double(m.comm)}, {"live", double(m.live)}, {"peak", double(m.peak)}};
}

QJsonArray intArray(const std::vector<std::int64_t> &v)
{
    QJsonArray a;
    for (auto x : v)
        a.append(double(x));
    return a;
}

struct Assignment {
    int epoch = 0;
    int rank = 0;
    int world = 1;
    TrainConfig config;
    std::int64_t firstStep = 0;
    std::int64_t diskEvery = 0;     // rank 0 sends a checkpoint every K steps
    std::int64_t recoveryEvery = 1; // keep the full parameters every K steps
    bool remoteBreakpoints = false; // ask the coordinator at every collective
    bool record = false;            // send collective and pause spans
    std::string glooBind;           // --backend gloo: where this node's Gloo device binds
    TrainingState initial; // parameters and moments to start from (undefined: the seed's)
};

class Agent;

// Pause at collectives when the coordinator holds the breakpoints: every
// collective asks the coordinator's BreakpointController (through a proxy
// thread there) whether to hold; only a held node ships its buffer, and gets
// it back with the user's edits. docs/runtime.md, "Pausing node processes".
class RemoteHook : public net::CollectiveHook {
public:
    RemoteHook(Agent &agent, int epoch, const std::atomic<std::int64_t> *step)
        : m_agent(agent), m_epoch(epoch), m_step(step) {}
    void before(const net::CollectiveInfo &info) override;
    void after(const net::CollectiveInfo &info) override;

private:
    Agent &m_agent;
    int m_epoch;
    const std::atomic<std::int64_t> *m_step;
};

// `--backend gloo`: the epoch's rendezvous, kept by the coordinator and
// reached over this node's authenticated control connection.
class ControlRendezvous : public RendezvousClient {
public:
    ControlRendezvous(Agent &agent, int epoch)
        : m_agent(agent)
        , m_epoch(epoch)
    {
    }
    void set(const std::string &key, const std::vector<std::uint8_t> &value) override;
    std::vector<std::uint8_t> get(const std::string &key, std::chrono::milliseconds timeout) override;
    std::int64_t add(const std::string &key, std::int64_t delta) override;
    bool check(const std::vector<std::string> &keys) override;
    void wait(const std::vector<std::string> &keys, std::chrono::milliseconds timeout) override;
    bool deleteKey(const std::string &key) override;
    std::int64_t numKeys() override;

private:
    Agent &m_agent;
    int m_epoch;
};

thread_local std::uint64_t t_steppedCall = 0; // the call whose result goes up in after()

QJsonObject infoJson(const net::CollectiveInfo &info)
{
    QJsonArray shape;
    for (int d = 0; d < info.buffer.shape.ndim; ++d)
        shape.append(double(info.buffer.shape.dims[std::size_t(d)]));
    return QJsonObject{{"kind", int(info.kind)},
                       {"seq", QString::number(info.seq)},
                       {"name", QString::fromStdString(info.name)},
                       {"rank", info.rank},
                       {"world", info.worldSize},
                       {"peer", info.peer},
                       {"dtype", int(info.buffer.dtype)},
                       {"count", double(info.buffer.count)},
                       {"receiving", info.receiving},
                       {"shape", shape}};
}

class Agent {
public:
    Agent(const NodeAgentOptions &options, const std::function<void(const std::string &)> &log)
        : m_opts(options), m_log(log) {}

    int run()
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
    std::unique_ptr<net::ControlChannel> connectToCoordinator()
    {
        const auto giveUp =
            std::chrono::steady_clock::now() + std::min<std::chrono::milliseconds>(m_opts.connectTimeout, kJoinRetries);
        std::chrono::milliseconds pause{50};
        for (;;) {
            try {
                return net::ControlChannel::connect(m_opts.host, m_opts.port, m_opts.token, m_opts.connectTimeout);
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

    struct CallReply {
        std::string type;
        bool stepped = false;
        QByteArray blob;
    };

    // A collective RPC: send, then wait for the coordinator's answer (or the
    // epoch's end, which throws so the collective fails like a lost peer).
    CallReply call(std::uint64_t id, const QJsonObject &json, const QByteArray &blob = {})
    {
        {
            std::lock_guard lock(m_mutex);
            m_replies.erase(id);
        }
        m_channel->send(json, blob);
        std::unique_lock lock(m_mutex);
        m_cv.wait(lock, [&] { return m_aborted || m_replies.count(id); });
        if (m_aborted)
            throw std::runtime_error("aborted by the coordinator while paused");
        CallReply r = std::move(m_replies[id]);
        m_replies.erase(id);
        return r;
    }

    void remoteBefore(int epoch, std::int64_t step, const net::CollectiveInfo &info)
    {
        t_steppedCall = 0;
        std::uint64_t id = 0;
        {
            std::lock_guard lock(m_mutex);
            id = m_nextCall++;
        }
        QJsonObject json = infoJson(info);
        json.insert("type", "coll");
        json.insert("epoch", epoch);
        json.insert("call", QString::number(id));
        json.insert("caller", QString::number(callerKey()));
        json.insert("step", double(step));
        CallReply r = call(id, json);
        if (r.type == "coll_hold") {
            noteHeldAtCollective();
            const QByteArray buffer(info.buffer.bytePtr(), qsizetype(info.buffer.bytes()));
            QJsonArray gathered; // what this node holds in full right now (zero3)
            for (const std::string &p : gatheredParamsNow())
                gathered.append(QString::fromStdString(p));
            r = call(id, QJsonObject{{"type", "coll_buffer"}, {"epoch", epoch}, {"call", QString::number(id)},
                                     {"caller", QString::number(callerKey())}, {"gathered", gathered}},
                     buffer);
            if (r.blob.size() == qsizetype(info.buffer.bytes()) && !r.blob.isEmpty())
                std::memcpy(info.buffer.data, r.blob.constData(), std::size_t(r.blob.size())); // the user's edits
        }
        if (r.stepped)
            t_steppedCall = id;
    }

    void remoteAfter(int epoch, std::int64_t step, const net::CollectiveInfo &info)
    {
        if (t_steppedCall == 0)
            return;
        QJsonObject json = infoJson(info);
        json.insert("type", "coll_after");
        json.insert("epoch", epoch);
        json.insert("call", QString::number(t_steppedCall));
        json.insert("caller", QString::number(callerKey()));
        json.insert("step", double(step));
        t_steppedCall = 0;
        m_channel->send(json, QByteArray(info.buffer.bytePtr(), qsizetype(info.buffer.bytes())));
    }

    // One rendezvous operation on the coordinator's board for this epoch
    // (rendezvous_board.h); throws on a refusal, the timeout or an abort.
    net::ControlMessage storeCall(int epoch, const QString &op, const std::vector<std::string> &keys,
                                  const QByteArray &blob, std::int64_t delta,
                                  std::chrono::milliseconds timeout)
    {
        std::uint64_t id = 0;
        {
            std::lock_guard lock(m_mutex);
            id = m_nextCall++;
        }
        QJsonArray k;
        for (const std::string &key : keys)
            k.append(QString::fromStdString(key));
        m_channel->send(QJsonObject{{"type", "store"},
                                    {"epoch", epoch},
                                    {"call", QString::number(id)},
                                    {"op", op},
                                    {"keys", k},
                                    {"delta", double(delta)}},
                        blob);
        std::unique_lock lock(m_mutex);
        const auto until = std::chrono::steady_clock::now() +
                           (timeout.count() > 0 ? timeout : std::chrono::milliseconds(std::chrono::hours(1)));
        if (!m_cv.wait_until(lock, until, [&] { return m_aborted || m_storeReplies.count(id); }))
            throw std::runtime_error("gloo rendezvous: no answer to '" + op.toStdString() + "' within " +
                                     std::to_string(timeout.count() / 1000) + " s");
        if (m_aborted)
            throw std::runtime_error("aborted by the coordinator");
        net::ControlMessage r = std::move(m_storeReplies[id]);
        m_storeReplies.erase(id);
        if (!r.json.value(QStringLiteral("ok")).toBool())
            throw std::runtime_error("gloo rendezvous: the coordinator refused '" + op.toStdString() +
                                     "': " + r.json.value(QStringLiteral("error")).toString().toStdString());
        return r;
    }

    std::string controlLocalAddress() const { return m_channel->localAddress(); }

private:
    static std::uint64_t callerKey() { return std::hash<std::thread::id>{}(std::this_thread::get_id()); }

    // Printed here and sent up to the coordinator's log.
    void log(const std::string &text)
    {
        if (m_log)
            m_log(text);
        if (m_channel && m_channel->isOpen())
            sendQuietly(QJsonObject{{"type", "log"}, {"text", QString::fromStdString(text)}});
    }

    // Sends that may fail because the coordinator vanished: the control loop
    // notices that on its own, so the epoch thread just carries on.
    void sendQuietly(const QJsonObject &json, const QByteArray &blob = {})
    {
        try {
            m_channel->send(json, blob);
        } catch (const std::exception &) {
        }
    }

    int controlLoop()
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
                log("joined the coordinator at " + m_opts.host + ":" + std::to_string(m_opts.port) + " as node " +
                    std::to_string(m.json.value(QStringLiteral("node")).toInt()));
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
            } else {
                log("ignoring an unknown control message '" + type + "'");
            }
        }
    }

    void startEpoch(const net::ControlMessage &m)
    {
        Assignment a;
        a.epoch = m.json.value(QStringLiteral("epoch")).toInt();
        a.rank = m.json.value(QStringLiteral("rank")).toInt();
        a.world = m.json.value(QStringLiteral("world")).toInt();
        a.firstStep = std::int64_t(m.json.value(QStringLiteral("first_step")).toDouble());
        a.diskEvery = std::int64_t(m.json.value(QStringLiteral("checkpoint_every")).toDouble());
        a.recoveryEvery = std::int64_t(m.json.value(QStringLiteral("recovery_every")).toDouble(1));
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
            sendQuietly(QJsonObject{{"type", "failed"}, {"epoch", a.epoch}, {"error", e.what()},
                                    {"ckpt_steps", -1}});
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

    void abortEpoch(int epoch)
    {
        std::lock_guard lock(m_mutex);
        if (epoch >= 0 && epoch != m_epoch)
            return;
        m_aborted = true;
        if (m_transport)
            m_transport->abort();
        m_cv.notify_all();
    }

    // Dial a lower rank at the address the coordinator gave for it. A
    // failure names the address and where it came from: the usual cause
    // across machines is a node that cannot be reached at the address it
    // was seen at (several interfaces, NAT), fixed with --advertise.
    void connectToPeer(net::TcpTransport &transport, int peer, const std::pair<std::string, std::uint16_t> &address)
    {
        try {
            transport.connectTo(peer, address.first, address.second);
        } catch (const net::NetError &e) {
            throw std::runtime_error(std::string(e.what()) + " (rank " + std::to_string(peer) +
                                     "'s data-plane address " + address.first + ":" +
                                     std::to_string(address.second) +
                                     ", as the coordinator gave it; if that node cannot be reached there, start it "
                                     "with --advertise ADDR, or give the coordinator --advertise ADDR for its own "
                                     "nodes; docs/runtime.md)");
        }
    }

    void heartbeatLoop()
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
    void flushTrace()
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
            sendQuietly(QJsonObject{{"type", "trace"}, {"epoch", epoch}, {"rank", rank}, {"spans", spans},
                                    {"memory", memory}},
                        batch);
    }

    // [t, step, collective, seq, before, params, grads, optimizer,
    // activations, comm, live, peak]; 64-bit values as text.
    void addMemory(const MemorySnapshot &m)
    {
        const NodeMemory &b = m.memory;
        const QJsonArray a{QString::number(net::monotonicNs()), double(m.step), int(m.kind), QString::number(m.seq),
                           m.before, QString::number(b.params), QString::number(b.grads),
                           QString::number(b.optimizer), QString::number(b.activations), QString::number(b.comm),
                           QString::number(b.live), QString::number(b.peak)};
        std::lock_guard lock(m_mutex);
        m_memory.append(a);
    }

    void addSpan(const SpanEvent &s)
    {
        const QJsonArray a{int(s.kind), QString::fromStdString(s.name), QString::number(s.startNs),
                           QString::number(s.endNs), double(s.step), int(s.collective), QString::number(s.seq),
                           double(s.bytes)};
        std::lock_guard lock(m_mutex);
        m_spans.append(a);
    }

    std::shared_ptr<const DataSource> dataFor(TrainConfig &config)
    {
        const std::string key = config.model.kind + "|" + std::to_string(config.seed) + "|" + config.corpus + "|" +
                                std::to_string(config.model.blockSize);
        auto it = m_data.find(key);
        if (it == m_data.end())
            it = m_data.emplace(key, std::make_pair(loadTrainingData(config), config.model.vocabSize)).first;
        config.model.vocabSize = it->second.second;
        return it->second.first;
    }

    template <typename Pred>
    void waitFor(Pred pred, const char *what)
    {
        std::unique_lock lock(m_mutex);
        if (!m_cv.wait_for(lock, std::chrono::seconds(60), [&] { return m_aborted || pred(); }))
            throw std::runtime_error(std::string("timed out waiting for ") + what);
        if (m_aborted)
            throw std::runtime_error("aborted by the coordinator");
    }

    void epochMain(Assignment a)
    {
        std::unique_ptr<net::TcpTransport> transport;
        // A 1-node world still gets a transport and a communicator (its
        // collectives return at once), so no strategy ever runs without one.
        std::vector<std::unique_ptr<net::Transport>> alone;
        TelemetryBuffer telemetry;
        TrainingState ckpt = a.initial;
        std::int64_t ckptSteps = a.firstStep;
        QJsonObject outcome;
        QByteArray outcomeBlob;
        try {
            TrainConfig config = a.config;
            config.model.seed = config.seed;
            config.nodes = a.world;
            memory::install();
            torch::set_num_threads(1);
            limitBlasToOneThread();
            const std::shared_ptr<const DataSource> data = dataFor(config);
            memory::resetNode(m_opts.memorySlot);
            std::uint16_t port = 0;
            // Gloo brings its own data plane: no transport of ours, no port.
            const bool gloo = config.backend == TrainConfig::Backend::Gloo && a.world > 1;
            if (a.world > 1 && !gloo) {
                net::TransportOptions topt;
                topt.bindAddress = m_opts.bindAddress;
                transport = std::make_unique<net::TcpTransport>(a.rank, a.world, m_opts.token, topt);
                for (const TrainConfig::Link &l : config.links) {
                    if (l.a == a.rank && l.b < a.world)
                        transport->setLinkLimit(l.b, l.limit);
                    if (l.b == a.rank && l.a < a.world)
                        transport->setLinkLimit(l.a, l.limit);
                }
                transport->setTraceSink(&telemetry);
                port = transport->listenPort();
            } else if (!gloo) {
                alone = net::makeLocalMesh(net::TransportKind::Inproc, 1, m_opts.token);
            }
            {
                std::lock_guard lock(m_mutex);
                if (m_aborted)
                    throw std::runtime_error("aborted by the coordinator");
                m_transport = transport ? static_cast<net::Transport *>(transport.get())
                                        : (alone.empty() ? nullptr : alone.front().get());
                m_telemetry = &telemetry;
            }
            m_channel->send(QJsonObject{{"type", "listening"}, {"epoch", a.epoch}, {"port", int(port)}});
            if (transport) {
                waitFor([&] { return m_peers.has_value(); }, "the peer list");
                std::vector<std::pair<std::string, std::uint16_t>> peers;
                {
                    std::lock_guard lock(m_mutex);
                    peers = *m_peers;
                }
                if (int(peers.size()) != a.world)
                    throw std::runtime_error("the peer list has " + std::to_string(peers.size()) + " entries for " +
                                             std::to_string(a.world) + " ranks");
                for (int j = 0; j < a.rank; ++j)
                    connectToPeer(*transport, j, peers[std::size_t(j)]);
                transport->waitForPeers(std::chrono::seconds(30));
            }
            std::unique_ptr<GlooStore> glooStore;
            std::unique_ptr<GlooCommunicator> glooComm;
            if (gloo) {
                // Every member is past `listening`: meet in this epoch's store
                // and connect Gloo's pairs. The device binds to one address:
                // --bind if given, else the one the coordinator assigned.
                waitFor([&] { return m_peers.has_value(); }, "the peer list");
                // Gloo binds where it advertises: an address the coordinator
                // saw through NAT is not one of ours, so then the interface
                // this node reaches the coordinator on.
                std::string bind = m_opts.bindAddress != "0.0.0.0" ? m_opts.bindAddress : a.glooBind;
                if (bind.empty() || bind == "0.0.0.0" ||
                    (bind != m_opts.bindAddress &&
                     !QNetworkInterface::allAddresses().contains(QHostAddress(QString::fromStdString(bind)))))
                    bind = controlLocalAddress();
                glooStore = std::make_unique<GlooStore>(std::make_shared<ControlRendezvous>(*this, a.epoch));
                glooComm = std::make_unique<GlooCommunicator>(*glooStore, a.rank, a.world, bind);
                glooComm->setTraceSink(&telemetry); // one event per collective (gloo_communicator.h)
            }
            m_channel->send(QJsonObject{{"type", "ready"}, {"epoch", a.epoch}});
            waitFor([&] { return m_started; }, "the start signal");

            std::unique_ptr<net::Communicator> comm;
            std::atomic<std::int64_t> currentStep{a.firstStep};
            std::unique_ptr<net::CollectiveHook> breakHook;
            std::unique_ptr<net::CollectiveHook> memoryHook;
            HookChain hooks; // memory first: a pause's last sample is the state it holds
            std::unique_ptr<SpanHook> spanHook;
            {
                if (glooComm)
                    comm = std::move(glooComm);
                else
                    comm = std::make_unique<net::Communicator>(
                        transport ? static_cast<net::Transport &>(*transport) : *alone.front());
                if (a.record) { // memory by category at every collective boundary, in the trace batches
                    memoryHook = makeMemoryHook(m_opts.memorySlot, &currentStep,
                                                [this](const MemorySnapshot &m) { addMemory(m); });
                    hooks.add(memoryHook.get());
                }
                if (a.remoteBreakpoints) {
                    breakHook = std::make_unique<RemoteHook>(*this, a.epoch, &currentStep);
                    hooks.add(breakHook.get());
                }
                if (a.record) {
                    spanHook = std::make_unique<SpanHook>(a.rank, &currentStep, hooks.empty() ? nullptr : &hooks,
                                                          [this](const SpanEvent &s) { addSpan(s); });
                    comm->setHook(spanHook.get());
                } else if (!hooks.empty()) {
                    comm->setHook(&hooks);
                }
            }
            const bool lockStep = !makeStrategy(config.strategy)->isAsynchronous();
            NodeRun run;
            run.rank = a.rank;
            run.memorySlot = m_opts.memorySlot;
            run.comm = comm.get();
            run.data = data;
            run.currentStep = &currentStep;
            run.firstStep = a.firstStep;
            if (a.record)
                run.onSpan = [this](const SpanEvent &s) { addSpan(s); };
            run.onTestLoss = [&](std::int64_t k, double loss) {
                m_channel->send(QJsonObject{{"type", "test_loss"}, {"epoch", a.epoch}, {"step", double(k)},
                                            {"loss", loss}});
            };
            run.initialParams = a.initial.params;
            run.initialMoments = a.initial.moments;
            // The in-memory checkpoint the cluster re-forms from when a node is
            // lost (every step: at most the interrupted step is redone), and
            // the disk checkpoints, which rank 0 sends from the same gather.
            std::int64_t every = 0;
            if (lockStep && a.world > 1 && a.recoveryEvery > 0)
                every = a.recoveryEvery;
            if (a.diskEvery > 0)
                every = every > 0 ? std::gcd(every, a.diskEvery) : a.diskEvery;
            run.checkpointEvery = every;
            // Bytes sent inside steps (the strategy's traffic), not the
            // recovery and held-out-loss gathers the runtime adds between them.
            std::uint64_t bytesInSteps = 0, bytesMark = 0;
            run.onStep = [&](std::int64_t k, double loss, const NodeMemory &mem) {
                const std::uint64_t sentNow = telemetry.bytesSent();
                bytesInSteps += sentNow - std::min(bytesMark, sentNow);
                bytesMark = sentNow;
                {
                    // A strategy that sends nothing (single, a 1-node world)
                    // learns of an abort here, at its step boundary.
                    std::lock_guard lock(m_mutex);
                    if (m_aborted)
                        throw std::runtime_error("aborted by the coordinator");
                }
                m_channel->send(QJsonObject{{"type", "step"},
                                            {"epoch", a.epoch},
                                            {"rank", a.rank},
                                            {"step", double(k)},
                                            {"loss", loss},
                                            {"t", QString::number(net::monotonicNs())},
                                            {"memory", memoryJson(mem)}});
            };
            run.onCheckpoint = [&](std::int64_t stepsDone, const torch::Tensor &params,
                                   const OptimizerMoments &moments) {
                bytesMark = telemetry.bytesSent();
                if (a.recoveryEvery > 0 && stepsDone % a.recoveryEvery == 0) {
                    memory::NodeScope uncharged(-1); // the runtime's copy, not the training's memory
                    ckpt.params = params.clone();
                    ckpt.moments = moments.defined() ? OptimizerMoments{moments.exp.clone(), moments.expSq.clone()}
                                                     : OptimizerMoments{};
                    ckptSteps = stepsDone;
                }
                if (a.diskEvery > 0 && a.rank == 0 && stepsDone % a.diskEvery == 0)
                    m_channel->send(QJsonObject{{"type", "checkpoint"}, {"epoch", a.epoch},
                                                {"steps_done", double(stepsDone)}, {"moments", moments.defined()}},
                                    packState({params, moments}));
            };
            NodeResult result = runNode(config, run);
            if (result.momentsRestarted && a.rank == 0)
                log("Adam's moments restart at step " + std::to_string(a.firstStep) +
                    " (no optimizer state to continue from)");
            QJsonObject stats;
            for (const auto &[key, value] : result.stats)
                stats.insert(QString::fromStdString(key), value);
            outcome = QJsonObject{{"type", "done"},
                                  {"epoch", a.epoch},
                                  {"rank", a.rank},
                                  {"seconds", result.seconds},
                                  {"bytes_sent", double(telemetry.bytesSent())},
                                  {"bytes_in_steps", double(bytesInSteps)},
                                  {"memory", memoryJson(result.memory)},
                                  {"peak", double(memory::usage(m_opts.memorySlot).peak)},
                                  {"stats", stats}};
            if (result.async.updates > 0)
                outcome.insert("async", QJsonObject{{"updates", double(result.async.updates)},
                                                    {"max_staleness", double(result.async.maxStaleness)},
                                                    {"pushes", intArray(result.async.pushes)},
                                                    {"discarded", intArray(result.async.discarded)},
                                                    {"waits", intArray(result.async.waits)},
                                                    {"joined_at", intArray(result.async.joinedAt)},
                                                    {"lost", intArray(result.async.lost)},
                                                    {"histogram", intArray(result.async.stalenessHistogram)}});
            if (a.rank == 0)
                outcomeBlob = packState({result.finalParams, {}});
        } catch (const std::exception &e) {
            bool aborted = false; // told to stop, so not this node's own failure
            {
                std::lock_guard lock(m_mutex);
                aborted = m_aborted;
            }
            log("epoch " + std::to_string(a.epoch) + " (rank " + std::to_string(a.rank) + ") ended: " + e.what());
            outcome = QJsonObject{{"type", "failed"},
                                  {"epoch", a.epoch},
                                  {"rank", a.rank},
                                  {"aborted", aborted},
                                  {"error", e.what()},
                                  {"ckpt_steps", double(ckptSteps)},
                                  {"moments", ckpt.moments.defined()}};
            outcomeBlob = packState(ckpt);
        }
        {
            std::lock_guard lock(m_mutex);
            m_transport = nullptr;
            m_telemetry = nullptr;
        }
        if (transport)
            transport->setTraceSink(nullptr);
        const QByteArray tail = telemetry.take();
        QJsonArray spans, memory;
        {
            std::lock_guard lock(m_mutex);
            spans.swap(m_spans);
            memory.swap(m_memory);
        }
        if (!tail.isEmpty() || !spans.isEmpty() || !memory.isEmpty())
            sendQuietly(QJsonObject{{"type", "trace"}, {"epoch", a.epoch}, {"rank", a.rank}, {"spans", spans},
                                    {"memory", memory}},
                        tail);
        // Report first, then close the data plane: a failure's own reason
        // reaches the coordinator before its peers' "connection closed".
        sendQuietly(outcome, outcomeBlob);
        if (outcome.value(QStringLiteral("type")).toString() == QLatin1String("done")) {
            // Peers may still be finishing their last collective (a ring's
            // last frames): a closed link would fail them. The links stay up
            // until the coordinator, having every node's result, moves on.
            std::lock_guard lock(m_mutex);
            m_finishedTransport = std::move(transport);
        }
        transport.reset();
    }

    const NodeAgentOptions m_opts;
    std::function<void(const std::string &)> m_log;
    std::unique_ptr<net::ControlChannel> m_channel;
    std::thread m_heartbeat;
    std::thread m_epochThread;
    std::atomic<bool> m_stop{false};
    std::mutex m_stopMutex;
    std::condition_variable m_stopCv;
    std::map<std::string, std::pair<std::shared_ptr<const DataSource>, std::int64_t>> m_data;

    std::mutex m_mutex; // guards everything below
    std::condition_variable m_cv;
    int m_epoch = 0;
    int m_rank = -1;
    QJsonArray m_spans; // collective and pause spans since the last trace batch
    QJsonArray m_memory; // memory samples at collective boundaries since the last trace batch
    bool m_aborted = false;
    bool m_started = false;
    std::optional<std::vector<std::pair<std::string, std::uint16_t>>> m_peers;
    std::map<std::uint64_t, CallReply> m_replies; // collective RPC answers, by call id
    std::map<std::uint64_t, net::ControlMessage> m_storeReplies; // rendezvous answers, by call id
    std::uint64_t m_nextCall = 1;
    net::Transport *m_transport = nullptr;
    TelemetryBuffer *m_telemetry = nullptr;
    std::unique_ptr<net::TcpTransport> m_finishedTransport; // the last epoch's, kept open (see epochMain)
};

constexpr std::chrono::milliseconds kStoreCallTimeout{30000}; // set, add, check: answered at once

void ControlRendezvous::set(const std::string &key, const std::vector<std::uint8_t> &value)
{
    m_agent.storeCall(m_epoch, "set", {key},
                      QByteArray(reinterpret_cast<const char *>(value.data()), qsizetype(value.size())), 0,
                      kStoreCallTimeout);
}

std::vector<std::uint8_t> ControlRendezvous::get(const std::string &key, std::chrono::milliseconds timeout)
{
    const net::ControlMessage r = m_agent.storeCall(m_epoch, "get", {key}, {}, 0, timeout);
    return std::vector<std::uint8_t>(r.blob.begin(), r.blob.end());
}

std::int64_t ControlRendezvous::add(const std::string &key, std::int64_t delta)
{
    return std::int64_t(m_agent.storeCall(m_epoch, "add", {key}, {}, delta, kStoreCallTimeout)
                            .json.value("value")
                            .toDouble());
}

bool ControlRendezvous::check(const std::vector<std::string> &keys)
{
    return m_agent.storeCall(m_epoch, "check", keys, {}, 0, kStoreCallTimeout).json.value("value").toBool();
}

void ControlRendezvous::wait(const std::vector<std::string> &keys, std::chrono::milliseconds timeout)
{
    m_agent.storeCall(m_epoch, "wait", keys, {}, 0, timeout);
}

bool ControlRendezvous::deleteKey(const std::string &key)
{
    return m_agent.storeCall(m_epoch, "delete", {key}, {}, 0, kStoreCallTimeout).json.value("value").toBool();
}

std::int64_t ControlRendezvous::numKeys()
{
    return std::int64_t(
        m_agent.storeCall(m_epoch, "num", {}, {}, 0, kStoreCallTimeout).json.value("value").toDouble());
}

void RemoteHook::before(const net::CollectiveInfo &info)
{
    m_agent.remoteBefore(m_epoch, m_step ? m_step->load() : 0, info);
}

void RemoteHook::after(const net::CollectiveInfo &info)
{
    m_agent.remoteAfter(m_epoch, m_step ? m_step->load() : 0, info);
}

} // namespace

int runNodeAgent(const NodeAgentOptions &options, const std::function<void(const std::string &)> &log)
{
    Agent agent(options, log);
    return agent.run();
}

} // namespace smol::engine
