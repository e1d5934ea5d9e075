// The timeline's time <-> pixel mapping: a plain struct, no Qt, so its
// arithmetic has a data-driven test (tests/tst_timeline_axis.cpp).
//
// The time area starts at pixel x = left and is `width` pixels wide; time
// startNs sits at x = left and every pixel is nsPerPixel nanoseconds.
// Times are int64 nanoseconds (a session's clock), pixels are doubles.
// Zooming keeps the time under the cursor where it is; nsPerPixel stays in
// [kMinNsPerPixel, maxNsPerPixel] and, once clampTo() has been given the
// data's range, the view cannot leave it by more than a quarter of a width.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace smol::widgets {

struct TimeAxis {
    // Deepest zoom: a nanosecond is 20 pixels wide.
    static constexpr double kMinNsPerPixel = 0.05;

    std::int64_t startNs = 0;
    double nsPerPixel = 1e6;
    double left = 0;
    double width = 1;
    // Set by clampTo(): the data's range; begin > end means none.
    std::int64_t dataBeginNs = 1;
    std::int64_t dataEndNs = 0;

    double x(std::int64_t tNs) const { return left + double(tNs - startNs) / nsPerPixel; }
    std::int64_t time(double px) const { return startNs + std::int64_t(std::llround((px - left) * nsPerPixel)); }
    double pixels(std::int64_t durationNs) const { return double(durationNs) / nsPerPixel; }
    std::int64_t endNs() const { return time(left + width); }
    std::int64_t spanNs() const { return std::int64_t(std::llround(width * nsPerPixel)); }

    // The zoom-out limit: the whole data range (or a second with no data)
    // in the width.
    double maxNsPerPixel() const
    {
        const double range = dataBeginNs <= dataEndNs ? double(dataEndNs - dataBeginNs) : 1e9;
        return std::max(kMinNsPerPixel, std::max(range, 1.0) / std::max(width, 1.0));
    }

    // Shows [t0, t1] across the width.
    void showRange(std::int64_t t0, std::int64_t t1)
    {
        if (t1 < t0)
            std::swap(t0, t1);
        nsPerPixel = std::clamp(double(t1 - t0) / std::max(width, 1.0), kMinNsPerPixel, maxNsPerPixel());
        // Centre the range when it is shorter than the deepest zoom allows.
        const double shown = width * nsPerPixel;
        startNs = t0 - std::int64_t(std::llround((shown - double(t1 - t0)) / 2));
        clamp();
    }
    void fit() { showRange(dataBeginNs, std::max(dataBeginNs, dataEndNs)); }

    // factor > 1 zooms in; the time at pixel px stays at px.
    void zoomAt(double px, double factor)
    {
        if (!(factor > 0))
            return;
        const double anchor = double(startNs) + (px - left) * nsPerPixel;
        nsPerPixel = std::clamp(nsPerPixel / factor, kMinNsPerPixel, maxNsPerPixel());
        startNs = std::int64_t(std::llround(anchor - (px - left) * nsPerPixel));
        clamp();
    }

    // Content follows the pointer: dragging right (dx > 0) shows earlier time.
    void panPixels(double dx)
    {
        startNs -= std::int64_t(std::llround(dx * nsPerPixel));
        clamp();
    }

    void centreOn(std::int64_t tNs)
    {
        startNs = tNs - std::int64_t(std::llround(width * nsPerPixel / 2));
        clamp();
    }

    // Keeps tNs in view: shifts the view (not the zoom) so that tNs sits
    // at most `marginPx` from the right edge.
    void follow(std::int64_t tNs, double marginPx)
    {
        if (x(tNs) > left + width - marginPx)
            startNs = tNs - std::int64_t(std::llround((width - marginPx) * nsPerPixel));
        clamp();
    }

    void clampTo(std::int64_t beginNs, std::int64_t endNs)
    {
        dataBeginNs = beginNs;
        dataEndNs = endNs;
        clamp();
    }

    // Zoom within limits; the view overlaps the data range, leaving at most
    // a quarter of the width empty on either side.
    void clamp()
    {
        nsPerPixel = std::clamp(nsPerPixel, kMinNsPerPixel, maxNsPerPixel());
        if (dataBeginNs > dataEndNs)
            return;
        const double slack = width * nsPerPixel / 4;
        const double lo = double(dataBeginNs) - slack;
        const double hi = double(dataEndNs) + slack - width * nsPerPixel;
        double s = double(startNs);
        if (hi < lo) // zoomed out to (nearly) the whole range: centre it
            s = (double(dataBeginNs) + double(dataEndNs) - width * nsPerPixel) / 2;
        else
            s = std::clamp(s, lo, hi);
        startNs = std::int64_t(std::llround(s));
    }
};

} // namespace smol::widgets
