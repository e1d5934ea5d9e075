#include "shard_map.h"

#include "widgets/paint/palette.h"
#include "widgets/paint/pixel_font.h"

#include <QHash>
#include <QLocale>
#include <QPainter>
#include <QPainterPath>

#include <algorithm>
#include <cmath>
#include <functional>

namespace smol::widgets {

QColor rankColor(int rank)
{
    // Tableau 10: distinct on a projector and for the common colour blindnesses.
    static const QColor kPalette[] = {
        QColor(0x4e, 0x79, 0xa7), QColor(0xf2, 0x8e, 0x2b), QColor(0xe1, 0x57, 0x59),
        QColor(0x76, 0xb7, 0xb2), QColor(0x59, 0xa1, 0x4f), QColor(0xed, 0xc9, 0x48),
        QColor(0xb0, 0x7a, 0xa1), QColor(0xff, 0x9d, 0xa7), QColor(0x9c, 0x75, 0x5f),
        QColor(0xba, 0xb0, 0xac),
    };
    constexpr int kCount = int(sizeof(kPalette) / sizeof(kPalette[0]));
    if (rank < 0)
        return QColor(0x9e, 0x9e, 0x9e);
    if (rank < kCount)
        return kPalette[rank];
    return QColor::fromHsv((rank * 47) % 360, 150, 190); // beyond ten ranks: spread hues
}

QColor rankTint(int rank, double whiteness)
{
    const QColor c = rankColor(rank);
    const auto mix = [whiteness](int v) { return int(std::lround(v + (255 - v) * whiteness)); };
    return QColor(mix(c.red()), mix(c.green()), mix(c.blue()));
}

// ---------------------------------------------------------------- model

ShardMapModel::ShardMapModel(QObject *parent)
    : QAbstractTableModel(parent)
{
}

void ShardMapModel::setState(ClusterStatePtr state)
{
    int ranks = 0;
    std::vector<ParamRow> rows;
    if (state) {
        for (const NodeState &node : state->nodes)
            if (node.rank >= 0)
                ++ranks;
        // Merge cells by parameter; rows grouped by layer, both in the order
        // the engine lists them (the model's order), not alphabetically.
        QStringList layers;
        QHash<QString, QStringList> paramsOfLayer;
        QHash<QString, ParamRow> byParam;
        for (const ShardCell &cell : state->shards) {
            auto it = byParam.find(cell.param);
            if (it == byParam.end()) {
                ParamRow row;
                row.param = cell.param;
                row.layer = cell.layer;
                row.replicated = true;
                row.owned.fill(0, ranks);
                row.materialised.fill(false, ranks);
                it = byParam.insert(cell.param, row);
                if (!paramsOfLayer.contains(cell.layer))
                    layers << cell.layer;
                paramsOfLayer[cell.layer] << cell.param;
            }
            ParamRow &row = *it;
            const std::int64_t length = std::max<std::int64_t>(0, cell.end - cell.begin);
            row.elements = std::max(row.elements, cell.end);
            if (cell.owner < 0) {
                for (std::int64_t &owned : row.owned)
                    owned += length;
            } else {
                row.replicated = false;
                if (cell.owner < ranks)
                    row.owned[cell.owner] += length;
            }
            for (int rank : cell.materialisedOn)
                if (rank >= 0 && rank < ranks)
                    row.materialised[rank] = true;
        }
        for (const QString &layer : std::as_const(layers))
            for (const QString &param : paramsOfLayer.value(layer))
                rows.push_back(byParam.value(param));
    }

    const bool sameShape =
        ranks == m_ranks && rows.size() == m_rows.size() &&
        std::equal(rows.begin(), rows.end(), m_rows.begin(), [](const ParamRow &a, const ParamRow &b) {
            return a.param == b.param && a.layer == b.layer;
        });
    if (!sameShape) {
        beginResetModel();
        m_rows = std::move(rows);
        m_ranks = ranks;
        endResetModel();
        return;
    }
    if (rows == m_rows)
        return; // 30 snapshots a second mostly repeat the map: no repaint
    m_rows = std::move(rows);
    if (!m_rows.empty() && m_ranks > 0)
        Q_EMIT dataChanged(index(0, 0), index(rowCount() - 1, m_ranks - 1));
}

int ShardMapModel::rowCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : int(m_rows.size());
}

int ShardMapModel::columnCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : m_ranks;
}

QVariant ShardMapModel::data(const QModelIndex &index, int role) const
{
    if (!index.isValid() || index.model() != this || std::size_t(index.row()) >= m_rows.size() ||
        index.column() >= m_ranks)
        return {};
    const ParamRow &row = m_rows[std::size_t(index.row())];
    const int rank = index.column();
    const std::int64_t owned = row.owned[rank];
    const double fraction = row.elements > 0 ? std::min(1.0, double(owned) / double(row.elements)) : 0.0;
    const bool materialised = row.materialised[rank];

    switch (role) {
    case Qt::DisplayRole:
        if (row.replicated)
            return tr("all");
        return owned > 0 ? tr("owner") : QString();
    case Qt::ToolTipRole: {
        const QLocale locale;
        QString text = row.replicated ? tr("%1: every rank holds all %2 elements")
                                            .arg(row.param, locale.toString(qlonglong(row.elements)))
                                      : tr("%1: rank %2 owns %3 of %4 elements")
                                            .arg(row.param)
                                            .arg(rank)
                                            .arg(locale.toString(qlonglong(owned)),
                                                 locale.toString(qlonglong(row.elements)));
        if (materialised) // float32: what holding it in full costs this rank now, beyond its shard
            text += tr("; materialised in full on this rank right now: %1 (%2 beyond its own %3)")
                        .arg(formatBytes(4 * row.elements), formatBytes(4 * (row.elements - owned)),
                             formatBytes(4 * owned));
        return text;
    }
    case Qt::TextAlignmentRole:
        return int(Qt::AlignCenter);
    case OwnedFractionRole:
        return fraction;
    case MaterialisedRole:
        return materialised;
    case ReplicatedRole:
        return row.replicated;
    case LayerRole:
        return row.layer;
    }
    return {};
}

QVariant ShardMapModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation == Qt::Horizontal) {
        if (section < 0 || section >= m_ranks)
            return {};
        if (role == Qt::DisplayRole)
            return tr("rank %1").arg(section);
        if (role == Qt::DecorationRole)
            return rankColor(section);
        return {};
    }
    if (section < 0 || std::size_t(section) >= m_rows.size())
        return {};
    const ParamRow &row = m_rows[std::size_t(section)];
    if (role == Qt::DisplayRole)
        return row.param;
    if (role == Qt::ToolTipRole)
        return tr("%1 (layer %2, %3 elements)")
            .arg(row.param, row.layer, QLocale().toString(qlonglong(row.elements)));
    return {};
}

// ---------------------------------------------------------------- view

struct ShardMapView::Geometry {
    QFont font;
    QFont boldFont;
    qreal margin = 8;
    qreal labelWidth = 0;
    qreal headerHeight = 0;
    qreal legendHeight = 0;
    qreal rowHeight = 0;
    qreal columnWidth = 0;
    qreal layerGap = 0; // extra space where a new layer starts
    qreal outline = 2;  // materialised outline width
};

ShardMapView::ShardMapView(QWidget *parent)
    : ProjectorWidget(parent)
    , m_model(new ShardMapModel(this))
{
    setAttribute(Qt::WA_OpaquePaintEvent);
    connect(m_model, &QAbstractItemModel::modelReset, this, [this] {
        updateGeometry();
        update();
    });
    connect(m_model, &QAbstractItemModel::dataChanged, this, qOverload<>(&QWidget::update));
}

QFont ShardMapView::viewFont() const
{
    return projectorFont(font(), m_projector);
}

ShardMapView::Geometry ShardMapView::geometry() const
{
    Geometry g;
    g.font = viewFont();
    g.boldFont = g.font;
    g.boldFont.setBold(true);
    const QFontMetricsF fm(g.font);
    const QFontMetricsF bold(g.boldFont);
    const qreal line = fm.height();
    g.margin = line * 0.6;
    g.outline = m_projector ? 4 : 2;
    g.headerHeight = line * 1.8;
    g.legendHeight = legend(nullptr, QRectF(g.margin, 0, width() - 2 * g.margin, 0), g) + line * 0.6;
    g.layerGap = line * 0.35;

    qreal widest = fm.horizontalAdvance(QStringLiteral("fc1.weight"));
    for (int r = 0; r < m_model->rowCount(); ++r)
        widest = std::max(widest, fm.horizontalAdvance(m_model->headerData(r, Qt::Vertical).toString()));
    g.labelWidth = std::min(widest + line, width() * 0.4);

    int layerBreaks = 0;
    for (int r = 1; r < m_model->rowCount(); ++r)
        if (m_model->index(r, 0).data(ShardMapModel::LayerRole) !=
            m_model->index(r - 1, 0).data(ShardMapModel::LayerRole))
            ++layerBreaks;
    const int rows = std::max(1, m_model->rowCount());
    const qreal gridHeight =
        height() - 2 * g.margin - g.headerHeight - g.legendHeight - layerBreaks * g.layerGap;
    g.rowHeight = std::clamp(gridHeight / rows, line * 1.25, line * 2.2);
    const int columns = std::max(1, m_model->columnCount());
    const qreal minColumn = bold.horizontalAdvance(QStringLiteral("rank 00")) + line;
    g.columnWidth = std::clamp((width() - 2 * g.margin - g.labelWidth) / columns, minColumn, minColumn * 2.5);
    return g;
}

QSize ShardMapView::sizeHint() const
{
    const QFontMetricsF fm(viewFont());
    const qreal line = fm.height();
    const int rows = std::max(4, m_model->rowCount());
    const int columns = std::max(2, m_model->columnCount());
    const qreal column = fm.horizontalAdvance(QStringLiteral("rank 00")) * 1.6 + line;
    return QSize(
        int(fm.horizontalAdvance(QStringLiteral("layers.0.attn.weight")) + columns * column + 2 * line),
        int(rows * line * 1.8 + 5 * line));
}

QSize ShardMapView::minimumSizeHint() const
{
    const QFontMetricsF fm(viewFont());
    return QSize(int(fm.horizontalAdvance(QStringLiteral("rank 00")) * 4), int(fm.height() * 8));
}

void ShardMapView::paintEvent(QPaintEvent *)
{
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    p.fillRect(rect(), palette().base());
    const Geometry g = geometry();
    p.setFont(g.font);

    if (m_model->rowCount() == 0 || m_model->columnCount() == 0) {
        p.setPen(palette().color(QPalette::PlaceholderText));
        // In the part of the view that shows (the widget may be wider than
        // its scroll area), wrapped: never cut off at either side.
        const QRect shown = visibleRegion().boundingRect().adjusted(8, 8, -8, -8);
        p.drawText(shown.isValid() ? shown : rect(), Qt::AlignCenter | Qt::TextWordWrap,
                   tr("No parameter shards to show yet"));
        return;
    }

    const qreal gridLeft = g.margin + g.labelWidth;
    const qreal gridTop = g.margin + g.headerHeight;

    // Column headers: "rank N" on a chip of the rank's colour.
    p.setFont(g.boldFont);
    for (int c = 0; c < m_model->columnCount(); ++c) {
        const QRectF chip(gridLeft + c * g.columnWidth + 3, g.margin + 3, g.columnWidth - 6,
                          g.headerHeight - 6);
        p.setPen(Qt::NoPen);
        p.setBrush(rankColor(c));
        p.drawRoundedRect(chip, 5, 5);
        p.setPen(Qt::white);
        p.drawText(chip, Qt::AlignCenter, m_model->headerData(c, Qt::Horizontal).toString());
    }

    qreal y = gridTop;
    for (int r = 0; r < m_model->rowCount(); ++r) {
        if (r > 0 && m_model->index(r, 0).data(ShardMapModel::LayerRole) !=
                         m_model->index(r - 1, 0).data(ShardMapModel::LayerRole)) {
            y += g.layerGap; // a gap and a rule between layers
            p.setPen(QPen(palette().color(QPalette::Mid), 1));
            p.drawLine(QPointF(g.margin, y - g.layerGap / 2),
                       QPointF(gridLeft + m_model->columnCount() * g.columnWidth, y - g.layerGap / 2));
        }
        p.setFont(g.font);
        p.setPen(palette().color(QPalette::Text));
        const QRectF label(g.margin, y, g.labelWidth - g.margin, g.rowHeight);
        const QString name = m_model->headerData(r, Qt::Vertical).toString();
        p.drawText(label, Qt::AlignRight | Qt::AlignVCenter,
                   QFontMetricsF(g.font).elidedText(name, Qt::ElideMiddle, label.width()));
        for (int c = 0; c < m_model->columnCount(); ++c)
            paintCell(p, QRectF(gridLeft + c * g.columnWidth, y, g.columnWidth, g.rowHeight),
                      m_model->index(r, c), g);
        y += g.rowHeight;
    }

    legend(&p, QRectF(g.margin, y + g.margin, width() - 2 * g.margin, g.legendHeight), g);
}

void ShardMapView::paintCell(QPainter &p, const QRectF &cell, const QModelIndex &index,
                             const Geometry &g) const
{
    const QRectF box = cell.adjusted(3, 2, -3, -2);
    const QColor colour = rankColor(index.column());
    const double fraction = index.data(ShardMapModel::OwnedFractionRole).toDouble();
    const bool replicated = index.data(ShardMapModel::ReplicatedRole).toBool();
    const bool materialised = index.data(ShardMapModel::MaterialisedRole).toBool();

    p.setPen(QPen(palette().color(QPalette::Midlight), 1));
    p.setBrush(QColor(0xf2, 0xf2, 0xf2));
    p.drawRect(box);

    QString text;
    if (replicated) {
        p.setPen(Qt::NoPen);
        p.setBrush(rankTint(index.column(), 0.7));
        p.drawRect(box);
        QBrush stripes(colour, Qt::BDiagPattern);
        p.setBrush(stripes);
        p.drawRect(box);
        text = index.data(Qt::DisplayRole).toString();
    } else if (fraction > 0) {
        const QRectF filled(box.left(), box.top(), box.width() * fraction, box.height());
        p.setPen(Qt::NoPen);
        p.setBrush(colour);
        p.drawRect(filled);
        const double percent = fraction * 100;
        text = percent < 1 ? QStringLiteral("<1%") : QStringLiteral("%1%").arg(std::lround(percent));
    }

    if (!text.isEmpty()) {
        p.setFont(g.boldFont);
        if (replicated) {
            // A pale plate under the word so the stripes do not eat it.
            const QFontMetricsF fm(g.boldFont);
            const QSizeF size(fm.horizontalAdvance(text) + fm.height() * 0.6, fm.height());
            const QRectF plate(box.center() - QPointF(size.width() / 2, size.height() / 2), size);
            p.setPen(Qt::NoPen);
            p.setBrush(QColor(255, 255, 255, 220));
            p.drawRoundedRect(plate, 4, 4);
            p.setPen(colour.darker(200));
            p.drawText(box, Qt::AlignCenter, text);
        } else {
            // Like a progress bar: white over the filled part, dark over the rest.
            const QRectF filled(box.left(), box.top(), box.width() * fraction, box.height());
            p.save();
            p.setClipRect(filled);
            p.setPen(Qt::white);
            p.drawText(box, Qt::AlignCenter, text);
            p.setClipRect(QRectF(filled.right(), box.top(), box.right() - filled.right(), box.height()));
            p.setPen(QColor(0x30, 0x30, 0x30));
            p.drawText(box, Qt::AlignCenter, text);
            p.restore();
        }
    }

    if (materialised) {
        p.setPen(QPen(QColor(0x20, 0x20, 0x20), g.outline));
        p.setBrush(Qt::NoBrush);
        p.drawRect(box.adjusted(g.outline / 2, g.outline / 2, -g.outline / 2, -g.outline / 2));
        const qreal dot = std::max<qreal>(4, box.height() * 0.22);
        p.setPen(QPen(Qt::white, g.outline / 2));
        p.setBrush(QColor(0x20, 0x20, 0x20));
        p.drawEllipse(QPointF(box.right() - dot * 1.1, box.top() + dot * 1.1), dot / 2, dot / 2);
    }
}

qreal ShardMapView::legend(QPainter *p, const QRectF &area, const Geometry &g) const
{
    const QFontMetricsF fm(g.font);
    const qreal line = fm.height();
    const qreal swatchH = line * 0.9;
    const qreal swatchW = swatchH * 1.8;
    const qreal rowHeight = line * 1.4;
    const QColor colour = rankColor(0);
    qreal x = area.left();
    qreal y = area.top();
    if (p)
        p->setFont(g.font);

    // Entries flow left to right and wrap, so a narrow view keeps them all.
    const auto entry = [&](const QString &label, const std::function<void(const QRectF &)> &swatch) {
        const qreal textW = fm.horizontalAdvance(label);
        const qreal entryW = swatchW + line * 0.3 + textW;
        if (x > area.left() && x + entryW > area.right()) {
            x = area.left();
            y += rowHeight;
        }
        if (p) {
            const QRectF box(x, y + (rowHeight - swatchH) / 2, swatchW, swatchH);
            p->setPen(QPen(palette().color(QPalette::Midlight), 1));
            p->setBrush(QColor(0xf2, 0xf2, 0xf2));
            p->drawRect(box);
            swatch(box);
            p->setPen(palette().color(QPalette::Text));
            p->drawText(QRectF(box.right() + line * 0.3, y, textW + 2, rowHeight),
                        Qt::AlignLeft | Qt::AlignVCenter, label);
        }
        x += entryW + line * 1.2;
    };

    entry(tr("owned share (fill = fraction of elements)"), [&](const QRectF &box) {
        p->setPen(Qt::NoPen);
        p->setBrush(colour);
        p->drawRect(QRectF(box.left(), box.top(), box.width() * 0.4, box.height()));
    });
    entry(tr("all = replicated on every rank"), [&](const QRectF &box) {
        p->setPen(Qt::NoPen);
        p->setBrush(rankTint(0, 0.7));
        p->drawRect(box);
        p->setBrush(QBrush(colour, Qt::BDiagPattern));
        p->drawRect(box);
    });
    entry(tr("materialised now (zero3)"), [&](const QRectF &box) {
        p->setPen(QPen(QColor(0x20, 0x20, 0x20), g.outline));
        p->setBrush(Qt::NoBrush);
        p->drawRect(box.adjusted(g.outline / 2, g.outline / 2, -g.outline / 2, -g.outline / 2));
        const qreal dot = box.height() * 0.3;
        p->setBrush(QColor(0x20, 0x20, 0x20));
        p->setPen(Qt::NoPen);
        p->drawEllipse(QPointF(box.right() - dot * 1.1, box.top() + dot * 1.1), dot / 2, dot / 2);
    });
    return y + rowHeight - area.top();
}

} // namespace smol::widgets
