// smolctl: the headless command line. Wiring only: parse the command, hand
// the rest of the arguments to the engine, return its exit code.
//
// Commands: train, node, watch, plan, info, export, lesson, bench allreduce|train|session|cluster|watch|timeline|soak.
#include "engine/bench/allreduce_bench.h"
#include "engine/bench/cluster_bench.h"
#include "engine/cluster/cluster_commands.h"
#include "engine/cluster/watch_command.h"
#include "engine/session/session_commands.h"
#include "engine/session/session_compare.h"
#include "engine/bench/session_bench.h"
#include "engine/bench/train_bench.h"
#include "engine/bench/watch_bench.h"
#include "engine/plan/plan_command.h"
#include "engine/train_command.h"
#include "app/lessons/lesson_check.h"
#include "soak_bench.h"
#include "timeline_bench.h"

#include <QCoreApplication>
#include <QApplication>
#include <QGuiApplication>
#include <QStringList>
#include <QTextStream>

#include <cstdio>
#include <cstring>
#include <memory>
#include <utility>

namespace {

const char kUsage[] = R"(Usage: smolctl COMMAND [OPTIONS]

Commands:
  train             train a model on an in-process cluster (nodes as threads,
                    real TCP over loopback), or coordinate a cluster of node
                    processes (--listen); see `smolctl train --help`
  node              join a cluster as a node: `smolctl node --join HOST:PORT
                    --token T`; see `smolctl node --help`
  plan              what a run will hold and send per node, by closed forms
                    (model states, activations, bytes a step by axis), with
                    the formulas; --check runs it and prints predicted,
                    measured and their ratio; see `smolctl plan --help`
  info FILE         what a recorded session holds (`--json` for one object)
  export FILE       a session as Chrome trace JSON (Perfetto) or its
                    metrics as CSV; see `smolctl export --help`
  compare A B       two recorded sessions side by side: config differences,
                    then each figure in A, B and B/A (`--json`)
  watch HOST:PORT   watch a teacher's run without joining it: a line per
                    step, pause and lesson step (`smolctl watch --help`)
  lesson            list the shipped lessons, check one's file, or run it
                    without a window and check every revealed value
                    (`smolctl lesson --help`)
  bench allreduce   time our TCP ring all-reduce (and optionally c10d Gloo's)
                    over loopback, ranks as threads; see `smolctl bench --help`
  bench train       samples/s of single vs ddp on 2 nodes, the cost of an
                    attached trace sink, and gradient compression's bytes,
                    accuracy and speed on 100 Mbit links
  bench cluster     ddp and zero3 over smolctl node processes on loopback,
                    our transport vs c10d's Gloo: samples/s and the ratio
  bench session     what recording a session costs a ddp run, events written
                    per second, and reading a 1 s window of a 1M-event file
  bench watch       samples/s of a 4-node ddp run with 64 viewers streamed
                    to and with none, the ratio, and one viewer's bytes/s
  bench timeline    paint the GUI's timeline offscreen (1920x1080) over 1M
                    packets: worst frame at every zoom, memory of the events
  bench soak        a live 4-node ddp run fed to the whole window offscreen
                    for M minutes: resident memory each minute, its slope

Options:
  -h, --help        show this help
  --version         print the version
)";

const char kBenchUsage[] = R"(Usage: smolctl bench allreduce [OPTIONS]
       smolctl bench train [--steps K] [--global-batch B] [--rounds R] [--compression]
       smolctl bench session [--steps K] [--rounds R] [--events N]
       smolctl bench cluster [--nodes N] [--steps K] [--global-batch B] [--rounds R]
       smolctl bench watch [--viewers N] [--steps K] [--rounds R] [--nodes N]
       smolctl bench timeline [--packets N] [--nodes K] [--frames F] [--recording FILE]
       smolctl bench soak [--minutes M] [--nodes N] [--strategy S] [--timeline-budget MIB]

bench train: mlp on Fashion-MNIST, one LibTorch thread per node, measured
side by side: samples/s of single vs ddp on 2 nodes (TCP loopback) and their
ratio, then ddp's step time with a recording trace sink attached vs detached
and that ratio, and the share of ddp's all-reduce time hidden under backward
(the buckets travel on each node's communication thread). Then the ratio
ddp/single at global batches 64, 512 and 2048 (400k samples a case at
least), the share hidden on the gpt (2 buckets), and zero3/ddp on the gpt
(2 nodes, global batch 32). Then compression (alone with --compression):
on 4 nodes, sgd lr 0.1, global batch 120, bytes per node per step of fp16
and powersgd:2 against plain ddp and test accuracy after 600 steps side by
side; samples/s with every link at 100 Mbit/s and 1 ms (the steps after
--compress-start); ddp+fp16/single at global batch 64. Defaults: 200
steps, global batch 64, 3 rounds.

bench allreduce:

Times an in-place all-reduce(Sum) of float32 buffers over loopback TCP with
ranks as threads of this process, checks every result against the closed
form, and prints one row per (size, nodes) case with its bus bandwidth.

Options:
  --nodes LIST      world sizes, comma-separated, 1 to 64 (default 2,4)
  --sizes LIST      buffer sizes in bytes with K/M/G suffixes, multiples of 4,
                    at most 1G (default 4K,64K,256K,4M,64M)
  --allreduce ALG   ring, doubling or auto (default: all three under 1M,
                    printed in ms per all-reduce; ring from 1M up)
  --iters N         timed iterations per round (default: 200 under 1M, then
                    by size, 5 to 50)
  --warmup N        untimed iterations before timing (default 2)
  --rounds N        rounds per case; the median round is shown (default 3)
  --vs-gloo         also run c10d's ProcessGroupGloo on the same cases, in
                    alternating rounds, and print the ratio ours/gloo
  --segment BYTES   frame segment size of our ring collectives
  -h, --help        show this help

Exit code 0 when every result matched, 1 on a mismatch or a failed run,
2 on bad arguments.

bench session: a ddp mlp run on 2 nodes with and without a session
recorder, back to back in each round (the median of the rounds' step-time
ratios; target <= 1.03), N frame events (default 1M) written to a session
file (target >= 1M/s), and 20 random 1 s windows read from it (target
<= 50 ms). Defaults: 1500 steps, 7 rounds.

bench cluster: N (default 2) `smolctl node` processes joined to a
coordinator on 127.0.0.1 run the same mlp job with ddp and with zero3, each
with --backend ours and --backend gloo, back to back in each round; prints
the median samples/s of each (from the first step to the last: set-up and
Gloo's rendezvous excluded) and the ratio gloo/ours. Defaults: 200 steps,
global batch 120, 3 rounds.

bench watch: a coordinator streaming to viewers (as a teacher's window
does) and 4 node threads run the same ddp mlp job with no viewer and with
N (default 64) ViewerClients on loopback in this process, back to back in
each round; prints the median samples/s of each, what one viewer received
per second, and `ratio samples/s with N viewers / without`. Defaults: 1000
steps, global batch 120, 5 rounds.

bench timeline: see `smolctl bench timeline --help`.

bench soak: see `smolctl bench soak --help`.
)";

bool isHelp(const QString &arg)
{
    return arg == QLatin1String("-h") || arg == QLatin1String("--help");
}

int fail(QTextStream &err, const QString &reason)
{
    err << "smolctl: " << reason << Qt::endl;
    return 2;
}

int runBench(const QStringList &args, QTextStream &out, QTextStream &err)
{
    if (args.isEmpty())
        return fail(err, QStringLiteral("bench: missing benchmark name (try `smolctl bench --help`)"));
    if (isHelp(args.first())) {
        out << kBenchUsage;
        return 0;
    }
    const QString name = args.first();
    const QStringList rest = args.mid(1);
    if (name == QLatin1String("timeline"))
        return smol::app::runTimelineBench(rest, out, err);
    if (name == QLatin1String("soak"))
        return smol::app::runSoakBench(rest, out, err);
    if (name != QLatin1String("allreduce") && name != QLatin1String("train") && name != QLatin1String("session") &&
        name != QLatin1String("cluster") && name != QLatin1String("watch"))
        return fail(err, QStringLiteral("bench: unknown benchmark '%1' (allreduce, train, session, cluster, "
                                        "watch, timeline or soak)")
                             .arg(name));
    if (rest.contains(QStringLiteral("--help")) || rest.contains(QStringLiteral("-h"))) {
        out << kBenchUsage;
        return 0;
    }
    if (name == QLatin1String("train"))
        return smol::engine::runTrainBench(rest, out, err);
    if (name == QLatin1String("session"))
        return smol::engine::runSessionBench(rest, out, err);
    if (name == QLatin1String("cluster"))
        return smol::engine::runClusterBench(rest, out, err);
    if (name == QLatin1String("watch"))
        return smol::engine::runWatchBench(rest, out, err);
    return smol::engine::runAllreduceBench(rest, out, err);
}

} // namespace

int main(int argc, char **argv)
{
    // The timeline bench paints text, which needs a GUI application; it
    // runs offscreen unless told otherwise.
    // The soak bench makes the whole window, which needs a QApplication.
    std::unique_ptr<QCoreApplication> app;
    const bool benchTimeline = argc > 2 && std::strcmp(argv[1], "bench") == 0 && std::strcmp(argv[2], "timeline") == 0;
    const bool benchSoak = argc > 2 && std::strcmp(argv[1], "bench") == 0 && std::strcmp(argv[2], "soak") == 0;
    if (benchTimeline || benchSoak) {
        if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM"))
            qputenv("QT_QPA_PLATFORM", "offscreen");
        if (benchSoak)
            app = std::make_unique<QApplication>(argc, argv);
        else
            app = std::make_unique<QGuiApplication>(argc, argv);
    } else {
        app = std::make_unique<QCoreApplication>(argc, argv);
    }
    QCoreApplication::setApplicationName(QStringLiteral("smolctl"));
    QCoreApplication::setApplicationVersion(QStringLiteral(SMOL_VERSION));

    QTextStream out(stdout);
    QTextStream err(stderr);
    const QStringList args = QCoreApplication::arguments().mid(1);

    if (args.isEmpty())
        return fail(err, QStringLiteral("missing command (try `smolctl --help`)"));
    const QString command = args.first();
    if (isHelp(command)) {
        out << kUsage;
        return 0;
    }
    if (command == QLatin1String("--version")) {
        out << "smolctl " << SMOL_VERSION << Qt::endl;
        return 0;
    }
    // Each subcommand takes the arguments after its name.
    using Command = int (*)(const QStringList &, QTextStream &, QTextStream &);
    static const std::pair<const char *, Command> kCommands[] = {
        {"bench", runBench},
        {"train", smol::engine::runTrainCommand},
        {"node", smol::engine::runNodeCommand},
        {"plan", smol::engine::runPlanCommand},
        {"info", smol::engine::runInfoCommand},
        {"export", smol::engine::runExportCommand},
        {"compare", smol::engine::runCompareCommand},
        {"lesson", smol::app::runLessonCommand},
        {"watch", smol::engine::runWatchCommand},
    };
    for (const auto &[name, run] : kCommands)
        if (command == QLatin1String(name))
            return run(args.mid(1), out, err);
    return fail(err, QStringLiteral("unknown command '%1' (try `smolctl --help`)").arg(command));
}
