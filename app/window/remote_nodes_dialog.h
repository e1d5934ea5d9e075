// Cluster > Remote nodes: the command that adds another machine to this
// cluster, the port/token/address the window listens with at its next
// start (remembered, so the command on the board stays the same), and the
// nodes joined so far, refreshed as they come and go.
#pragma once

#include "app/bridge/engine_controller.h"

class QWidget;

namespace smol::app {

// Modal; returns when the user closes it.
void showRemoteNodesDialog(QWidget *parent, EngineController *engine, const widgets::ClusterStatePtr &state);

} // namespace smol::app
