#include "compare_table.h"

#include "widgets/column_title.h"

#include <QFont>

namespace smol::widgets {

namespace {

#define CONTEXT "smol::widgets::CompareTableModel"
// By CompareTableModel::Columns, as `smolctl compare` heads them.
const ColumnTitle kColumns[CompareTableModel::NUM_COLUMNS] = {
    {QT_TRANSLATE_NOOP(CONTEXT, "figure")},
    {QT_TRANSLATE_NOOP(CONTEXT, "A")},
    {QT_TRANSLATE_NOOP(CONTEXT, "B")},
    {QT_TRANSLATE_NOOP(CONTEXT, "B/A")},
};
#undef CONTEXT

} // namespace

CompareTableModel::CompareTableModel(QObject *parent)
    : QAbstractTableModel(parent)
{
}

void CompareTableModel::setRows(const QVector<CompareTableRow> &rows)
{
    beginResetModel();
    m_rows = rows;
    endResetModel();
}

void CompareTableModel::setValueHeaders(const QStringList &headers)
{
    m_valueHeaders = headers;
    Q_EMIT headerDataChanged(Qt::Horizontal, A, Ratio);
}

int CompareTableModel::find(const QString &figure, const QString &fromSection) const
{
    bool inSection = fromSection.isEmpty();
    for (int i = 0; i < m_rows.size(); ++i) {
        const CompareTableRow &r = m_rows[i];
        if (r.section) {
            if (!fromSection.isEmpty())
                inSection = r.figure == fromSection;
            continue;
        }
        if (inSection && r.figure.trimmed() == figure)
            return i;
    }
    return -1;
}

int CompareTableModel::rowCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : int(m_rows.size());
}

int CompareTableModel::columnCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : NUM_COLUMNS;
}

QVariant CompareTableModel::data(const QModelIndex &index, int role) const
{
    if (!index.isValid() || index.row() >= m_rows.size())
        return {};
    const CompareTableRow &r = m_rows[index.row()];
    if (role == Qt::DisplayRole || role == Qt::ToolTipRole) {
        if (r.section)
            return index.column() == Figure ? QVariant(r.figure) : QVariant();
        switch (index.column()) {
        case Figure:
            return r.figure;
        case A:
            return r.a;
        case B:
            return r.b;
        case Ratio:
            return r.ratio;
        default:
            return {};
        }
    }
    if (role == Qt::FontRole && r.section) {
        QFont f;
        f.setBold(true);
        return f;
    }
    if (role == Qt::TextAlignmentRole && index.column() != Figure)
        return int(Qt::AlignRight | Qt::AlignVCenter);
    return {};
}

QVariant CompareTableModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation == Qt::Horizontal && role == Qt::DisplayRole && section >= A &&
        section - A < m_valueHeaders.size())
        return m_valueHeaders[section - A];
    return columnHeader(kColumns, staticMetaObject.className(), section, orientation, role);
}

} // namespace smol::widgets
