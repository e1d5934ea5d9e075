#include "cluster_commands.h"

#include "coordinator.h"
#include "node_agent.h"

#include "engine/memory_tracker.h"
#include "net/errors.h"
#include "net/socket_util.h"
#include "net/trace.h"

#include <QHostInfo>
#include <QNetworkInterface>
#include <QRandomGenerator>

#include <cmath>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace smol::engine {

const char kClusterTrainUsage[] = R"(
Cluster runtime (a coordinator and nodes over authenticated TCP):
  --listen PORT       be the coordinator of a cluster: accept nodes on PORT
                      (0.0.0.0; 0 = any free port) that join with
                      `smolctl node --join HOST:PORT --token T`
  --token T           the cluster's shared secret (default: the
                      SMOLCLUSTER_TOKEN environment variable; required with
                      --listen). Never sent over the wire.
  --wait-nodes N      nodes that must join before training starts (default
                      --nodes); training uses the first --nodes of them
  --local-nodes K     also run K nodes as threads of this process (default 0
                      with --listen, else --nodes); 0 to 64
  --advertise ADDR    the address other machines dial to reach this
                      process's own nodes (default: the address each of
                      them reaches the coordinator at); for a multi-homed
                      or NAT'd coordinator (docs/runtime.md)
  --wait-timeout SEC  give up when the nodes have not joined (default 120)
  --heartbeat-timeout SEC
                      a node silent this long is lost (default 5)
  --rejoin-timeout SEC
                      when every node is lost, wait this long for nodes to
                      join again and resume with them (default 120)
  --checkpoint-every K --checkpoint-dir D
                      write the parameters every K steps to
                      D/checkpoint.smolckpt (written to a temporary file and
                      renamed: a crash never leaves half a file)
  --resume D          start from the checkpoint in D (at its step; the
                      strategy and node count may differ)
  --recovery-every K  nodes keep the parameters in memory every K steps to
                      re-form from after losing a node (default 1: at most
                      the interrupted step is redone; sharded strategies pay
                      an all-gather for it; 0: re-form from the start)
  --keep-every K      the coordinator keeps the newest full state, sent by
                      rank 0 every K steps or 10 s, whichever comes first,
                      to resume from when every node is lost (default 100;
                      0: keep none)
  --keep-budget MB    memory for that state (default 256); a larger state is
                      kept in a temporary directory instead
  --viewers N         stream the run to viewers (`smolctl watch`, a
                      student's smolcluster --watch/--join) on the same
                      port, and wait for N of them (0: none) before training
  --watch-token W     viewers may also use this token, which may watch but
                      never join as a node (differs from --token)
  --viewer-budget B   bytes a second each viewer is sent at most (default
                      256K; K and M suffixes); over it, per-link totals
                      stand in for single packets
  A lost node (killed, crashed, silent) does not end the run: edp trains on
  without it; the lock-step strategies re-form with the survivors (and any
  node that joined meanwhile) from the last step every node completed.
  When every node is lost the run waits --rejoin-timeout for nodes to join
  and resumes from the state the coordinator kept (edp: its server's).
)";

namespace {

bool waitForViewers(const Coordinator &c, int n, std::chrono::milliseconds timeout)
{
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (c.viewerCount() < n) {
        if (std::chrono::steady_clock::now() > deadline)
            return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return true;
}

bool seconds(const QString &v, std::chrono::milliseconds &out)
{
    bool ok = false;
    const double s = v.toDouble(&ok);
    if (!ok || !std::isfinite(s) || s <= 0 || s > 86400)
        return false;
    out = std::chrono::milliseconds(std::int64_t(s * 1000));
    return true;
}

std::string freshToken()
{
    return QString::number(QRandomGenerator::system()->generate64(), 16).toStdString() +
           QString::number(QRandomGenerator::system()->generate64(), 16).toStdString();
}

// The address other machines would use to reach this one.
QString reachableAddress()
{
    for (const QHostAddress &a : QNetworkInterface::allAddresses())
        if (a.protocol() == QAbstractSocket::IPv4Protocol && !a.isLoopback())
            return a.toString();
    return QStringLiteral("127.0.0.1");
}

} // namespace

bool parseClusterOption(const QStringList &args, int &i, ClusterCliOptions &o, QString &error)
{
    static const QStringList names{"--listen",       "--token",          "--wait-nodes",     "--advertise",
                                   "--local-nodes",  "--wait-timeout",   "--heartbeat-timeout", "--rejoin-timeout",
                                   "--checkpoint-every", "--checkpoint-dir", "--resume", "--recovery-every",
                                   "--keep-every", "--keep-budget",
                                   "--viewers", "--watch-token", "--viewer-budget"};
    const QString a = args[i];
    if (!names.contains(a))
        return false;
    if (i + 1 >= args.size()) {
        error = "'" + a + "' needs a value";
        return true;
    }
    const QString v = args[++i];
    bool ok = true;
    if (a == "--listen") {
        const int port = v.toInt(&ok);
        ok = ok && port >= 0 && port <= 65535;
        o.listen = true;
        o.listenPort = std::uint16_t(port);
    } else if (a == "--token") {
        ok = !v.isEmpty();
        o.token = v.toStdString();
    } else if (a == "--advertise") {
        o.advertise = v.toStdString();
        ok = net::sock::isPlausibleHost(o.advertise);
    } else if (a == "--wait-nodes") {
        o.waitNodes = v.toInt(&ok);
        ok = ok && o.waitNodes >= 1 && o.waitNodes <= kMaxClusterNodes;
    } else if (a == "--local-nodes") {
        o.localNodes = v.toInt(&ok);
        ok = ok && o.localNodes >= 0 && o.localNodes <= kMaxClusterNodes;
    } else if (a == "--wait-timeout") {
        ok = seconds(v, o.waitTimeout);
    } else if (a == "--heartbeat-timeout") {
        ok = seconds(v, o.heartbeatTimeout);
    } else if (a == "--rejoin-timeout") {
        ok = seconds(v, o.rejoinTimeout);
    } else if (a == "--checkpoint-every") {
        o.checkpointEvery = v.toLongLong(&ok);
        ok = ok && o.checkpointEvery >= 1;
    } else if (a == "--recovery-every") {
        o.recoveryEvery = v.toLongLong(&ok);
        ok = ok && o.recoveryEvery >= 0;
    } else if (a == "--keep-every") {
        o.keepEvery = v.toLongLong(&ok);
        ok = ok && o.keepEvery >= 0;
    } else if (a == "--keep-budget") {
        const std::int64_t mb = v.toLongLong(&ok);
        ok = ok && mb >= 0 && mb <= (std::int64_t(1) << 20);
        o.keepBudgetBytes = mb << 20;
    } else if (a == "--checkpoint-dir") {
        ok = !v.isEmpty();
        o.checkpointDir = v;
    } else if (a == "--resume") {
        ok = !v.isEmpty();
        o.resumeDir = v;
    } else if (a == "--viewers") {
        o.viewers = v.toInt(&ok);
        ok = ok && o.viewers >= 0 && o.viewers <= 256;
    } else if (a == "--watch-token") {
        ok = !v.isEmpty();
        o.watchToken = v.toStdString();
    } else if (a == "--viewer-budget") {
        const QString n = v.toUpper();
        const std::int64_t unit = n.endsWith('K') ? 1024 : n.endsWith('M') ? 1024 * 1024 : 1;
        o.viewerBudget = (unit > 1 ? n.chopped(1) : n).toLongLong(&ok) * unit;
        ok = ok && o.viewerBudget >= 1024 && o.viewerBudget <= (std::int64_t(1) << 34);
    }
    o.enabled = true;
    if (!ok)
        error = "bad value '" + v + "' for " + a;
    return true;
}

namespace {

// The options' phase of a cluster run: checked together, the token filled
// in; how many local nodes to start and how many nodes to wait for.
void settleClusterOptions(const TrainConfig &config, ClusterCliOptions &o, int &local, int &wait)
{
    if (o.checkpointEvery > 0 && o.checkpointDir.isEmpty())
        throw std::invalid_argument("--checkpoint-every needs --checkpoint-dir");
    if (!o.checkpointDir.isEmpty() && o.checkpointEvery == 0)
        throw std::invalid_argument("--checkpoint-dir needs --checkpoint-every K");
    if (o.token.empty())
        if (const char *env = std::getenv("SMOLCLUSTER_TOKEN"))
            o.token = env;
    if (o.listen && o.token.empty())
        throw std::invalid_argument("--listen needs --token T (or SMOLCLUSTER_TOKEN)");
    if (!o.listen && o.token.empty())
        o.token = freshToken(); // local threads only: a secret nobody else knows
    local = o.localNodes >= 0 ? o.localNodes : (o.listen ? 0 : config.nodes);
    wait = o.waitNodes > 0 ? o.waitNodes : config.nodes;
    if (wait < config.nodes)
        throw std::invalid_argument("--wait-nodes " + std::to_string(wait) + " is fewer than --nodes " +
                                    std::to_string(config.nodes));
    if (!o.listen && local < wait)
        throw std::invalid_argument("without --listen only local nodes can join: --local-nodes " +
                                    std::to_string(local) + " < " + std::to_string(wait));
}

ClusterRunOptions runOptionsOf(const TrainConfig &config, const ClusterCliOptions &o)
{
    ClusterRunOptions ro;
    ro.nodes = config.nodes;
    ro.checkpointEvery = o.checkpointEvery;
    ro.recoveryEvery = o.recoveryEvery;
    ro.keepEvery = o.keepEvery;
    ro.keepBudgetBytes = o.keepBudgetBytes;
    ro.rejoinTimeout = o.rejoinTimeout;
    ro.breakpoints = o.breakpoints;
    ro.events = o.events;
    ro.checkpointDir = o.checkpointDir;
    ro.resumeDir = o.resumeDir;
    return ro;
}

} // namespace

TrainSummary runClusterTraining(const TrainConfig &config, ClusterCliOptions o, TrainObserver *observer,
                                QTextStream &err)
{
    int local = 0, wait = 0;
    settleClusterOptions(config, o, local, wait);

    std::mutex printMutex;
    auto log = [&](const std::string &line) {
        // Threads of this process joining it is no news; losses, re-forms and checkpoints are.
        if (!o.listen && (line.find(" joined") != std::string::npos || line.find("clock offset") != std::string::npos))
            return;
        std::lock_guard lock(printMutex);
        err << "smolctl: " << QString::fromStdString(line) << "\n";
        err.flush();
    };
    CoordinatorOptions co;
    co.bindAddress = o.listen ? "0.0.0.0" : "127.0.0.1";
    co.port = o.listenPort;
    co.token = o.token;
    co.heartbeatTimeout = o.heartbeatTimeout;
    co.watchToken = o.watchToken;
    co.streamToViewers = o.viewers >= 0 || !o.watchToken.empty();
    co.viewerBudgetBytesPerSecond = o.viewerBudget;
    Coordinator coordinator(co);
    coordinator.setLogSink(log);
    if (o.listen)
        log("coordinator listening on port " + std::to_string(coordinator.port()) + "; on each node run: smolctl node --join " +
            reachableAddress().toStdString() + ":" + std::to_string(coordinator.port()) + " --token <token>");

    memory::install();
    // Each local node's data-plane links and control connection (about
    // K(K+3) descriptors: 64 nodes need more than a desktop's soft 1024).
    if (local > 1)
        net::reserveFileDescriptors(std::size_t(local) * std::size_t(local + 3));
    std::vector<std::thread> locals;
    for (int k = 0; k < local; ++k)
        locals.emplace_back([&, k] {
            NodeAgentOptions no;
            no.port = coordinator.port();
            no.token = o.token;
            no.name = "local-" + std::to_string(k);
            // Listening: remote peers dial these nodes too (the data plane is
            // authenticated like the control plane).
            no.bindAddress = o.listen ? "0.0.0.0" : "127.0.0.1";
            no.advertise = o.advertise;
            no.memorySlot = k;
            no.inProcess = true;
            try {
                runNodeAgent(no, [&, k](const std::string &line) { (void)k, (void)line; });
            } catch (const std::exception &e) {
                log("local node " + std::to_string(k) + ": " + e.what());
            }
        });
    struct Cleanup {
        Coordinator &c;
        std::vector<std::thread> &threads;
        ~Cleanup()
        {
            c.shutdownNodes();
            for (auto &t : threads)
                t.join();
        }
    } cleanup{coordinator, locals};

    if (!coordinator.waitForNodes(wait, o.waitTimeout))
        throw std::runtime_error("only " + std::to_string(coordinator.nodes().size()) + " of " +
                                 std::to_string(wait) + " nodes joined within " +
                                 std::to_string(o.waitTimeout.count() / 1000) + " s");
    if (o.viewers > 0 && !waitForViewers(coordinator, o.viewers, o.waitTimeout))
        throw std::runtime_error("only " + std::to_string(coordinator.viewerCount()) + " of " +
                                 std::to_string(o.viewers) + " viewers came within " +
                                 std::to_string(o.waitTimeout.count() / 1000) + " s");
    for (const ClusterNode &n : coordinator.nodes())
        if (n.clockValid)
            log("node " + std::to_string(n.id) + " '" + n.name + "' clock offset " +
                QString::number(double(n.clockOffsetNs) / 1e6, 'f', 3).toStdString() + " ms +- " +
                QString::number(double(n.clockErrorNs) / 1e6, 'f', 3).toStdString() + " ms");
    return coordinator.run(config, runOptionsOf(config, o), observer);
}

namespace {

const char kNodeUsage[] = R"(Usage: smolctl node --join HOST:PORT --token T [OPTIONS]

Joins the cluster whose coordinator (`smolctl train --listen PORT ...`, or
the smolcluster window) listens at HOST:PORT, and trains whatever it
assigns until it says shutdown. The token is checked with an HMAC
challenge in both directions; it is never sent.

Options:
  --join HOST:PORT    the coordinator
  --token T           the cluster's secret (default: SMOLCLUSTER_TOKEN)
  --name NAME         how the coordinator shows this node (default:
                      host name and process id)
  --bind ADDR         address for the data-plane port other nodes connect
                      to (default 0.0.0.0); with --backend gloo, the
                      address Gloo's device binds to (default: the one
                      the coordinator assigns, else the interface this
                      node reaches the coordinator on; never all)
  --advertise ADDR    the address other nodes dial to reach this one
                      (default: the address the coordinator sees this node
                      connect from); for a multi-homed or NAT'd machine
  --clock-skew MS     pretend this machine's clock is MS ms ahead (may be
                      negative): watch the coordinator estimate and correct it
  --heartbeat SEC     seconds between heartbeats (default 1)
  -h, --help          show this help

Exit code 0 when the coordinator said shutdown, 1 when it went away,
2 on bad arguments or when joining failed (wrong token, no coordinator).
)";

} // namespace

int runNodeCommand(const QStringList &args, QTextStream &out, QTextStream &err)
{
    NodeAgentOptions o;
    bool joined = false;
    auto bad = [&](const QString &why) {
        err << "smolctl node: " << why << "\n";
        err.flush();
        return 2;
    };
    for (int i = 0; i < args.size(); ++i) {
        const QString a = args[i];
        if (a == "-h" || a == "--help") {
            out << kNodeUsage;
            return 0;
        }
        if (i + 1 >= args.size())
            return bad("'" + a + "' is unknown or needs a value (see smolctl node --help)");
        const QString v = args[++i];
        bool ok = true;
        if (a == "--join") {
            const int colon = v.lastIndexOf(':');
            const int port = colon > 0 ? v.mid(colon + 1).toInt(&ok) : 0;
            ok = ok && colon > 0 && port > 0 && port <= 65535;
            o.host = v.left(colon).toStdString();
            o.port = std::uint16_t(port);
            joined = ok;
        } else if (a == "--token") {
            o.token = v.toStdString();
            ok = !v.isEmpty();
        } else if (a == "--name") {
            o.name = v.toStdString();
        } else if (a == "--bind") {
            o.bindAddress = v.toStdString();
        } else if (a == "--advertise") {
            o.advertise = v.toStdString();
            ok = net::sock::isPlausibleHost(o.advertise);
        } else if (a == "--clock-skew") {
            const double ms = v.toDouble(&ok);
            ok = ok && std::isfinite(ms) && std::fabs(ms) < 1e9;
            if (ok)
                net::setClockSkewNs(std::int64_t(ms * 1e6));
        } else if (a == "--heartbeat") {
            std::chrono::milliseconds hb{};
            ok = seconds(v, hb);
            o.heartbeatInterval = hb;
        } else {
            return bad("unknown option '" + a + "' (see smolctl node --help)");
        }
        if (!ok)
            return bad("bad value '" + v + "' for " + a);
    }
    if (!joined)
        return bad("--join HOST:PORT is required (see smolctl node --help)");
    if (o.token.empty())
        if (const char *env = std::getenv("SMOLCLUSTER_TOKEN"))
            o.token = env;
    if (o.token.empty())
        return bad("--token T is required (or SMOLCLUSTER_TOKEN)");
    std::mutex printMutex;
    try {
        return runNodeAgent(o, [&](const std::string &line) {
            std::lock_guard lock(printMutex);
            err << "smolctl node: " << QString::fromStdString(line) << "\n";
            err.flush();
        });
    } catch (const std::exception &e) {
        err << "smolctl node: cannot join " << QString::fromStdString(o.host) << ":" << o.port << ": " << e.what()
            << "\n";
        return 2;
    }
}

} // namespace smol::engine
