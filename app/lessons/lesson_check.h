// `smolctl lesson`: list the shipped lessons, show one's outline (checking
// its file), or run every step of it without a window on a local cluster
// (--check) and check each revealed value against its formula within the
// lesson's tolerance. No LibTorch in this header.
#pragma once

#include <QStringList>
#include <QTextStream>

namespace smol::app {

extern const char kLessonUsage[];

// 0: listed, outlined, or every step reached and every value agreed;
// 1: a step failed or a value disagreed (the step and the reason on `err`);
// 2: bad arguments or a lesson file that does not parse (one line).
int runLessonCommand(const QStringList &args, QTextStream &out, QTextStream &err);

} // namespace smol::app
