// `smolctl bench cluster`. One coordinator in this process, bound to
// 127.0.0.1, and N `smolctl node` processes (this executable) joined to it
// for the whole bench. Each round runs ddp and zero3 with --backend ours and
// --backend gloo, back to back, so machine noise hits both alike; each
// figure is the median over rounds.
//
// samples/s counts from the first step's report to the last: an epoch's
// set-up (our mesh's handshakes, Gloo's rendezvous and pairs) is left out,
// since a long run pays it once.
#include "cluster_bench.h"

#include "engine/cluster/coordinator.h"
#include "engine/memory_tracker.h"
#include "engine/trainer.h"
#include "step_clock.h"

#include <QCoreApplication>
#include <QProcess>
#include <QRandomGenerator>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>

namespace smol::engine {

namespace {

using bench::median;
using bench::StepClock;

struct Options {
    int nodes = 2;
    std::int64_t steps = 200;
    std::int64_t globalBatch = 120;
    int rounds = 3;
};

} // namespace

int runClusterBench(const QStringList &args, QTextStream &out, QTextStream &err)
{
    Options o;
    for (int i = 0; i < args.size(); ++i) {
        bool ok = i + 1 < args.size();
        const QString a = args[i];
        const qlonglong v = ok ? args[++i].toLongLong(&ok) : 0;
        if (ok && a == "--nodes" && v >= 2 && v <= 8)
            o.nodes = int(v);
        else if (ok && a == "--steps" && v >= 10 && v <= 100000)
            o.steps = v;
        else if (ok && a == "--global-batch" && v >= 8 && v <= 65536)
            o.globalBatch = v;
        else if (ok && a == "--rounds" && v >= 1 && v <= 100)
            o.rounds = int(v);
        else {
            err << "smolctl bench cluster: bad or unknown argument '" << a
                << "' (--nodes N (2-8), --steps K (>= 10), --global-batch B, --rounds R)\n";
            return 2;
        }
    }
    memory::install();
    CoordinatorOptions co;
    co.bindAddress = "127.0.0.1";
    co.token = QString::number(QRandomGenerator::system()->generate64(), 16).toStdString();
    Coordinator coordinator(co);
    std::vector<std::unique_ptr<QProcess>> nodes;
    struct Cleanup {
        Coordinator &c;
        std::vector<std::unique_ptr<QProcess>> &nodes;
        ~Cleanup()
        {
            c.shutdownNodes();
            for (auto &p : nodes)
                if (!p->waitForFinished(10000))
                    p->kill(), p->waitForFinished(2000);
        }
    } cleanup{coordinator, nodes};
    // The token reaches the nodes in their environment, not on a command line
    // other users can read.
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert(QStringLiteral("SMOLCLUSTER_TOKEN"), QString::fromStdString(co.token));
    for (int k = 0; k < o.nodes; ++k) {
        auto p = std::make_unique<QProcess>();
        p->setProcessEnvironment(env);
        p->setProcessChannelMode(QProcess::ForwardedErrorChannel);
        p->setStandardOutputFile(QProcess::nullDevice());
        p->start(QCoreApplication::applicationFilePath(),
                 {"node", "--join", "127.0.0.1:" + QString::number(coordinator.port()), "--name",
                  "bench-" + QString::number(k)});
        nodes.push_back(std::move(p));
    }
    if (!coordinator.waitForNodes(o.nodes, std::chrono::seconds(60))) {
        err << "smolctl bench cluster: only " << coordinator.nodes().size() << " of " << o.nodes
            << " node processes joined within 60 s\n";
        return 1;
    }

    const std::vector<std::string> strategies{"ddp", "zero3"};
    const std::vector<std::pair<TrainConfig::Backend, const char *>> backends{
        {TrainConfig::Backend::Ours, "ours"}, {TrainConfig::Backend::Gloo, "gloo"}};
    std::map<std::pair<std::string, std::string>, std::vector<double>> rate;
    out << "# bench cluster: mlp, " << o.nodes << " smolctl node processes on loopback, global batch "
        << o.globalBatch << ", " << o.steps << " steps;\n"
        << "# median of " << o.rounds
        << " alternating rounds; samples/s from the first step to the last (set-up "
        << "excluded)\n";
    out.flush();
    try {
        for (int round = 0; round < o.rounds; ++round)
            for (const std::string &strategy : strategies)
                for (const auto &[backend, name] : backends) {
                    TrainConfig c;
                    c.strategy = strategy;
                    c.nodes = o.nodes;
                    c.steps = o.steps;
                    c.globalBatch = o.globalBatch;
                    c.seed = 1;
                    c.backend = backend;
                    ClusterRunOptions ro;
                    ro.nodes = o.nodes;
                    ro.recoveryEvery = 0; // no recovery gathers between steps: the strategy's traffic only
                    ro.keepEvery = 0;     // nor the coordinator's copies
                    StepClock clock;
                    coordinator.run(c, ro, &clock);
                    rate[{strategy, name}].push_back(clock.samplesPerS(o.globalBatch));
                }
    } catch (const std::exception &e) {
        err << "smolctl bench cluster: " << e.what() << "\n";
        return 1;
    }
    for (const std::string &strategy : strategies) {
        const double ours = median(rate[{strategy, "ours"}]), gloo = median(rate[{strategy, "gloo"}]);
        const QString s = QString::fromStdString(strategy).leftJustified(6);
        out << s << "ours  samples/s: " << QString::number(ours, 'f', 0) << "\n";
        out << s << "gloo  samples/s: " << QString::number(gloo, 'f', 0) << "\n";
        out << "ratio " << QString::fromStdString(strategy)
            << " gloo/ours: " << QString::number(ours > 0 ? gloo / ours : 0, 'f', 2) << "\n";
    }
    return 0;
}

} // namespace smol::engine
