// The window's number fields (the run settings, the Node page's next-run
// settings): a range, a start value, and the unit beside the number.
#pragma once

#include <QDoubleSpinBox>
#include <QSpinBox>
#include <QString>

namespace smol::app {

template <typename Box, typename T>
Box *numberField(QWidget *parent, T min, T max, T value, const QString &prefix, const QString &suffix = {})
{
    auto *box = new Box(parent);
    box->setRange(min, max);
    box->setValue(value);
    box->setPrefix(prefix);
    box->setSuffix(suffix);
    return box;
}

} // namespace smol::app
