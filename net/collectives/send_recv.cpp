// Point-to-point send and receive (pipeline stages, parameter-server push and
// pull). Sequence numbers count per ordered pair of ranks, so only the two
// ranks involved need to agree on the order of their messages.
//
// Bytes on the wire: S from the sender to the receiver, in segments of at
// most the communicator's segment size; an empty buffer is one empty frame so
// the pair stays in step. Gather and scatter reuse these loops.
#include "collective.h"

#include <algorithm>

namespace smol::net::detail {

void sendSegments(const Call &c, int peer, TensorView buf)
{
    SendGroup sends(c.transport);
    const Segments segs{buf.count, segmentElems(c, buf.dtype, buf.count)};
    // An empty buffer still sends one empty frame, so the pair stays in step.
    const std::size_t n = std::max<std::size_t>(1, segs.size());
    for (std::size_t j = 0; j < n; ++j) {
        const std::size_t len = segs.size() ? segs.length(j) : 0;
        const TensorView part = buf.slice(segs.size() ? segs.offset(j) : 0, len);
        sends.send(peer, c.meta(tagOf(0, 0, unsigned(j)), buf.dtype, len), part.data, part.bytes());
    }
    sends.waitAll();
}

void recvSegments(const Call &c, int peer, TensorView buf)
{
    const Segments segs{buf.count, segmentElems(c, buf.dtype, buf.count)};
    const std::size_t n = std::max<std::size_t>(1, segs.size());
    for (std::size_t j = 0; j < n; ++j) {
        const std::size_t len = segs.size() ? segs.length(j) : 0;
        const TensorView part = buf.slice(segs.size() ? segs.offset(j) : 0, len);
        c.transport.recvInto(peer, c.meta(tagOf(0, 0, unsigned(j)), buf.dtype, len), part.data, part.bytes());
    }
}

} // namespace smol::net::detail
