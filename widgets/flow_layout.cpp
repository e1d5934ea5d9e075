#include "flow_layout.h"

#include <QStyle>
#include <QWidget>

namespace smol::widgets {

FlowLayout::FlowLayout(QWidget *parent, int hSpacing, int vSpacing)
    : QLayout(parent), m_hSpace(hSpacing), m_vSpace(vSpacing)
{
}

FlowLayout::~FlowLayout()
{
    while (QLayoutItem *item = takeAt(0))
        delete item;
}

void FlowLayout::addItem(QLayoutItem *item) { m_items.append(item); }

int FlowLayout::horizontalSpacing() const
{
    return m_hSpace >= 0 ? m_hSpace : smartSpacing(QStyle::PM_LayoutHorizontalSpacing);
}

int FlowLayout::verticalSpacing() const
{
    return m_vSpace >= 0 ? m_vSpace : smartSpacing(QStyle::PM_LayoutVerticalSpacing);
}

QLayoutItem *FlowLayout::takeAt(int index)
{
    return index >= 0 && index < m_items.size() ? m_items.takeAt(index) : nullptr;
}

int FlowLayout::heightForWidth(int width) const { return doLayout(QRect(0, 0, width, 0), true); }

void FlowLayout::setGeometry(const QRect &rect)
{
    QLayout::setGeometry(rect);
    doLayout(rect, false);
}

QSize FlowLayout::sizeHint() const
{
    // One row: what the layout would like; minimumSize() says how narrow it may go.
    int w = 0, h = 0;
    for (const QLayoutItem *item : m_items) {
        if (item->isEmpty())
            continue;
        w += item->sizeHint().width() + (w > 0 ? horizontalSpacing() : 0);
        h = std::max(h, item->sizeHint().height());
    }
    const QMargins m = contentsMargins();
    return QSize(w + m.left() + m.right(), h + m.top() + m.bottom());
}

QSize FlowLayout::minimumSize() const
{
    // The widest item: narrower than that, something would be clipped.
    QSize size;
    for (const QLayoutItem *item : m_items)
        if (!item->isEmpty())
            size = size.expandedTo(item->hasHeightForWidth() ? item->minimumSize()
                                                             : item->minimumSize().expandedTo(item->sizeHint()));
    const QMargins m = contentsMargins();
    return size + QSize(m.left() + m.right(), m.top() + m.bottom());
}

int FlowLayout::doLayout(const QRect &rect, bool testOnly) const
{
    const QMargins m = contentsMargins();
    const QRect area = rect.adjusted(m.left(), m.top(), -m.right(), -m.bottom());
    int x = area.x(), y = area.y(), lineHeight = 0;
    // Items of a row share its height: they are centred vertically in it.
    QList<std::pair<QLayoutItem *, QRect>> row;
    auto flush = [&] {
        for (auto &[item, r] : row)
            item->setGeometry(QRect(r.x(), r.y() + (lineHeight - r.height()) / 2, r.width(), r.height()));
        row.clear();
    };
    for (QLayoutItem *item : m_items) {
        if (item->isEmpty())
            continue;
        // An item wider than the row (a wrapping label) gets the row and the
        // height it needs at that width.
        QSize hint = item->sizeHint();
        if (hint.width() > area.width() && area.width() > 0) {
            hint.setWidth(std::max(area.width(), item->minimumSize().width()));
            if (item->hasHeightForWidth())
                hint.setHeight(item->heightForWidth(hint.width()));
        }
        int nextX = x + hint.width() + horizontalSpacing();
        if (nextX - horizontalSpacing() > area.right() + 1 && lineHeight > 0) {
            if (!testOnly)
                flush();
            x = area.x();
            y += lineHeight + verticalSpacing();
            nextX = x + hint.width() + horizontalSpacing();
            lineHeight = 0;
        }
        if (!testOnly)
            row.append({item, QRect(QPoint(x, y), hint)});
        x = nextX;
        lineHeight = std::max(lineHeight, hint.height());
    }
    if (!testOnly)
        flush();
    return y + lineHeight - rect.y() + m.bottom();
}

int FlowLayout::smartSpacing(QStyle::PixelMetric pm) const
{
    QObject *parent = this->parent();
    if (!parent)
        return -1;
    if (parent->isWidgetType()) {
        auto *pw = static_cast<QWidget *>(parent);
        return pw->style()->pixelMetric(pm, nullptr, pw);
    }
    return static_cast<QLayout *>(parent)->spacing();
}

} // namespace smol::widgets
