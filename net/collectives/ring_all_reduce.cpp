// Ring all-reduce = ring reduce-scatter, then ring all-gather
// (ring_reduce_scatter.cpp, ring_all_gather.cpp), in place.
//
//   1. reduce-scatter: N-1 steps; afterwards rank r holds chunk r summed.
//   2. average only: rank r divides its chunk by N (once, not N times).
//   3. all-gather: N-1 steps; every rank receives every summed chunk.
//
// Steps: 2(N-1). Bytes on the wire per node: 2(N-1)/N x S sent and the same
// received, independent of N: the bandwidth-optimal all-reduce. (Sending the
// whole buffer to every peer would cost (N-1) x S.)
#include "collective.h"

namespace smol::net::detail {

void ringAllReduce(const Call &c, TensorView buf, ReduceOp op)
{
    if (c.world == 1 || buf.count == 0)
        return;
    ringReduceScatterPhase(c, buf, 0);
    if (op == ReduceOp::Average) {
        const ChunkRange mine = Communicator::chunk(buf.count, c.world, c.rank);
        divideBy(buf.dtype, buf.bytePtr() + mine.offset * dtypeSize(buf.dtype), mine.count, c.world);
    }
    ringAllGatherPhase(c, buf, 1);
}

} // namespace smol::net::detail
