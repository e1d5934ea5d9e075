// smolcluster: the GUI. Wiring only: parse the options, start the engine
// bridge (a coordinator and N local nodes, threads of this process talking
// the same authenticated TCP protocol remote nodes use), show the window.
// The GUI thread never waits on the network or on training.
#include "app/replay/compare_controller.h"
#include "app/bridge/engine_controller.h"
#include "gui_options.h"
#include "lesson_ui.h"
#include "mainwindow.h"
#include "run_controls.h"
#include "widgets/timeline/timeline_view.h"
#include "app/replay/replay_controller.h"
#include "viewer_window.h"

#include <QApplication>
#include <QElapsedTimer>
#include <QImage>
#include <QPixmap>
#include <QTimer>

#include <cstdio>
#include <exception>
#include <functional>
#include <memory>

namespace {

using smol::app::GuiOptions;

const char kUsage[] = R"(Usage: smolcluster [--nodes N] [--strategy S] [--model M] [--mesh SPEC] [--backend B]
                   [--steps K] [--projector]
                   [--listen PORT --token T [--advertise ADDR]] [--timeline-budget MIB]
                   [--replay SESSION [--compare SESSION]] [--lesson NAME|FILE [--lesson-step K]]
                   [--break SPEC] [--view NAME] [--screenshot FILE.png] [--watch-token W]
       smolcluster --watch HOST:PORT --token T [--name N] [--projector] [--screenshot FILE.png]
       smolcluster --join HOST:PORT --token T [--name N] [--projector] [--screenshot FILE.png]

Opens the control panel with a ready local cluster: N nodes that are
threads of this process, joined to its coordinator over authenticated TCP
exactly as `smolctl node` processes on other machines join it. Choose a
strategy and press Start.

Other machines join with the command Cluster > Remote nodes shows:
  smolctl node --join ADDR:PORT --token T
For a command that stays the same from one start to the next (one to
write on the board), fix the port and token with --listen and --token, or
in Cluster > Remote nodes, which remembers them for the next start.
Without either: any free port and a new random token at every start.

A student's window: --join runs one node of this machine in the teacher's
cluster (as `smolctl node --join` does) and opens the window as a viewer of
the teacher's live run, its own node framed "you: rank N"; --watch is the
same view without a node. A viewer is read-only (no start, stop, pause,
edit or kill); the teacher's pauses and lesson steps show, and a step that
asks a question takes this student's prediction to the teacher.

Options:
  --nodes N              local nodes, 1 to 64 (default 4)
  --strategy S           strategy preselected in the tool bar (default ddp);
                         with --mesh, what its dp axis does (ddp, zero1, zero2, zero3)
  --model M              model preselected in the tool bar: mlp or gpt
                         (default mlp)
  --mesh SPEC            a device mesh for the run, any of dp, pp, cp, tp:
                         dp=2,tp=2,pp=2; the nodes are its product (a --nodes
                         that disagrees is an error); tp and cp need --model
                         gpt. Rank order: tp fastest, then cp, pp, dp. The
                         cluster view draws the nodes as the mesh's grid
  --backend B            who runs the collectives: ours (every packet on the
                         timeline) or gloo (c10d's ProcessGroupGloo: one
                         span per collective; docs/runtime.md) (default ours)
  --steps K              steps preselected in the tool bar (default 300)
  --projector            start in projector mode (large fonts, high contrast)
  --listen PORT          the port other machines' nodes join on, 1 to 65535
                         (default: the remembered one, else any free port)
  --token T              the token they join with (default: the remembered
                         one, else random)
  --advertise ADDR       the address other machines reach this one at: the
                         local nodes' data-plane address and the host in the
                         join command (for a machine with several networks
                         or behind NAT; default: worked out per peer)
  --watch-token W        a second token with which students' windows and
                         `smolctl watch` may watch the run but not join as
                         nodes (the run's token lets them do both)
  --watch HOST:PORT      watch the teacher's cluster at HOST:PORT (with
                         --token: its token or its watch token)
  --join HOST:PORT       join it with one node of this machine, and watch
                         (with --token: its token)
  --name N               the name the teacher sees beside this window's
                         node and predictions (default: host name and pid)
  --timeline-budget MIB  memory the live timeline may keep (default 256 MiB,
                         about the last 6 minutes of a 4-node ddp run in
                         full; older events leave the view, never a
                         recording; 0: keep everything)
  --replay SESSION       open a recorded session (`smolctl train --record`,
                         or Ctrl+R here) in the window, as File > Open does
  --compare SESSION      with --replay A: open B beside it, as File > Compare
                         with... does (one scrubber moves both)
  --screenshot FILE.png  train K steps (default 20) at once, save the window
                         to FILE.png when the run ends and exit (0 if the
                         run finished and the image is not blank); with
                         --watch or --join: save it when the teacher's run
                         ends or reveals a lesson step's answer; with
                         --replay, move the replay to step K (default: the
                         end) and save the window then
  --lesson NAME|FILE     open a lesson (`smolctl lesson --list`, or a .lesson
                         file; docs/lessons.md) once the local nodes have
                         joined, as the Lessons menu does
  --lesson-step K        run it to step K, revealing each step's numbers on
                         the way (with --screenshot: save the window there and
                         exit, 0 if every step was reached)
  --compress C           ddp's gradient compression: none, fp16, bf16 or
                         powersgd:R (PowerSGD from step 10, as the run
                         settings' default)
  --break SPEC           a breakpoint for the run, as the tool bar takes it
                         (allgather@step=3, allreduce,rank=1, next;
                         docs/breakpoints.md); with --screenshot, save the
                         window at the pause, the held collective framed
                         on the timeline, and exit
  --view NAME            the view shown at start: node, memory, shards,
                         placement, inspector, log, charts or timeline
  -h, --help             show this help
  --version              print the version

Keys: Ctrl+Return start, Space pause/resume, N step one collective,
Ctrl+. stop, Ctrl+R record the next run, Ctrl+O open a session,
Ctrl+W close it, Ctrl+P projector mode, F11 full screen, Ctrl+Q quit.
Lesson: Page Down or Right next (or reveal), Page Up or Left back, B blank
the screen, Ctrl+L open a lesson file.
Replay: Space play/pause, [ and ] (or N) previous/next collective.
Timeline: wheel zoom, drag pan, Shift+drag zoom to a range, click for
details, + - zoom, Home fit, End follow, Z zoom to the selection,
Ctrl+G go to a step, Ctrl+Shift+P save it as PNG, Ctrl+Shift+T export the
session as Chrome trace JSON.
)";

GuiOptions parseOptions(const QStringList &args)
{
    return smol::app::parseGuiOptions(args);
}

// Returns an exit code when the options say not to start the GUI, else -1.
int handleEarly(const GuiOptions &options)
{
    if (!options.error.isEmpty()) {
        std::fprintf(stderr, "smolcluster: %s (try --help)\n", qPrintable(options.error));
        return 2;
    }
    if (options.help) {
        std::fputs(kUsage, stdout);
        return 0;
    }
    if (options.version) {
        std::printf("smolcluster %s\n", SMOL_VERSION);
        return 0;
    }
    return -1;
}

// A grab with a single colour everywhere is a broken window, not a screenshot.
bool isBlank(const QImage &image)
{
    if (image.isNull())
        return true;
    const QRgb first = image.pixel(0, 0);
    for (int y = 0; y < image.height(); y += 7)
        for (int x = 0; x < image.width(); x += 7)
            if (image.pixel(x, y) != first)
                return false;
    return true;
}

} // namespace

// Saves the window to `file` (after the last snapshot reached every view)
// and ends the application: 0 when `ok` and the image is not blank.
void grabAndExit(QWidget &window, const QString &file, bool ok)
{
    QTimer::singleShot(400, &window, [&window, file, ok] {
        const QImage image = window.grab().toImage();
        if (isBlank(image) || !image.save(file)) {
            std::fprintf(stderr, "smolcluster: could not write a non-blank screenshot to %s\n", qPrintable(file));
            QCoreApplication::exit(1);
            return;
        }
        std::printf("smolcluster: screenshot saved to %s\n", qPrintable(file));
        QCoreApplication::exit(ok ? 0 : 1);
    });
}

// Calls `then` once `nodes` local nodes are idle in the cluster (they join
// in the background); after 60 s without them, says so and exits 1.
void whenNodesJoined(smol::app::EngineController &engine, QWidget &window, int nodes, std::function<void()> then)
{
    auto *poll = new QTimer(&window);
    auto waited = std::make_shared<int>(0);
    QObject::connect(poll, &QTimer::timeout, &window, [&engine, poll, nodes, waited, then] {
        if (++*waited > 600) { // 60 s
            poll->stop();
            std::fprintf(stderr, "smolcluster: the local nodes did not join within 60 s\n");
            QCoreApplication::exit(1);
            return;
        }
        if (engine.isRunning() || engine.readyNodes() < nodes)
            return;
        poll->stop();
        then();
    });
    poll->start(100);
}

// --lesson NAME [--lesson-step K] [--screenshot FILE]: once the local nodes
// have joined, open the lesson, run it to step K (revealing on the way) and
// save the window.
int runLesson(QApplication &app, smol::app::EngineController &engine, smol::app::MainWindow &window,
              const GuiOptions &options)
{
    whenNodesJoined(engine, window, options.nodes, [&window, options] {
        QString error;
        if (!window.lessons()->open(options.lesson, &error, /*quiet=*/true)) {
            std::fprintf(stderr, "smolcluster: %s\n", qPrintable(error));
            QCoreApplication::exit(2);
            return;
        }
        if (options.lessonStep < 0 && options.screenshot.isEmpty())
            return;
        window.lessons()->runTo(std::max(1, options.lessonStep), [&window, options](bool ok, const QString &why) {
            if (!ok)
                std::fprintf(stderr, "smolcluster: lesson: %s\n", qPrintable(why));
            else
                std::printf("smolcluster: lesson at step %d\n", std::max(1, options.lessonStep));
            if (!options.screenshot.isEmpty())
                grabAndExit(window, options.screenshot, ok);
            else if (!ok)
                QCoreApplication::exit(1);
        });
    });
    return app.exec();
}

// --screenshot FILE: a replay moved to step K, or a live run trained to its
// end (or held at --break's pause), saved to FILE; then exit.
int runScreenshot(QApplication &app, smol::app::EngineController &engine, smol::app::MainWindow &window,
                  const GuiOptions &options)
{
    const QString file = options.screenshot;
    auto grab = [&window, file](bool finished) { grabAndExit(window, file, finished); };
    if (!options.replay.isEmpty()) {
        smol::app::ReplayController *replay = window.replay();
        if (options.steps > 0) {
            if (!replay->seekToStep(options.steps)) {
                std::fprintf(stderr, "smolcluster: %s has no step %d\n", qPrintable(options.replay), options.steps);
                return 1;
            }
        } else {
            replay->seek(replay->endNs());
        }
        grab(true);
        return app.exec();
    }
    // How long a big cluster takes to come up and run, measured here
    // for the record (issue 25 asked for 64 nodes within 5 s).
    auto sinceLaunch = std::make_shared<QElapsedTimer>();
    sinceLaunch->start();
    auto startedAtMs = std::make_shared<qint64>(0);
    QObject::connect(&engine, &smol::app::EngineController::stepAvailable, &window,
                     [sinceLaunch, startedAtMs](const smol::widgets::StepPoint &p) {
                         if (p.step == 0)
                             std::printf("smolcluster: step 0 done %.1f s after Start\n",
                                         double(sinceLaunch->elapsed() - *startedAtMs) / 1000);
                     });
    QObject::connect(&engine, &smol::app::EngineController::runFinished, &window,
                     [grab, sinceLaunch, startedAtMs](const QString &summary) {
                         std::printf("smolcluster: %s\n", qPrintable(summary));
                         std::printf("smolcluster: the run took %.1f s from Start\n",
                                     double(sinceLaunch->elapsed() - *startedAtMs) / 1000);
                         grab(true);
                     });
    QObject::connect(&engine, &smol::app::EngineController::runFailed, &window, [grab](const QString &reason) {
        std::fprintf(stderr, "smolcluster: the run failed: %s\n", qPrintable(reason));
        grab(false);
    });
    // --break: the picture is the pause, once the views have framed it.
    QObject::connect(&engine, &smol::app::EngineController::pausedAt, &window,
                     [grab, &window, options](const smol::app::PauseView &) {
                         if (options.breakAt.isEmpty())
                             return;
                         if (!options.view.isEmpty())
                             window.showView(options.view);
                         QTimer::singleShot(1500, &window, [grab] { grab(true); });
                     });
    QObject::connect(&window, &smol::app::MainWindow::runRefused, &window, [grab](const QString &reason) {
        std::fprintf(stderr, "smolcluster: %s\n", qPrintable(reason));
        grab(false);
    });
    // Start once every local node has joined (they connect in the background).
    whenNodesJoined(engine, window, options.nodes, [&window, sinceLaunch, startedAtMs, options] {
        *startedAtMs = sinceLaunch->elapsed();
        std::printf("smolcluster: %d local node(s) joined %.1f s after the window opened\n", options.nodes,
                    double(*startedAtMs) / 1000);
        window.startRun();
    });
    return app.exec();
}

namespace {

// The tool bar's settings as the command line asks.
smol::app::RunSettings settingsOf(smol::app::RunSettings settings, const GuiOptions &options)
{
    settings.strategy = options.strategy;
    settings.backend = options.backend;
    settings.nodes = options.nodes;
    if (!options.model.isEmpty())
        settings.model = options.model;
    settings.mesh = options.mesh;
    if (!options.compress.isEmpty())
        settings.compression = options.compress;
    if (options.steps > 0)
        settings.steps = options.steps;
    else if (!options.screenshot.isEmpty())
        settings.steps = 20;
    return settings;
}

// --replay (and --compare): false, with the reason on stderr, when a file
// does not open.
bool openReplay(smol::app::MainWindow &window, const GuiOptions &options)
{
    if (options.replay.isEmpty())
        return true;
    QString error;
    if (!window.openSession(options.replay, &error, /*quiet=*/true)) {
        std::fprintf(stderr, "smolcluster: %s\n", qPrintable(error));
        return false;
    }
    if (!options.compare.isEmpty()) {
        if (!window.compare()->open(options.compare, &error, /*quiet=*/true)) {
            std::fprintf(stderr, "smolcluster: %s\n", qPrintable(error));
            return false;
        }
        window.showView(QStringLiteral("memory")); // both runs' bars side by side
    }
    return true;
}

} // namespace

int main(int argc, char **argv)
{
    // Help, version and bad values must not need a display, so parse once
    // before QApplication exists; Qt's own options (-platform …) only parse
    // after QApplication has removed them.
    QStringList rawArgs;
    for (int i = 0; i < argc; ++i)
        rawArgs << QString::fromLocal8Bit(argv[i]);
    const GuiOptions early = parseOptions(rawArgs);
    if (early.parsed) {
        if (const int code = handleEarly(early); code >= 0)
            return code;
    }

    QApplication app(argc, argv);
    QApplication::setApplicationName(QStringLiteral("smolcluster"));
    QApplication::setApplicationVersion(QStringLiteral(SMOL_VERSION));
    QGuiApplication::setDesktopFileName(QStringLiteral("smolcluster"));
    GuiOptions options = parseOptions(QCoreApplication::arguments());
    if (options.name.isEmpty())
        options.name = early.name; // QApplication takes --name for itself
    if (const int code = handleEarly(options); code >= 0)
        return code;

    // The flags, else what the Remote nodes dialog remembered, else any
    // free port and a random token.
    if (!options.watchHost.isEmpty())
        return smol::app::runViewerWindow(app, options); // a student's window: the teacher's cluster

    const smol::app::ListenSettings listen =
        smol::app::effectiveListenSettings(options.listen, smol::app::rememberedListenSettings());
    std::unique_ptr<smol::app::EngineController> engineOwner;
    try {
        engineOwner = std::make_unique<smol::app::EngineController>(
            smol::app::ClusterOptions{options.nodes, listen.port, listen.token, listen.advertise,
                                      QStringLiteral("0.0.0.0"), options.watchToken});
    } catch (const std::exception &e) {
        std::fprintf(stderr, "smolcluster: %s\n", e.what());
        return 1;
    }
    smol::app::EngineController &engine = *engineOwner;
    smol::app::MainWindow window(&engine);
    window.setSettings(settingsOf(window.settings(), options));
    window.setProjectorMode(options.projector);
    window.timeline()->setLiveMemoryBudget(std::size_t(options.timelineBudgetMiB) << 20);
    window.show();
    if (!options.view.isEmpty())
        window.showView(options.view);
    if (!options.breakAt.isEmpty()) {
        QString why;
        if (!window.runControls()->addBreakpoint(options.breakAt, &why)) {
            std::fprintf(stderr, "smolcluster: %s\n", qPrintable(why));
            return 2;
        }
    }

    if (!openReplay(window, options))
        return 1;
    if (!options.lesson.isEmpty())
        return runLesson(app, engine, window, options);
    if (!options.screenshot.isEmpty())
        return runScreenshot(app, engine, window, options);
    return app.exec();
}
