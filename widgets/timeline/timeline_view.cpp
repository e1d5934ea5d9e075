#include "timeline_view.h"

#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <QWheelEvent>

#include <cmath>

namespace smol::widgets {

namespace {

constexpr double kWheelStep = 1.25; // zoom per wheel notch
constexpr double kKeyZoom = 1.5;
// Live, before a step has completed (no step length to go by): at most the last 10 s.
constexpr std::int64_t kAutoFollowNs = 10'000'000'000;
constexpr double kClickSlopPx = 4;

} // namespace

TimelineView::TimelineView(QWidget *parent)
    : QWidget(parent)
{
    setMouseTracking(true);
    setFocusPolicy(Qt::StrongFocus);
    setAttribute(Qt::WA_OpaquePaintEvent);
    setToolTip(QString()); // tooltips come from event()
    setAccessibleName(tr("Timeline"));
    relayout();
}

void TimelineView::clear()
{
    m_data.clear();
    m_seenDrops = m_data.dropGeneration();
    m_renderer.forgetHits();
    m_overlay = TimelineOverlay();
    m_fitted = false;
    m_following = true;
    m_followSpanNs = 0;
    m_autoSpanNs = 0;
    m_holding = false;
    m_holdFramed = false;
    m_hold = TimelineHold();
    relayout();
    update();
}

std::int64_t TimelineView::dataEnd() const
{
    std::int64_t end = m_data.endNs();
    if (m_live && m_overlay.nowNs != TimelineOverlay::kNone && m_data.beginNs() <= end)
        end = std::max(end, m_overlay.nowNs);
    return end;
}

void TimelineView::relayout()
{
    m_renderer.layout(QRectF(rect()), std::max(m_data.laneCount(), 1));
    m_axis.left = m_renderer.timeLeft();
    m_axis.width = std::max(1.0, m_renderer.timeWidth());
    m_axis.clampTo(m_data.beginNs(), dataEnd());
}

std::uint64_t TimelineView::droppedBefore(const TimelineHit &hit) const
{
    switch (hit.kind) {
    case TimelineHit::Kind::Packet:
    case TimelineHit::Kind::PacketRun:
        return m_data.packetsDroppedFrom(hit.lane);
    case TimelineHit::Kind::Span:
    case TimelineHit::Kind::SpanRun:
        return m_data.spansDroppedFrom(hit.lane, hit.row);
    case TimelineHit::Kind::Memory:
        return m_data.memoryDroppedFrom(hit.lane);
    case TimelineHit::Kind::None:
        break;
    }
    return 0;
}

void TimelineView::setSelected(const TimelineHit &hit)
{
    m_overlay.selected = hit;
    m_selectedBase = droppedBefore(hit);
}

void TimelineView::setHovered(const TimelineHit &hit)
{
    m_overlay.hovered = hit;
    m_hoveredBase = droppedBefore(hit);
}

void TimelineView::followDrops()
{
    if (m_data.dropGeneration() == m_seenDrops)
        return;
    m_seenDrops = m_data.dropGeneration();
    m_renderer.forgetHits(); // until the next paint, nothing is hit by a stale index
    const auto follow = [this](TimelineHit &hit, std::uint64_t &base) {
        if (hit.kind == TimelineHit::Kind::None)
            return;
        const std::uint64_t now = droppedBefore(hit);
        const std::uint64_t gone = now - base;
        if (hit.first < gone) { // some or all of it was dropped
            hit = TimelineHit();
            base = 0;
            return;
        }
        hit.first -= std::size_t(gone);
        base = now;
    };
    follow(m_overlay.selected, m_selectedBase);
    follow(m_overlay.hovered, m_hoveredBase);
}

void TimelineView::setLiveMemoryBudget(std::size_t bytes)
{
    m_liveBudget = bytes;
    if (m_live) {
        m_data.setMemoryBudget(bytes);
        dataChanged();
    }
}

void TimelineView::dataChanged()
{
    followDrops();
    relayout();
    if (m_data.beginNs() <= m_data.endNs()) {
        if (!m_fitted) {
            m_fitted = true;
            m_axis.fit();
        }
        if (m_following)
            followNow();
        if (m_holding)
            frameHold();
    }
    update();
}

std::int64_t TimelineView::followSpan()
{
    const std::int64_t recent = recentStepsSpan(m_data);
    if (recent <= 0)
        return kAutoFollowNs;
    // Steps vary by a few percent: the zoom moves only when they change by a quarter.
    if (m_autoSpanNs <= 0 || recent > m_autoSpanNs * 5 / 4 || recent < m_autoSpanNs * 4 / 5)
        m_autoSpanNs = recent;
    return m_autoSpanNs;
}

void TimelineView::followNow()
{
    if (m_data.beginNs() > m_data.endNs())
        return;
    if (!m_live) {
        // Replay: keep the playhead inside, paging when it leaves (a
        // position before the first event or after the last shows the edge).
        if (m_overlay.playheadNs == TimelineOverlay::kNone)
            return;
        const std::int64_t t = std::clamp(m_overlay.playheadNs, m_data.beginNs(), m_data.endNs());
        if (t < m_axis.startNs || t > m_axis.endNs()) {
            m_axis.startNs = t - m_axis.spanNs() / 10;
            m_axis.clamp();
        }
        return;
    }
    // What every node has reported at the right edge: events reach the
    // window a snapshot or two (tens of ms) after they happen, and "now"
    // beyond them would be an empty band as wide as a step, with every
    // packet to a node yet to report drawn in flight. Held, "now": the
    // hatch grows to it.
    const std::int64_t span = m_followSpanNs > 0 ? m_followSpanNs : followSpan();
    const std::int64_t end = m_holding ? dataEnd() : reportedUntilNs(m_data, span);
    if (end - m_data.beginNs() <= span && m_followSpanNs == 0) {
        m_axis.fit();
        return;
    }
    m_axis.showRange(end - span, end + span / 50);
}

void TimelineView::setLive(bool live)
{
    m_live = live;
    // Before a replay loads its window, so none of it is dropped.
    m_data.setMemoryBudget(live ? m_liveBudget : 0);
    followDrops();
    if (live)
        m_overlay.playheadNs = TimelineOverlay::kNone;
    else
        m_overlay.nowNs = TimelineOverlay::kNone;
    m_overlay.livePauseNs = TimelineOverlay::kNone;
    m_overlay.livePauseCaption.clear();
    m_holding = false; // a run's end (or a replay's start) ends its pause
    update();
}

void TimelineView::setNow(std::int64_t nowNs)
{
    if (!m_live)
        return;
    m_overlay.nowNs = nowNs;
    m_axis.clampTo(m_data.beginNs(), dataEnd());
    if (m_following)
        followNow();
    update();
}

void TimelineView::setLivePause(std::int64_t startNs, const QString &reason)
{
    if (startNs == TimelineOverlay::kNone) {
        releaseHold();
        return;
    }
    TimelineHold hold;
    hold.atNs = startNs;
    hold.reason = reason;
    holdAt(hold);
}

void TimelineView::holdAt(const TimelineHold &hold)
{
    if (!m_holding) {
        m_followAfterHold = m_following;
        m_holding = true;
    }
    m_hold = hold;
    m_following = false;
    m_holdFramed = true;
    if (m_live) {
        m_overlay.livePauseNs = hold.atNs; // until frameHold() finds the last event before it
        m_overlay.livePauseCaption = holdCaption(hold);
    }
    frameHold();
    update();
}

void TimelineView::releaseHold()
{
    if (!m_holding)
        return;
    m_holding = false; // m_holdFramed stays: the frame is still what is shown
    m_overlay.livePauseNs = TimelineOverlay::kNone;
    m_overlay.livePauseCaption.clear();
    if (m_followAfterHold) { // at the zoom it followed with before the pause
        m_following = true;
        followNow();
    }
    update();
}

void TimelineView::frameHold()
{
    const std::optional<TimelineHoldFrame> frame = holdFrame(m_data, m_hold, m_live);
    if (!frame)
        return;
    if (m_live)
        m_overlay.livePauseNs = frame->heldNs;
    if (!m_holdFramed)
        return;
    const TimeAxis before = m_axis;
    m_axis.clampTo(m_data.beginNs(), dataEnd());
    m_axis.showRange(frame->startNs, frame->endNs);
    if (m_axis.startNs != before.startNs || m_axis.nsPerPixel != before.nsPerPixel)
        Q_EMIT rangeChanged(m_axis.startNs, m_axis.endNs());
}

void TimelineView::setPlayhead(std::int64_t ns)
{
    m_overlay.playheadNs = ns;
    if (m_following)
        followNow();
    update();
}

void TimelineView::setFollowing(bool on)
{
    m_following = on;
    if (on) {
        // At the zoom the user chose; from the whole run or a pause's frame
        // (chosen by no one), at the newest step and a half.
        if (m_live && m_fitted)
            m_followSpanNs =
                m_holdFramed || m_axis.spanNs() >= m_data.endNs() - m_data.beginNs() ? 0 : m_axis.spanNs();
        m_holdFramed = false;
        followNow();
    }
    update();
}

void TimelineView::setProjectorMode(bool on)
{
    m_renderer.setProjectorMode(on);
    relayout();
    update();
}

void TimelineView::showRange(std::int64_t t0, std::int64_t t1)
{
    m_axis.showRange(t0, t1);
    viewMoved();
}

void TimelineView::fitAll()
{
    m_axis.fit();
    viewMoved();
}

bool TimelineView::jumpToStep(std::int64_t step)
{
    const auto range = m_data.stepRange(step);
    if (!range)
        return false;
    const std::int64_t pad = std::max<std::int64_t>(1000, (range->second - range->first) / 20);
    showRange(range->first - pad, range->second + pad);
    return true;
}

bool TimelineView::showSteps(std::int64_t from, std::int64_t to)
{
    const auto a = m_data.stepRange(from), b = m_data.stepRange(std::max(from, to));
    if (!a || !b)
        return jumpToStep(from);
    const std::int64_t pad = std::max<std::int64_t>(1000, (b->second - a->first) / 20);
    showRange(a->first - pad, b->second + pad);
    return true;
}

bool TimelineView::zoomToSelection()
{
    const TimelineHit &h = m_overlay.selected;
    if (h.kind == TimelineHit::Kind::None)
        return false;
    const std::int64_t pad = std::max<std::int64_t>(200, (h.endNs - h.startNs) / 10);
    showRange(h.startNs - pad, h.endNs + pad);
    return true;
}

void TimelineView::select(const TimelineHit &hit)
{
    setSelected(hit);
    update();
}

QImage TimelineView::renderImage()
{
    QImage image(size() * devicePixelRatioF(), QImage::Format_ARGB32_Premultiplied);
    image.setDevicePixelRatio(devicePixelRatioF());
    QPainter p(&image);
    m_stats = m_renderer.paint(p, m_data, m_axis, m_overlay);
    return image;
}

void TimelineView::viewMoved()
{
    m_following = false;
    m_holdFramed = false;
    update();
    Q_EMIT rangeChanged(m_axis.startNs, m_axis.endNs());
}

void TimelineView::paintEvent(QPaintEvent *)
{
    QPainter p(this);
    m_stats = m_renderer.paint(p, m_data, m_axis, m_overlay);
    if (hasFocus()) {
        p.setPen(QPen(palette().highlight().color(), 1));
        p.drawRect(rect().adjusted(0, 0, -1, -1));
    }
}

void TimelineView::resizeEvent(QResizeEvent *)
{
    // A resize keeps the time range in view (the first layout of a window
    // can pass through tiny sizes).
    const std::int64_t t0 = m_axis.startNs, t1 = m_axis.endNs();
    relayout();
    if (m_fitted)
        m_axis.showRange(t0, t1);
    if (m_following)
        followNow();
    if (m_holding)
        frameHold();
}

void TimelineView::wheelEvent(QWheelEvent *event)
{
    const double notches = event->angleDelta().y() / 120.0;
    if (notches == 0) {
        event->ignore();
        return;
    }
    if (event->modifiers() & Qt::ShiftModifier)
        m_axis.panPixels(notches * m_axis.width / 10);
    else
        m_axis.zoomAt(std::max(event->position().x(), m_axis.left), std::pow(kWheelStep, notches));
    viewMoved();
    event->accept();
}

void TimelineView::mousePressEvent(QMouseEvent *event)
{
    setFocus(Qt::MouseFocusReason);
    m_pressPos = m_lastPos = event->position();
    m_moved = false;
    if (event->button() == Qt::RightButton ||
        (event->button() == Qt::LeftButton && (event->modifiers() & Qt::ShiftModifier)))
        m_drag = Drag::Band;
    else if (event->button() == Qt::LeftButton)
        m_drag = Drag::Pan;
    event->accept();
}

void TimelineView::mouseMoveEvent(QMouseEvent *event)
{
    const QPointF pos = event->position();
    if (m_drag == Drag::None) {
        const TimelineHit hover = m_renderer.hitTest(pos);
        if (hover != m_overlay.hovered) {
            setHovered(hover);
            setCursor(hover.kind == TimelineHit::Kind::None ? Qt::ArrowCursor : Qt::PointingHandCursor);
            update();
        }
        return;
    }
    if (!m_moved && std::hypot(pos.x() - m_pressPos.x(), pos.y() - m_pressPos.y()) < kClickSlopPx)
        return;
    m_moved = true;
    if (m_drag == Drag::Pan) {
        setCursor(Qt::ClosedHandCursor);
        m_axis.panPixels(pos.x() - m_lastPos.x());
        viewMoved();
    } else {
        m_overlay.bandStartNs = m_axis.time(std::max(m_pressPos.x(), m_axis.left));
        m_overlay.bandEndNs = m_axis.time(std::max(pos.x(), m_axis.left));
        update();
    }
    m_lastPos = pos;
}

void TimelineView::mouseReleaseEvent(QMouseEvent *event)
{
    const Drag drag = std::exchange(m_drag, Drag::None);
    setCursor(Qt::ArrowCursor);
    if (drag == Drag::Band && m_moved) {
        const std::int64_t a = m_overlay.bandStartNs, b = m_overlay.bandEndNs;
        m_overlay.bandStartNs = m_overlay.bandEndNs = TimelineOverlay::kNone;
        if (a != b)
            showRange(std::min(a, b), std::max(a, b));
        update();
        return;
    }
    if (!m_moved && event->button() == Qt::LeftButton) {
        const TimelineHit hit = m_renderer.hitTest(event->position());
        setSelected(hit);
        update();
        if (hit.kind != TimelineHit::Kind::None)
            Q_EMIT activated(hit);
    }
}

void TimelineView::mouseDoubleClickEvent(QMouseEvent *event)
{
    const TimelineHit hit = m_renderer.hitTest(event->position());
    if (hit.kind == TimelineHit::Kind::None) {
        m_axis.zoomAt(event->position().x(), 4);
        viewMoved();
        return;
    }
    setSelected(hit);
    zoomToSelection();
}

void TimelineView::keyPressEvent(QKeyEvent *event)
{
    const double centre = m_axis.left + m_axis.width / 2;
    const bool page = event->modifiers() & Qt::ShiftModifier;
    switch (event->key()) {
    case Qt::Key_Plus:
    case Qt::Key_Equal:
        m_axis.zoomAt(centre, kKeyZoom);
        viewMoved();
        break;
    case Qt::Key_Minus:
        m_axis.zoomAt(centre, 1 / kKeyZoom);
        viewMoved();
        break;
    case Qt::Key_Left:
        m_axis.panPixels(page ? m_axis.width * 0.9 : m_axis.width / 8);
        viewMoved();
        break;
    case Qt::Key_Right:
        m_axis.panPixels(page ? -m_axis.width * 0.9 : -m_axis.width / 8);
        viewMoved();
        break;
    case Qt::Key_Home:
    case Qt::Key_0:
        fitAll();
        break;
    case Qt::Key_End:
        setFollowing(true);
        break;
    case Qt::Key_Z:
        zoomToSelection();
        break;
    case Qt::Key_Escape:
        setSelected(TimelineHit());
        update();
        break;
    default:
        QWidget::keyPressEvent(event);
        return;
    }
    event->accept();
}

void TimelineView::leaveEvent(QEvent *)
{
    if (m_overlay.hovered.kind != TimelineHit::Kind::None) {
        setHovered(TimelineHit());
        update();
    }
}

bool TimelineView::event(QEvent *event)
{
    if (event->type() == QEvent::ToolTip) {
        auto *help = static_cast<QHelpEvent *>(event);
        const TimelineHit hit = m_renderer.hitTest(help->pos());
        if (hit.kind == TimelineHit::Kind::None)
            QToolTip::hideText();
        else
            QToolTip::showText(help->globalPos(), describe(hit), this);
        return true;
    }
    return QWidget::event(event);
}

} // namespace smol::widgets
