// Ring reduce-scatter.
//
// The buffer of S bytes is cut into N chunks (Communicator::chunk). Ranks form
// a ring r -> r+1. In step s = 0 .. N-2, rank r sends chunk (r-s-1) mod N to
// its right neighbour and receives chunk (r-s-2) mod N from its left one,
// adding it into its own copy. After N-1 steps rank r holds chunk r summed
// over all ranks (divided by N for the average).
//
// Each chunk travels in segments (Communicator::setSegmentBytes): as soon as
// a received segment is reduced it is handed to the right neighbour as part
// of the next step, so reduction overlaps transfer.
//
// Steps: N-1. Bytes on the wire per node: (N-1)/N x S sent, the same received.
#include "collective.h"

#include "../errors.h"

namespace smol::net::detail {

void ringReduceScatterPhase(const Call &c, TensorView buf, unsigned phase)
{
    const int N = c.world;
    const std::size_t elem = dtypeSize(buf.dtype);
    const std::size_t segElems = segmentElems(c, buf.dtype, Communicator::chunk(buf.count, N, 0).count);
    auto mod = [N](int i) { return ((i % N) + N) % N; };
    auto segmentsOf = [&](int chunkIdx) {
        return Segments{Communicator::chunk(buf.count, N, chunkIdx).count, segElems};
    };

    SendGroup sends(c.transport);
    auto sendSegment = [&](unsigned step, int chunkIdx, std::size_t j) {
        const ChunkRange ch = Communicator::chunk(buf.count, N, chunkIdx);
        const Segments segs = segmentsOf(chunkIdx);
        const std::size_t len = segs.length(j);
        sends.send(c.right(), c.meta(tagOf(phase, step, unsigned(j)), buf.dtype, len),
                   buf.bytePtr() + (ch.offset + segs.offset(j)) * elem, len * elem);
    };

    // Step 0 sends local data: all of it can go at once.
    const int first = mod(c.rank - 1);
    for (std::size_t j = 0; j < segmentsOf(first).size(); ++j)
        sendSegment(0, first, j);

    for (int s = 0; s < N - 1; ++s) {
        const int recvIdx = mod(c.rank - s - 2);
        const ChunkRange ch = Communicator::chunk(buf.count, N, recvIdx);
        const Segments segs = segmentsOf(recvIdx);
        for (std::size_t j = 0; j < segs.size(); ++j) {
            const std::size_t len = segs.length(j);
            Message m = c.transport.recv(c.left(), c.meta(tagOf(phase, unsigned(s), unsigned(j)), buf.dtype, len));
            if (m.payload.size() != len * elem)
                SMOL_THROW(ProtocolError, "rank " + std::to_string(c.rank) + ": segment of " +
                                              std::to_string(m.payload.size()) + " bytes from rank " +
                                              std::to_string(c.left()) + ", expected " + std::to_string(len * elem));
            reduceSum(buf.dtype, buf.bytePtr() + (ch.offset + segs.offset(j)) * elem, m.payload.data(), len);
            c.transport.recycle(std::move(m.payload));
            if (s + 1 < N - 1)
                sendSegment(unsigned(s + 1), recvIdx, j); // this chunk is next step's send
        }
    }
    // The all-gather that may follow overwrites chunks we sent: drain first.
    sends.waitAll();
}

void ringReduceScatter(const Call &c, TensorView buf, ReduceOp op)
{
    if (c.world > 1)
        ringReduceScatterPhase(c, buf, 0);
    if (op == ReduceOp::Average) {
        const ChunkRange mine = Communicator::chunk(buf.count, c.world, c.rank);
        divideBy(buf.dtype, buf.bytePtr() + mine.offset * dtypeSize(buf.dtype), mine.count, c.world);
    }
}

} // namespace smol::net::detail
