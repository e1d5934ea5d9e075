// Frame events travelling node -> coordinator: packed into a blob of
// fixed-size little-endian records (56 bytes each), sent in batches every
// 100 ms, unpacked and moved onto the coordinator's clock there.
//
// Record: u8 side, u8 kind, u16 zero, i32 src, i32 dst, u32 tag, u64 bytes,
// u64 seq, i64 sendStartNs, i64 sendCompleteNs, i64 recvCompleteNs.
#pragma once

#include "net/communicator.h"
#include "net/trace.h"

#include <QByteArray>

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

namespace smol::engine {

constexpr int kPackedEventBytes = 56;

void packEvent(QByteArray &out, const net::FrameEvent &e);
// Throws std::runtime_error for a blob that is not whole records or holds
// out-of-range fields.
std::vector<net::FrameEvent> unpackEvents(const QByteArray &blob);

// A node's trace sink: counts the bytes it sends and buffers every event
// for the next batch. Thread-safe (called from I/O threads).
class TelemetryBuffer : public net::TraceSink {
public:
    void onFrame(const net::FrameEvent &e) override;
    QByteArray take(); // the packed events since the last take()
    std::uint64_t bytesSent() const { return m_sent.load(); }
    // The same by process group (net::groupOfSeq of each frame), index = group id.
    std::vector<std::uint64_t> bytesSentByGroup() const;

private:
    std::mutex m_mutex;
    QByteArray m_packed;
    std::atomic<std::uint64_t> m_sent{0};
    std::array<std::atomic<std::uint64_t>, net::kMaxGroupId + 1> m_sentByGroup{};
};

} // namespace smol::engine
