// Time as sets of intervals, and how much of a node's run it computed: the
// idle share that `smolctl compare` reads from a session file and that the
// window's lesson figures (app/engine_controller) read from the live spans.
// One definition, so a lesson and a comparison of the same run agree.
// Plain C++; no Qt, no LibTorch.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace smol::engine::spantime {

using Interval = std::pair<std::int64_t, std::int64_t>; // [start, end] in ns
using Intervals = std::vector<Interval>;                // sorted, disjoint once merged

// Sorted and disjoint; empty intervals dropped.
Intervals merged(Intervals v);
std::int64_t length(const Intervals &v);
// Both merged: the time they share.
std::int64_t overlap(const Intervals &a, const Intervals &b);
// Merged: does one of them hold t?
bool contains(const Intervals &v, std::int64_t t);

// A node's time from its first step's start to its last step's end (wall),
// and of it the time in compute spans (forward, backward, optimizer) but not
// in a wait (a collective or a pause: ddp all-reduces inside backward).
// All three merged; nullopt without steps.
struct Busy {
    std::int64_t computeNs = 0;
    std::int64_t wallNs = 0;
    double idleShare() const { return wallNs > 0 ? 1.0 - double(computeNs) / double(wallNs) : 0.0; }
};
std::optional<Busy> busyTime(const Intervals &steps, const Intervals &compute, const Intervals &waits);

} // namespace smol::engine::spantime
