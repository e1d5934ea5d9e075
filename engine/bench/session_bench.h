#pragma once

#include <QStringList>
#include <QTextStream>

namespace smol::engine {

// `smolctl bench session`: what recording costs and how fast session files
// are, measured side by side in one run (see session_bench.cpp).
int runSessionBench(const QStringList &args, QTextStream &out, QTextStream &err);

} // namespace smol::engine
