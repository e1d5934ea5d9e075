// The 1-2-5 steps every axis ticks at (the charts, the memory bars' MiB,
// the timeline's ruler): 1, 2 or 5 times a power of ten, so a tick label
// reads as a round number in any unit. Tested in tests/tst_nice_steps.cpp.
#pragma once

namespace smol::widgets {

// The smallest 1, 2 or 5 x 10^k at or above `atLeast`; 1 for zero, a
// negative value or NaN (there is no axis to step along).
double niceStep(double atLeast);

// Decimals that tell multiples of a 1-2-5 `step` apart: 0 for 1, 2, 5,
// 10...; 1 for 0.5, 0.2, 0.1; 2 for 0.05...
int stepDecimals(double step);

} // namespace smol::widgets
