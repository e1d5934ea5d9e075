// A view that a projector can switch to large type, thick lines and the
// high-contrast palette (Ctrl+P). The mode is one flag kept here for every
// such view; a view restyles or re-measures itself in projectorModeChanged(),
// which runs only when the mode really changes.
//
// Header-only, so views in any widgets/ room (cluster/, the panels) share it
// without a link dependency between their libraries.
#pragma once

#include <QWidget>

namespace smol::widgets {

class ProjectorWidget : public QWidget {
public:
    using QWidget::QWidget;

    void setProjectorMode(bool on)
    {
        if (on == m_projector)
            return;
        m_projector = on;
        projectorModeChanged();
    }
    bool projectorMode() const { return m_projector; }

protected:
    // The default: the size hints may have changed, and every pixel has.
    virtual void projectorModeChanged()
    {
        updateGeometry();
        update();
    }

    bool m_projector = false;
};

} // namespace smol::widgets
