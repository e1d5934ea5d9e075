// The command-line faces of session files:
//
//   smolctl info FILE [--json]     what a recording holds
//   smolctl export FILE --chrome-trace OUT.json | --csv OUT.csv
//
// `args` are the arguments after the command name. Exit codes: 0 done, 1 a
// session file or output that cannot be read or written (one line on
// stderr: "smolctl info: FILE: reason"), 2 bad arguments.
#pragma once

#include <QStringList>
#include <QTextStream>

namespace smol::engine {

int runInfoCommand(const QStringList &args, QTextStream &out, QTextStream &err);
int runExportCommand(const QStringList &args, QTextStream &out, QTextStream &err);

} // namespace smol::engine
