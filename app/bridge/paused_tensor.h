// An engine tensor snapshot as the inspector shows it: the live pause
// (EngineController) and a recorded one (ReplayController) go through here.
#pragma once

#include "engine/breakpoints/tensor_snapshot.h"
#include "widgets/tensor_inspector.h"

namespace smol::engine {
struct PauseState;
struct TensorRecord;
} // namespace smol::engine

namespace smol::app {

widgets::PausedTensor pausedTensorOf(const engine::TensorSnapshot &snapshot);
// A live pause whole: why, whether every node is held, inputs and results.
widgets::PauseView pauseViewOf(const engine::PauseState &state);
// A recorded tensor (a session file's, or a teacher's stream's): the picture
// from its JSON; which node, step, collective and side from the record (the
// indexed columns).
widgets::PausedTensor pausedTensorOf(const engine::TensorRecord &record);

} // namespace smol::app
