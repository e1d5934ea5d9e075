#include "pixel_font.h"

#include <algorithm>
#include <cmath>

namespace smol::widgets {

QFont pixelFont(const QFont &base, double px, bool bold)
{
    QFont f(base);
    f.setPixelSize(std::max(1, int(std::lround(px))));
    f.setBold(bold);
    return f;
}

QFont projectorFont(const QFont &base, bool projector)
{
    QFont f(base);
    if (projector)
        f.setPointSizeF(std::max(18.0, f.pointSizeF() * 1.8));
    return f;
}

} // namespace smol::widgets
