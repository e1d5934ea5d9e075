#include "placement_editor.h"

#include "widgets/paint/pixel_font.h"
#include "widgets/shard_map.h" // rankColor

#include <QLabel>
#include <QMouseEvent>
#include <QPainter>

#include <algorithm>

namespace smol::widgets {

namespace {

constexpr int kUnplaced = -1;

// A non-negative decimal number, or -1 (same rule as the engine's parser).
int number(const QString &text)
{
    if (text.isEmpty() || text.size() > 6)
        return -1;
    for (QChar c : text)
        if (!c.isDigit() || c.unicode() > 127)
            return -1;
    return text.toInt();
}

// White or near-black text, whichever reads better on `fill`.
QColor textOn(const QColor &fill)
{
    const double luminance = 0.299 * fill.redF() + 0.587 * fill.greenF() + 0.114 * fill.blueF();
    return luminance > 0.62 ? QColor(0x20, 0x20, 0x20) : QColor(Qt::white);
}

} // namespace

PlacementEditor::PlacementEditor(QWidget *parent)
    : QWidget(parent)
    , m_message(new QLabel(this))
{
    m_message->setObjectName(QStringLiteral("message"));
    m_message->setWordWrap(true);
    m_message->setAlignment(Qt::AlignLeft | Qt::AlignVCenter);
    setAttribute(Qt::WA_OpaquePaintEvent);
    showHint();
}

void PlacementEditor::setLayers(const QStringList &names)
{
    if (names.size() != m_layers.size())
        m_nodeOfLayer = QVector<int>(names.size(), kUnplaced);
    m_layers = names;
    updateGeometry();
    update();
}

void PlacementEditor::setNodes(int count)
{
    m_nodes = std::max(0, count);
    for (int &node : m_nodeOfLayer)
        if (node >= m_nodes)
            node = kUnplaced;
    if (m_selected >= m_nodes || (m_selected < 0 && m_nodes > 0))
        m_selected = m_nodes > 0 ? std::min(std::max(m_selected, 0), m_nodes - 1) : -1;
    updateGeometry();
    update();
}

void PlacementEditor::setSelectedNode(int node)
{
    if (node < -1 || node >= m_nodes || node == m_selected)
        return;
    m_selected = node;
    update();
}

QString PlacementEditor::spec() const
{
    return format(m_nodeOfLayer);
}

QString PlacementEditor::format(const QVector<int> &nodeOfLayer)
{
    QStringList items;
    for (int first = 0; first < nodeOfLayer.size();) {
        const int node = nodeOfLayer[first];
        int last = first;
        while (last + 1 < nodeOfLayer.size() && nodeOfLayer[last + 1] == node)
            ++last;
        if (node != kUnplaced) {
            const QString range =
                first == last ? QString::number(first) : QStringLiteral("%1-%2").arg(first).arg(last);
            items << QStringLiteral("%1:%2").arg(range).arg(node);
        }
        first = last + 1;
    }
    return items.join(QLatin1Char(','));
}

QVector<int> PlacementEditor::parse(const QString &specIn, QString *error) const
{
    const QString spec = specIn.trimmed();
    QVector<int> nodeOfLayer(m_layers.size(), kUnplaced);
    if (spec.isEmpty())
        return nodeOfLayer;
    const QStringList items = spec.split(QLatin1Char(','));
    for (const QString &raw : items) {
        const QString item = raw.trimmed();
        if (item.isEmpty()) {
            *error = tr("placement \"%1\" has an empty item").arg(spec);
            return {};
        }
        const int colon = item.indexOf(QLatin1Char(':'));
        if (colon < 0) {
            *error = tr("placement item \"%1\" has no ':NODE' (expected FIRST-LAST:NODE)").arg(item);
            return {};
        }
        const QString range = item.left(colon).trimmed();
        const QString nodeText = item.mid(colon + 1).trimmed();
        const int dash = range.indexOf(QLatin1Char('-'));
        const int first = number(range.left(dash < 0 ? range.size() : dash).trimmed());
        const int last = dash < 0 ? first : number(range.mid(dash + 1).trimmed());
        const int node = number(nodeText);
        if (first < 0 || last < 0) {
            *error = tr("placement item \"%1\": \"%2\" is not a layer or a FIRST-LAST range of layers")
                         .arg(item, range);
            return {};
        }
        if (node < 0) {
            *error = tr("placement item \"%1\": \"%2\" is not a node number").arg(item, nodeText);
            return {};
        }
        if (first > last) {
            *error = tr("placement item \"%1\": range %2 runs backwards").arg(item, range);
            return {};
        }
        if (last >= m_layers.size()) {
            *error = tr("layer %1 does not exist (the model has %2 layers)").arg(last).arg(m_layers.size());
            return {};
        }
        if (node >= m_nodes) {
            *error = tr("node %1 does not exist (%2 nodes)").arg(node).arg(m_nodes);
            return {};
        }
        for (int l = first; l <= last; ++l) {
            if (nodeOfLayer[l] != kUnplaced) {
                *error = tr("layer %1 is placed twice (on node %2 and node %3)")
                             .arg(l)
                             .arg(nodeOfLayer[l])
                             .arg(node);
                return {};
            }
            nodeOfLayer[l] = node;
        }
    }
    return nodeOfLayer;
}

bool PlacementEditor::setSpec(const QString &text)
{
    QString error;
    const QVector<int> nodeOfLayer = parse(text, &error);
    if (error.isEmpty() && m_validator)
        error = m_validator(format(nodeOfLayer));
    if (!error.isEmpty()) {
        showReason(error);
        return false;
    }
    const bool changed = nodeOfLayer != m_nodeOfLayer;
    m_nodeOfLayer = nodeOfLayer;
    showHint();
    update();
    if (changed)
        Q_EMIT placementChanged(spec());
    return true;
}

void PlacementEditor::tryApply(const QVector<int> &nodeOfLayer)
{
    const QString candidate = format(nodeOfLayer);
    const QString reason = m_validator ? m_validator(candidate) : QString();
    if (!reason.isEmpty()) {
        showReason(reason);
        Q_EMIT placementRejected(reason);
        return;
    }
    m_nodeOfLayer = nodeOfLayer;
    showHint();
    update();
    Q_EMIT placementChanged(candidate);
}

void PlacementEditor::showHint()
{
    m_message->setStyleSheet(QString());
    m_message->setText(tr("Click a node's header to select it, then click layers to put them on it "
                          "(right click: take a layer off)."));
}

void PlacementEditor::showReason(const QString &reason)
{
    m_message->setStyleSheet(QStringLiteral("color: #b71c1c;"));
    m_message->setText(tr("Not applied: %1").arg(reason));
}

void PlacementEditor::setProjectorMode(bool on)
{
    if (on == m_projector)
        return;
    m_projector = on;
    m_message->setFont(viewFont());
    updateGeometry();
    layoutMessage();
    update();
}

QFont PlacementEditor::viewFont() const
{
    return projectorFont(font(), m_projector);
}

PlacementEditor::Geometry PlacementEditor::geometry() const
{
    const qreal line = QFontMetricsF(viewFont()).height();
    const qreal margin = line * 0.5;
    Geometry g;
    g.area = QRectF(rect()).adjusted(margin, margin, -margin, -margin - messageHeight());
    g.headerHeight = line * 2;
    g.columnWidth = g.area.width() / (m_nodes + 1);
    const int rows = std::max<int>(1, m_layers.size());
    g.rowHeight = std::clamp((g.area.height() - g.headerHeight - line * 0.4) / rows, line * 1.4, line * 2.4);
    return g;
}

int PlacementEditor::messageHeight() const
{
    return int(QFontMetricsF(viewFont()).height() * 2.6); // two wrapped lines
}

void PlacementEditor::layoutMessage()
{
    const int margin = int(QFontMetricsF(viewFont()).height() * 0.5);
    m_message->setGeometry(margin, height() - messageHeight() - margin / 2, width() - 2 * margin,
                           messageHeight());
}

void PlacementEditor::resizeEvent(QResizeEvent *)
{
    layoutMessage();
}

QRectF PlacementEditor::cellRect(int layer, int column) const
{
    const Geometry g = geometry();
    return QRectF(g.area.left() + column * g.columnWidth,
                  g.area.top() + g.headerHeight + g.rowHeight * 0.2 + layer * g.rowHeight, g.columnWidth,
                  g.rowHeight);
}

QRectF PlacementEditor::chipRect(int layer) const
{
    if (layer < 0 || layer >= m_nodeOfLayer.size())
        return {};
    const qreal inset = QFontMetricsF(viewFont()).height() * 0.15;
    return cellRect(layer, m_nodeOfLayer[layer] + 1).adjusted(inset * 2, inset, -inset * 2, -inset);
}

QRectF PlacementEditor::nodeHeaderRect(int node) const
{
    if (node < 0 || node >= m_nodes)
        return {};
    const Geometry g = geometry();
    return QRectF(g.area.left() + (node + 1) * g.columnWidth, g.area.top(), g.columnWidth, g.headerHeight)
        .adjusted(4, 2, -4, -2);
}

QSize PlacementEditor::sizeHint() const
{
    const QFontMetricsF fm(viewFont());
    qreal chip = fm.horizontalAdvance(QStringLiteral("not placed"));
    for (int l = 0; l < m_layers.size(); ++l)
        chip = std::max(chip, fm.horizontalAdvance(QStringLiteral("%1  %2").arg(l).arg(m_layers[l])));
    const qreal line = fm.height();
    const int rows = std::max<int>(3, m_layers.size());
    return QSize(int((chip + line * 1.5) * (std::max(2, m_nodes) + 1) + line),
                 int(line * 2.5 + rows * line * 2 + line * 3.5));
}

QSize PlacementEditor::minimumSizeHint() const
{
    const qreal line = QFontMetricsF(viewFont()).height();
    return QSize(int(line * 12), int(line * 10));
}

void PlacementEditor::paintEvent(QPaintEvent *)
{
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    p.fillRect(rect(), palette().base());
    const Geometry g = geometry();
    QFont font = viewFont();
    QFont bold = font;
    bold.setBold(true);
    const QFontMetricsF fm(font);
    const qreal gridBottom = cellRect(int(m_layers.size()) - 1, 0).bottom();

    // Columns: "not placed", then one per node; the selected node's column
    // is tinted so it is clear where a click will put a layer.
    for (int c = 0; c <= m_nodes; ++c) {
        const int node = c - 1;
        const QRectF column(g.area.left() + c * g.columnWidth + 2, g.area.top() + g.headerHeight + 2,
                            g.columnWidth - 4, gridBottom - g.area.top() - g.headerHeight);
        p.setPen(Qt::NoPen);
        p.setBrush(node < 0 ? QColor(0xf4, 0xf4, 0xf4) : rankTint(node, node == m_selected ? 0.78 : 0.92));
        p.drawRoundedRect(column, 6, 6);

        QRectF header =
            node < 0
                ? QRectF(g.area.left(), g.area.top(), g.columnWidth, g.headerHeight).adjusted(4, 2, -4, -2)
                : nodeHeaderRect(node);
        if (node < 0) {
            p.setFont(font);
            p.setPen(palette().color(QPalette::PlaceholderText));
            p.drawText(header, Qt::AlignCenter, tr("not placed"));
            continue;
        }
        const QColor colour = rankColor(node);
        const bool selected = node == m_selected;
        p.setPen(selected ? QPen(QColor(0x20, 0x20, 0x20), m_projector ? 4 : 2.5) : QPen(colour, 2));
        p.setBrush(selected ? colour : rankTint(node, 0.8));
        p.drawRoundedRect(header, 6, 6);
        p.setFont(bold);
        p.setPen(selected ? textOn(colour) : colour.darker(160));
        p.drawText(header, Qt::AlignCenter,
                   selected ? tr("\u25BC node %1").arg(node) : tr("node %1").arg(node));
    }

    // Chips: layer index and name, in the colour of the node holding it.
    for (int l = 0; l < m_layers.size(); ++l) {
        const QRectF chip = chipRect(l);
        const int node = m_nodeOfLayer[l];
        if (node == kUnplaced) {
            QPen dashed(QColor(0x9e, 0x9e, 0x9e), 1.5, Qt::DashLine);
            p.setPen(dashed);
            p.setBrush(Qt::white);
        } else {
            p.setPen(QPen(rankColor(node).darker(130), 1));
            p.setBrush(rankColor(node));
        }
        p.drawRoundedRect(chip, 5, 5);
        p.setFont(font);
        p.setPen(node == kUnplaced ? QColor(0x50, 0x50, 0x50) : textOn(rankColor(node)));
        const QRectF textRect = chip.adjusted(fm.height() * 0.4, 0, -fm.height() * 0.4, 0);
        const QString text = QStringLiteral("%1  %2").arg(l).arg(m_layers[l]);
        p.drawText(textRect, Qt::AlignVCenter | Qt::AlignLeft,
                   fm.elidedText(text, Qt::ElideRight, textRect.width()));
    }
}

void PlacementEditor::mousePressEvent(QMouseEvent *event)
{
    const QPointF pos = event->position();
    for (int n = 0; n < m_nodes; ++n) {
        if (nodeHeaderRect(n).contains(pos)) {
            setSelectedNode(n);
            return;
        }
    }
    for (int l = 0; l < m_layers.size(); ++l) {
        if (!chipRect(l).contains(pos))
            continue;
        QVector<int> candidate = m_nodeOfLayer;
        if (event->button() == Qt::RightButton) {
            if (candidate[l] == kUnplaced)
                return;
            candidate[l] = kUnplaced;
        } else if (event->button() == Qt::LeftButton) {
            if (m_selected < 0 || candidate[l] == m_selected)
                return;
            candidate[l] = m_selected;
        } else {
            return;
        }
        tryApply(candidate);
        return;
    }
    // An empty cell of a node's column: select that node and put the layer there.
    if (event->button() != Qt::LeftButton)
        return;
    for (int l = 0; l < m_layers.size(); ++l) {
        for (int n = 0; n < m_nodes; ++n) {
            if (!cellRect(l, n + 1).contains(pos))
                continue;
            setSelectedNode(n);
            QVector<int> candidate = m_nodeOfLayer;
            candidate[l] = n;
            tryApply(candidate);
            return;
        }
    }
    QWidget::mousePressEvent(event);
}

} // namespace smol::widgets
