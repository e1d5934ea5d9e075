// One step number everywhere: the header, the inspector, the timeline, the
// replay bar and the lesson panel name the same step at a pause, as
// displayName() gives a node one name.
//
// The number is the engine's step index, counted from 0: the step a
// collective belongs to, as breakpoints (allreduce@step=3), the timeline's
// axis ("step 0, step 2, ...") and smolctl write it. Which step that is:
//   - at a pause, the held collective's step (PauseView::step()). It is not
//     always the step after the newest completed one: the held-out loss and
//     a checkpoint gather the parameters after step k has been reported, and
//     those collectives belong to step k;
//   - otherwise the step in progress, the one after the newest completed
//     step, unless the feed knows better (ClusterState::current: a replay
//     reads it from the spans at its position).
// If the window ever counted from 1, stepText() is the one place to change.
// Header-only, Qt Core: every widget room may include it.
#pragma once

#include "widgets/cluster_state.h"

#include <QCoreApplication>
#include <QString>

#include <cstdint>

namespace smol::widgets {

// "step 690": a step index as every view writes it.
inline QString stepText(std::int64_t step)
{
    return QCoreApplication::translate("smol::widgets::StepNumber", "step %1").arg(step);
}

// Some node of the snapshot is in a run (running, held or slowed).
inline bool runActive(const ClusterState &state)
{
    for (const NodeState &n : state.nodes)
        if (n.state == NodeRunState::Running || n.state == NodeRunState::Paused || n.state == NodeRunState::Slow)
            return true;
    return false;
}

// The step the cluster is in (see the top of this file); -1 when no node is
// in a run (not started, or ended: ClusterState::step says how far it got).
inline std::int64_t stepInProgress(const ClusterState &state)
{
    if (!runActive(state))
        return -1;
    return state.current >= 0 ? state.current : state.step + 1;
}

} // namespace smol::widgets
