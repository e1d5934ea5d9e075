// Trace batches from the nodes (node_agent's flushTrace), moved onto this
// process's clock with each sender's offset (net/clock_sync.h): frame
// events (packed, telemetry.h) to the trace sink and the run's event sink;
// collective and pause spans and memory samples at collective boundaries
// (JSON rows) to the event sink. Batches of another epoch are dropped, and
// a malformed one is a log line.
#include "coordinator_private.h"

namespace smol::engine {

namespace {

// A collective or pause span row, [kind, name, start, end, step, collective,
// seq, bytes] (node_agent's addSpan), moved by `offset`; nullopt when malformed.
std::optional<SpanEvent> spanFromRow(const QJsonArray &a, int rank, std::int64_t offset)
{
    if (a.size() != 8)
        return std::nullopt;
    SpanEvent s;
    s.node = rank;
    const int kind0 = a[0].toInt();
    if (kind0 < 0 || kind0 >= SpanEvent::kKinds)
        return std::nullopt;
    s.kind = SpanEvent::Kind(kind0);
    s.name = a[1].toString().toStdString();
    s.startNs = a[2].toString().toLongLong() - offset;
    s.endNs = a[3].toString().toLongLong() - offset;
    s.step = std::int64_t(a[4].toDouble());
    const int kind = a[5].toInt();
    s.collective = net::isValidCollectiveKind(std::uint8_t(kind)) ? net::CollectiveKind(kind)
                                                                  : net::CollectiveKind::None;
    s.seq = a[6].toString().toULongLong();
    s.bytes = std::uint64_t(a[7].toDouble());
    return s;
}

// Memory by category at a collective boundary, [t, step, collective, seq,
// before, params, grads, optimizer, activations, comm, live, peak]
// (node_agent's addMemory), moved by `offset`; nullopt when malformed.
std::optional<MemorySample> memorySampleFromRow(const QJsonArray &a, int rank, std::int64_t offset)
{
    if (a.size() != 12)
        return std::nullopt;
    MemorySample sample;
    sample.tNs = a[0].toString().toLongLong() - offset;
    sample.node = rank;
    sample.step = std::int64_t(a[1].toDouble());
    const int kind = a[2].toInt();
    sample.collective = net::isValidCollectiveKind(std::uint8_t(kind)) ? net::CollectiveKind(kind)
                                                                       : net::CollectiveKind::None;
    sample.seq = a[3].toString().toULongLong();
    sample.before = a[4].toBool();
    net::MemoryByCategory &b = sample.memory;
    std::int64_t *fields[] = {&b.params, &b.grads, &b.optimizer, &b.activations, &b.comm, &b.live, &b.peak};
    for (int f = 0; f < 7; ++f)
        *fields[f] = std::max<std::int64_t>(0, a[5 + f].toString().toLongLong());
    return sample;
}

} // namespace

void Coordinator::Private::forwardTrace(Conn &from, const net::ControlMessage &m)
{
    std::vector<net::FrameEvent> batch;
    try {
        batch = unpackEvents(m.blob);
    } catch (const std::exception &e) {
        if (!std::exchange(from.toldOffMalformedTrace, true)) // a node that sends one may send thousands
            log("node " + std::to_string(from.info.id) + ": dropped a malformed trace batch (and any more from it): " +
                e.what());
        return;
    }
    std::lock_guard lock(mutex);
    if ((!traceSink && !eventSink) || m.json.value(QStringLiteral("epoch")).toInt() != traceEpoch)
        return;
    // A rank's clock offset in this epoch (0 for a rank it does not have).
    auto offsetOf = [&](int rank) -> std::int64_t {
        if (rank < 0 || rank >= int(epochNodeOfRank.size()))
            return 0;
        return conns[std::size_t(epochNodeOfRank[std::size_t(rank)])]->clock.offsetNs();
    };
    if (eventSink) {
        // Spans and memory samples, on the sending node's clock.
        const int rank = m.json.value(QStringLiteral("rank")).toInt(-1);
        const std::int64_t offset = offsetOf(rank);
        for (const QJsonValue &v : m.json.value(QStringLiteral("spans")).toArray())
            if (const std::optional<SpanEvent> s = spanFromRow(v.toArray(), rank, offset))
                eventSink->onSpan(*s);
        for (const QJsonValue &v : m.json.value(QStringLiteral("memory")).toArray())
            if (const std::optional<MemorySample> s = memorySampleFromRow(v.toArray(), rank, offset))
                eventSink->onMemory(*s);
    }
    for (net::FrameEvent e : batch) {
        // Send side: both stamps are the sender's clock. Receive side:
        // sendStart is the sender's (from the frame header), recvComplete
        // the receiver's.
        const std::int64_t senderOffset = offsetOf(e.src);
        e.sendStartNs -= senderOffset;
        if (e.side == net::FrameEvent::Side::Send) {
            e.sendCompleteNs -= senderOffset;
        } else {
            e.recvCompleteNs -= offsetOf(e.dst);
        }
        if (traceSink)
            traceSink->onFrame(e);
        if (eventSink)
            eventSink->onFrame(e);
    }
}

} // namespace smol::engine
