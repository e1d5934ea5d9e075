// `smolctl bench timeline`: paints the packets-in-flight timeline (with its
// memory lanes) offscreen into a 1920x1080 QImage with the widget's own
// renderer and reports the worst frame over full zoom-out, mid and deep
// zoom, and the memory the loaded events take. Needs a QGuiApplication
// (fonts).
#pragma once

#include <QStringList>
#include <QTextStream>

namespace smol::app {

int runTimelineBench(const QStringList &args, QTextStream &out, QTextStream &err);

} // namespace smol::app
