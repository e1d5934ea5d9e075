// A table model's column headings as one table per model: each column's
// title beside its tooltip, in column order, rather than a switch per role
// in every headerData(). The strings are marked with QT_TRANSLATE_NOOP in
// the model's context and translated when a view asks for them.
#pragma once

#include <QVariant>
#include <Qt>

#include <cstddef>

namespace smol::widgets {

struct ColumnTitle {
    const char *title;
    const char *toolTip = nullptr; // none
};

// headerData() for horizontal sections [0, count) of `titles`: the title for
// Qt::DisplayRole, the tooltip for Qt::ToolTipRole, translated in `context`
// (the model's class name); invalid for anything else.
QVariant columnHeader(const ColumnTitle *titles, std::size_t count, const char *context, int section,
                      Qt::Orientation orientation, int role);

template <std::size_t N> QVariant columnHeader(const ColumnTitle (&titles)[N], const char *context,
                                               int section, Qt::Orientation orientation, int role)
{
    return columnHeader(titles, N, context, section, orientation, role);
}

} // namespace smol::widgets
