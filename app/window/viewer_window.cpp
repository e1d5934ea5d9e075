#include "viewer_window.h"

#include "app/bridge/engine_controller.h"
#include "app/feed/viewer_feed.h"
#include "gui_options.h"
#include "mainwindow.h"

#include "engine/cluster/node_agent.h"
#include "engine/cluster/viewer_client.h"

#include <QApplication>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QJsonObject>
#include <QMessageBox>
#include <QSysInfo>
#include <QThread>
#include <QTimer>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

void grabAndExit(QWidget &window, const QString &file, bool ok); // smolcluster_main.cpp

namespace smol::app {

namespace {

// This machine's node in the teacher's cluster: an agent thread, as a
// `smolctl node --join` process would run it.
class JoinedNode {
public:
    explicit JoinedNode(engine::NodeAgentOptions options)
    {
        options.joined = [this](int id) { m_id = id; };
        m_thread = std::thread([this, options] {
            try {
                engine::runNodeAgent(options, [](const std::string &) {});
            } catch (const std::exception &e) {
                std::lock_guard lock(m_mutex);
                m_error = e.what();
            }
            m_done = true;
        });
    }
    ~JoinedNode()
    {
        if (m_done)
            m_thread.join();
        else
            m_thread.detach(); // the process ends with it (see runViewerWindow)
    }
    bool done() const { return m_done; }
    // The node id the coordinator gave, once it has; -1 with `error` when it cannot join.
    int waitJoined(int timeoutMs, std::string *error)
    {
        QElapsedTimer clock;
        clock.start();
        while (m_id < 0 && !m_done && clock.elapsed() < timeoutMs)
            QThread::msleep(20);
        std::lock_guard lock(m_mutex);
        if (m_id < 0)
            *error = !m_error.empty() ? m_error : m_done ? "the coordinator closed the connection" : "no welcome in time";
        return m_id;
    }

private:
    std::atomic<int> m_id{-1};
    std::atomic<bool> m_done{false};
    std::mutex m_mutex;
    std::string m_error;
    std::thread m_thread;
};

// --screenshot: the window when the teacher's run ends or a lesson step is revealed.
void screenshotWhenShown(MainWindow &window, ViewerFeed &feed, const QString &file)
{
    QObject::connect(&feed, &RunFeed::runFinished, &window, [&window, file] { grabAndExit(window, file, true); });
    QObject::connect(&feed, &RunFeed::runFailed, &window, [&window, file] { grabAndExit(window, file, false); });
    QObject::connect(&feed, &ViewerFeed::lessonChanged, &window, [&window, file](const QJsonObject &step) {
        if (step.value(QStringLiteral("revealed")).toBool())
            QTimer::singleShot(1500, &window, [&window, file] { grabAndExit(window, file, true); });
    });
    QObject::connect(&feed, &ViewerFeed::closed, &window, [](const QString &reason) {
        std::fprintf(stderr, "smolcluster: the teacher's stream ended: %s\n", qPrintable(reason));
        QCoreApplication::exit(1);
    });
}

} // namespace

int runViewerWindow(QApplication &app, const GuiOptions &o)
{
    const QString where = QStringLiteral("%1:%2").arg(o.watchHost).arg(o.watchPort);
    const std::string name = (o.name.isEmpty() ? QSysInfo::machineHostName() : o.name).toStdString();
    // 1. --join: this machine's node first, so the stream knows which is "you".
    std::unique_ptr<JoinedNode> node;
    int nodeId = -1;
    if (o.join) {
        engine::NodeAgentOptions agent;
        agent.host = o.watchHost.toStdString();
        agent.port = o.watchPort;
        agent.token = o.listen.token.toStdString();
        agent.name = o.name.toStdString();
        agent.inProcess = true; // the teacher's Kill ends this node, not the window
        node = std::make_unique<JoinedNode>(agent);
        std::string error;
        nodeId = node->waitJoined(int(agent.connectTimeout.count()) + 2000, &error);
        if (nodeId < 0) {
            std::fprintf(stderr, "smolcluster: cannot join %s: %s\n", qPrintable(where), error.c_str());
            std::fflush(nullptr);
            std::_Exit(1); // the agent thread may still be trying
        }
        std::printf("smolcluster: joined %s as node %d\n", qPrintable(where), nodeId);
        std::fflush(stdout);
    }
    // 2. The teacher's stream.
    ViewerFeed feed;
    engine::ViewerClientOptions vo;
    vo.host = o.watchHost.toStdString();
    vo.port = o.watchPort;
    vo.token = o.listen.token.toStdString();
    vo.name = name;
    vo.node = nodeId;
    QString error;
    if (!feed.connectTo(vo, &error)) {
        std::fprintf(stderr, "smolcluster: cannot watch %s: %s\n", qPrintable(where), qPrintable(error));
        std::fflush(nullptr);
        std::_Exit(1);
    }
    // 3. The window. It is built around a live bridge; a viewer's has no
    // nodes, listens on loopback only, and nothing in the window reaches it.
    EngineController idle(ClusterOptions{0, 0, QString(), QString(), QStringLiteral("127.0.0.1")});
    MainWindow window(&idle);
    window.watch(&feed);
    window.setProjectorMode(o.projector);
    window.show();
    if (!o.view.isEmpty())
        window.showView(o.view);
    if (!o.screenshot.isEmpty())
        screenshotWhenShown(window, feed, o.screenshot);
    else
        QObject::connect(&feed, &ViewerFeed::closed, &window, [&window, where](const QString &reason) {
            auto *box = new QMessageBox(QMessageBox::Warning, QObject::tr("The teacher's stream ended"),
                                        QObject::tr("The stream from %1 ended: %2").arg(where, reason),
                                        QMessageBox::Ok, &window);
            box->setAttribute(Qt::WA_DeleteOnClose);
            box->open();
        });
    const int code = app.exec();
    feed.close();
    if (node && !node->done()) { // the teacher's cluster still has it: the process's end is its end
        std::fflush(nullptr);
        std::_Exit(code);
    }
    return code;
}

} // namespace smol::app
