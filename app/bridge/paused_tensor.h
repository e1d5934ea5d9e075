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
// `pause` when it held collective (step, kind: net::CollectiveKind's value),
// else an empty view: RunFeed::pauseAt of a feed that keeps its newest pause
// (the live bridge, a teacher's stream).
widgets::PauseView pauseIfAt(const widgets::PauseView &pause, qint64 step, int collectiveKind);

} // namespace smol::app
