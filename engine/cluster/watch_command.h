// `smolctl watch HOST:PORT --token T [--json]`: the headless viewer of a
// teacher's run (viewer_client.h): a line per step, pause and lesson step,
// and the run's end. No LibTorch in this header.
#pragma once

#include <QStringList>
#include <QTextStream>

namespace smol::engine {

// 0: the run ended well; 1: it failed, or the connection ended before the
// run did; 2: bad arguments, or the coordinator could not be reached or
// refused the token.
int runWatchCommand(const QStringList &args, QTextStream &out, QTextStream &err);

} // namespace smol::engine
