// A view of one cluster snapshot (widgets/cluster_state.h): it keeps the
// newest snapshot its feed handed it and repaints the whole of itself from
// that and nothing else. The cluster view and the memory view are two.
// Header-only, as ProjectorWidget.
#pragma once

#include "widgets/cluster_state.h"
#include "widgets/projector_widget.h"

#include <utility>

namespace smol::widgets {

class SnapshotView : public ProjectorWidget {
public:
    explicit SnapshotView(QWidget *parent)
        : ProjectorWidget(parent)
    {
        setAttribute(Qt::WA_OpaquePaintEvent); // paintEvent fills every pixel
    }

    void setState(ClusterStatePtr state)
    {
        m_state = std::move(state);
        snapshotChanged();
    }
    ClusterStatePtr state() const { return m_state; }

protected:
    // After setState(); the default repaints.
    virtual void snapshotChanged() { update(); }

    ClusterStatePtr m_state;
};

} // namespace smol::widgets
