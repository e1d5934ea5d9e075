#include "palette.h"

#include <QCoreApplication>
#include <QStringList>

#include <algorithm>
#include <cmath>

namespace smol::widgets {

namespace {

QString tr(const char *text)
{
    return QCoreApplication::translate("smol::widgets::Palette", text);
}

QString scaled(double value, const char *unit)
{
    return QStringLiteral("%1 %2").arg(value, 0, 'f', value < 100 ? 1 : 0).arg(QLatin1String(unit));
}

} // namespace

// The categories in MemoryByCategory's stacking order, so a category's
// index is its place in every bar.
static_assert(kMemoryCategoryCount == net::MemoryByCategory::kCategories);
static_assert(int(MemoryCategory::Params) == 0 && int(MemoryCategory::Comm) == kMemoryCategoryCount - 1);

std::int64_t categoryBytes(const net::MemoryByCategory &memory, MemoryCategory category)
{
    return memory.category(int(category));
}

QString categoryName(MemoryCategory category)
{
    static const char *const kNames[kMemoryCategoryCount] = {
        QT_TRANSLATE_NOOP("smol::widgets::Palette", "params"),
        QT_TRANSLATE_NOOP("smol::widgets::Palette", "grads"),
        QT_TRANSLATE_NOOP("smol::widgets::Palette", "optimizer"),
        QT_TRANSLATE_NOOP("smol::widgets::Palette", "activations"),
        QT_TRANSLATE_NOOP("smol::widgets::Palette", "comm")};
    const int i = int(category);
    return i >= 0 && i < kMemoryCategoryCount ? tr(kNames[i]) : QString();
}

QString runStateName(NodeRunState state)
{
    static const char *const kNames[kNodeRunStateCount] = {
        QT_TRANSLATE_NOOP("smol::widgets::Palette", "idle"),
        QT_TRANSLATE_NOOP("smol::widgets::Palette", "running"),
        QT_TRANSLATE_NOOP("smol::widgets::Palette", "paused"),
        QT_TRANSLATE_NOOP("smol::widgets::Palette", "slow"),
        QT_TRANSLATE_NOOP("smol::widgets::Palette", "lost"),
        QT_TRANSLATE_NOOP("smol::widgets::Palette", "failed")};
    static_assert(int(NodeRunState::Failed) == kNodeRunStateCount - 1);
    const int i = int(state);
    return i >= 0 && i < kNodeRunStateCount ? tr(kNames[i]) : QString();
}

QString formatBytes(std::int64_t bytes)
{
    const double b = double(bytes);
    const double magnitude = std::abs(b);
    if (magnitude < 1024)
        return QStringLiteral("%1 B").arg(bytes);
    if (magnitude < 1024.0 * 1024)
        return scaled(b / 1024, "KiB");
    if (magnitude < 1024.0 * 1024 * 1024)
        return scaled(b / (1024.0 * 1024), "MiB");
    return QStringLiteral("%1 GiB").arg(b / (1024.0 * 1024 * 1024), 0, 'f', 2);
}

QString formatRate(double bytesPerSecond)
{
    const double r = std::max(0.0, bytesPerSecond);
    if (r < 1e3)
        return QStringLiteral("%1 B/s").arg(std::lround(r));
    if (r < 1e6)
        return scaled(r / 1e3, "kB/s");
    if (r < 1e9)
        return scaled(r / 1e6, "MB/s");
    return scaled(r / 1e9, "GB/s");
}

QString nodeSummary(const NodeState &node)
{
    QStringList lines;
    lines << QStringLiteral("%1 (id %2)").arg(displayName(node)).arg(node.id);
    QStringList where;
    where << (node.rank >= 0 ? tr("rank %1").arg(node.rank) : tr("not in this run"));
    if (!node.role.isEmpty())
        where << node.role;
    if (!node.host.isEmpty())
        where << node.host;
    lines << where.join(QStringLiteral(" · "));
    QString state = runStateName(node.state);
    if (node.slowdown > 1)
        state += tr(" (%1x slower)").arg(node.slowdown, 0, 'g', 3);
    if (!node.reason.isEmpty())
        state += QStringLiteral(": ") + node.reason;
    lines << state;
    for (MemoryCategory c : kMemoryCategories)
        lines << QStringLiteral("%1: %2").arg(categoryName(c), formatBytes(categoryBytes(node.memory, c)));
    lines << tr("live %1, peak %2").arg(formatBytes(node.memory.live), formatBytes(node.memory.peak));
    if (node.predictedBytes)
        lines << tr("ZeRO formula (params+grads+optimizer): %1").arg(formatBytes(*node.predictedBytes));
    if (!node.lastLog.isEmpty())
        lines << node.lastLog;
    return lines.join(QLatin1Char('\n'));
}

const Palette &Palette::normal()
{
    static const Palette p = [] {
        Palette n;
        n.background = QColor(0xfa, 0xfa, 0xfb);
        n.text = QColor(0x1f, 0x23, 0x28);
        n.mutedText = QColor(0x5f, 0x66, 0x6d);
        n.grid = QColor(0xd0, 0xd4, 0xd9);
        n.nodeFill = QColor(0xff, 0xff, 0xff);
        n.nodeBorder = QColor(0x9a, 0xa1, 0xa9);
        n.outOfRunFill = QColor(0xee, 0xef, 0xf1);
        n.lostFill = QColor(0xfd, 0xec, 0xec);
        n.selection = QColor(0x1a, 0x66, 0xd2);
        n.link = QColor(0x37, 0x47, 0x4f);
        n.idleLink = QColor(0xb4, 0xb9, 0xbf);
        n.labelBackground = QColor(0xff, 0xff, 0xff, 235);
        n.peak = QColor(0x1f, 0x23, 0x28);
        n.predicted = QColor(0x37, 0x47, 0x4f);
        // Okabe-Ito: blue, orange, bluish green, reddish purple, sky blue.
        n.categories = {QColor(0x00, 0x72, 0xb2), QColor(0xe6, 0x9f, 0x00), QColor(0x00, 0x9e, 0x73),
                        QColor(0xcc, 0x79, 0xa7), QColor(0x56, 0xb4, 0xe9)};
        // idle, running, paused, slow, lost, failed (a dark magenta: an error
        // like lost, told apart from it by hue as well as by its word)
        n.states = {QColor(0x80, 0x86, 0x8b), QColor(0x1e, 0x8e, 0x3e), QColor(0x1a, 0x5f, 0xb4),
                    QColor(0xf2, 0xb1, 0x1c), QColor(0xd3, 0x2f, 0x2f), QColor(0x9c, 0x1c, 0x6b)};
        n.stateTexts = {Qt::white, Qt::white, Qt::white, QColor(0x1f, 0x23, 0x28), Qt::white, Qt::white};
        return n;
    }();
    return p;
}

const Palette &Palette::projector()
{
    // Pure white and black, darker and more saturated fills: a projector
    // lifts the black level and washes out pale tints, so nothing here is pale.
    static const Palette p = [] {
        Palette n;
        n.background = Qt::white;
        n.text = Qt::black;
        n.mutedText = QColor(0x30, 0x30, 0x30);
        n.grid = QColor(0x90, 0x90, 0x90);
        n.nodeFill = QColor(0xf4, 0xf4, 0xf4);
        n.nodeBorder = QColor(0x20, 0x20, 0x20);
        n.outOfRunFill = QColor(0xdc, 0xdc, 0xdc);
        n.lostFill = QColor(0xff, 0xd6, 0xd6);
        n.selection = QColor(0x00, 0x3c, 0xe0);
        n.link = Qt::black;
        n.idleLink = QColor(0x8c, 0x8c, 0x8c);
        n.labelBackground = Qt::white;
        n.peak = Qt::black;
        n.predicted = Qt::black;
        n.categories = {QColor(0x00, 0x55, 0xa5), QColor(0xf0, 0x8c, 0x00), QColor(0x00, 0x80, 0x5a),
                        QColor(0xb8, 0x3c, 0x8c), QColor(0x3a, 0xa8, 0xec)};
        n.states = {QColor(0x50, 0x50, 0x50), QColor(0x00, 0x7a, 0x2e), QColor(0x00, 0x48, 0xb0),
                    QColor(0xff, 0xb0, 0x00), QColor(0xc0, 0x00, 0x00), QColor(0x8a, 0x00, 0x5c)};
        n.stateTexts = {Qt::white, Qt::white, Qt::white, Qt::black, Qt::white, Qt::white};
        return n;
    }();
    return p;
}

} // namespace smol::widgets
