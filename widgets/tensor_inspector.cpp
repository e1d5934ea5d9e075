#include "tensor_inspector.h"

#include "flow_layout.h"
#include "memory_model.h"
#include "step_number.h"

#include <QDoubleSpinBox>
#include <QFile>
#include <QFontMetricsF>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPainter>
#include <QPushButton>
#include <QScrollBar>
#include <QStandardItemModel>
#include <QTableView>
#include <QTextStream>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace smol::widgets {

namespace {

// "0, 1" (world ranks).
QString rankList(const QVector<int> &ranks)
{
    QStringList out;
    for (int r : ranks)
        out.append(QString::number(r));
    return out.join(QStringLiteral(", "));
}

// "[4, 64, 128]"
QString shapeText(const QVector<qint64> &shape)
{
    QStringList dims;
    for (qint64 d : shape)
        dims.append(QString::number(d));
    return QStringLiteral("[%1]").arg(dims.join(QStringLiteral(", ")));
}

// A group tensor's own name ("g.attn.block0"); the label for a recording made before groups.
QString tensorNameOf(const PausedTensor &t) { return t.tensorName.isEmpty() ? t.name : t.tensorName; }

} // namespace

// ---- pause ------------------------------------------------------------------

const PausedTensor *PauseView::heldGroup() const
{
    const PausedTensor *firstGroup = nullptr;
    for (const PausedTensor &t : inputs) {
        if (hitRank >= 0 && t.rank == hitRank)
            return t.members.isEmpty() ? nullptr : &t;
        if (!firstGroup && !t.members.isEmpty())
            firstGroup = &t;
    }
    return firstGroup;
}

bool PauseView::inHeldGroup(const PausedTensor &t) const
{
    const PausedTensor *held = heldGroup();
    return !held || (held->members.contains(t.rank) && t.members == held->members &&
                     t.collective == held->collective && t.name == held->name && t.step == held->step);
}

// ---- model ------------------------------------------------------------------

InspectorModel::InspectorModel(QObject *parent) : QAbstractTableModel(parent) {}

void InspectorModel::setPause(const PauseView &pause)
{
    beginResetModel();
    m_rows.clear();
    m_elsewhere.clear();
    m_absent.clear();
    const PausedTensor *held = pause.heldGroup();
    m_group = held != nullptr;
    if (!m_group) {
        m_rows = pause.inputs;
        m_rows += pause.results;
    } else {
        // The members in group order (group rank 0 first), their inputs then their results.
        for (const QVector<PausedTensor> *side : {&pause.inputs, &pause.results})
            for (int member : held->members)
                for (const PausedTensor &t : *side)
                    if (t.rank == member && pause.inHeldGroup(t))
                        m_rows.append(t);
        for (const PausedTensor &t : pause.inputs)
            if (!pause.inHeldGroup(t))
                m_elsewhere.append(t);
        for (int member : held->members)
            if (std::none_of(pause.inputs.begin(), pause.inputs.end(),
                             [&](const PausedTensor &t) { return t.rank == member && pause.inHeldGroup(t); }))
                m_absent.append(member);
    }
    endResetModel();
}

void InspectorModel::setMesh(const QString &spec)
{
    net::DeviceMesh mesh;
    try {
        if (!spec.isEmpty())
            mesh = net::DeviceMesh::parse(spec.toStdString());
    } catch (const std::invalid_argument &) {
        mesh = net::DeviceMesh(); // no coordinates rather than wrong ones
    }
    if (mesh == m_mesh)
        return;
    m_mesh = mesh;
    if (!m_rows.isEmpty())
        Q_EMIT dataChanged(index(0, Coords), index(int(m_rows.size()) - 1, Coords));
}

QString InspectorModel::coordsOf(int rank) const
{
    if (m_mesh.trivial() || rank < 0 || rank >= m_mesh.nodes())
        return {};
    return QString::fromStdString(m_mesh.coordsLabel(rank));
}

void InspectorModel::setRankNames(const QStringList &names)
{
    if (names == m_rankNames)
        return;
    m_rankNames = names;
    if (!m_rows.isEmpty())
        Q_EMIT dataChanged(index(0, Rank), index(int(m_rows.size()) - 1, Rank));
}

QString InspectorModel::rankName(int rank) const
{
    return rank >= 0 && rank < m_rankNames.size() && !m_rankNames[rank].isEmpty() ? m_rankNames[rank]
                                                                                   : QStringLiteral("rank %1").arg(rank);
}

const PausedTensor *InspectorModel::tensorAt(int row) const
{
    return row >= 0 && row < m_rows.size() ? &m_rows[row] : nullptr;
}

int InspectorModel::rowCount(const QModelIndex &parent) const { return parent.isValid() ? 0 : int(m_rows.size()); }
int InspectorModel::columnCount(const QModelIndex &parent) const { return parent.isValid() ? 0 : NUM_COLUMNS; }

QVariant InspectorModel::data(const QModelIndex &index, int role) const
{
    if (!index.isValid() || index.row() >= m_rows.size() || (role != Qt::DisplayRole && role != SortRole))
        return {};
    const PausedTensor &t = m_rows[index.row()];
    const bool raw = role == SortRole;
    auto num = [&](double v) -> QVariant { return raw ? QVariant(v) : QVariant(QString::number(v, 'g', 5)); };
    switch (index.column()) {
    case Rank:
        return raw || t.rank < 0 || t.rank >= m_rankNames.size() || m_rankNames[t.rank].isEmpty() ? QVariant(t.rank)
                                                                                                    : QVariant(m_rankNames[t.rank]);
    case Side:
        return t.before ? QStringLiteral("input") : QStringLiteral("result");
    case Name: // a member's: its tensor (the title names the collective)
        return m_group ? tensorNameOf(t)
                       : QStringLiteral("%1 '%2' step %3").arg(t.collective, t.name).arg(t.step);
    case Count:
        return raw ? QVariant(t.count) : QVariant(QString::number(t.count));
    case Min:
        return num(t.min);
    case Max:
        return num(t.max);
    case Mean:
        return num(t.mean);
    case Std:
        return num(t.std);
    case L2:
        return num(t.l2);
    case NaN:
        return raw ? QVariant(t.nanCount) : QVariant(QString::number(t.nanCount));
    case Coords:
        return coordsOf(t.rank);
    case Shape:
        return raw ? QVariant(t.count) : QVariant(shapeText(t.shape));
    case Bytes:
        return raw ? QVariant(t.bytes) : QVariant(MemoryModel::bytesText(t.bytes));
    }
    return {};
}

QVariant InspectorModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return {};
    static const char *names[NUM_COLUMNS] = {"rank", "", "collective", "elements", "min",   "max",  "mean",
                                             "std",  "L2", "NaN",        "mesh",     "shape", "bytes"};
    if (section == Name && m_group)
        return tr("tensor");
    return section >= 0 && section < NUM_COLUMNS ? QString::fromLatin1(names[section]) : QString();
}

// ---- plot -------------------------------------------------------------------

TensorPlot::TensorPlot(QWidget *parent) : QWidget(parent) { setMinimumSize(160, 60); }

void TensorPlot::setTensor(const PausedTensor *tensor)
{
    m_has = tensor != nullptr;
    if (tensor)
        m_tensor = *tensor;
    update();
}

void TensorPlot::setProjectorMode(bool on)
{
    m_projector = on;
    update();
}

void TensorPlot::paintEvent(QPaintEvent *)
{
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    p.fillRect(rect(), m_projector ? Qt::black : palette().base().color());
    const QColor ink = m_projector ? Qt::white : palette().text().color();
    QFont f = font();
    f.setPointSizeF(f.pointSizeF() * (m_projector ? 1.4 : 1.0));
    p.setFont(f);
    p.setPen(ink);
    if (!m_has) {
        p.drawText(rect(), Qt::AlignCenter, tr("Pause the cluster to inspect the tensors it exchanges"));
        return;
    }
    const bool heat = m_tensor.shape.size() == 2 && !m_tensor.values.isEmpty() &&
                      m_tensor.shape[0] * m_tensor.shape[1] == m_tensor.values.size();
    // Room below for the min and max labels (the caption is a label above).
    const double lineHeight = QFontMetricsF(f).height();
    QRectF area = rect().adjusted(12, 8, -12, -int(std::ceil(lineHeight)) - 8);
    QRectF histArea = area;
    if (heat) {
        histArea.setWidth(area.width() / 2 - 8);
        const QRectF heatArea(area.left() + area.width() / 2 + 8, area.top(), area.width() / 2 - 8, area.height());
        const int rows = int(m_tensor.shape[0]), cols = int(m_tensor.shape[1]);
        const double lim = std::max(std::abs(m_tensor.min), std::abs(m_tensor.max));
        const int gr = std::min(rows, int(heatArea.height())), gc = std::min(cols, int(heatArea.width()));
        QImage img(gc, gr, QImage::Format_RGB32);
        for (int y = 0; y < gr; ++y)
            for (int x = 0; x < gc; ++x) {
                const int r = int(qint64(y) * rows / gr), c = int(qint64(x) * cols / gc);
                const double v = m_tensor.values[r * cols + c];
                const double u = std::isfinite(v) && lim > 0 ? std::clamp(v / lim, -1.0, 1.0) : 0;
                img.setPixel(x, y, std::isfinite(v) ? (u >= 0 ? qRgb(255, int(255 * (1 - u)), int(255 * (1 - u)))
                                                            : qRgb(int(255 * (1 + u)), int(255 * (1 + u)), 255))
                                                     : qRgb(0, 0, 0));
            }
        p.drawImage(heatArea, img);
        const QString key = tr("%1 x %2 (blue < 0 < red)").arg(rows).arg(cols);
        p.drawText(QRectF(heatArea.left(), heatArea.bottom() + 4, heatArea.width(), lineHeight), Qt::AlignCenter,
                   QFontMetricsF(f).elidedText(key, Qt::ElideRight, heatArea.width()) == key
                       ? key
                       : tr("%1 x %2").arg(rows).arg(cols));
    }
    // Histogram of the finite elements.
    const QVector<qint64> &h = m_tensor.histogram;
    const qint64 peak = h.isEmpty() ? 0 : *std::max_element(h.begin(), h.end());
    p.drawLine(histArea.bottomLeft(), histArea.bottomRight());
    if (peak > 0) {
        const double w = histArea.width() / h.size();
        const QColor bar = m_projector ? QColor(255, 200, 0) : QColor(60, 120, 200);
        for (int i = 0; i < h.size(); ++i) {
            const double height = histArea.height() * double(h[i]) / double(peak);
            p.fillRect(QRectF(histArea.left() + i * w, histArea.bottom() - height, std::max(1.0, w - 1), height), bar);
        }
    }
    // The histogram's range under its two ends, inside the widget.
    p.setPen(ink);
    const QRectF under(histArea.left(), histArea.bottom() + 4, histArea.width(), lineHeight);
    p.drawText(under, Qt::AlignLeft | Qt::AlignTop, QString::number(m_tensor.histogramMin, 'g', 3));
    p.drawText(under, Qt::AlignRight | Qt::AlignTop, QString::number(m_tensor.histogramMax, 'g', 3));
}

QString TensorPlot::caption(const PausedTensor &t, const QString &rankName)
{
    const QString what =
        t.part.isEmpty() || t.part == QLatin1String("the whole buffer") ? QString() : QStringLiteral(" (%1)").arg(t.part);
    return tr("%1 %2%3: %4 elements, mean %5, NaN %6")
        .arg(rankName, t.before ? tr("input") : tr("result"), what)
        .arg(t.count)
        .arg(t.mean, 0, 'g', 4)
        .arg(t.nanCount);
}

QString TensorPlot::memberCaption(const PausedTensor &t, const QString &rankName, const QString &coords)
{
    const QString who = coords.isEmpty() ? rankName : QStringLiteral("%1 (%2)").arg(rankName, coords);
    return tr("%1 %2: %3 %4, %5 elements, %6, L2 %7, mean %8, NaN %9")
        .arg(who, t.before ? tr("input") : tr("result"), tensorNameOf(t), shapeText(t.shape))
        .arg(t.count)
        .arg(MemoryModel::bytesText(t.bytes))
        .arg(t.l2, 0, 'g', 4)
        .arg(t.mean, 0, 'g', 4)
        .arg(t.nanCount);
}

// ---- inspector ----------------------------------------------------------------

TensorInspector::TensorInspector(QWidget *parent)
    : QWidget(parent), m_model(new InspectorModel(this)), m_table(new QTableView(this)), m_plot(new TensorPlot(this)),
      m_title(new QLabel(tr("Not paused"), this)), m_caption(new QLabel(this)), m_elsewhere(new QLabel(this)),
      m_factor(new QDoubleSpinBox(this)),
      m_scale(new QPushButton(tr("Scale"), this)), m_zero(new QPushButton(tr("Zero"), this)),
      m_nan(new QPushButton(tr("Inject NaN"), this))
{
    m_table->setModel(m_model);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->setSelectionMode(QAbstractItemView::SingleSelection);
    m_table->horizontalHeader()->setStretchLastSection(true);
    m_table->verticalHeader()->hide();
    // The figures first, the long collective name last (it takes what is left, elided).
    m_table->horizontalHeader()->moveSection(InspectorModel::Name, InspectorModel::NUM_COLUMNS - 1);
    // A group pause's columns: a member's coordinates beside its rank, its
    // shape and bytes beside its element count.
    QHeaderView *header = m_table->horizontalHeader();
    using M = InspectorModel;
    header->moveSection(header->visualIndex(M::Coords), header->visualIndex(M::Rank) + 1);
    header->moveSection(header->visualIndex(M::Shape), header->visualIndex(M::Count));
    header->moveSection(header->visualIndex(M::Bytes), header->visualIndex(M::Count) + 1);
    m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_table->horizontalHeader()->setSectionResizeMode(InspectorModel::Name, QHeaderView::Stretch);
    m_table->setTextElideMode(Qt::ElideRight);
    m_title->setWordWrap(true);
    // The selected tensor's caption wraps above its histogram: "local-0
    // input (node 0's chunk, elements 0..8223 of 32896): 8224 elements,
    // mean 0.003, NaN 0" is wider than a projector's side panel.
    m_caption->setObjectName(QStringLiteral("tensorCaption"));
    m_caption->setWordWrap(true);
    m_caption->setTextFormat(Qt::PlainText);
    m_caption->setAlignment(Qt::AlignHCenter);
    m_elsewhere->setObjectName(QStringLiteral("heldElsewhere"));
    m_elsewhere->setWordWrap(true);
    m_elsewhere->setTextFormat(Qt::PlainText);
    m_elsewhere->hide();
    // Header and three rows at least; the rest scrolls inside the table (a
    // short side panel keeps the edit buttons on screen).
    m_table->setMinimumHeight(m_table->fontMetrics().height() * 3);
    m_factor->setRange(-1000, 1000);
    m_factor->setValue(10);
    m_factor->setPrefix(QStringLiteral("x "));
    // The edit row wraps (the side panel may be a third of a projector's width).
    auto *edits = new FlowLayout;
    m_edits = edits;
    auto *editsLabel = new QLabel(tr("Edit the selected node's input before resuming:"), this);
    editsLabel->setWordWrap(true);
    edits->addWidget(editsLabel);
    edits->addWidget(m_factor);
    edits->addWidget(m_scale);
    edits->addWidget(m_zero);
    edits->addWidget(m_nan);
    // After the title and the edit row's label: the pause's title stays the first label.
    m_relatedTitle = new QLabel(this);
    m_related = new QTableView(this);
    m_relatedModel = new QStandardItemModel(this);
    auto *layout = new QVBoxLayout(this);
    layout->addWidget(m_title);
    layout->addWidget(m_table, 2);
    layout->addWidget(m_elsewhere);
    layout->addWidget(m_relatedTitle);
    layout->addWidget(m_related, 2);
    layout->addLayout(edits); // above the plot: on a short screen the plot gives way, not the buttons
    layout->addWidget(m_caption);
    layout->addWidget(m_plot, 3);
    connect(m_table->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
            [this](const QModelIndex &current) { selectRow(current.row()); });
    auto request = [this](const QString &op) {
        if (const PausedTensor *t = selected(); t && t->before)
            Q_EMIT editRequested(t->rank, op, m_factor->value());
    };
    connect(m_scale, &QPushButton::clicked, this, [request] { request(QStringLiteral("scale")); });
    connect(m_zero, &QPushButton::clicked, this, [request] { request(QStringLiteral("zero")); });
    connect(m_nan, &QPushButton::clicked, this, [request] { request(QStringLiteral("nan")); });
    setUpRelated();
    clear();
}

// The tensors riding with the selected input (PowerSGD's Q and error buffer
// beside P): their own small table, the figures a class compares, read-only.
void TensorInspector::setUpRelated()
{
    m_relatedModel->setHorizontalHeaderLabels({tr("tensor"), tr("shape"), tr("elements"), tr("L2"), tr("min"), tr("max")});
    m_related->setObjectName(QStringLiteral("relatedTensors"));
    m_related->setModel(m_relatedModel);
    m_related->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_related->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_related->setSelectionMode(QAbstractItemView::SingleSelection);
    m_related->verticalHeader()->hide();
    // The name takes what the figures leave, elided in the middle; no
    // sideways scrolling (fitRelated() drops figures on a narrow page).
    m_related->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_related->horizontalHeader()->setSectionResizeMode(0, QHeaderView::Stretch);
    m_related->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    m_related->setTextElideMode(Qt::ElideMiddle); // "error ...fc2.weight": the parameter stays readable
    m_relatedTitle->setObjectName(QStringLiteral("relatedTitle"));
    m_relatedTitle->setWordWrap(true);
    m_relatedTitle->setTextFormat(Qt::PlainText);
    connect(m_related->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
            [this](const QModelIndex &current) { selectRelated(current.row()); });
    showRelated(nullptr);
}

void TensorInspector::showRelated(const PausedTensor *input)
{
    m_relatedRow = -1;
    m_relatedModel->removeRows(0, m_relatedModel->rowCount());
    const bool has = input && !input->related.empty();
    m_relatedTitle->setVisible(has);
    m_related->setVisible(has);
    if (!has) {
        fitRelated(); // the pause's title back
        return;
    }
    m_relatedText = tr("Riding with %1's %2, read-only (an edit changes %2 only):")
                        .arg(m_model->rankName(input->rank), tensorNameOf(*input));
    m_relatedTitle->setText(m_relatedText);
    m_related->setToolTip(m_relatedText);
    const auto cell = [](const QString &text) {
        auto *item = new QStandardItem(text);
        item->setToolTip(text);
        return item;
    };
    for (const PausedTensor &r : input->related)
        m_relatedModel->appendRow({cell(r.name), cell(shapeText(r.shape)), cell(QString::number(r.count)),
                                   cell(QString::number(r.l2, 'g', 4)), cell(QString::number(r.min, 'g', 4)),
                                   cell(QString::number(r.max, 'g', 4))});
    fitRelated();
}

int TensorInspector::relatedHeight(int rows) const
{
    return m_related->horizontalHeader()->sizeHint().height() +
           rows * m_related->verticalHeader()->defaultSectionSize() + 2 * m_related->frameWidth();
}

// Room for the related tensors on a short page (a projector's side panel):
// first their title gives way (the table's tooltip and the caption say it),
// then the pause's title (the status bar and the timeline's frame say where
// the cluster is held), then their table shrinks to one row, which scrolls.
// Narrow, the figures go before the name: min, max, then elements.
void TensorInspector::fitRelated()
{
    if (m_related->isHidden()) {
        m_title->setVisible(true);
        return;
    }
    const QMargins m = layout()->contentsMargins();
    const int inner = width() - m.left() - m.right(), spacing = std::max(0, layout()->spacing());
    const int elsewhere = !m_elsewhere->isHidden() ? spacing + m_elsewhere->heightForWidth(inner) : 0;
    const int base = m.top() + m.bottom() + 3 * spacing + m_table->minimumHeight() + elsewhere +
                     m_edits->heightForWidth(inner);
    const int title = spacing + m_title->heightForWidth(inner), relTitle = spacing + m_relatedTitle->heightForWidth(inner);
    const int two = relatedHeight(std::min<int>(2, m_relatedModel->rowCount()));
    const bool full = height() >= base + title + relTitle + two;
    const bool keepTitle = full || height() >= base + title + two;
    m_relatedTitle->setVisible(full);
    m_title->setVisible(keepTitle);
    m_related->setMinimumHeight(keepTitle || height() >= base + two ? two : relatedHeight(1));
    QHeaderView *header = m_related->horizontalHeader();
    for (int c = 1; c < m_relatedModel->columnCount(); ++c)
        m_related->setColumnHidden(c, false);
    const int room = m_related->width() - 2 * m_related->frameWidth() - m_related->verticalScrollBar()->sizeHint().width();
    const auto need = [&] {
        int w = 12 * header->fontMetrics().averageCharWidth(); // the name, elided
        for (int c = 1; c < m_relatedModel->columnCount(); ++c)
            if (!m_related->isColumnHidden(c))
                w += std::max(header->sectionSizeHint(c), static_cast<QAbstractItemView *>(m_related)->sizeHintForColumn(c));
        return w;
    };
    for (int c : {4, 5, 2}) // min, max, elements; L2 and the shape stay
        if (need() > room)
            m_related->setColumnHidden(c, true);
}

// A related tensor in the plot (its histogram, a small Q's heatmap), or
// back to the input (row -1); the edit buttons act on the input only.
void TensorInspector::selectRelated(int row)
{
    const PausedTensor *input = selected();
    if (!input || row < 0 || std::size_t(row) >= input->related.size())
        return;
    m_relatedRow = row;
    const PausedTensor &r = input->related[std::size_t(row)];
    m_plot->setTensor(&r);
    m_caption->setText(tr("%1's %2 %3 (read-only): %4 elements, L2 %5, mean %6, NaN %7")
                           .arg(m_model->rankName(input->rank), r.name, shapeText(r.shape))
                           .arg(r.count)
                           .arg(r.l2, 0, 'g', 4)
                           .arg(r.mean, 0, 'g', 4)
                           .arg(r.nanCount));
    fitPlot();
}

void TensorInspector::setPause(const PauseView &pause)
{
    m_model->setPause(pause);
    fitColumns();
    m_title->setText(titleOf(pause));
    m_complete = pause.complete;
    showElsewhere();
    selectRow(0);
    m_table->selectRow(0);
}

QString TensorInspector::titleOf(const PauseView &pause) const
{
    const PausedTensor *held = pause.heldGroup();
    // The members are the table's rows, the others are named under it; the
    // reason is the status bar's (two lines, not three, on a projector).
    if (held)
        return tr("%1 group (ranks %2) held at %3 '%4', %5")
            .arg(held->axis, rankList(held->members), held->collective, tensorNameOf(*held))
            .arg(stepText(pause.step()));
    const PausedTensor *first = m_model->tensorAt(0);
    return first ? tr("Paused (%1) at %2 '%3', %4: %5 node(s)%6")
                       .arg(pause.reason, first->collective, first->name)
                       .arg(stepText(pause.step()))
                       .arg(pause.inputs.size())
                       .arg(pause.complete ? QString() : tr(", not every node reached it"))
                 : tr("Paused");
}

// "Held elsewhere: ranks 2, 3 at tp all-reduce 'g.attn.block0'; rank 4 at
// send 'stage1.act'": the nodes not in the held group, by the collective
// each waits at; then the members that have not reached it, and the nodes
// not held at all (in a receive, say).
QString TensorInspector::elsewhereText() const
{
    QStringList places;
    QVector<QVector<int>> ranksAt;
    QVector<int> held;
    for (int row = 0; row < m_model->rowCount(); ++row)
        held.append(m_model->tensorAt(row)->rank);
    for (const PausedTensor &t : m_model->elsewhere()) {
        held.append(t.rank);
        const QString place = t.axis.isEmpty()
                                  ? QStringLiteral("%1 '%2'").arg(t.collective, t.name)
                                  : QStringLiteral("%1 %2 '%3'").arg(t.axis, t.collective, tensorNameOf(t));
        const qsizetype at = places.indexOf(place);
        if (at < 0) {
            places.append(place);
            ranksAt.append(QVector<int>{t.rank});
        } else {
            ranksAt[at].append(t.rank);
        }
    }
    QStringList parts;
    for (qsizetype i = 0; i < places.size(); ++i)
        parts.append(tr("%1 %2 at %3")
                         .arg(ranksAt[i].size() == 1 ? tr("rank") : tr("ranks"), rankList(ranksAt[i]), places[i]));
    QStringList lines;
    if (!parts.isEmpty())
        lines.append(tr("Held elsewhere: %1").arg(parts.join(QStringLiteral("; "))));
    const auto ranks = [](const QVector<int> &r) {
        return (r.size() == 1 ? tr("rank %1") : tr("ranks %1")).arg(rankList(r));
    };
    if (!m_model->absentMembers().isEmpty())
        lines.append(tr("Not at it yet: %1").arg(ranks(m_model->absentMembers())));
    QVector<int> unheld; // the mesh's ranks that no input came from
    for (int r = 0; r < m_model->meshNodes(); ++r)
        if (!held.contains(r) && !m_model->absentMembers().contains(r))
            unheld.append(r);
    if (!unheld.isEmpty())
        lines.append(tr("Not held (waiting in a receive or computing): %1").arg(ranks(unheld)));
    else if (!m_complete && m_model->meshNodes() == 0)
        lines.append(tr("Not every node is held."));
    return lines.join(QLatin1Char('\n'));
}

// The nodes held elsewhere under the table: wrapped when the page has the
// room, else one elided line (the tooltip has all of it), so that the
// members' rows and the edit buttons keep theirs.
void TensorInspector::showElsewhere()
{
    m_elsewhereText = m_model->groupPause() ? elsewhereText() : QString();
    m_elsewhere->setToolTip(m_elsewhereText);
    m_elsewhere->setVisible(!m_elsewhereText.isEmpty());
    if (m_elsewhereText.isEmpty())
        return;
    // Every member's row, up to four, without scrolling.
    const int rows = std::min(4, std::max(1, m_model->rowCount()));
    m_table->setMinimumHeight(m_table->horizontalHeader()->sizeHint().height() +
                              rows * m_table->verticalHeader()->defaultSectionSize() + 2 * m_table->frameWidth());
    const QMargins m = layout()->contentsMargins();
    const int inner = width() - m.left() - m.right(), spacing = std::max(0, layout()->spacing());
    const int fixed = m.top() + m.bottom() + 3 * spacing + m_title->heightForWidth(inner) + m_table->minimumHeight() +
                      m_edits->heightForWidth(inner);
    m_elsewhere->setText(m_elsewhereText);
    if (height() < fixed + m_elsewhere->heightForWidth(inner))
        m_elsewhere->setText(m_elsewhere->fontMetrics().elidedText(
            QString(m_elsewhereText).replace(QLatin1Char('\n'), QStringLiteral("; ")), Qt::ElideRight, inner));
}

QString TensorInspector::captionOf(const PausedTensor &t) const
{
    const QString name = m_model->rankName(t.rank);
    return m_model->groupPause() ? TensorPlot::memberCaption(t, name, m_model->coordsOf(t.rank))
                                 : TensorPlot::caption(t, name);
}

void TensorInspector::setRankNames(const QStringList &names)
{
    m_model->setRankNames(names);
    if (const PausedTensor *t = selected())
        m_caption->setText(captionOf(*t));
}

void TensorInspector::setMesh(const QString &spec)
{
    m_model->setMesh(spec);
    if (const PausedTensor *t = selected())
        m_caption->setText(captionOf(*t));
    showElsewhere();
    fitColumns();
    fitPlot();
}

void TensorInspector::clear()
{
    m_model->setPause({});
    m_title->setText(tr("Running: press Space (pause) or set a breakpoint to stop the cluster at a collective"));
    m_table->setMinimumHeight(m_table->fontMetrics().height() * 3);
    showElsewhere();
    selectRow(-1);
}

void TensorInspector::setProjectorMode(bool on)
{
    m_plot->setProjectorMode(on);
    fitColumns();
}

void TensorInspector::resizeEvent(QResizeEvent *event)
{
    QWidget::resizeEvent(event);
    fitColumns();
    showElsewhere();
    fitRelated();
    fitPlot();
}

// A side page shorter than the title, three rows of the table, the edit
// buttons, the caption and a useful histogram would lay them over one
// another: the histogram and its caption give way (the table keeps the
// figures), and come back when the page is tall enough.
void TensorInspector::fitPlot()
{
    const int w = width();
    const QMargins m = layout()->contentsMargins();
    const int spacing = std::max(0, layout()->spacing());
    const int inner = w - m.left() - m.right();
    const int elsewhere = !m_elsewhere->isHidden() ? spacing + m_elsewhere->heightForWidth(inner) : 0;
    const int related = (!m_related->isHidden() ? spacing + m_related->minimumHeight() : 0) +
                        (!m_relatedTitle->isHidden() ? spacing + m_relatedTitle->heightForWidth(inner) : 0);
    const int titleHeight = !m_title->isHidden() ? m_title->heightForWidth(inner) : 0;
    const int need = m.top() + m.bottom() + 4 * spacing + titleHeight + m_table->minimumHeight() +
                     elsewhere + related + m_edits->heightForWidth(inner) + m_caption->heightForWidth(inner) +
                     2 * m_plot->minimumHeight();
    const bool room = height() >= need;
    const bool has = selected() != nullptr;
    m_plot->setVisible(room);
    // A member's caption has what the table's narrowed columns left out: it
    // stays while there is room for it alone.
    const bool captionRoom = room || (m_model->groupPause() && height() >= need - 2 * m_plot->minimumHeight());
    m_caption->setVisible(captionRoom && has);
}

void TensorInspector::fitColumns()
{
    // The figures a class compares (min, max, mean, NaN) stay longest; the
    // title has the collective's name, the tooltip-free rest goes first;
    // on the narrowest panel (a projector beside a lesson) mean and min go
    // too, never max or the NaN count.
    using M = InspectorModel;
    const QVector<int> kDropOrder{M::Name, M::L2, M::Std, M::Count, M::Side, M::Mean, M::Min};
    // A group's members: who (rank, coordinates) and what each contributes
    // (bytes, its norm) stay longest; the caption under the table has the rest.
    const QVector<int> kGroupDropOrder{M::Std,  M::Min,  M::Max,   M::Side,  M::NaN,
                                       M::Mean, M::Name, M::Count, M::Shape, M::Bytes};
    const bool group = m_model->groupPause();
    const QVector<int> groupOnly{M::Coords, M::Shape, M::Bytes};
    QHeaderView *header = m_table->horizontalHeader();
    for (int c = 0; c < InspectorModel::NUM_COLUMNS; ++c)
        m_table->setColumnHidden(c, !group && groupOnly.contains(c));
    const auto need = [&] {
        int w = 0;
        for (int c = 0; c < InspectorModel::NUM_COLUMNS; ++c)
            if (!m_table->isColumnHidden(c) && group) // by content: the stretched last section is no measure
                w += std::max(header->sectionSizeHint(c),
                              static_cast<QAbstractItemView *>(m_table)->sizeHintForColumn(c));
            else if (!m_table->isColumnHidden(c))
                w += c == InspectorModel::Name ? 8 * header->fontMetrics().averageCharWidth() // it stretches, elided
                                               : std::max(header->sectionSizeHint(c), header->sectionSize(c));
        return w;
    };
    // The vertical scroll bar's width kept free: with more rows than fit it
    // appears after this, and the last column must not go under it.
    const int room = (m_table->viewport()->width() > 0 ? m_table->width() - 2 * m_table->frameWidth() : width()) -
                     m_table->verticalScrollBar()->sizeHint().width();
    for (int c : group ? kGroupDropOrder : kDropOrder)
        if (need() > room)
            m_table->setColumnHidden(c, true);
}

void TensorInspector::selectRow(int row)
{
    m_row = row;
    const PausedTensor *t = selected();
    showRelated(t);
    m_plot->setTensor(t);
    m_caption->setText(t ? captionOf(*t) : QString());
    fitPlot();
    const bool editable = t && t->before;
    m_scale->setEnabled(editable);
    m_zero->setEnabled(editable);
    m_nan->setEnabled(editable);
}

const PausedTensor *TensorInspector::selected() const { return m_model->tensorAt(m_row); }

bool TensorInspector::exportCsv(const QString &path) const
{
    const PausedTensor *t = selected();
    QFile f(path);
    if (!t || !f.open(QIODevice::WriteOnly | QIODevice::Truncate))
        return false;
    QTextStream out(&f);
    const bool full = !t->values.isEmpty();
    out << "rank,side,collective,name,step," << (full ? "index,value" : "bucket,mean") << "\n";
    const QVector<double> &v = full ? t->values : t->downsampled;
    for (int i = 0; i < v.size(); ++i)
        out << t->rank << "," << (t->before ? "input" : "result") << "," << t->collective << "," << t->name << ","
            << t->step << "," << i << "," << QString::number(v[i], 'g', 9) << "\n";
    return out.status() == QTextStream::Ok;
}

bool TensorInspector::exportPng(const QString &path) { return grab().save(path); }

} // namespace smol::widgets
