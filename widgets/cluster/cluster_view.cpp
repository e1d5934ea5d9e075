#include "cluster_view.h"

#include "cluster_painter.h"
#include "widgets/paint/palette.h"

#include <QHelpEvent>
#include <QImage>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>

namespace smol::widgets {

namespace {

const NodeState *findNode(const ClusterState &state, int id)
{
    for (const NodeState &n : state.nodes)
        if (n.id == id)
            return &n;
    return nullptr;
}

} // namespace

void ClusterView::snapshotChanged()
{
    if (m_selected >= 0 && (!m_state || !findNode(*m_state, m_selected)))
        setSelectedNode(-1);
    update();
}

void ClusterView::projectorModeChanged()
{
    update(); // the size hints do not depend on the mode
}

void ClusterView::setSelectedNode(int id)
{
    if (id < 0)
        id = -1;
    if (id == m_selected)
        return;
    m_selected = id;
    update();
    Q_EMIT selectedNodeChanged(id);
}

void ClusterView::setNextRun(const QString &strategy)
{
    if (strategy == m_nextStrategy)
        return;
    m_nextStrategy = strategy;
    update();
}

const ClusterLayout &ClusterView::layout() const
{
    if (!m_layout.sameInputs(m_state.get(), size(), m_projector, font()))
        m_layout = ClusterLayout::compute(m_state.get(), size(), m_projector, font());
    return m_layout;
}

int ClusterView::nodeAt(QPointF pos) const
{
    return layout().nodeAt(pos);
}

QRectF ClusterView::nodeRect(int id) const
{
    return layout().nodeRect(id);
}

bool ClusterView::isCompact() const
{
    return layout().compact;
}

QString ClusterView::headerText() const
{
    return m_state ? ClusterPainter::headerTitle(*m_state, m_nextStrategy) : QString();
}

QStringList ClusterView::nodeText(int id) const
{
    const NodeState *node = m_state ? findNode(*m_state, id) : nullptr;
    const ClusterLayout &l = layout();
    if (!node || !l.rects.contains(id))
        return {};
    // Paint the box where nobody sees it, keeping what it writes.
    QImage scratch(size().expandedTo(QSize(1, 1)), QImage::Format_ARGB32_Premultiplied);
    QPainter p(&scratch);
    QStringList shown;
    ClusterPainter(l, *m_state).paintNode(p, *node, &shown);
    return shown;
}

void ClusterView::paintEvent(QPaintEvent *)
{
    QPainter p(this);
    if (!m_state || m_state->nodes.isEmpty())
        ClusterPainter::paintEmpty(p, size(), m_projector, font());
    else
        ClusterPainter(layout(), *m_state).paint(p, m_nextStrategy, m_selected);
}

bool ClusterView::event(QEvent *event)
{
    if (event->type() == QEvent::ToolTip) {
        auto *help = static_cast<QHelpEvent *>(event);
        const int id = nodeAt(help->pos());
        const NodeState *node = id >= 0 && m_state ? findNode(*m_state, id) : nullptr;
        if (node)
            QToolTip::showText(help->globalPos(), nodeSummary(*node), this, nodeRect(id).toAlignedRect());
        else
            QToolTip::hideText();
        return true;
    }
    return QWidget::event(event);
}

void ClusterView::mousePressEvent(QMouseEvent *event)
{
    if (event->button() != Qt::LeftButton) {
        QWidget::mousePressEvent(event);
        return;
    }
    setSelectedNode(nodeAt(event->position()));
}

} // namespace smol::widgets
