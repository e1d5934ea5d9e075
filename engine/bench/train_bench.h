// `smolctl bench train`: training throughput measured side by side in one
// run on the mlp with one LibTorch thread per node: single vs ddp on 2 nodes,
// and ddp's step time with a recording trace sink attached vs detached.
// No LibTorch in this header.
#pragma once

#include <QStringList>
#include <QTextStream>

namespace smol::engine {

int runTrainBench(const QStringList &args, QTextStream &out, QTextStream &err);

} // namespace smol::engine
