// Recursive-doubling all-reduce: the latency-optimal one, for small buffers.
//
// With N a power of two, in step k = 0 .. log2(N)-1 rank r swaps its whole
// buffer with rank r XOR 2^k and adds what it receives. After step k every
// rank holds the sum over its block of 2^(k+1) ranks; after the last, over
// all. Both ranks of a pair add the same two values (a + b and b + a are the
// same bits), so every rank ends with identical results.
//
// When N is not a power of two, P = the largest power of two below it and
// E = N - P ranks fold in first: among ranks 0 .. 2E-1, each even rank sends
// its buffer to the odd rank after it (fold step) and waits; the P remaining
// ranks (the odd ones below 2E, all from 2E up) run the doubling; then each
// odd rank below 2E sends the result back to its even partner (unfold step).
//
// Steps: log2(P), plus 2 for the folding ranks. Bytes on the wire per node:
// log2(P) x S sent and received (a folding pair: one S more each way). The
// ring sends 2(N-1)/N x S in 2(N-1) steps: more steps, fewer bytes. Small
// buffers spend their time waiting on steps, so they take this one
// (Communicator::algorithmFor, kDoublingMaxBytes).
//
// Every step sends the whole buffer in segments; what arrives is added only
// once all of this step's segments have left (the transport may still be
// reading the buffer while it sends).
#include "collective.h"

#include "../errors.h"

#include <cstring>

namespace smol::net::detail {

namespace {

constexpr unsigned kFoldPhase = 0;
constexpr unsigned kDoublingPhase = 1;
constexpr unsigned kUnfoldPhase = 2;

void receiveWhole(const Call &c, int peer, unsigned phase, unsigned step, TensorView buf,
                                       std::vector<Message> *parts)
{
    const std::size_t elem = dtypeSize(buf.dtype);
    const Segments segs{buf.count, segmentElems(c, buf.dtype, buf.count)};
    parts->clear();
    for (std::size_t j = 0; j < segs.size(); ++j) {
        const std::size_t len = segs.length(j);
        Message m = c.transport.recv(peer, c.meta(tagOf(phase, step, unsigned(j)), buf.dtype, len));
        if (m.payload.size() != len * elem)
            SMOL_THROW(ProtocolError, "rank " + std::to_string(c.rank) + ": segment of " +
                                          std::to_string(m.payload.size()) + " bytes from rank " +
                                          std::to_string(peer) + ", expected " + std::to_string(len * elem));
        parts->push_back(std::move(m));
    }
}

void sendWhole(const Call &c, SendGroup &sends, int peer, unsigned phase, unsigned step, TensorView buf)
{
    const std::size_t elem = dtypeSize(buf.dtype);
    const Segments segs{buf.count, segmentElems(c, buf.dtype, buf.count)};
    for (std::size_t j = 0; j < segs.size(); ++j)
        sends.send(peer, c.meta(tagOf(phase, step, unsigned(j)), buf.dtype, segs.length(j)),
                   buf.bytePtr() + segs.offset(j) * elem, segs.length(j) * elem);
}

// Adds (or, `replace`, copies) the received segments into buf, in order.
void absorb(const Call &c, TensorView buf, std::vector<Message> &parts, bool replace)
{
    const std::size_t elem = dtypeSize(buf.dtype);
    const Segments segs{buf.count, segmentElems(c, buf.dtype, buf.count)};
    for (std::size_t j = 0; j < parts.size(); ++j) {
        char *dst = buf.bytePtr() + segs.offset(j) * elem;
        if (replace)
            std::memcpy(dst, parts[j].payload.data(), parts[j].payload.size());
        else
            reduceSum(buf.dtype, dst, parts[j].payload.data(), segs.length(j));
        c.transport.recycle(std::move(parts[j].payload));
    }
    parts.clear();
}

} // namespace

void doublingAllReduce(const Call &c, TensorView buf, ReduceOp op)
{
    if (c.world == 1 || buf.count == 0)
        return;
    int pow2 = 1;
    while (pow2 * 2 <= c.world)
        pow2 *= 2;
    const int extra = c.world - pow2;
    std::vector<Message> parts;

    // Fold: even ranks below 2E hand their buffer to the next rank and wait.
    if (c.rank < 2 * extra && c.rank % 2 == 0) {
        {
            SendGroup sends(c.transport);
            sendWhole(c, sends, c.rank + 1, kFoldPhase, 0, buf);
            sends.waitAll();
        }
        receiveWhole(c, c.rank + 1, kUnfoldPhase, 0, buf, &parts);
        absorb(c, buf, parts, /*replace=*/true);
        return;
    }
    if (c.rank < 2 * extra) {
        receiveWhole(c, c.rank - 1, kFoldPhase, 0, buf, &parts);
        absorb(c, buf, parts, /*replace=*/false);
    }

    // Doubling among the P remaining ranks, numbered 0 .. P-1.
    const int virt = c.rank < 2 * extra ? c.rank / 2 : c.rank - extra;
    auto realRank = [extra](int v) { return v < extra ? 2 * v + 1 : v + extra; };
    unsigned step = 0;
    for (int mask = 1; mask < pow2; mask <<= 1, ++step) {
        const int partner = realRank(virt ^ mask);
        SendGroup sends(c.transport);
        sendWhole(c, sends, partner, kDoublingPhase, step, buf);
        receiveWhole(c, partner, kDoublingPhase, step, buf, &parts);
        sends.waitAll(); // the buffer is ours again
        absorb(c, buf, parts, /*replace=*/false);
    }
    if (op == ReduceOp::Average)
        divideBy(buf.dtype, buf.data, buf.count, c.world);

    // Unfold: the result back to the partner that folded in.
    if (c.rank < 2 * extra) {
        SendGroup sends(c.transport);
        sendWhole(c, sends, c.rank - 1, kUnfoldPhase, 0, buf);
        sends.waitAll();
    }
}

} // namespace smol::net::detail
