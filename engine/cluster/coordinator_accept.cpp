// The coordinator's door: an accept thread that admits a bounded number of
// handshakes at once (admission.h), each on its own short-lived thread: the
// token's HMAC handshake, then a hello whose fields are checked, then a
// welcome and a burst of pings for a first clock estimate. A refusal is a
// log line (at most one per address and reason class per 10 s, then a
// count), never an exception. Does not read a joined node's messages:
// coordinator_readers.cpp.
#include "coordinator_private.h"
#include "viewer_protocol.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>

namespace smol::engine {

void Coordinator::Private::acceptLoop()
{
    while (!stop) {
        reapHandshakes(/*all=*/false);
        pollfd p{listenFd, POLLIN, 0};
        if (::poll(&p, 1, 200) <= 0)
            continue;
        sockaddr_in peer{};
        socklen_t len = sizeof peer;
        const int fd = ::accept4(listenFd, reinterpret_cast<sockaddr *>(&peer), &len, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        char text[INET_ADDRSTRLEN] = {};
        ::inet_ntop(AF_INET, &peer.sin_addr, text, sizeof text);
        const std::string from = text;
        if (!gate.tryEnter(from)) {
            int closing = fd;
            net::sock::closeFd(closing);
            refuse(from, "too many handshakes in progress");
            continue;
        }
        Handshake &h = handshakes.emplace_back();
        h.thread = std::thread([this, fd, from, &h] {
            Conn *joined = admit(fd, from);
            gate.leave(from); // the gate bounds handshakes, not the nodes that passed one
            if (joined)
                greet(joined);
            h.done = true;
        });
    }
}

// Join finished handshakes (all: every one, waiting for them).
void Coordinator::Private::reapHandshakes(bool all)
{
    for (auto it = handshakes.begin(); it != handshakes.end();) {
        if (!all && !it->done) {
            ++it;
            continue;
        }
        it->thread.join();
        it = handshakes.erase(it);
    }
}

// One log line per address and reason class per 10 s (RefusalLog).
void Coordinator::Private::refuse(const std::string &from, const std::string &reason)
{
    const std::string line = refusals.refuse(from, reason, Clock::now());
    if (!line.empty())
        log(line);
}

// A hello's fields, each of the type it must have (one line otherwise).
void Coordinator::Private::checkHello(const net::ControlMessage &hello)
{
    if (hello.type() != "hello")
        throw std::runtime_error("expected hello, got '" + printableText(hello.type(), 32) + "'");
    auto optional = [&](const char *field, bool (QJsonValue::*is)() const, const char *what) {
        const QJsonValue v = hello.json.value(QLatin1String(field));
        if (!v.isUndefined() && !(v.*is)())
            throw std::runtime_error(std::string("hello's '") + field + "' is not " + what);
    };
    optional("name", &QJsonValue::isString, "a string");
    optional("host", &QJsonValue::isString, "a string");
    optional("pid", &QJsonValue::isDouble, "a number");
    optional("version", &QJsonValue::isDouble, "a number");
    optional("role", &QJsonValue::isString, "a string");
    optional("node", &QJsonValue::isDouble, "a number");
    const QString role = hello.json.value(QStringLiteral("role")).toString(QStringLiteral("node"));
    if (role != QLatin1String("node") && role != QLatin1String("viewer"))
        throw std::runtime_error("hello's role is neither node nor viewer");
    const QJsonValue advertise = hello.json.value(QStringLiteral("advertise"));
    if (!advertise.isUndefined() &&
        (!advertise.isString() || !net::sock::isPlausibleHost(advertise.toString().toStdString())))
        throw std::runtime_error("its advertised address is not a host name or IPv4 address");
}

// A hello is a few hundred bytes; a longer name is cut (kMaxNodeNameChars),
// not refused, up to this.
constexpr std::uint32_t kMaxHelloJsonBytes = 4u << 20;

// The handshake and hello; the node's connection when it joined.
Coordinator::Private::Conn *Coordinator::Private::admit(int fd, const std::string &from)
{
    int owned = fd;
    std::unique_ptr<net::ControlChannel> channel;
    bool watchToken = false;
    try {
        net::sock::tuneDataSocket(owned);
        channel = std::make_unique<net::ControlChannel>(owned);
        watchToken = net::ControlChannel::acceptHandshake(fd, options.token, options.watchToken,
                                                          std::chrono::seconds(5)) == 1;
    } catch (const std::exception &e) {
        refuse(from, e.what());
        return nullptr; // the channel's destructor closes the socket
    }
    net::ControlMessage hello;
    try {
        // The first message must be hello, within the handshake's time, and
        // without a blob: a token holder's handshake costs at most a few MB.
        channel->setReceiveLimits(kMaxHelloJsonBytes, 0);
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 5000) <= 0)
            throw std::runtime_error("no hello within 5 s");
        hello = channel->receive();
        checkHello(hello);
    } catch (const std::exception &e) {
        refuse(from, e.what());
        return nullptr;
    }
    if (admitViewer(channel, hello, watchToken, from))
        return nullptr;
    channel->setReceiveLimits(net::kMaxControlJsonBytes, net::kMaxControlBlobBytes); // a node's checkpoints
    Conn *c = nullptr;
    {
        std::lock_guard lock(mutex);
        if (stop)
            return nullptr;
        auto conn = std::make_unique<Conn>();
        conn->info.id = int(conns.size());
        conn->info.name =
            printableText(hello.json.value(QStringLiteral("name")).toString(), kMaxNodeNameChars)
                .toStdString();
        conn->info.host = from;
        conn->info.advertise = hello.json.value(QStringLiteral("advertise")).toString().toStdString();
        conn->coordinatorAddress = channel->localAddress();
        conn->info.pid = std::int64_t(hello.json.value(QStringLiteral("pid")).toDouble());
        if (conn->info.name.empty())
            conn->info.name = "node" + std::to_string(conn->info.id);
        conn->lastSeen = Clock::now();
        conn->channel = std::move(channel);
        c = conn.get();
        conns.push_back(std::move(conn));
        c->reader = std::thread([this, c] { readLoop(c); });
    }
    log("node " + std::to_string(c->info.id) + " '" + c->info.name + "' joined from " + from);
    return c;
}

bool Coordinator::Private::admitViewer(std::unique_ptr<net::ControlChannel> &channel,
                                       const net::ControlMessage &hello, bool watchToken, const std::string &from)
{
    const bool viewer = hello.json.value(QStringLiteral("role")).toString() == QLatin1String("viewer");
    if (!viewer && !watchToken)
        return false;
    auto sayNo = [&](const std::string &reason) {
        refuse(from, reason);
        try { // the peer prints why rather than "connection closed"
            channel->send(QJsonObject{{"type", "refused"}, {"reason", QString::fromStdString(reason)}}, {},
                          std::chrono::seconds(2));
        } catch (const std::exception &) {
        }
    };
    if (!viewer) {
        sayNo("the watch token may watch the run, not join it as a node");
        return true;
    }
    const std::string name = printableText(hello.json.value(QStringLiteral("name")).toString(), kMaxNodeNameChars)
                                 .toStdString();
    const double node = hello.json.value(QStringLiteral("node")).toDouble(-1);
    if (!viewers->add(std::move(channel), name.empty() ? "viewer" : name, from,
                      node >= 0 && node < 1e6 ? int(node) : -1))
        refuse(from, "the run has as many viewers as it takes (" + std::to_string(viewer::kMaxViewers) + ")");
    return true;
}

// Welcome a node that joined, with a burst of pings for a first clock estimate.
void Coordinator::Private::greet(Conn *c)
{
    try {
        c->channel->send(QJsonObject{{"type", "welcome"}, {"node", c->info.id}});
        for (int i = 0; i < 8 && !stop; ++i) { // a burst of pings for a first clock estimate
            ping(*c);
            std::this_thread::sleep_for(std::chrono::milliseconds(15));
        }
    } catch (const std::exception &e) {
        markLost(*c, std::string("control connection failed: ") + e.what());
    }
    changed.notify_all();
}

} // namespace smol::engine
