// An engine tensor snapshot as the inspector shows it: the live pause
// (EngineController) and a recorded one (ReplayController) go through here.
#pragma once

#include "engine/tensor_snapshot.h"
#include "widgets/tensor_inspector.h"

namespace smol::app {

widgets::PausedTensor pausedTensorOf(const engine::TensorSnapshot &snapshot);

} // namespace smol::app
