// `smolctl bench watch`: what viewers cost a run. One coordinator streaming
// to viewers, 4 node threads, a ddp mlp run, in alternating rounds with no
// viewer and with 64 (ViewerClients of this process on loopback, each
// decoding its whole stream); prints the median samples/s of each, the
// ratio, and what one viewer received per second. No LibTorch in this header.
#pragma once

#include <QStringList>
#include <QTextStream>

namespace smol::engine {

int runWatchBench(const QStringList &args, QTextStream &out, QTextStream &err);

} // namespace smol::engine
