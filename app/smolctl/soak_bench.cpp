// `smolctl bench soak`: a live run fed to the whole window for M minutes,
// the process's resident memory each minute and its slope over the last
// half. The window is smolcluster's MainWindow (offscreen), fed by the same
// EngineController: every view the live run streams into (timeline, charts
// and their metrics table, memory tab, log, inspector) is the real one with
// its real budget, so the slope says whether those budgets hold.
#include "soak_bench.h"

#include "app/bridge/engine_controller.h"
#include "app/window/mainwindow.h"
#include "resident_memory.h"
#include "widgets/charts_panel.h"
#include "widgets/metrics_model.h"
#include "widgets/timeline/timeline_view.h"

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QLineSeries>
#include <QPlainTextEdit>
#include <QTimer>

#include <malloc.h>

#include <functional>
#include <optional>
#include <vector>

namespace smol::app {

namespace {

const char kUsage[] = R"(Usage: smolctl bench soak [--minutes M] [--nodes N] [--strategy S] [--timeline-budget MIB]

Runs a real local cluster of N nodes (default 4, as smolcluster starts) with
strategy S (default ddp) for 1,000,000 steps and feeds it, for M minutes
(default 10), to smolcluster's whole window (MainWindow, offscreen: the
timeline, the charts and their metrics table, the memory tab, the log and
the inspector, each under its budget; docs/runtime.md lists them). Each
minute it prints the process's resident memory and the steps done,
  soak: minute 1 rss 412.3 MB steps 9410
with a `#` line of what the views hold; then the least-squares slope of the
resident memory over the last half of the minutes,
  soak: slope over the last half 0.04 MB/min (target <= 0.1)
--timeline-budget MIB sets the live timeline's budget (default the window's,
256 MiB; a smaller one fills sooner, so a short soak reaches the plateau).
Exit code 0 also when the slope misses the target (a measurement, not a test).
)";

struct SoakOptions {
    int minutes = 10;
    int nodes = 4;
    QString strategy = QStringLiteral("ddp");
    int timelineBudgetMiB = -1; // -1: the window's default
};

// Options in, or a one-line reason.
std::optional<SoakOptions> parse(const QStringList &args, QTextStream &err)
{
    SoakOptions o;
    for (int i = 0; i < args.size(); ++i) {
        const QString &a = args[i];
        bool ok = i + 1 < args.size();
        const auto number = [&](int &to, int lo, int hi) {
            to = args[++i].toInt(&ok);
            ok = ok && to >= lo && to <= hi;
        };
        if (!ok)
            ; // every option takes a value
        else if (a == QLatin1String("--minutes"))
            number(o.minutes, 1, 600);
        else if (a == QLatin1String("--nodes"))
            number(o.nodes, 2, 16);
        else if (a == QLatin1String("--timeline-budget"))
            number(o.timelineBudgetMiB, 1, 65536);
        else if (a == QLatin1String("--strategy"))
            o.strategy = args[++i];
        else
            ok = false;
        if (!ok) {
            err << "smolctl: bench soak: bad or incomplete option '" << a
                << "' (--minutes 1..600, --nodes 2..16, --timeline-budget 1..65536; try --help)" << Qt::endl;
            return std::nullopt;
        }
    }
    return o;
}

// Runs the event loop until `done` or `ms` milliseconds pass (checked every
// 100 ms); whether done.
bool waitFor(const std::function<bool()> &done, qint64 ms)
{
    QElapsedTimer clock;
    clock.start();
    QEventLoop loop;
    QTimer poll;
    QObject::connect(&poll, &QTimer::timeout, &loop, [&] {
        if (done() || clock.elapsed() >= ms)
            loop.quit();
    });
    poll.start(100);
    if (!done() && ms > 0)
        loop.exec();
    return done();
}

// Least-squares slope of ys over xs.
double slope(const std::vector<double> &xs, const std::vector<double> &ys)
{
    const double n = double(xs.size());
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (std::size_t i = 0; i < xs.size(); ++i) {
        sx += xs[i];
        sy += ys[i];
        sxx += xs[i] * xs[i];
        sxy += xs[i] * ys[i];
    }
    const double d = n * sxx - sx * sx;
    return d == 0 ? 0 : (n * sxy - sx * sy) / d;
}

QString mb(double bytes)
{
    return QString::number(bytes / 1e6, 'f', 1);
}

// What the window's views hold now, for the `#` line under a minute's.
QString heldByViews(MainWindow &window)
{
    const widgets::TimelineData &t = window.timeline()->data();
    const auto *charts = window.findChild<widgets::ChartsPanel *>();
    QString charted;
    if (charts)
        charted = QStringLiteral(", metrics rows %1, loss points %2")
                      .arg(charts->metricsModel()->rowCount())
                      .arg(charts->trainLossSeries()->count());
    // The heap's bytes in use (every thread's arenas): flat while the
    // resident memory grows means fragmentation, not something held.
    const struct mallinfo2 heap = mallinfo2();
    return QStringLiteral("#   timeline %1 MB held (budget %2 MB%3)%4, log lines %5, heap in use %6 MB")
        .arg(mb(double(t.memoryBytes())), mb(double(t.memoryBudget())),
             t.historyDropped() ? QStringLiteral(", dropping") : QString(), charted)
        .arg(window.logView()->blockCount())
        .arg(mb(double(heap.uordblks + heap.hblkhd)));
}

// Starts the run once the local nodes have joined; false (with a reason on
// `err`) when they do not join or the run does not start.
bool startRun(EngineController &engine, MainWindow &window, const SoakOptions &o, QTextStream &err)
{
    if (!waitFor([&] { return engine.readyNodes() >= o.nodes; }, 60'000)) {
        err << "smolctl: bench soak: the local nodes did not join within 60 s" << Qt::endl;
        return false;
    }
    RunSettings s = window.settings();
    s.strategy = o.strategy;
    s.nodes = o.nodes;
    s.steps = 1'000'000;
    s.recordPath.clear(); // the recorder writes everything by design; the views are what is soaked
    window.setSettings(s);
    window.startRun();
    if (!waitFor([&] { return engine.isRunning(); }, 30'000)) {
        err << "smolctl: bench soak: the run did not start (" << o.strategy << " on " << o.nodes << " nodes)"
            << Qt::endl;
        return false;
    }
    return true;
}

// Minute by minute: resident memory and steps; the slope over the last half.
void soak(EngineController &engine, MainWindow &window, const SoakOptions &o, QTextStream &out)
{
    qint64 lastStep = -1;
    QObject::connect(&engine, &RunFeed::stepAvailable, &window,
                     [&lastStep](const widgets::StepPoint &p) { lastStep = p.step; });
    std::vector<double> minutes, rss;
    QElapsedTimer clock;
    clock.start();
    for (int m = 1; m <= o.minutes; ++m) {
        waitFor([&] { return !engine.isRunning(); }, qint64(m) * 60'000 - clock.elapsed());
        const double bytes = double(residentBytes());
        out << "soak: minute " << m << " rss " << mb(bytes) << " MB steps " << lastStep + 1 << Qt::endl;
        out << heldByViews(window) << Qt::endl;
        if (2 * m >= o.minutes) {
            minutes.push_back(m);
            rss.push_back(bytes / 1e6);
        }
        if (!engine.isRunning()) {
            out << "# the run ended before the soak did" << Qt::endl;
            break;
        }
    }
    out << "soak: slope over the last half " << QString::number(slope(minutes, rss), 'f', 2)
        << " MB/min (target <= 0.1)" << Qt::endl;
}

} // namespace

int runSoakBench(const QStringList &args, QTextStream &out, QTextStream &err)
{
    if (args.contains(QStringLiteral("--help")) || args.contains(QStringLiteral("-h"))) {
        out << kUsage;
        return 0;
    }
    const std::optional<SoakOptions> o = parse(args, err);
    if (!o)
        return 2;
    EngineController engine(o->nodes);
    MainWindow window(&engine);
    if (o->timelineBudgetMiB > 0)
        window.timeline()->setLiveMemoryBudget(std::size_t(o->timelineBudgetMiB) << 20);
    window.resize(1600, 1000);
    window.show();
    out << "soak: before start rss " << mb(double(residentBytes())) << " MB" << Qt::endl;
    if (!startRun(engine, window, *o, err))
        return 1;
    soak(engine, window, *o, out);
    engine.stop();
    waitFor([&] { return !engine.isRunning(); }, 30'000);
    return 0;
}

} // namespace smol::app
