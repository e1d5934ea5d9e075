#include "nice_steps.h"

#include <algorithm>
#include <cmath>

namespace smol::widgets {

double niceStep(double atLeast)
{
    if (!(atLeast > 0))
        return 1;
    const double magnitude = std::pow(10.0, std::floor(std::log10(atLeast)));
    const double f = atLeast / magnitude; // in [1, 10), give or take rounding
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * magnitude;
}

int stepDecimals(double step)
{
    if (!(step > 0))
        return 0;
    // 1e-9: log10(0.1) may come out a hair below -1.
    return std::max(0, int(-std::floor(std::log10(step) + 1e-9)));
}

} // namespace smol::widgets
