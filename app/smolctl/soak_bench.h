// `smolctl bench soak`: the window's resident memory over a long live run.
// A real local ddp cluster (EngineController, as smolcluster makes it) feeds
// a whole MainWindow, offscreen, for M minutes; each minute it prints the
// process's resident memory and the steps done, at the end the slope over
// the last half. Needs a QApplication (widgets), offscreen unless told
// otherwise.
#pragma once

#include <QStringList>
#include <QTextStream>

namespace smol::app {

int runSoakBench(const QStringList &args, QTextStream &out, QTextStream &err);

} // namespace smol::app
