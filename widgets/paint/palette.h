// The colours and words every view uses for the same things: the five memory
// categories (stacked bottom-to-top / left-to-right in this order: params,
// grads, optimizer, activations, comm), the node run states, links, peak and
// predicted marks, and the selection. Two variants: normal (a desktop window)
// and projector (high contrast, thick-line friendly, for a washed-out beamer
// image in a lit room). Category colours come from the Okabe-Ito set, which
// stays distinguishable for colour-blind viewers, and every view pairs each
// colour with a text label (legend, badge), so nothing relies on colour alone.
// Also here: the byte and rate formatting the views share, so "2.9 MiB" reads
// the same on the cluster view, the memory bars and their tooltips.
#pragma once

#include "widgets/cluster_state.h"

#include <QColor>
#include <QString>

#include <array>
#include <cstdint>

namespace smol::widgets {

enum class MemoryCategory { Params, Grads, Optimizer, Activations, Comm };
inline constexpr int kMemoryCategoryCount = 5;
// Stacking order of every memory bar (first = bottom / left).
inline constexpr std::array<MemoryCategory, kMemoryCategoryCount> kMemoryCategories = {
    MemoryCategory::Params, MemoryCategory::Grads, MemoryCategory::Optimizer, MemoryCategory::Activations,
    MemoryCategory::Comm};

std::int64_t categoryBytes(const net::MemoryByCategory &memory, MemoryCategory category);
QString categoryName(MemoryCategory category); // "params", "grads", ...
QString runStateName(NodeRunState state);      // "idle", "running", "paused", "slow", "lost", "failed"

// Binary units, one decimal below 100: "512 B", "12.5 KiB", "2.9 MiB", "1.25 GiB".
QString formatBytes(std::int64_t bytes);
// Decimal units, as network rates are usually quoted: "0 B/s", "830 B/s", "12.3 MB/s".
QString formatRate(double bytesPerSecond);
// Multi-line plain-text summary of one node (tooltips).
QString nodeSummary(const NodeState &node);

struct Palette {
    QColor background;
    QColor text;
    QColor mutedText;
    QColor grid; // axes, tick lines, bar tracks
    QColor nodeFill;
    QColor nodeBorder;
    QColor outOfRunFill; // nodes with rank -1
    QColor lostFill;
    QColor selection;
    QColor link;            // a link carrying traffic
    QColor idleLink;        // a link at 0 bytes/s
    QColor labelBackground; // behind text drawn over lines
    QColor peak;
    QColor predicted; // the hollow "ZeRO formula" bar
    std::array<QColor, kMemoryCategoryCount> categories;
    std::array<QColor, kNodeRunStateCount> states;     // by NodeRunState
    std::array<QColor, kNodeRunStateCount> stateTexts; // readable on the matching state colour

    QColor category(MemoryCategory c) const { return categories[std::size_t(c)]; }
    QColor state(NodeRunState s) const { return states[std::size_t(s)]; }
    QColor stateText(NodeRunState s) const { return stateTexts[std::size_t(s)]; }

    static const Palette &normal();
    static const Palette &projector();
    static const Palette &forMode(bool projectorMode) { return projectorMode ? projector() : normal(); }
};

} // namespace smol::widgets
