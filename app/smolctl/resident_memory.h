// The process's resident memory, as the kernel counts it (/proc/self/statm):
// what the benches that watch memory (bench timeline, bench soak) report.
#pragma once

#include <QByteArray>
#include <QFile>
#include <QList>

#include <unistd.h>

#include <cstdint>

namespace smol::app {

inline std::int64_t residentBytes()
{
    QFile f(QStringLiteral("/proc/self/statm"));
    if (!f.open(QIODevice::ReadOnly))
        return 0;
    const QList<QByteArray> fields = f.readAll().split(' ');
    return fields.size() > 1 ? fields[1].toLongLong() * sysconf(_SC_PAGESIZE) : 0;
}

} // namespace smol::app
