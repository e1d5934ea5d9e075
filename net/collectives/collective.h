// Shared plumbing of the collective algorithms (one algorithm per file in
// this directory). Internal to net/.
#pragma once

#include "../communicator.h"
#include "../transport.h"

#include <vector>

namespace smol::net::detail {

// One collective call as the algorithms see it.
struct Call {
    Transport &transport;
    int rank;
    int world;
    CollectiveKind kind;
    std::uint64_t seq;
    std::size_t segmentBytes;

    int right() const { return (rank + 1) % world; }
    int left() const { return (rank + world - 1) % world; }
    FrameMeta meta(std::uint32_t tag, DType dtype, std::size_t count) const;
};

// Tags inside one collective: which phase, which ring step, which segment.
std::uint32_t tagOf(unsigned phase, unsigned step, unsigned segment);

// Splits `count` elements into segments of at most `segElems`.
struct Segments {
    std::size_t count;
    std::size_t segElems;
    std::size_t size() const { return segElems ? (count + segElems - 1) / segElems : 0; }
    std::size_t offset(std::size_t j) const { return j * segElems; }
    std::size_t length(std::size_t j) const { return std::min(segElems, count - j * segElems); }
};
// Segment length in elements for buffers of `dtype`, kept within the tag's
// segment field for buffers of up to `maxCount` elements.
std::size_t segmentElems(const Call &c, DType dtype, std::size_t maxCount);

// Outstanding sends of one collective. The destructor waits for all of them,
// so the caller's buffer is never freed under the I/O thread, even when the
// collective fails half-way.
class SendGroup {
public:
    explicit SendGroup(Transport &t) : m_transport(t) {}
    ~SendGroup();
    void send(int peer, const FrameMeta &meta, const void *data, std::size_t bytes);
    void waitAll();

private:
    Transport &m_transport;
    std::vector<SendTicket> m_tickets;
};

// Receives posted ahead of their frames (the TCP transport then reads
// payloads straight into place). The destructor cancels any not waited for,
// so a failing collective never leaves the I/O thread writing into the
// caller's buffer.
class RecvGroup {
public:
    explicit RecvGroup(Transport &t) : m_transport(t) {}
    ~RecvGroup();
    std::size_t post(int peer, const FrameMeta &meta, void *dst, std::size_t bytes);
    void wait(std::size_t index);

private:
    Transport &m_transport;
    std::vector<RecvHandle> m_handles;
};

// acc[i] += in[i] for `count` elements of `dtype`.
void reduceSum(DType dtype, void *acc, const void *in, std::size_t count);
// buf[i] /= world (integer types: truncating division).
void divideBy(DType dtype, void *buf, std::size_t count, int world);

// Ring phases, shared by all-reduce, reduce-scatter and all-gather.
void ringReduceScatterPhase(const Call &c, TensorView buf, unsigned phase);
void ringAllGatherPhase(const Call &c, TensorView buf, unsigned phase);

void ringAllReduce(const Call &c, TensorView buf, ReduceOp op);
void doublingAllReduce(const Call &c, TensorView buf, ReduceOp op);
void ringReduceScatter(const Call &c, TensorView buf, ReduceOp op);
void ringAllGather(const Call &c, TensorView buf);
void chainBroadcast(const Call &c, TensorView buf, int root);
void disseminationBarrier(const Call &c);
void gatherToRoot(const Call &c, TensorView input, TensorView output, int root);
void scatterFromRoot(const Call &c, TensorView input, TensorView output, int root);
void sendSegments(const Call &c, int peer, TensorView buf);
void recvSegments(const Call &c, int peer, TensorView buf);

} // namespace smol::net::detail
