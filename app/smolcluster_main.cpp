// smolcluster: the GUI. Wiring only: parse the options, start the engine
// bridge (a coordinator and N local nodes, threads of this process talking
// the same authenticated TCP protocol remote nodes use), show the window.
// The GUI thread never waits on the network or on training.
#include "engine_controller.h"
#include "mainwindow.h"
#include "replay_controller.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QImage>
#include <QPixmap>
#include <QTimer>

#include <cstdio>

namespace {

constexpr int kDefaultNodes = 4;
constexpr int kMaxNodes = 16;

struct Options {
    bool parsed = false; // false: parse error (may be a Qt option before QApplication strips them)
    bool help = false;
    bool version = false;
    bool projector = false;
    int nodes = kDefaultNodes;
    int steps = -1; // -1: not given
    QString strategy = QStringLiteral("ddp");
    QString screenshot;
    QString replay;
    QString error;
};

const char kUsage[] = R"(Usage: smolcluster [--nodes N] [--strategy S] [--steps K] [--projector]
                   [--replay SESSION] [--screenshot FILE.png]

Opens the control panel with a ready local cluster: N nodes that are
threads of this process, joined to its coordinator over authenticated TCP
exactly as `smolctl node` processes on other machines join it (Cluster >
Remote nodes shows the command). Choose a strategy and press Start.

Options:
  --nodes N              local nodes, 1 to 16 (default 4)
  --strategy S           strategy preselected in the tool bar (default ddp)
  --steps K              steps preselected in the tool bar (default 300)
  --projector            start in projector mode (large fonts, high contrast)
  --replay SESSION       open a recorded session (`smolctl train --record`,
                         or Ctrl+R here) in the window, as File > Open does
  --screenshot FILE.png  train K steps (default 20) at once, save the window
                         to FILE.png when the run ends and exit (0 if the
                         run finished and the image is not blank); with
                         --replay, move the replay to step K (default: the
                         end) and save the window then
  -h, --help             show this help
  --version              print the version

Keys: Ctrl+Return start, Space pause/resume, N step one collective,
Ctrl+. stop, Ctrl+R record the next run, Ctrl+O open a session,
Ctrl+W close it, Ctrl+P projector mode, F11 full screen, Ctrl+Q quit.
Replay: Space play/pause, [ and ] (or N) previous/next collective.
Timeline: wheel zoom, drag pan, Shift+drag zoom to a range, click for
details, + - zoom, Home fit, End follow, Z zoom to the selection,
Ctrl+G go to a step, Ctrl+Shift+P save it as PNG, Ctrl+Shift+T export the
session as Chrome trace JSON.
)";

Options parseOptions(const QStringList &args)
{
    QCommandLineParser parser;
    const QCommandLineOption help(QStringList{QStringLiteral("h"), QStringLiteral("help")});
    const QCommandLineOption version(QStringLiteral("version"));
    const QCommandLineOption projector(QStringLiteral("projector"));
    const QCommandLineOption nodes(QStringLiteral("nodes"), QString(), QStringLiteral("N"));
    const QCommandLineOption steps(QStringLiteral("steps"), QString(), QStringLiteral("K"));
    const QCommandLineOption strategy(QStringLiteral("strategy"), QString(), QStringLiteral("S"));
    const QCommandLineOption screenshot(QStringLiteral("screenshot"), QString(), QStringLiteral("FILE"));
    const QCommandLineOption replay(QStringLiteral("replay"), QString(), QStringLiteral("SESSION"));
    parser.addOptions({help, version, projector, nodes, steps, strategy, screenshot, replay});

    Options options;
    if (!parser.parse(args)) {
        options.error = parser.errorText();
        return options;
    }
    options.parsed = true;
    options.help = parser.isSet(help);
    options.version = parser.isSet(version);
    options.projector = parser.isSet(projector);
    options.screenshot = parser.value(screenshot);
    options.replay = parser.value(replay);
    if (parser.isSet(strategy))
        options.strategy = parser.value(strategy);
    if (parser.isSet(nodes)) {
        bool ok = false;
        options.nodes = parser.value(nodes).toInt(&ok);
        if (!ok || options.nodes < 1 || options.nodes > kMaxNodes)
            options.error = QStringLiteral("--nodes must be an integer from 1 to %1, got '%2'")
                                .arg(kMaxNodes)
                                .arg(parser.value(nodes));
    }
    if (parser.isSet(steps)) {
        bool ok = false;
        options.steps = parser.value(steps).toInt(&ok);
        if (!ok || options.steps < 1)
            options.error = QStringLiteral("--steps must be a positive integer, got '%1'").arg(parser.value(steps));
    }
    if (!parser.positionalArguments().isEmpty())
        options.error = QStringLiteral("unexpected argument '%1'").arg(parser.positionalArguments().first());
    return options;
}

// Returns an exit code when the options say not to start the GUI, else -1.
int handleEarly(const Options &options)
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

int main(int argc, char **argv)
{
    // Help, version and bad values must not need a display, so parse once
    // before QApplication exists; Qt's own options (-platform …) only parse
    // after QApplication has removed them.
    QStringList rawArgs;
    for (int i = 0; i < argc; ++i)
        rawArgs << QString::fromLocal8Bit(argv[i]);
    if (const Options early = parseOptions(rawArgs); early.parsed) {
        if (const int code = handleEarly(early); code >= 0)
            return code;
    }

    QApplication app(argc, argv);
    QApplication::setApplicationName(QStringLiteral("smolcluster"));
    QApplication::setApplicationVersion(QStringLiteral(SMOL_VERSION));
    QGuiApplication::setDesktopFileName(QStringLiteral("smolcluster"));
    const Options options = parseOptions(QCoreApplication::arguments());
    if (const int code = handleEarly(options); code >= 0)
        return code;

    smol::app::EngineController engine(options.nodes);
    smol::app::MainWindow window(&engine);
    smol::app::RunSettings settings = window.settings();
    settings.strategy = options.strategy;
    settings.nodes = options.nodes;
    if (options.steps > 0)
        settings.steps = options.steps;
    else if (!options.screenshot.isEmpty())
        settings.steps = 20;
    window.setSettings(settings);
    window.setProjectorMode(options.projector);
    window.show();

    if (!options.replay.isEmpty()) {
        QString error;
        if (!window.openSession(options.replay, &error, /*quiet=*/true)) {
            std::fprintf(stderr, "smolcluster: %s\n", qPrintable(error));
            return 1;
        }
    }
    if (!options.screenshot.isEmpty()) {
        const QString file = options.screenshot;
        auto grab = [&window, file](bool finished) {
            // Let the last snapshot reach every view before grabbing.
            QTimer::singleShot(300, &window, [&window, file, finished] {
                const QImage image = window.grab().toImage();
                if (isBlank(image) || !image.save(file)) {
                    std::fprintf(stderr, "smolcluster: could not write a non-blank screenshot to %s\n",
                                 qPrintable(file));
                    QCoreApplication::exit(1);
                    return;
                }
                std::printf("smolcluster: screenshot saved to %s\n", qPrintable(file));
                QCoreApplication::exit(finished ? 0 : 1);
            });
        };
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
        QObject::connect(&engine, &smol::app::EngineController::runFinished, &window, [grab](const QString &summary) {
            std::printf("smolcluster: %s\n", qPrintable(summary));
            grab(true);
        });
        QObject::connect(&engine, &smol::app::EngineController::runFailed, &window, [grab](const QString &reason) {
            std::fprintf(stderr, "smolcluster: the run failed: %s\n", qPrintable(reason));
            grab(false);
        });
        // Start once every local node has joined (they connect in the background).
        auto *poll = new QTimer(&window);
        QObject::connect(poll, &QTimer::timeout, &window, [&engine, &window, poll, options] {
            static int waited = 0;
            if (++waited > 600) { // 60 s
                std::fprintf(stderr, "smolcluster: the local nodes did not join within 60 s\n");
                QCoreApplication::exit(1);
                return;
            }
            if (!engine.isRunning() && engine.readyNodes() >= options.nodes) {
                poll->stop();
                window.startRun();
            }
        });
        poll->start(100);
    }
    return app.exec();
}
