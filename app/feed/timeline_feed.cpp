#include "timeline_feed.h"

#include "engine/session/session_reader.h"

#include <QJsonDocument>
#include <QJsonObject>

#include <algorithm>

namespace smol::app {

widgets::TimelineFrameSide toTimeline(const net::FrameEvent &e)
{
    return widgets::TimelineFrameSide{e.side == net::FrameEvent::Side::Send, e.src, e.dst, e.bytes, int(e.kind), e.seq,
                                      e.tag, e.sendStartNs, e.sendCompleteNs, e.recvCompleteNs};
}

widgets::TimelineSpan toTimeline(const engine::SpanEvent &s)
{
    return widgets::TimelineSpan{s.node, widgets::TimelineSpanKind(int(s.kind)), QString::fromStdString(s.name),
                                 s.startNs, s.endNs, s.step, int(s.collective), s.seq, s.bytes};
}

widgets::TimelineMemorySample toTimeline(const engine::MemorySample &m)
{
    return widgets::TimelineMemorySample{m.node,         m.tNs, m.step,  m.memory, int(m.collective),
                                         m.seq,          m.before, m.stepPeak};
}

QStringList collectiveNames()
{
    QStringList names;
    for (int k = 0; k <= int(net::CollectiveKind::Pull); ++k)
        names.append(QString::fromLatin1(net::collectiveName(net::CollectiveKind(k))));
    return names;
}

bool recordedOnGloo(const engine::SessionHeader &header)
{
    const QJsonObject config = QJsonDocument::fromJson(header.configJson).object();
    return config.value(QStringLiteral("backend")).toString() == QLatin1String("gloo");
}

bool glooFrameIsPacket(const net::FrameEvent &e)
{
    return e.src != e.dst;
}

void markGlooSpan(widgets::TimelineSpan &span)
{
    if (span.kind == widgets::TimelineSpanKind::Collective && !widgets::isGlooSpanName(span.name))
        span.name = widgets::kGlooSpanPrefix + span.name;
}

void loadTimeline(const engine::SessionReader &reader, widgets::TimelineData &data,
                  const std::function<void(std::uint64_t, std::uint64_t)> &progress)
{
    data.clear();
    data.setCollectiveNames(collectiveNames());
    QStringList names;
    for (const engine::SessionNode &n : reader.header().nodeList) {
        while (names.size() <= n.rank)
            names.append(QString());
        if (n.rank >= 0)
            names[n.rank] = QString::fromStdString(n.name);
    }
    data.setNodes(names);
    // Progress by event time (frames come in time order): counting the rows
    // first would cost a pass of its own.
    const auto [first, last] = reader.timeRange();
    const std::uint64_t total = std::uint64_t(std::max<std::int64_t>(1, last - first));
    std::uint64_t seen = 0;
    const bool gloo = recordedOnGloo(reader.header());
    reader.forEachFrame([&](const net::FrameEvent &e) {
        if (!gloo || glooFrameIsPacket(e))
            data.addFrame(toTimeline(e));
        if (progress && ++seen % 65536 == 0)
            progress(std::uint64_t(std::clamp<std::int64_t>(engine::eventTimeNs(e) - first, 0, std::int64_t(total))),
                     total);
    });
    reader.forEachSpanByStart([&](const engine::SpanEvent &s) {
        widgets::TimelineSpan t = toTimeline(s);
        if (gloo)
            markGlooSpan(t);
        data.addSpan(t);
    });
    reader.forEachMemory([&](const engine::MemorySample &m) { data.addMemory(toTimeline(m)); });
    if (progress)
        progress(total, total);
}

TimelineBatch toTimeline(const std::vector<net::FrameEvent> &frames, const std::vector<engine::SpanEvent> &spans,
                         const std::vector<engine::MemorySample> &memory, bool gloo)
{
    TimelineBatch b;
    b.frames.reserve(qsizetype(frames.size()));
    for (const auto &e : frames)
        if (!gloo || glooFrameIsPacket(e)) // Gloo's one event per collective: its span shows it
            b.frames.append(toTimeline(e));
    b.spans.reserve(qsizetype(spans.size()));
    for (const auto &e : spans) {
        widgets::TimelineSpan t = toTimeline(e);
        if (gloo)
            markGlooSpan(t); // its packets are not visible
        b.spans.append(t);
    }
    b.memory.reserve(qsizetype(memory.size()));
    for (const auto &m : memory)
        b.memory.append(toTimeline(m));
    return b;
}

} // namespace smol::app
