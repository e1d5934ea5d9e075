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

namespace {

bool sameColumns(const QVector<ShardColumn> &a, const QVector<ShardColumn> &b)
{
    return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const ShardColumn &x, const ShardColumn &y) {
        return x.coords == y.coords && x.sequenceBegin == y.sequenceBegin && x.sequenceEnd == y.sequenceEnd &&
               x.blockSize == y.blockSize && x.optimizerBegin == y.optimizerBegin &&
               x.optimizerEnd == y.optimizerEnd && x.localElements == y.localElements &&
               x.sharedBy == y.sharedBy && x.paramsShared == y.paramsShared;
    });
}

// "12.3k": an element count short enough for a column a projector shows 16 of.
QString shortCount(std::int64_t n)
{
    if (n >= 1000000)
        return QStringLiteral("%1M").arg(double(n) / 1e6, 0, 'f', n >= 10000000 ? 0 : 1);
    if (n >= 1000)
        return QStringLiteral("%1k").arg(double(n) / 1e3, 0, 'f', n >= 10000 ? 0 : 1);
    return QString::number(n);
}

// Under "rank N": coordinates, the sequence block when cp cuts it, and the
// optimizer shard ("opt 1/2" of its stage's state, "opt all"; zero3
// "p+g+opt 1/2": the params and grads too, between steps).
QStringList columnNotes(const ShardColumn &c)
{
    QStringList lines;
    // "dp1 · pp0 · tp1" is wider than a column: the axes' letters and digits alone.
    QString coords = c.coords;
    coords.replace(QStringLiteral(" \u00b7 "), QStringLiteral(" "));
    lines << coords;
    if (c.blockSize > 0 && (c.sequenceBegin > 0 || c.sequenceEnd < c.blockSize))
        lines << ShardMapModel::tr("seq %1-%2").arg(c.sequenceBegin).arg(c.sequenceEnd - 1);
    if (c.sharedBy > 1)
        lines << (c.paramsShared ? ShardMapModel::tr("p+g+opt 1/%1") : ShardMapModel::tr("opt 1/%1"))
                     .arg(c.sharedBy);
    else
        lines << ShardMapModel::tr("opt all");
    return lines;
}

QString columnToolTip(int rank, const ShardColumn &c)
{
    const QLocale locale;
    QString text = ShardMapModel::tr("rank %1 (%2): positions %3 to %4 of every %5-token sequence")
                       .arg(rank)
                       .arg(c.coords)
                       .arg(c.sequenceBegin)
                       .arg(c.sequenceEnd - 1)
                       .arg(c.blockSize);
    text +=
        ShardMapModel::tr("; optimizer state of elements [%1, %2) of its stage's %3 (%4 elements)")
            .arg(locale.toString(qlonglong(c.optimizerBegin)), locale.toString(qlonglong(c.optimizerEnd)),
                 locale.toString(qlonglong(c.localElements)), shortCount(c.optimizerEnd - c.optimizerBegin));
    if (c.paramsShared)
        text += ShardMapModel::tr("; between steps only that shard of its params and grads too (zero3)");
    return text;
}

} // namespace

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
        m_columns = state ? state->shardColumns : QVector<ShardColumn>();
        endResetModel();
        return;
    }
    const QVector<ShardColumn> columns = state ? state->shardColumns : QVector<ShardColumn>();
    if (!sameColumns(columns, m_columns)) {
        m_columns = columns;
        Q_EMIT headerDataChanged(Qt::Horizontal, 0, std::max(0, m_ranks - 1));
    }
    if (rows == m_rows)
        return; // 30 snapshots a second mostly repeat the map: no repaint
    m_rows = std::move(rows);
    if (!m_rows.empty() && m_ranks > 0)
        Q_EMIT dataChanged(index(0, 0), index(rowCount() - 1, m_ranks - 1));
}

std::vector<ShardMapModel::ParamRow> ShardMapModel::layerRows() const
{
    std::vector<ParamRow> out;
    for (const ParamRow &row : m_rows) {
        if (out.empty() || out.back().layer != row.layer) {
            ParamRow layer;
            layer.param = row.layer;
            layer.layer = row.layer;
            layer.replicated = true;
            layer.owned.fill(0, m_ranks);
            layer.materialised.fill(false, m_ranks);
            out.push_back(layer);
        }
        ParamRow &layer = out.back();
        layer.elements += row.elements;
        layer.replicated = layer.replicated && row.replicated;
        for (int r = 0; r < m_ranks; ++r) {
            layer.owned[r] += row.owned[r];
            layer.materialised[r] = layer.materialised[r] || row.materialised[r];
        }
    }
    return out;
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
        if (role == ColumnNotesRole)
            return section < m_columns.size() ? columnNotes(m_columns[section]) : QStringList();
        if (role == Qt::ToolTipRole && section < m_columns.size())
            return columnToolTip(section, m_columns[section]);
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
    qreal notesHeight = 0;                     // compact: the ranks' notes listed below the grid
    bool compact = false;                      // columns too narrow for "rank N" and notes: one row per layer
    std::vector<ShardMapModel::ParamRow> rows; // as drawn: by parameter, or compact by layer
    qreal chipHeight = 0;                      // "rank N"; a mesh's notes below it
    qreal noteHeight = 0;                      // one line of a column's notes
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
    g.chipHeight = line * 1.8;
    g.noteHeight = line * 1.05;
    int noteLines = 0;
    qreal widestNote = 0;
    for (int c = 0; c < m_model->columnCount(); ++c) {
        const QStringList notes =
            m_model->headerData(c, Qt::Horizontal, ShardMapModel::ColumnNotesRole).toStringList();
        noteLines = std::max(noteLines, int(notes.size()));
        for (const QString &n : notes)
            widestNote = std::max(widestNote, fm.horizontalAdvance(n));
    }
    qreal widest = fm.horizontalAdvance(QStringLiteral("fc1.weight"));
    for (int r = 0; r < m_model->rowCount(); ++r)
        widest = std::max(widest, fm.horizontalAdvance(m_model->headerData(r, Qt::Vertical).toString()));
    g.labelWidth = std::min(widest + line, width() * 0.4);
    const int columns = std::max(1, m_model->columnCount());
    const qreal minColumn = std::max(bold.horizontalAdvance(QStringLiteral("rank 00")), widestNote) + line;
    // Too many ranks for "rank N" columns (a mesh in the side panel on a
    // projector): narrow columns headed by the rank's number, and each
    // rank's notes as a list below the grid.
    g.compact = (width() - 2 * g.margin - g.labelWidth) / columns < minColumn;
    g.rows = g.compact ? m_model->layerRows() : m_model->params();
    if (g.compact) {
        widest = 0;
        for (const ShardMapModel::ParamRow &row : g.rows)
            widest = std::max(widest, fm.horizontalAdvance(row.param));
        g.labelWidth = std::min(widest + line, width() * 0.45);
        g.columnWidth = std::max<qreal>(12, (width() - 2 * g.margin - g.labelWidth) / columns);
        g.headerHeight = g.chipHeight;
    } else {
        g.columnWidth =
            std::clamp((width() - 2 * g.margin - g.labelWidth) / columns, minColumn, minColumn * 2.5);
        g.headerHeight = g.chipHeight + noteLines * g.noteHeight + (noteLines > 0 ? line * 0.3 : 0);
    }
    const QRectF below(g.margin, 0, width() - 2 * g.margin, 0);
    g.notesHeight = g.compact && noteLines > 0 ? notesList(nullptr, below, g) + line * 0.6 : 0;
    g.legendHeight = legend(nullptr, below, g) + line * 0.6;
    g.layerGap = line * 0.35;

    int layerBreaks = 0;
    for (std::size_t r = 1; r < g.rows.size(); ++r)
        if (g.rows[r].layer != g.rows[r - 1].layer)
            ++layerBreaks;
    const int rows = std::max(1, int(g.rows.size()));
    const qreal gridHeight =
        height() - 2 * g.margin - g.headerHeight - g.notesHeight - g.legendHeight - layerBreaks * g.layerGap;
    // Compact rows are few (layers): kept low, so the notes below show too.
    g.rowHeight =
        std::clamp(gridHeight / rows, line * (g.compact ? 1.1 : 1.25), line * (g.compact ? 1.5 : 2.2));
    return g;
}

QSize ShardMapView::sizeHint() const
{
    const QFontMetricsF fm(viewFont());
    const qreal line = fm.height();
    const int rows = std::max(4, m_model->rowCount());
    const int columns = std::max(2, m_model->columnCount());
    const qreal column = fm.horizontalAdvance(QStringLiteral("rank 00")) * 1.6 + line;
    const int notes =
        int(m_model->headerData(0, Qt::Horizontal, ShardMapModel::ColumnNotesRole).toStringList().size());
    return QSize(
        int(fm.horizontalAdvance(QStringLiteral("layers.0.attn.weight")) + columns * column + 2 * line),
        int(rows * line * 1.8 + (5 + notes) * line));
}

QSize ShardMapView::minimumSizeHint() const
{
    // Narrower than "rank N" columns need: a side panel gets compact columns
    // rather than a horizontal scroll bar.
    const QFontMetricsF fm(viewFont());
    return QSize(int(fm.horizontalAdvance(QStringLiteral("rank 00")) * 2.5), int(fm.height() * 8));
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

    // Column headers: "rank N" on a chip of the rank's colour; compact: the
    // number alone, every chip's shrunk alike to fit the widest, if need be;
    // none when they cannot all fit (the list below names the colours).
    QFont chipFont = g.boldFont;
    bool titles = true;
    if (g.compact) {
        const QString widest = QString::number(m_model->columnCount() - 1);
        const qreal wide = QFontMetricsF(chipFont).horizontalAdvance(widest);
        if (wide > g.columnWidth - 4)
            chipFont.setPointSizeF(std::max(6.0, chipFont.pointSizeF() * (g.columnWidth - 4) / wide));
        titles = QFontMetricsF(chipFont).horizontalAdvance(widest) <= g.columnWidth - 2;
    }
    p.setFont(chipFont);
    for (int c = 0; c < m_model->columnCount(); ++c) {
        const qreal inset = g.compact ? 1 : 3;
        const QRectF chip(gridLeft + c * g.columnWidth + inset, g.margin + 3, g.columnWidth - 2 * inset,
                          g.chipHeight - 6);
        p.setPen(Qt::NoPen);
        p.setBrush(rankColor(c));
        p.drawRoundedRect(chip, 5, 5);
        p.setPen(Qt::white);
        const QString title =
            g.compact ? QString::number(c) : m_model->headerData(c, Qt::Horizontal).toString();
        if (titles && QFontMetricsF(chipFont).horizontalAdvance(title) <= chip.width())
            p.drawText(chip, Qt::AlignCenter, title);
    }
    if (!g.compact)
        paintColumnNotes(p, gridLeft, g);

    qreal y = gridTop;
    for (std::size_t r = 0; r < g.rows.size(); ++r) {
        if (r > 0 && g.rows[r].layer != g.rows[r - 1].layer) {
            y += g.layerGap; // a gap and a rule between layers
            p.setPen(QPen(palette().color(QPalette::Mid), 1));
            p.drawLine(QPointF(g.margin, y - g.layerGap / 2),
                       QPointF(gridLeft + m_model->columnCount() * g.columnWidth, y - g.layerGap / 2));
        }
        p.setFont(g.font);
        p.setPen(palette().color(QPalette::Text));
        const QRectF label(g.margin, y, g.labelWidth - g.margin, g.rowHeight);
        p.drawText(label, Qt::AlignRight | Qt::AlignVCenter,
                   QFontMetricsF(g.font).elidedText(g.rows[r].param, Qt::ElideMiddle, label.width()));
        for (int c = 0; c < m_model->columnCount(); ++c)
            paintCell(p, QRectF(gridLeft + c * g.columnWidth, y, g.columnWidth, g.rowHeight), g.rows[r], c,
                      g);
        y += g.rowHeight;
    }

    if (g.notesHeight > 0) {
        notesList(&p, QRectF(g.margin, y + g.margin, width() - 2 * g.margin, g.notesHeight), g);
        y += g.notesHeight;
    }
    legend(&p, QRectF(g.margin, y + g.margin, width() - 2 * g.margin, g.legendHeight), g);
}

// A mesh's lines under each rank's chip: coordinates, sequence block,
// optimizer shard.
void ShardMapView::paintColumnNotes(QPainter &p, qreal gridLeft, const Geometry &g) const
{
    p.setFont(g.font);
    p.setPen(palette().color(QPalette::Text));
    for (int c = 0; c < m_model->columnCount(); ++c) {
        const QStringList notes =
            m_model->headerData(c, Qt::Horizontal, ShardMapModel::ColumnNotesRole).toStringList();
        qreal y = g.margin + g.chipHeight;
        for (const QString &note : notes) {
            p.drawText(QRectF(gridLeft + c * g.columnWidth, y, g.columnWidth, g.noteHeight), Qt::AlignCenter,
                       note);
            y += g.noteHeight;
        }
    }
}

// Compact: one entry per rank, its number on a chip of its colour and its
// notes on one line ("dp0 pp1 tp1 · seq 0-7 · opt 1/2"), flowing like the
// legend. Returns the height; paints only when `p` is not null.
qreal ShardMapView::notesList(QPainter *p, const QRectF &area, const Geometry &g) const
{
    const QFontMetricsF fm(g.font);
    const qreal line = fm.height();
    const qreal rowHeight = line * 1.3;
    qreal x = area.left(), y = area.top();
    for (int c = 0; c < m_model->columnCount(); ++c) {
        const QString number = QString::number(c);
        const qreal chipW = QFontMetricsF(g.boldFont).horizontalAdvance(number) + line * 0.5;
        const QString text = m_model->headerData(c, Qt::Horizontal, ShardMapModel::ColumnNotesRole)
                                 .toStringList()
                                 .join(QStringLiteral(" \u00b7 "));
        const qreal textW = std::min(fm.horizontalAdvance(text), area.width() - chipW - line * 0.3);
        const qreal entryW = chipW + line * 0.3 + textW;
        if (x > area.left() && x + entryW > area.right()) {
            x = area.left();
            y += rowHeight;
        }
        if (p) {
            const QRectF chip(x, y + (rowHeight - line * 1.1) / 2, chipW, line * 1.1);
            p->setPen(Qt::NoPen);
            p->setBrush(rankColor(c));
            p->drawRoundedRect(chip, 4, 4);
            p->setFont(g.boldFont);
            p->setPen(Qt::white);
            p->drawText(chip, Qt::AlignCenter, number);
            p->setFont(g.font);
            p->setPen(palette().color(QPalette::Text));
            p->drawText(QRectF(chip.right() + line * 0.3, y, textW + 2, rowHeight),
                        Qt::AlignLeft | Qt::AlignVCenter, fm.elidedText(text, Qt::ElideRight, textW + 1));
        }
        x += entryW + line * 1.2;
    }
    return y + rowHeight - area.top();
}

// As the model's roles say for (row, rank): OwnedFractionRole,
// ReplicatedRole, MaterialisedRole.
void ShardMapView::paintCell(QPainter &p, const QRectF &cell, const ShardMapModel::ParamRow &row, int rank,
                             const Geometry &g) const
{
    const QRectF box = g.compact ? cell.adjusted(1, 2, -1, -2) : cell.adjusted(3, 2, -3, -2);
    const QColor colour = rankColor(rank);
    const std::int64_t owned = row.owned.value(rank);
    const double fraction = row.elements > 0 ? std::min(1.0, double(owned) / double(row.elements)) : 0.0;
    const bool replicated = row.replicated;
    const bool materialised = row.materialised.value(rank);

    p.setPen(QPen(palette().color(QPalette::Midlight), 1));
    p.setBrush(QColor(0xf2, 0xf2, 0xf2));
    p.drawRect(box);

    QString text;
    if (replicated) {
        p.setPen(Qt::NoPen);
        p.setBrush(rankTint(rank, 0.7));
        p.drawRect(box);
        QBrush stripes(colour, Qt::BDiagPattern);
        p.setBrush(stripes);
        p.drawRect(box);
        text = ShardMapModel::tr("all");
    } else if (fraction > 0) {
        const QRectF filled(box.left(), box.top(), box.width() * fraction, box.height());
        p.setPen(Qt::NoPen);
        p.setBrush(colour);
        p.drawRect(filled);
        const double percent = fraction * 100;
        text = percent < 1 ? QStringLiteral("<1%") : QStringLiteral("%1%").arg(std::lround(percent));
    }

    if (!text.isEmpty() && QFontMetricsF(g.boldFont).horizontalAdvance(text) <= box.width()) {
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
