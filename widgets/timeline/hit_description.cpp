#include "hit_description.h"

#include "timeline_renderer.h"
#include "widgets/paint/palette.h"

#include <QStringList>

#include <algorithm>

namespace smol::widgets {

QString HitDescription::secondsAt(const TimelineData &data, std::int64_t tNs)
{
    return QStringLiteral("%1 s").arg(double(tNs - data.originNs()) / 1e9, 0, 'f', 6);
}

QString HitDescription::of(const TimelineData &data, const TimelineHit &hit)
{
    const auto at = [&](std::int64_t t) { return secondsAt(data, t); };
    switch (hit.kind) {
    case TimelineHit::Kind::None:
        return {};
    case TimelineHit::Kind::Packet: {
        const TimelinePacket &pk = data.packets(hit.lane)[hit.first];
        QString s = QStringLiteral("%1 #%2: %3 → %4\n%5 payload\nsent at %6")
                        .arg(data.collectiveName(pk.collective))
                        .arg(pk.seq)
                        .arg(data.laneName(pk.src), data.laneName(pk.dst), formatBytes(std::int64_t(pk.bytes)),
                             at(pk.sendStartNs));
        if (pk.received())
            s += QStringLiteral(", received %1 later").arg(TimelineRenderer::formatDuration(double(pk.recvEndNs - pk.sendStartNs)));
        else
            s += QStringLiteral(", not received yet");
        const std::int64_t step = data.stepAt(hit.lane, pk.sendStartNs, pk.collective, pk.seq);
        if (step >= 0)
            s += QStringLiteral("\nstep %1").arg(step);
        return s;
    }
    case TimelineHit::Kind::PacketRun:
        return QStringLiteral("%1 packets from %2, %3\n%4 to %5 (zoom in to see them)")
            .arg(hit.count)
            .arg(data.laneName(hit.lane), formatBytes(std::int64_t(data.packetBytes(hit.lane, hit.first, hit.count))),
                 at(hit.startNs), at(hit.endNs));
    case TimelineHit::Kind::Span: {
        const StoredSpan &s = data.spans(hit.lane, hit.row)[hit.first];
        QString what;
        if (s.kind == TimelineSpanKind::Collective)
            what = QStringLiteral("%1 #%2 (%3), %4 buffer")
                       .arg(data.collectiveName(s.collective))
                       .arg(s.seq)
                       .arg(data.name(s.name), formatBytes(std::int64_t(s.bytes))) +
                   (isGlooSpanName(data.name(s.name))
                        ? QStringLiteral("\nrun by c10d Gloo: its packets are not visible")
                        : QString());
        else if (s.kind == TimelineSpanKind::Pause)
            what = QStringLiteral("paused: %1").arg(data.name(s.name));
        else
            what = QStringLiteral("%1 %2")
                       .arg(s.kind == TimelineSpanKind::Forward    ? QStringLiteral("forward")
                            : s.kind == TimelineSpanKind::Backward ? QStringLiteral("backward")
                                                                   : QStringLiteral("optimizer"),
                            data.name(s.name));
        return QStringLiteral("%1 on %2\nstep %3, %4 from %5")
            .arg(what.trimmed(), data.laneName(hit.lane))
            .arg(s.step)
            .arg(TimelineRenderer::formatDuration(double(s.endNs - s.startNs)), at(s.startNs));
    }
    case TimelineHit::Kind::SpanRun:
        return QStringLiteral("%1 spans on %2\n%3 to %4 (zoom in to see them)")
            .arg(hit.count)
            .arg(data.laneName(hit.lane), at(hit.startNs), at(hit.endNs));
    case TimelineHit::Kind::Memory:
        return memory(data, hit);
    }
    return {};
}

QString HitDescription::memory(const TimelineData &data, const TimelineHit &hit)
{
    if (hit.lane < 0 || hit.lane >= data.laneCount() || hit.first >= data.memory(hit.lane).size())
        return {};
    const auto at = [&](std::int64_t t) { return secondsAt(data, t); };
    const auto &samples = data.memory(hit.lane);
    const StoredMemory &m = samples[hit.first];
    QString where = m.collective == 0
                        ? QStringLiteral("at step end")
                        : QStringLiteral("%1 %2 #%3")
                              .arg(m.before ? QStringLiteral("before") : QStringLiteral("after"),
                                   data.collectiveName(m.collective))
                              .arg(m.seq);
    if (m.step >= 0)
        where += QStringLiteral(", step %1").arg(m.step);
    QString s;
    if (hit.count > 1) {
        const TimelineData::MemoryRange r = data.memoryIn(hit.lane, hit.startNs, hit.endNs);
        s = QStringLiteral("memory of %1: %2 samples in this pixel (%3 to %4), total from %5 to %6\n"
                           "the highest, at %7, %8:\n")
                .arg(data.laneName(hit.lane))
                .arg(hit.count)
                .arg(at(hit.startNs), at(hit.endNs), formatBytes(r.minTotal), formatBytes(r.maxTotal),
                     at(m.tNs), where);
    } else {
        s = QStringLiteral("memory of %1 at %2, %3").arg(data.laneName(hit.lane), at(m.tNs), where);
        if (hit.first + 1 < samples.size())
            s += QStringLiteral(" (held %1)").arg(TimelineRenderer::formatDuration(double(samples[hit.first + 1].tNs - m.tNs)));
        s += QLatin1Char('\n');
    }
    QStringList parts;
    for (int k = 0; k < StoredMemory::kCategories; ++k)
        parts << QStringLiteral("%1 %2").arg(categoryName(kMemoryCategories[std::size_t(k)]),
                                             formatBytes(m.memory.category(k)));
    s += parts.join(QStringLiteral(", "));
    s += QStringLiteral("\ntotal %1 (live %2, peak %3)")
             .arg(formatBytes(m.total()), formatBytes(m.memory.live), formatBytes(m.memory.peak));
    if (hit.count > 1)
        s += QStringLiteral("; zoom in to see each");
    // The step this instant belongs to, at its highest (the line over it).
    const std::deque<TimelineData::StepPeak> &peaks = data.stepPeaks(hit.lane);
    const auto peak = std::lower_bound(peaks.begin(), peaks.end(), m.tNs,
                                       [](const TimelineData::StepPeak &p, std::int64_t t) { return p.endNs < t; });
    if (peak != peaks.end() && peak->startNs <= m.tNs)
        s += QStringLiteral("\nstep %1 at its highest (the line): %2, activations %3")
                 .arg(peak->step)
                 .arg(formatBytes(peak->total), formatBytes(peak->activations));
    return s;
}

} // namespace smol::widgets
