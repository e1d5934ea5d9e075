// What the coordinator tests share (tst_coordinator_admission,
// tst_hostile_traffic, tst_all_lost): a coordinator on loopback, its log as
// lines, connections from chosen loopback addresses, and this process's
// resident memory.
#pragma once

#include "engine/cluster/coordinator.h"
#include "engine/cluster/node_agent.h"

#include <QFile>
#include <QString>
#include <QStringList>

#include <algorithm>
#include <arpa/inet.h>
#include <cstdint>
#include <functional>
#include <mutex>
#include <netinet/in.h>
#include <string>
#include <sys/socket.h>
#include <unistd.h>

namespace smol::test {

inline engine::CoordinatorOptions loopbackCoordinator(const std::string &token)
{
    engine::CoordinatorOptions o;
    o.bindAddress = "127.0.0.1";
    o.token = token;
    return o;
}

// An in-process node agent that joins a loopback coordinator
// (runNodeAgent(o, {}) on a thread of the test).
inline engine::NodeAgentOptions inProcessNode(std::uint16_t port, const std::string &token, const std::string &name,
                                              int memorySlot)
{
    engine::NodeAgentOptions o;
    o.port = port;
    o.token = token;
    o.name = name;
    o.bindAddress = "127.0.0.1";
    o.memorySlot = memorySlot;
    o.inProcess = true;
    return o;
}

// The coordinator's log, as lines (Coordinator::setLogSink(logs.sink())).
class LogLines {
public:
    std::function<void(const std::string &)> sink()
    {
        return [this](const std::string &l) {
            std::lock_guard lock(m_mutex);
            m_lines << QString::fromStdString(l);
        };
    }
    QStringList lines() const
    {
        std::lock_guard lock(m_mutex);
        return m_lines;
    }
    QString all() const { return lines().join('\n'); }

private:
    mutable std::mutex m_mutex;
    QStringList m_lines;
};

inline bool printable(const QString &s)
{
    return std::all_of(s.begin(), s.end(), [](QChar ch) { return ch.isPrint(); });
}

// Resident memory of this process in bytes (-1: unknown).
inline std::int64_t residentBytes()
{
    QFile f(QStringLiteral("/proc/self/status"));
    if (!f.open(QIODevice::ReadOnly))
        return -1;
    for (const QByteArray &line : f.readAll().split('\n'))
        if (line.startsWith("VmRSS:"))
            return line.mid(6).trimmed().split(' ').first().toLongLong() * 1024;
    return -1;
}

// A TCP connection to 127.0.0.1:port from a chosen loopback address; -1
// when it cannot be made.
inline int connectFrom(const char *source, std::uint16_t port)
{
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in from{}, to{};
    from.sin_family = to.sin_family = AF_INET;
    ::inet_pton(AF_INET, source, &from.sin_addr);
    ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    to.sin_port = htons(port);
    if (::bind(fd, reinterpret_cast<sockaddr *>(&from), sizeof from) != 0 ||
        ::connect(fd, reinterpret_cast<sockaddr *>(&to), sizeof to) != 0) {
        ::close(fd);
        return -1;
    }
    return fd;
}

} // namespace smol::test
