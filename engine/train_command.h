// `smolctl train`: parse the arguments, run an in-process cluster
// (trainer.h), print progress or JSON lines, and return an exit code.
// No LibTorch in this header.
#pragma once

#include <QStringList>
#include <QTextStream>

namespace smol::engine {

struct TrainConfig;

extern const char kTrainUsage[];

// `smolctl train`'s run settings in `args` (its options and the defaults
// that depend on another, as `train` parses them; not the cluster options,
// --break, --record or --json) into `config`. Returns the reason they are
// bad (one line), empty when they are good. What `smolctl plan` takes.
QString parseRunOptions(const QStringList &args, TrainConfig &config);

// Bad arguments: one line on `err`, returns 2. A failed run: one line, 1.
int runTrainCommand(const QStringList &args, QTextStream &out, QTextStream &err);

} // namespace smol::engine
