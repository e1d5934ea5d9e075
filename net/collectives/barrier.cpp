// Dissemination barrier.
//
// In round k = 0, 1, ... while 2^k < N, rank r sends an empty frame to
// r + 2^k and waits for one from r - 2^k (mod N). After ceil(log2 N) rounds
// every rank has heard, directly or transitively, from every other, so no
// rank leaves before all have arrived.
//
// Rounds: ceil(log2 N). Bytes on the wire per node: ceil(log2 N) headers, no
// payload.
#include "collective.h"

namespace smol::net::detail {

void disseminationBarrier(const Call &c)
{
    const int N = c.world;
    unsigned round = 0;
    for (int dist = 1; dist < N; dist *= 2, ++round) {
        const FrameMeta meta = c.meta(tagOf(0, round, 0), DType::UInt8, 0);
        SendTicket t = c.transport.send((c.rank + dist) % N, meta, nullptr, 0);
        c.transport.recv((c.rank - dist + N) % N, meta);
        t.wait();
    }
}

} // namespace smol::net::detail
