// smolcluster: the GUI. Wiring only: parse the options, show the window,
// start a local cluster on a worker thread and forward its snapshots to the
// window through queued calls. The GUI thread never waits on the network.
//
// Today the "cluster" is N ranks as threads of this process, connected by a
// TCP loopback mesh and checked with one barrier + all-reduce.
#include "local_cluster.h"
#include "mainwindow.h"

#include "net/mesh_health_check.h"
#include "net/transport.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QElapsedTimer>
#include <QPixmap>
#include <QRandomGenerator>
#include <QTimer>

#include <array>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <mutex>
#include <thread>

namespace {

using smol::app::ClusterSnapshot;
using smol::app::LocalCluster;
using smol::widgets::NodeRow;
using smol::widgets::NodeState;

constexpr int kDefaultNodes = 4;
constexpr int kMaxNodes = 16;

struct Options {
    bool parsed = false; // false: parse error (may be a Qt option before QApplication strips them)
    bool help = false;
    bool version = false;
    int nodes = kDefaultNodes;
    QString screenshot;
    QString error;
};

const char kUsage[] = R"(Usage: smolcluster [--nodes N] [--screenshot FILE.png]

Starts N nodes (threads in this process) connected by a TCP loopback mesh,
checks them with a barrier and an all-reduce, and shows every node's state
and the payload bytes it moved.

Options:
  --nodes N              number of nodes, 1 to 16 (default 4)
  --screenshot FILE.png  wait for the health check, save the window to FILE.png
                         and exit (0 if every node is ready)
  -h, --help             show this help
  --version              print the version

Keys: Ctrl+Q quits, F11 toggles full screen.
)";

Options parseOptions(const QStringList &args)
{
    QCommandLineParser parser;
    const QCommandLineOption help(QStringList{QStringLiteral("h"), QStringLiteral("help")});
    const QCommandLineOption version(QStringLiteral("version"));
    const QCommandLineOption nodes(QStringLiteral("nodes"), QString(), QStringLiteral("N"));
    const QCommandLineOption screenshot(QStringLiteral("screenshot"), QString(), QStringLiteral("FILE"));
    parser.addOptions({help, version, nodes, screenshot});

    Options options;
    if (!parser.parse(args)) {
        options.error = parser.errorText();
        return options;
    }
    options.parsed = true;
    options.help = parser.isSet(help);
    options.version = parser.isSet(version);
    options.screenshot = parser.value(screenshot);
    if (parser.isSet(nodes)) {
        bool ok = false;
        options.nodes = parser.value(nodes).toInt(&ok);
        if (!ok || options.nodes < 1 || options.nodes > kMaxNodes)
            options.error = QStringLiteral("--nodes must be an integer from 1 to %1, got '%2'")
                                .arg(kMaxNodes)
                                .arg(parser.value(nodes));
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

void saveScreenshotAndQuit(QWidget &window, const QString &file, const ClusterSnapshot &snapshot)
{
    if (!window.grab().save(file)) {
        std::fprintf(stderr, "smolcluster: could not write screenshot to %s\n", qPrintable(file));
        QCoreApplication::exit(1);
        return;
    }
    std::printf("smolcluster: %s; screenshot saved to %s\n", qPrintable(snapshot.status), qPrintable(file));
    QCoreApplication::exit(snapshot.allReady ? 0 : 1);
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

    smol::app::MainWindow window;
    window.show();

    // Declared after the window so it is destroyed (and joined) first.
    LocalCluster cluster(options.nodes, [&window, file = options.screenshot](ClusterSnapshot snapshot) {
        QMetaObject::invokeMethod(
            &window,
            [&window, file, snapshot = std::move(snapshot)] {
                window.setNodes(snapshot.nodes);
                window.showStatus(snapshot.status);
                if (snapshot.finished && !file.isEmpty()) {
                    // Let the view lay out the new rows before grabbing.
                    QTimer::singleShot(100, &window, [&window, file, snapshot] {
                        saveScreenshotAndQuit(window, file, snapshot);
                    });
                }
            },
            Qt::QueuedConnection);
    });
    return app.exec();
}
