// The views' text sizes. Most views size text in pixels, not points, from
// the widget's size and the projector mode, so a label is the same number
// of pixels tall on any screen's DPI setting; the table-like panels follow
// the desktop's point size, enlarged on a projector.
#pragma once

#include <QFont>

namespace smol::widgets {

// `base` (the widget's font: its family) at `px` pixels, rounded, at least 1.
QFont pixelFont(const QFont &base, double px, bool bold = false);

// The panels whose text follows the desktop's point size (shard map,
// placement editor): on a projector 1.8 times as large, and at least 18 pt.
QFont projectorFont(const QFont &base, bool projector);

} // namespace smol::widgets
