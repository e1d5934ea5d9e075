// The frame: a fixed 112-byte little-endian header followed by the raw
// payload (docs/protocol.md has the byte layout). FrameDecoder is the
// explicit receive state machine: Header -> Payload -> Header ..., ending in
// Error on the first violation. It never allocates a claimed size before the
// header is validated, and even then grows the payload buffer only as bytes
// actually arrive, so a lying peer cannot make it allocate much.
#pragma once

#include "transport.h"

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

namespace smol::net {

constexpr std::uint32_t kFrameMagic = 0x4C4F4D53; // "SMOL" on the wire
constexpr std::uint16_t kProtocolVersion = 1;
constexpr std::size_t kHeaderBytes = 112;

enum class FrameType : std::uint8_t {
    Data = 1,      // a payload for a collective or a send/recv
    Heartbeat = 2, // no payload; keeps a quiet link known to be alive
};

struct FrameHeader {
    FrameType type = FrameType::Data;
    int src = -1;
    int dst = -1;
    FrameMeta meta;
    std::int64_t sendStartNs = 0;
    std::uint64_t payloadBytes = 0;
};

void encodeHeader(const FrameHeader &header, char *out /* kHeaderBytes */);

// Decodes and validates one header. Returns an empty string when valid, else
// the reason. `expectedSrc` < 0 accepts any source.
std::string decodeHeader(const char *in, FrameHeader &header, int expectedSrc, int myRank,
                         std::uint64_t maxPayloadBytes);

class FrameDecoder {
public:
    enum class State { Header, Payload, Error };
    enum class Event { NeedMore, HeaderReady, FrameReady, Failed };

    FrameDecoder(int expectedSrc, int myRank, std::uint64_t maxPayloadBytes);

    // Where payload buffers come from (default: fresh allocations).
    void setBufferSource(std::function<Payload(std::size_t minCapacity)> source) { m_source = std::move(source); }

    State state() const { return m_state; }
    const std::string &error() const { return m_error; }

    // Where the next received bytes must be written: the rest of the header,
    // or the next stretch of the payload. Empty only in the Error state.
    std::pair<char *, std::size_t> buffer();
    // `n` bytes were written at buffer(). HeaderReady: a header with a
    // non-empty payload was accepted (header() is valid; redirectPayload() may
    // be called now). FrameReady: takeFrame().
    Event commit(std::size_t n);

    const FrameHeader &header() const { return m_header; }
    // Read the payload of the current frame straight into dst (which holds
    // header().payloadBytes bytes) instead of an owned buffer.
    void redirectPayload(char *dst);
    bool payloadRedirected() const { return m_redirect != nullptr; }
    // Bytes the decoder holds allocated for the current payload.
    std::size_t bufferedCapacity() const { return m_payload.capacity(); }
    // After FrameReady. The payload is empty if it was redirected.
    Message takeFrame();

    // Convenience for tests and byte-at-a-time callers: copy data through the
    // state machine. Returns false once in the Error state.
    bool feed(const char *data, std::size_t n, const std::function<void(Message &&)> &onFrame);

private:
    Event fail(std::string reason);

    State m_state = State::Header;
    std::string m_error;
    int m_expectedSrc;
    int m_myRank;
    std::uint64_t m_maxPayload;
    char m_headerBytes[kHeaderBytes];
    std::size_t m_headerFill = 0;
    FrameHeader m_header;
    Payload m_payload;
    char *m_redirect = nullptr;
    std::function<Payload(std::size_t)> m_source;
    std::uint64_t m_payloadFill = 0;
};

} // namespace smol::net
