#include "column_title.h"

#include <QCoreApplication>
#include <QString>

namespace smol::widgets {

QVariant columnHeader(const ColumnTitle *titles, std::size_t count, const char *context, int section,
                      Qt::Orientation orientation, int role)
{
    if (orientation != Qt::Horizontal || section < 0 || std::size_t(section) >= count)
        return {};
    const ColumnTitle &column = titles[section];
    const char *text = role == Qt::DisplayRole   ? column.title
                       : role == Qt::ToolTipRole ? column.toolTip
                                                 : nullptr;
    if (!text)
        return {};
    return QCoreApplication::translate(context, text);
}

} // namespace smol::widgets
