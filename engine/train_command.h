// `smolctl train`: parse the arguments, run an in-process cluster
// (trainer.h), print progress or JSON lines, and return an exit code.
// No LibTorch in this header.
#pragma once

#include <QStringList>
#include <QTextStream>

namespace smol::engine {

extern const char kTrainUsage[];

// Bad arguments: one line on `err`, returns 2. A failed run: one line, 1.
int runTrainCommand(const QStringList &args, QTextStream &out, QTextStream &err);

} // namespace smol::engine
