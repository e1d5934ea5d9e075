// The packets-in-flight timeline: one lane per node, compute and collective
// spans, every packet an arrow from sender to receiver, and (when memory
// samples come) a strip of the node's memory by category under them
// (TimelineRenderer paints it; TimelineData holds it). Live runs and replays use the same
// widget: live, it follows the newest events and draws packets still in
// flight up to "now"; in a replay it shows the whole recording with a
// playhead, and packets in flight at the playhead move along their arrows.
//
// Mouse: wheel zooms at the pointer, drag pans, Shift+drag (or a right-button
// drag) zooms to the dragged range, a click selects (activated()), a double
// click zooms to what it hits; hovering shows the details as a tooltip.
// Keys: + / - zoom, Left / Right pan (Shift: a page), Home or 0 fits the
// whole run, End follows the newest events again, Z zooms to the selection,
// Escape clears it.
//
// Following "now" live, the view shows the last step and a half
// (recentStepsSpan: the newest steps with their packets drawn apart) until
// the user picks a zoom. At a pause (holdAt: Space, N, a breakpoint, a
// lesson's stop, a replay at a recorded pause) it stops following and
// frames the held collective (timeline_hold.h), re-framing as the last
// events before the hold arrive, until the user moves the view; live,
// every lane is hatched from the hold on and captioned with the held
// collective and its step. releaseHold() brings following back if it was
// on when the pause began.
//
// Live, the data keeps to a memory budget (setLiveMemoryBudget, default
// TimelineData::kDefaultLiveBudget): the oldest events leave the view, a
// mark shows where its history starts, and a selection or hover on dropped
// events is cleared. A replay (setLive(false)) holds its whole window.
#pragma once

#include "timeline_axis.h"
#include "timeline_data.h"
#include "timeline_hold.h"
#include "timeline_renderer.h"

#include <QWidget>

#include <optional>

namespace smol::widgets {

class TimelineView : public QWidget {
    Q_OBJECT

public:
    explicit TimelineView(QWidget *parent = nullptr);

    // Add events through data(), then call dataChanged().
    TimelineData &data() { return m_data; }
    const TimelineData &data() const { return m_data; }
    void dataChanged();
    void clear();

    // Live: follow the newest events; unreceived packets reach to now.
    void setLive(bool live);
    bool isLive() const { return m_live; }
    // The budget the data keeps to while live (0: none); replays have none.
    void setLiveMemoryBudget(std::size_t bytes);
    std::size_t liveMemoryBudget() const { return m_liveBudget; }
    void setNow(std::int64_t nowNs);
    // Live: the cluster paused at startNs (kNone: it runs; the pause ends,
    // as releaseHold()); holdAt() with only the time and the reason known.
    void setLivePause(std::int64_t startNs, const QString &reason = QString());
    // A pause began, or a replay's position lies in a recorded pause: frame
    // the held collective (see above). Another hold while held frames the
    // new one (N after N).
    void holdAt(const TimelineHold &hold);
    // The pause is over: no hatch; following again if it was on at the hold.
    void releaseHold();
    bool isHolding() const { return m_holding; }
    const TimelineHold &hold() const { return m_hold; }
    // What the live hatch says (holdCaption()); empty when not held.
    QString holdText() const { return m_overlay.livePauseCaption; }
    // Replay: the position; TimelineOverlay::kNone hides it.
    void setPlayhead(std::int64_t ns);
    std::int64_t playhead() const { return m_overlay.playheadNs; }
    // Keep the newest events (live) or the playhead (replay) in view.
    void setFollowing(bool on);
    bool isFollowing() const { return m_following; }

    void setProjectorMode(bool on);

    const TimeAxis &axis() const { return m_axis; }
    void showRange(std::int64_t t0, std::int64_t t1); // stops following
    void fitAll();
    bool jumpToStep(std::int64_t step); // false: no such step
    // Steps `from` to `to` in view (only `from` when `to` is not there yet).
    bool showSteps(std::int64_t from, std::int64_t to);
    bool zoomToSelection();

    TimelineHit selected() const { return m_overlay.selected; }
    void select(const TimelineHit &hit);
    // What is at a point of the widget (after a paint).
    TimelineHit hitAt(const QPointF &pos) const { return m_renderer.hitTest(pos); }
    QString describe(const TimelineHit &hit) const { return TimelineRenderer::describe(m_data, hit); }
    // The visible timeline as an image of the widget's size (for export).
    QImage renderImage();
    const TimelineFrameStats &lastStats() const { return m_stats; }

    QSize sizeHint() const override { return QSize(900, 320); }
    QSize minimumSizeHint() const override { return QSize(320, 140); }

Q_SIGNALS:
    void activated(const smol::widgets::TimelineHit &hit); // a click on an item
    void rangeChanged(qint64 startNs, qint64 endNs);

protected:
    void paintEvent(QPaintEvent *event) override;
    void resizeEvent(QResizeEvent *event) override;
    void wheelEvent(QWheelEvent *event) override;
    void mousePressEvent(QMouseEvent *event) override;
    void mouseMoveEvent(QMouseEvent *event) override;
    void mouseReleaseEvent(QMouseEvent *event) override;
    void mouseDoubleClickEvent(QMouseEvent *event) override;
    void keyPressEvent(QKeyEvent *event) override;
    void leaveEvent(QEvent *event) override;
    bool event(QEvent *event) override;

private:
    void relayout();
    void viewMoved(); // the user moved the view: stop following, repaint
    void followNow();
    std::int64_t followSpan(); // live, following with no zoom of the user's
    void frameHold();          // the hold's hatch, and its frame while the user has not moved
    std::int64_t dataEnd() const;
    // Selection and hover hold list indexes: after the data dropped events,
    // move them with their events, or clear them when those are gone.
    void followDrops();
    std::uint64_t droppedBefore(const TimelineHit &hit) const;
    void setSelected(const TimelineHit &hit);
    void setHovered(const TimelineHit &hit);

    TimelineData m_data;
    TimelineRenderer m_renderer;
    TimeAxis m_axis;
    TimelineOverlay m_overlay;
    TimelineFrameStats m_stats;
    bool m_live = false;
    bool m_following = true;
    bool m_fitted = false; // the first events have been fitted
    std::size_t m_liveBudget = TimelineData::kDefaultLiveBudget;
    std::uint64_t m_seenDrops = 0;                       // the data's dropGeneration() last followed
    std::uint64_t m_selectedBase = 0, m_hoveredBase = 0; // droppedBefore() when they were taken
    std::int64_t m_followSpanNs = 0; // while following: how much time is shown (0: recentStepsSpan)
    std::int64_t m_autoSpanNs = 0;   // recentStepsSpan as last shown (it moves only by a quarter or more)
    bool m_holding = false;
    TimelineHold m_hold;
    bool m_followAfterHold = false; // following was on when the pause began
    bool m_holdFramed = false;      // the view shows the hold's frame (the user has not moved it)
    // Mouse state.
    enum class Drag { None, Pan, Band } m_drag = Drag::None;
    QPointF m_pressPos;
    QPointF m_lastPos;
    bool m_moved = false;
};

} // namespace smol::widgets
