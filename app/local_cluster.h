// The GUI's embedded cluster for now: N ranks as threads of the GUI process,
// connected by a TCP loopback mesh and checked with one barrier + all-reduce,
// on a worker thread that publishes snapshots. The engine's coordinator will
// replace it; until then it lives here, out of main().
#pragma once

#include "widgets/node_table_model.h"
#include "net/mesh_health_check.h"
#include "net/transport.h"

#include <QElapsedTimer>
#include <QRandomGenerator>
#include <QString>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace smol::app {

using widgets::NodeRow;
using widgets::NodeState;

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

} // namespace smol::app
