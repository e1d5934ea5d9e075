// Gather to a root and scatter from a root: the shapes of a parameter server
// (workers push to the server, the server hands out parts).
//
// gather:  every rank r != root sends its S-byte input to the root, which
//          places it at output[r * count]. Root receives (N-1) x S bytes,
//          every other rank sends S.
// scatter: the root sends part r (S bytes) of its input to each rank r, which
//          receives it into output. Root sends (N-1) x S bytes, every other
//          rank receives S.
//
// Steps: 1 (all transfers concurrent). Large buffers travel in segments.
#include "collective.h"

#include "../errors.h"

#include <cstring>

namespace smol::net::detail {

namespace {
void copyOwn(TensorView from, char *to)
{
    if (from.count && from.bytePtr() != to)
        std::memmove(to, from.bytePtr(), from.bytes());
}
} // namespace

void gatherToRoot(const Call &c, TensorView input, TensorView output, int root)
{
    if (c.rank != root) {
        sendSegments(c, root, input);
        return;
    }
    if (output.count != input.count * std::size_t(c.world) || output.dtype != input.dtype)
        SMOL_THROW(NetError, "gather: the root's output must hold world x input elements of the same dtype");
    for (int r = 0; r < c.world; ++r) {
        TensorView slot = output.slice(std::size_t(r) * input.count, input.count);
        if (r == root)
            copyOwn(input, slot.bytePtr());
        else
            recvSegments(c, r, slot);
    }
}

void scatterFromRoot(const Call &c, TensorView input, TensorView output, int root)
{
    if (c.rank != root) {
        recvSegments(c, root, output);
        return;
    }
    if (input.count != output.count * std::size_t(c.world) || output.dtype != input.dtype)
        SMOL_THROW(NetError, "scatter: the root's input must hold world x output elements of the same dtype");
    SendGroup sends(c.transport);
    const Segments segs{output.count, segmentElems(c, output.dtype, output.count)};
    for (int r = 0; r < c.world; ++r) {
        TensorView part = input.slice(std::size_t(r) * output.count, output.count);
        if (r == root) {
            copyOwn(part, output.bytePtr());
            continue;
        }
        const std::size_t n = std::max<std::size_t>(1, segs.size());
        for (std::size_t j = 0; j < n; ++j) {
            const std::size_t len = segs.size() ? segs.length(j) : 0;
            TensorView piece = part.slice(segs.size() ? segs.offset(j) : 0, len);
            sends.send(r, c.meta(tagOf(0, 0, unsigned(j)), part.dtype, len), piece.data, piece.bytes());
        }
    }
    sends.waitAll();
}

} // namespace smol::net::detail
