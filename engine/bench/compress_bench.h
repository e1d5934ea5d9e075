// The compression part of `smolctl bench train` (also alone: `smolctl bench
// train --compression`): on 4 nodes, mlp, sgd lr 0.1, global batch 120,
//   1. bytes per node per step on the wire, fp16 and powersgd:2 against
//      plain ddp, and test accuracy after 600 steps side by side;
//   2. samples/s with every link at 100 Mbit/s and 1 ms, compressed against
//      plain, in the steady state (the steps after --compress-start);
//   3. on loopback, ddp+fp16 against single at global batch 64 (2 nodes).
// No LibTorch in this header.
#pragma once

#include <QString>
#include <QTextStream>

namespace smol::engine {

// Returns a process exit code (1: a run failed, its reason on `err`).
int runCompressionBench(int rounds, QTextStream &out, QTextStream &err);

} // namespace smol::engine
