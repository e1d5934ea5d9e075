// Pipelined chain broadcast.
//
// Ranks form a chain starting at the root: root -> root+1 -> ... -> root-1
// (mod N). The buffer travels in segments; every rank forwards each segment
// to its successor as soon as it has arrived, so the chain streams and the
// time is about S / bandwidth + (N-1) x segment latency rather than N-1 full
// transfers.
//
// Steps: 1 per segment per link. Bytes on the wire per node: S received
// (except the root), S sent (except the chain's last rank).
#include "collective.h"

namespace smol::net::detail {

void chainBroadcast(const Call &c, TensorView buf, int root)
{
    const int N = c.world;
    if (N == 1 || buf.count == 0)
        return;
    const int pos = (c.rank - root + N) % N;
    const int prev = (c.rank - 1 + N) % N;
    const int next = (c.rank + 1) % N;
    const std::size_t elem = dtypeSize(buf.dtype);
    const Segments segs{buf.count, segmentElems(c, buf.dtype, buf.count)};
    RecvGroup recvs(c.transport);
    if (pos > 0)
        for (std::size_t j = 0; j < segs.size(); ++j)
            recvs.post(prev, c.meta(tagOf(0, 0, unsigned(j)), buf.dtype, segs.length(j)),
                       buf.bytePtr() + segs.offset(j) * elem, segs.length(j) * elem);
    SendGroup sends(c.transport);
    for (std::size_t j = 0; j < segs.size(); ++j) {
        const std::size_t len = segs.length(j);
        if (pos > 0)
            recvs.wait(j);
        if (pos < N - 1)
            sends.send(next, c.meta(tagOf(0, 0, unsigned(j)), buf.dtype, len), buf.bytePtr() + segs.offset(j) * elem,
                       len * elem);
    }
    sends.waitAll();
}

} // namespace smol::net::detail
