#include "telemetry.h"

#include <QtEndian>

#include <stdexcept>

namespace smol::engine {

void packEvent(QByteArray &out, const net::FrameEvent &e)
{
    char r[kPackedEventBytes] = {};
    r[0] = char(e.side);
    r[1] = char(e.kind);
    qToLittleEndian<std::int32_t>(e.src, r + 4);
    qToLittleEndian<std::int32_t>(e.dst, r + 8);
    qToLittleEndian<std::uint32_t>(e.tag, r + 12);
    qToLittleEndian<std::uint64_t>(e.bytes, r + 16);
    qToLittleEndian<std::uint64_t>(e.seq, r + 24);
    qToLittleEndian<std::int64_t>(e.sendStartNs, r + 32);
    qToLittleEndian<std::int64_t>(e.sendCompleteNs, r + 40);
    qToLittleEndian<std::int64_t>(e.recvCompleteNs, r + 48);
    out.append(r, kPackedEventBytes);
}

std::vector<net::FrameEvent> unpackEvents(const QByteArray &blob)
{
    if (blob.size() % kPackedEventBytes != 0)
        throw std::runtime_error("trace batch of " + std::to_string(blob.size()) + " bytes is not whole records");
    std::vector<net::FrameEvent> events;
    events.reserve(std::size_t(blob.size() / kPackedEventBytes));
    for (qsizetype at = 0; at < blob.size(); at += kPackedEventBytes) {
        const char *r = blob.constData() + at;
        net::FrameEvent e;
        if (std::uint8_t(r[0]) > 1)
            throw std::runtime_error("trace record with an unknown side");
        e.side = net::FrameEvent::Side(std::uint8_t(r[0]));
        if (!net::isValidCollectiveKind(std::uint8_t(r[1])))
            throw std::runtime_error("trace record with an unknown collective kind");
        e.kind = net::CollectiveKind(std::uint8_t(r[1]));
        e.src = qFromLittleEndian<std::int32_t>(r + 4);
        e.dst = qFromLittleEndian<std::int32_t>(r + 8);
        e.tag = qFromLittleEndian<std::uint32_t>(r + 12);
        e.bytes = qFromLittleEndian<std::uint64_t>(r + 16);
        e.seq = qFromLittleEndian<std::uint64_t>(r + 24);
        e.sendStartNs = qFromLittleEndian<std::int64_t>(r + 32);
        e.sendCompleteNs = qFromLittleEndian<std::int64_t>(r + 40);
        e.recvCompleteNs = qFromLittleEndian<std::int64_t>(r + 48);
        events.push_back(e);
    }
    return events;
}

void TelemetryBuffer::onFrame(const net::FrameEvent &e)
{
    if (e.side == net::FrameEvent::Side::Send) {
        m_sent += e.bytes;
        m_sentByGroup[net::groupOfSeq(e.seq) % m_sentByGroup.size()] += e.bytes;
    }
    std::lock_guard lock(m_mutex);
    packEvent(m_packed, e);
}

std::vector<std::uint64_t> TelemetryBuffer::bytesSentByGroup() const
{
    std::vector<std::uint64_t> out;
    for (const auto &n : m_sentByGroup)
        out.push_back(n.load());
    return out;
}

QByteArray TelemetryBuffer::take()
{
    std::lock_guard lock(m_mutex);
    QByteArray out;
    out.swap(m_packed);
    return out;
}

} // namespace smol::engine
