// Ring all-gather.
//
// Rank r starts with its chunk r (Communicator::chunk) of the buffer. In step
// s = 0 .. N-2 it sends chunk (r-s) mod N to its right neighbour and receives
// chunk (r-s-1) mod N from its left one straight into place; each received
// segment is forwarded right in the next step without waiting for the rest of
// its chunk.
//
// Steps: N-1. Bytes on the wire per node: (N-1)/N x S sent, the same received.
#include "collective.h"

namespace smol::net::detail {

void ringAllGatherPhase(const Call &c, TensorView buf, unsigned phase)
{
    const int N = c.world;
    const std::size_t elem = dtypeSize(buf.dtype);
    const std::size_t segElems = segmentElems(c, buf.dtype, Communicator::chunk(buf.count, N, 0).count);
    auto mod = [N](int i) { return ((i % N) + N) % N; };

    SendGroup sends(c.transport);
    auto sendSegment = [&](unsigned step, int chunkIdx, std::size_t j) {
        const ChunkRange ch = Communicator::chunk(buf.count, N, chunkIdx);
        const Segments segs{ch.count, segElems};
        const std::size_t len = segs.length(j);
        sends.send(c.right(), c.meta(tagOf(phase, step, unsigned(j)), buf.dtype, len),
                   buf.bytePtr() + (ch.offset + segs.offset(j)) * elem, len * elem);
    };

    // Every chunk but our own arrives exactly once and is never written by us
    // in between, so all receives can be posted up front: payloads then land
    // in place with no copy.
    RecvGroup recvs(c.transport);
    std::vector<std::size_t> posted;
    for (int s = 0; s < N - 1; ++s) {
        const ChunkRange ch = Communicator::chunk(buf.count, N, mod(c.rank - s - 1));
        const Segments segs{ch.count, segElems};
        for (std::size_t j = 0; j < segs.size(); ++j)
            posted.push_back(recvs.post(c.left(), c.meta(tagOf(phase, unsigned(s), unsigned(j)), buf.dtype, segs.length(j)),
                                        buf.bytePtr() + (ch.offset + segs.offset(j)) * elem, segs.length(j) * elem));
    }

    const Segments own{Communicator::chunk(buf.count, N, c.rank).count, segElems};
    for (std::size_t j = 0; j < own.size(); ++j)
        sendSegment(0, c.rank, j);

    std::size_t next = 0;
    for (int s = 0; s < N - 1; ++s) {
        const int recvIdx = mod(c.rank - s - 1);
        const Segments segs{Communicator::chunk(buf.count, N, recvIdx).count, segElems};
        for (std::size_t j = 0; j < segs.size(); ++j) {
            recvs.wait(posted[next++]);
            if (s + 1 < N - 1)
                sendSegment(unsigned(s + 1), recvIdx, j);
        }
    }
    sends.waitAll();
}

void ringAllGather(const Call &c, TensorView buf)
{
    if (c.world > 1)
        ringAllGatherPhase(c, buf, 0);
}

} // namespace smol::net::detail
