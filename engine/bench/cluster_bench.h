// `smolctl bench cluster`: the same ddp and zero3 jobs over real
// `smolctl node` processes on loopback, once on our transport and once on
// c10d's ProcessGroupGloo, in alternating rounds; prints each one's
// samples/s and the ratio gloo/ours. No LibTorch in this header.
#pragma once

#include <QStringList>
#include <QTextStream>

namespace smol::engine {

int runClusterBench(const QStringList &args, QTextStream &out, QTextStream &err);

} // namespace smol::engine
