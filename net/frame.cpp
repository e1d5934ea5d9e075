#include "frame.h"

#include <QtEndian>

#include <algorithm>
#include <cstring>

namespace smol::net {

namespace {

// Offsets of docs/protocol.md's header table.
enum Offset : std::size_t {
    kMagic = 0,
    kVersion = 4,
    kType = 6,
    kDType = 7,
    kSrc = 8,
    kDst = 12,
    kKind = 16,
    kNDim = 17,
    kFlags = 18,
    kTag = 20,
    kSeq = 24,
    kSendStart = 32,
    kDims = 40,
    kPayloadLen = 104,
};
static_assert(kPayloadLen + 8 == kHeaderBytes);

// Payload buffers start at most this large and double as bytes arrive.
constexpr std::size_t kInitialPayloadCapacity = std::size_t(1) << 20;

template <typename T> void put(char *out, std::size_t at, T v)
{
    qToLittleEndian<T>(v, out + at);
}
template <typename T> T get(const char *in, std::size_t at)
{
    return qFromLittleEndian<T>(in + at);
}

} // namespace

void encodeHeader(const FrameHeader &h, char *out)
{
    std::memset(out, 0, kHeaderBytes);
    put<std::uint32_t>(out, kMagic, kFrameMagic);
    put<std::uint16_t>(out, kVersion, kProtocolVersion);
    out[kType] = char(h.type);
    out[kDType] = char(h.meta.dtype);
    put<std::int32_t>(out, kSrc, h.src);
    put<std::int32_t>(out, kDst, h.dst);
    out[kKind] = char(h.meta.kind);
    out[kNDim] = char(h.meta.shape.ndim);
    put<std::uint32_t>(out, kTag, h.meta.tag);
    put<std::uint64_t>(out, kSeq, h.meta.seq);
    put<std::int64_t>(out, kSendStart, h.sendStartNs);
    for (int i = 0; i < h.meta.shape.ndim && i < kMaxDims; ++i)
        put<std::int64_t>(out, kDims + 8 * std::size_t(i), h.meta.shape.dims[std::size_t(i)]);
    put<std::uint64_t>(out, kPayloadLen, h.payloadBytes);
}

std::string decodeHeader(const char *in, FrameHeader &h, int expectedSrc, int myRank,
                         std::uint64_t maxPayloadBytes)
{
    if (get<std::uint32_t>(in, kMagic) != kFrameMagic)
        return "bad magic";
    const auto version = get<std::uint16_t>(in, kVersion);
    if (version != kProtocolVersion)
        return "unsupported protocol version " + std::to_string(version);
    const auto type = std::uint8_t(in[kType]);
    if (type != std::uint8_t(FrameType::Data) && type != std::uint8_t(FrameType::Heartbeat))
        return "unknown frame type " + std::to_string(type);
    const auto dtype = std::uint8_t(in[kDType]);
    if (!isValidDType(dtype))
        return "unknown dtype " + std::to_string(dtype);
    const auto kind = std::uint8_t(in[kKind]);
    if (!isValidCollectiveKind(kind))
        return "unknown collective kind " + std::to_string(kind);
    const auto ndim = std::uint8_t(in[kNDim]);
    if (ndim > kMaxDims)
        return "too many dimensions (" + std::to_string(ndim) + ")";
    if (get<std::uint16_t>(in, kFlags) != 0)
        return "reserved flags set";

    h.type = FrameType(type);
    h.src = get<std::int32_t>(in, kSrc);
    h.dst = get<std::int32_t>(in, kDst);
    if (expectedSrc >= 0 && h.src != expectedSrc)
        return "source rank " + std::to_string(h.src) + " on the link of rank " + std::to_string(expectedSrc);
    if (h.dst != myRank)
        return "destination rank " + std::to_string(h.dst) + " arrived at rank " + std::to_string(myRank);
    h.meta.kind = CollectiveKind(kind);
    h.meta.dtype = DType(dtype);
    h.meta.tag = get<std::uint32_t>(in, kTag);
    h.meta.seq = get<std::uint64_t>(in, kSeq);
    h.sendStartNs = get<std::int64_t>(in, kSendStart);
    h.meta.shape = Shape{};
    h.meta.shape.ndim = ndim;
    for (std::size_t i = 0; i < std::size_t(kMaxDims); ++i) {
        const auto d = get<std::int64_t>(in, kDims + 8 * i);
        if (i >= ndim && d != 0)
            return "unused dimension " + std::to_string(i) + " is not zero";
        if (i < ndim)
            h.meta.shape.dims[i] = d;
    }
    h.payloadBytes = get<std::uint64_t>(in, kPayloadLen);
    if (h.payloadBytes > maxPayloadBytes)
        return "payload of " + std::to_string(h.payloadBytes) + " bytes exceeds the cap of " +
               std::to_string(maxPayloadBytes);
    if (h.type == FrameType::Heartbeat && (h.payloadBytes != 0 || ndim != 0))
        return "heartbeat with a payload";
    const std::uint64_t elem = dtypeSize(h.meta.dtype);
    if (ndim == 0) {
        if (h.payloadBytes % elem != 0)
            return "payload of " + std::to_string(h.payloadBytes) + " bytes is not a whole number of " +
                   dtypeName(h.meta.dtype);
    } else {
        const std::int64_t numel = h.meta.shape.numel();
        if (numel < 0 || h.payloadBytes % elem != 0 || std::uint64_t(numel) != h.payloadBytes / elem)
            return "shape/length mismatch (" + std::to_string(numel) + " x " + dtypeName(h.meta.dtype) +
                   " vs " + std::to_string(h.payloadBytes) + " bytes)";
    }
    return {};
}

FrameDecoder::FrameDecoder(int expectedSrc, int myRank, std::uint64_t maxPayloadBytes)
    : m_expectedSrc(expectedSrc)
    , m_myRank(myRank)
    , m_maxPayload(maxPayloadBytes)
{
}

std::pair<char *, std::size_t> FrameDecoder::buffer()
{
    switch (m_state) {
    case State::Header:
        return {m_headerBytes + m_headerFill, kHeaderBytes - m_headerFill};
    case State::Payload: {
        if (m_redirect)
            return {m_redirect + m_payloadFill, std::size_t(m_header.payloadBytes - m_payloadFill)};
        if (m_payload.capacity() == 0) {
            const auto first = std::size_t(std::min<std::uint64_t>(m_header.payloadBytes, kInitialPayloadCapacity));
            if (m_source)
                m_payload = m_source(first);
            else
                m_payload.reserve(first);
        }
        else if (m_payloadFill == m_payload.capacity()) {
            m_payload.resize(std::size_t(m_payloadFill)); // reserve() keeps size() bytes
            m_payload.reserve(std::size_t(std::min<std::uint64_t>(m_header.payloadBytes, m_payload.capacity() * 2)));
        }
        // Never past this frame's end: the next frame's header is not ours.
        const std::size_t end = std::size_t(std::min<std::uint64_t>(m_payload.capacity(), m_header.payloadBytes));
        return {m_payload.data() + m_payloadFill, end - std::size_t(m_payloadFill)};
    }
    case State::Error:
        break;
    }
    return {nullptr, 0};
}

FrameDecoder::Event FrameDecoder::fail(std::string reason)
{
    m_state = State::Error;
    m_error = std::move(reason);
    m_payload = Payload{};
    return Event::Failed;
}

FrameDecoder::Event FrameDecoder::commit(std::size_t n)
{
    switch (m_state) {
    case State::Header:
        m_headerFill += n;
        if (m_headerFill < kHeaderBytes)
            return Event::NeedMore;
        if (std::string reason = decodeHeader(m_headerBytes, m_header, m_expectedSrc, m_myRank, m_maxPayload);
            !reason.empty())
            return fail(std::move(reason));
        m_headerFill = 0;
        m_payloadFill = 0;
        m_redirect = nullptr;
        m_payload = Payload(0);
        if (m_header.payloadBytes == 0)
            return Event::FrameReady;
        m_state = State::Payload; // buffer() allocates unless redirectPayload() comes first
        return Event::HeaderReady;
    case State::Payload:
        m_payloadFill += n;
        if (m_payloadFill < m_header.payloadBytes)
            return Event::NeedMore;
        if (!m_redirect)
            m_payload.resize(std::size_t(m_payloadFill));
        m_state = State::Header;
        return Event::FrameReady;
    case State::Error:
        break;
    }
    return Event::Failed;
}

void FrameDecoder::redirectPayload(char *dst)
{
    if (m_state == State::Payload && m_payloadFill == 0) {
        m_redirect = dst;
        m_payload = Payload{};
    }
}

Message FrameDecoder::takeFrame()
{
    Message m;
    m.src = m_header.src;
    m.meta = m_header.meta;
    m.payload = std::move(m_payload);
    m_payload = Payload{};
    m_redirect = nullptr;
    return m;
}

bool FrameDecoder::feed(const char *data, std::size_t n, const std::function<void(Message &&)> &onFrame)
{
    while (m_state != State::Error && n > 0) {
        auto [dst, room] = buffer();
        const std::size_t take = std::min(room, n);
        std::memcpy(dst, data, take);
        data += take;
        n -= take;
        const Event e = commit(take);
        if (e == Event::FrameReady && onFrame)
            onFrame(takeFrame());
    }
    return m_state != State::Error;
}

} // namespace smol::net
