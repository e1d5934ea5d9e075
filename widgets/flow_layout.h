// A layout that places its items left to right and wraps to a new row when
// the next one does not fit (Qt's "Flow Layout" example, trimmed): the run
// controls and the side pages' button rows use it so that a 1024 px
// projector gets two rows instead of a tool bar overflow menu or a
// horizontal scroll bar. Items keep their size hints (never squeezed, so no
// text is clipped); the layout has a height for its width.
#pragma once

#include <QLayout>
#include <QList>
#include <QStyle>

namespace smol::widgets {

class FlowLayout : public QLayout {
public:
    explicit FlowLayout(QWidget *parent = nullptr, int hSpacing = -1, int vSpacing = -1);
    ~FlowLayout() override;

    void addItem(QLayoutItem *item) override;
    int horizontalSpacing() const;
    int verticalSpacing() const;
    Qt::Orientations expandingDirections() const override { return {}; }
    bool hasHeightForWidth() const override { return true; }
    int heightForWidth(int width) const override;
    int count() const override { return int(m_items.size()); }
    QLayoutItem *itemAt(int index) const override { return m_items.value(index); }
    QLayoutItem *takeAt(int index) override;
    QSize minimumSize() const override;
    void setGeometry(const QRect &rect) override;
    QSize sizeHint() const override;

private:
    int doLayout(const QRect &rect, bool testOnly) const;
    int smartSpacing(QStyle::PixelMetric pm) const;

    QList<QLayoutItem *> m_items;
    int m_hSpace;
    int m_vSpace;
};

} // namespace smol::widgets
