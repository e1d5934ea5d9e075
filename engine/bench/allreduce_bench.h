// `smolctl bench allreduce`: our TCP ring all-reduce and c10d's
// ProcessGroupGloo all-reduce side by side over loopback, same sizes, same
// ranks (as threads), same iterations after warm-up. Prints one row per case
// (under 1 MiB: milliseconds of ring, doubling and auto beside Gloo's), the
// minimum ratio over sizes >= 4 MiB and the 4-node ring/gloo at 4M and 64M.
// No LibTorch in this header.
#pragma once

#include <QStringList>
#include <QTextStream>

namespace smol::engine {

// args: everything after "bench allreduce". Returns a process exit code;
// bad arguments print a one-line reason to `err` and return 2.
int runAllreduceBench(const QStringList &args, QTextStream &out, QTextStream &err);

} // namespace smol::engine
