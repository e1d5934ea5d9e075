// smolcluster: the GUI. Wiring only: parse the options, show the window,
// start a local cluster on a worker thread and forward its snapshots to the
// window through queued calls. The GUI thread never waits on the network.
//
// Today the "cluster" is N ranks as threads of this process, connected by a
// TCP loopback mesh and checked with one barrier + all-reduce.
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

using smol::widgets::NodeRow;
using smol::widgets::NodeState;

constexpr int kDefaultNodes = 4;
constexpr int kMaxNodes = 16;

struct ClusterSnapshot {
    std::vector<NodeRow> nodes;
    QString status;
    bool finished = false; // the health check is over
    bool allReady = false;
};

// Owns the worker thread that builds the mesh, checks it, and keeps it up
// until destruction, which tears it down (and aborts a check in progress).
class LocalCluster {
public:
    using Publish = std::function<void(ClusterSnapshot)>; // called on the worker thread

    LocalCluster(int nodes, Publish publish)
        : m_nodes(nodes)
        , m_publish(std::move(publish))
        , m_thread([this] { threadMain(); })
    {
    }

    ~LocalCluster()
    {
        {
            std::lock_guard lock(m_mutex);
            m_stop = true;
            for (smol::net::Transport *t : m_checking)
                t->abort();
        }
        m_wake.notify_all();
        m_thread.join();
    }

private:
    static std::string randomToken()
    {
        std::array<quint32, 4> words;
        QRandomGenerator::system()->fillRange(words.data(), words.size());
        return QByteArray(reinterpret_cast<const char *>(words.data()), sizeof(words)).toHex().toStdString();
    }

    void threadMain()
    {
        try {
            run();
        } catch (const std::exception &e) {
            // Thread top: whatever failed becomes every node's state.
            m_publish({rows(NodeState::Failed, QString::fromStdString(e.what())),
                       QObject::tr("The local cluster failed: %1").arg(e.what()), true, false});
        }
        waitForStop();
    }

    // Builds the mesh, checks it, publishes what was measured, and holds the
    // mesh until stop is requested.
    void run()
    {
        using namespace smol::net;
        m_publish(
            {rows(NodeState::Connecting),
             QObject::tr("Connecting %1 nodes (threads in this process) over TCP loopback…").arg(m_nodes)});

        QElapsedTimer timer;
        timer.start();
        const std::vector<std::unique_ptr<Transport>> mesh =
            makeLocalMesh(TransportKind::Tcp, m_nodes, randomToken());
        const qint64 connectMs = timer.elapsed();

        std::vector<Transport *> ranks;
        for (const auto &t : mesh)
            ranks.push_back(t.get());
        {
            std::lock_guard lock(m_mutex);
            if (m_stop)
                return; // the mesh closes on the way out
            m_checking = ranks;
        }
        m_publish({rows(NodeState::Connecting),
                   QObject::tr("Mesh connected in %1 ms; running barrier + all-reduce…").arg(connectMs)});

        timer.restart();
        const std::vector<RankHealth> health = runMeshHealthCheck(ranks);
        const qint64 checkMs = timer.elapsed();
        {
            std::lock_guard lock(m_mutex);
            m_checking.clear();
        }

        std::vector<NodeRow> nodes = rows(NodeState::Connecting);
        int ready = 0;
        for (std::size_t r = 0; r < nodes.size(); ++r) {
            nodes[r].state = health[r].ok ? NodeState::Ready : NodeState::Failed;
            nodes[r].error = QString::fromStdString(health[r].error);
            nodes[r].bytesSent = health[r].bytesSent;
            nodes[r].bytesReceived = health[r].bytesReceived;
            ready += health[r].ok ? 1 : 0;
        }
        const bool allReady = ready == m_nodes;
        QString status =
            QObject::tr("%1 of %2 nodes failed the health check").arg(m_nodes - ready).arg(m_nodes);
        if (allReady)
            status = QObject::tr("%1/%1 nodes ready: mesh connected in %2 ms, barrier + all-reduce "
                                 "matched N(N+1)/2 in %3 ms")
                         .arg(m_nodes)
                         .arg(connectMs)
                         .arg(checkMs);
        m_publish({nodes, status, true, allReady});

        waitForStop();
        // `mesh` goes out of scope here: connections close, I/O threads join.
    }

    std::vector<NodeRow> rows(NodeState state, const QString &error = {}) const
    {
        using namespace smol::net;
        const QString transport =
            QStringLiteral("%1 %2").arg(QString::fromLatin1(transportName(TransportKind::Tcp)),
                                        QString::fromStdString(TransportOptions{}.bindAddress));
        std::vector<NodeRow> nodes;
        for (int r = 0; r < m_nodes; ++r)
            nodes.push_back(NodeRow{r, QStringLiteral("node-%1").arg(r), transport, state, error, {}, {}});
        return nodes;
    }

    void waitForStop()
    {
        std::unique_lock lock(m_mutex);
        m_wake.wait(lock, [this] { return m_stop; });
    }

    const int m_nodes;
    const Publish m_publish;
    std::mutex m_mutex;
    std::condition_variable m_wake;
    bool m_stop = false;
    // Aborting these stops a health check in progress.
    std::vector<smol::net::Transport *> m_checking;
    // Declared last: the thread starts once the members above exist.
    std::thread m_thread;
};

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
