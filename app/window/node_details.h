// The Node page's text for the selected node: its name (as every view
// names it), id, rank and role, host, state, memory by category, the ZeRO
// formula's prediction and its newest log line, as rich text.
#pragma once

#include "widgets/cluster_state.h"

#include <QString>

namespace smol::app {

QString nodeDetailsHtml(const widgets::NodeState &n);

} // namespace smol::app
