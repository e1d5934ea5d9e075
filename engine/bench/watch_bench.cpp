// smolctl bench watch. Both sides of each round run on the same
// coordinator, which streams to viewers in both (its hub gathers the run's
// events either way, as a teacher's window does); only the 64 viewers
// differ. samples/s counts from the first step's report to the last.
#include "watch_bench.h"

#include "engine/cluster/coordinator.h"
#include "engine/cluster/node_agent.h"
#include "engine/cluster/viewer_client.h"
#include "engine/memory_tracker.h"
#include "engine/trainer.h"
#include "step_clock.h"
#include "net/socket_util.h"

#include <QRandomGenerator>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

namespace smol::engine {

namespace {

using bench::median;
using bench::StepClock;

using Clock = std::chrono::steady_clock;

struct Options {
    int viewers = 64;
    int nodes = 4;
    std::int64_t steps = 1000;
    std::int64_t globalBatch = 120;
    int rounds = 5;
};

// A viewer that decodes everything and keeps only counts.
struct CountingViewer {
    std::atomic<std::uint64_t> batches{0}, aggregated{0};
    std::unique_ptr<ViewerClient> client;
    CountingViewer(std::uint16_t port, const std::string &token, int k)
    {
        ViewerClientOptions o;
        o.port = port;
        o.token = token;
        o.name = "bench-" + std::to_string(k);
        ViewerClient::Handlers h;
        h.events = [this](ViewerBatch &b) {
            ++batches;
            aggregated += b.aggregated ? 1 : 0;
        };
        client = std::make_unique<ViewerClient>(o, std::move(h));
    }
};

struct Round {
    double samplesPerS = 0;
    double seconds = 0;
    std::uint64_t oneViewerBytes = 0;
    std::uint64_t batches = 0, aggregated = 0;
};

Round runOnce(Coordinator &c, const std::string &token, const Options &o, int viewers)
{
    std::vector<std::unique_ptr<CountingViewer>> watching;
    for (int k = 0; k < viewers; ++k)
        watching.push_back(std::make_unique<CountingViewer>(c.port(), token, k));
    while (c.viewerCount() < viewers)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    TrainConfig cfg;
    cfg.strategy = "ddp";
    cfg.nodes = o.nodes;
    cfg.steps = o.steps;
    cfg.globalBatch = o.globalBatch;
    cfg.seed = 1;
    StepClock clock;
    const auto start = Clock::now();
    c.run(cfg, ClusterRunOptions{}, &clock);
    Round r;
    r.samplesPerS = clock.samplesPerS(o.globalBatch);
    r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (!watching.empty()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(300)); // the last batches arrive
        r.oneViewerBytes = watching.front()->client->bytesReceived();
        for (const auto &v : watching) {
            r.batches += v->batches;
            r.aggregated += v->aggregated;
        }
    }
    watching.clear();
    while (c.viewerCount() > 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return r;
}

QString parse(const QStringList &args, Options &o)
{
    for (int i = 0; i < args.size(); ++i) {
        const QString a = args[i];
        bool ok = i + 1 < args.size();
        const qlonglong v = ok ? args[++i].toLongLong(&ok) : 0;
        if (!ok)
            return "'" + a + "' needs a number";
        if (a == "--viewers" && v >= 1 && v <= 256)
            o.viewers = int(v);
        else if (a == "--steps" && v >= 10)
            o.steps = v;
        else if (a == "--rounds" && v >= 1 && v <= 20)
            o.rounds = int(v);
        else if (a == "--nodes" && v >= 2 && v <= 8)
            o.nodes = int(v);
        else
            return "bad option '" + a + "' (--viewers 1..256, --steps >= 10, --rounds 1..20, --nodes 2..8)";
    }
    return {};
}

} // namespace

int runWatchBench(const QStringList &args, QTextStream &out, QTextStream &err)
{
    Options o;
    if (const QString bad = parse(args, o); !bad.isEmpty()) {
        err << "smolctl bench watch: " << bad << "\n";
        return 2;
    }
    memory::install();
    net::reserveFileDescriptors(std::size_t(o.nodes) * std::size_t(o.nodes + 3) + std::size_t(o.viewers) * 4 + 64);
    CoordinatorOptions co;
    co.bindAddress = "127.0.0.1";
    co.token = QString::number(QRandomGenerator::system()->generate64(), 36).toStdString();
    co.streamToViewers = true;
    Coordinator c(co);
    std::vector<std::thread> nodes;
    for (int k = 0; k < o.nodes; ++k)
        nodes.emplace_back([&, k] {
            NodeAgentOptions no;
            no.port = c.port();
            no.token = co.token;
            no.name = "bench-" + std::to_string(k);
            no.bindAddress = "127.0.0.1";
            no.memorySlot = k;
            no.inProcess = true;
            try {
                runNodeAgent(no, {});
            } catch (const std::exception &) {
            }
        });
    struct Join {
        Coordinator &c;
        std::vector<std::thread> &t;
        ~Join()
        {
            c.shutdownNodes();
            for (auto &x : t)
                x.join();
        }
    } join{c, nodes};
    if (!c.waitForNodes(o.nodes, std::chrono::seconds(30))) {
        err << "smolctl bench watch: the nodes did not join within 30 s\n";
        return 1;
    }
    out << "watch bench: ddp mlp on " << o.nodes << " nodes, " << o.steps << " steps, global batch "
        << o.globalBatch << ", " << o.rounds << " alternating rounds; " << o.viewers
        << " viewers on loopback in this process, each decoding its stream (budget 256 KiB/s each)\n";
    out.flush();
    std::vector<double> without, with, perViewer;
    std::uint64_t batches = 0, aggregated = 0;
    try {
        for (int round = 0; round < o.rounds; ++round) {
            const Round a = runOnce(c, co.token, o, 0);
            const Round b = runOnce(c, co.token, o, o.viewers);
            without.push_back(a.samplesPerS);
            with.push_back(b.samplesPerS);
            perViewer.push_back(b.seconds > 0 ? double(b.oneViewerBytes) / b.seconds : 0);
            batches += b.batches;
            aggregated += b.aggregated;
            out << QString("round %1: %2 samples/s without viewers, %3 with %4\n")
                       .arg(round + 1)
                       .arg(a.samplesPerS, 0, 'f', 0)
                       .arg(b.samplesPerS, 0, 'f', 0)
                       .arg(o.viewers);
            out.flush();
        }
    } catch (const std::exception &e) {
        err << "smolctl bench watch: " << QString::fromUtf8(e.what()) << "\n";
        return 1;
    }
    const double a = median(without), b = median(with);
    out << QString("samples/s without viewers: %1\n").arg(a, 0, 'f', 0);
    out << QString("samples/s with %1 viewers: %2\n").arg(o.viewers).arg(b, 0, 'f', 0);
    out << QString("one viewer received: %1 bytes/s (median round; %2 of %3 batches thinned to per-link totals)\n")
               .arg(median(perViewer), 0, 'f', 0)
               .arg(aggregated)
               .arg(batches);
    out << QString("ratio samples/s with %1 viewers / without: %2\n").arg(o.viewers).arg(a > 0 ? b / a : 0, 0, 'f', 3);
    return 0;
}

} // namespace smol::engine
