#include "span_time.h"

#include <algorithm>
#include <limits>

namespace smol::engine::spantime {

Intervals merged(Intervals v)
{
    std::sort(v.begin(), v.end());
    Intervals out;
    for (const Interval &i : v) {
        if (i.second <= i.first)
            continue;
        if (!out.empty() && i.first <= out.back().second)
            out.back().second = std::max(out.back().second, i.second);
        else
            out.push_back(i);
    }
    return out;
}

std::int64_t length(const Intervals &v)
{
    std::int64_t sum = 0;
    for (const Interval &i : v)
        sum += i.second - i.first;
    return sum;
}

std::int64_t overlap(const Intervals &a, const Intervals &b)
{
    std::int64_t sum = 0;
    for (std::size_t i = 0, j = 0; i < a.size() && j < b.size();) {
        sum += std::max<std::int64_t>(0, std::min(a[i].second, b[j].second) - std::max(a[i].first, b[j].first));
        (a[i].second < b[j].second ? i : j)++;
    }
    return sum;
}

bool contains(const Intervals &v, std::int64_t t)
{
    auto it = std::upper_bound(v.begin(), v.end(), Interval{t, std::numeric_limits<std::int64_t>::max()});
    return it != v.begin() && t <= std::prev(it)->second;
}

std::optional<Busy> busyTime(const Intervals &steps, const Intervals &compute, const Intervals &waits)
{
    if (steps.empty())
        return std::nullopt;
    const std::int64_t lo = steps.front().first, hi = steps.back().second;
    if (hi <= lo)
        return std::nullopt;
    Intervals inside;
    for (const Interval &i : compute)
        if (i.second > lo && i.first < hi)
            inside.push_back({std::max(i.first, lo), std::min(i.second, hi)});
    Busy b;
    b.wallNs = hi - lo;
    b.computeNs = length(inside) - overlap(inside, waits);
    return b;
}

} // namespace smol::engine::spantime
