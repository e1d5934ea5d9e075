// Collectives over typed buffers, written once against Transport. One
// Communicator per rank. All ranks must call collectives in the same order
// (each call takes the next sequence number); point-to-point send/recv count
// per peer pair instead, so they need only agree pairwise. send/recv with
// DIFFERENT peers may run on different threads at once (separate per-peer
// counters, thread-safe transports; a parameter server handles each worker
// on its own thread); the hook is then called concurrently too.
//
// The algorithms live one per file in net/collectives/, each opening with its
// steps and bytes on the wire.
#pragma once

#include "dtype.h"
#include "tensor_view.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace smol::net {

class Transport;

// seq = group << kGroupSeqShift | the group's own sequence number. Group 0 is
// the world (every frame outside a group, as before).
constexpr unsigned kGroupSeqShift = 48;
// At most 31 groups, so a tagged seq stays below 2^53 (exact as a JSON number).
constexpr std::uint32_t kMaxGroupId = 31;
inline std::uint32_t groupOfSeq(std::uint64_t seq) { return std::uint32_t(seq >> kGroupSeqShift); }
inline std::uint64_t seqInGroup(std::uint64_t seq) { return seq & ((std::uint64_t(1) << kGroupSeqShift) - 1); }


// How an all-reduce runs (net/collectives/): the ring (2(N-1) steps,
// 2(N-1)/N x S per node: bandwidth-optimal) or recursive doubling (log2 N
// steps, log2 N x S per node, one fold step more each way when N is not a
// power of two: latency-optimal). Auto takes doubling for buffers of at most
// kDoublingMaxBytes and the ring above (docs/protocol.md, "All-reduce").
enum class AllReduceAlgorithm { Ring, Doubling, Auto };
// At 1 ms a step and 100 Mbit/s, four ranks: the ring costs 6 ms + 1.5 S,
// doubling 2 ms + 2 S at 12.5 MB/s; they cross near 100 KB. On loopback
// (about 40 us a step, GB/s) they cross a little higher. 64 KiB keeps every
// auto choice on the winning side of both.
constexpr std::size_t kDoublingMaxBytes = 64 * 1024;
const char *allReduceAlgorithmName(AllReduceAlgorithm algorithm);
// "ring", "doubling", "auto"; false for anything else.
bool parseAllReduceAlgorithm(const std::string &text, AllReduceAlgorithm *out);

// A tensor a collective's hook may show beside its buffer, read-only
// (PowerSGD's all-reduce of P shows Q and the error buffer).
struct RelatedTensor {
    std::string name;
    TensorView view;
};

struct CollectiveInfo {
    CollectiveKind kind = CollectiveKind::None;
    std::uint64_t seq = 0;   // collective sequence number (p2p: per-pair count)
    std::string name;        // tensor or bucket name given by the caller
    int rank = -1;
    int worldSize = 0;
    int peer = -1;           // root for rooted collectives, peer for send/recv
    TensorView buffer;       // the caller's buffer: input before, result after
    bool receiving = false;  // recv (and pull): the buffer is only written to
    // A process group's collective (net/group_transport.h): its id (0: the
    // whole world) and the mesh axis it runs on ("tp", "dp+cp", ...; empty
    // for the world). seq then carries the group id in its top bits; rank,
    // worldSize and peer are group ranks.
    std::uint32_t group = 0;
    std::string axis;
    const std::vector<int> *members = nullptr; // the group's world ranks, in group order; null: the world
    // All-reduce: the algorithm that runs it ("ring", "doubling"); else null.
    const char *algorithm = nullptr;
    // Read-only tensors shown beside the buffer (Communicator::attachToNext).
    std::vector<RelatedTensor> related;

    // The group's first world rank (0 for the world): with seq, what names
    // one collective of one group (groups of one axis share their seqs).
    int leader() const { return members && !members->empty() ? members->front() : 0; }
    // "tp (ranks 4, 5) · name" for a group's collective; name alone for the world's.
    std::string label() const;
};

// The part of a collective's buffer that this rank contributes (before) or
// ends up with as its own (after), in elements of info.buffer; the rest of
// the buffer is scratch or not yet written, and a pause shows and edits
// only this part:
//   all-gather     before: its own chunk          after: the whole buffer
//   reduce-scatter before: the whole buffer       after: its own chunk
//   recv, pull     before: nothing (count 0)      after: the message
//   broadcast      before: the root's buffer only after: the whole buffer
//   scatter        before: nothing (the output)   after: the whole buffer
//   everything else: the whole buffer.
struct BufferPart {
    std::size_t offset = 0;
    std::size_t count = 0;
    bool whole = true;
};
BufferPart contributedPart(const CollectiveInfo &info, bool before);

// Called on the calling (compute) thread before and after every collective.
// before() may block to hold the collective (pause-at-collective) and may
// change the buffer's contents; it must not change its size.
class CollectiveHook {
public:
    virtual ~CollectiveHook() = default;
    virtual void before(const CollectiveInfo &info) = 0;
    virtual void after(const CollectiveInfo &info) = 0;
};

struct ChunkRange {
    std::size_t offset = 0;
    std::size_t count = 0;
};

// The collectives are virtual so another engine can stand in for ours
// (engine/gloo_communicator.h: c10d's ProcessGroupGloo). An override keeps
// the contract above: same sequence numbers, hook before and after.
class Communicator {
public:
    explicit Communicator(Transport &transport);
    virtual ~Communicator() = default;

    int rank() const { return m_rank; }
    int worldSize() const { return m_worldSize; }
    // Over a GroupTransport: its group id, else 0 (the world).
    std::uint32_t group() const { return m_group; }
    // The mesh axis this communicator's collectives run on (CollectiveInfo::axis).
    void setAxis(std::string axis) { m_axis = std::move(axis); }
    const std::string &axis() const { return m_axis; }

    // A communicator for the process group of world ranks `members` (this
    // rank among them; group id `id`, as GroupTransport takes it), its
    // collectives on `axis`, hooked like this one. Every member calls it, in
    // the same order of groups. Ours: a GroupTransport over this
    // communicator's transport; Gloo's: a ProcessGroupGloo of the members.
    virtual std::unique_ptr<Communicator> makeGroup(std::vector<int> members, std::uint32_t id, std::string axis);
    // Throws NetError for a communicator without one (another backend).
    Transport &transport();

    void setHook(CollectiveHook *hook) { m_hook = hook; } // not owned
    CollectiveHook *hook() const { return m_hook; }
    // Ring collectives split each chunk into frames of at most this size so
    // reduction of one segment overlaps the transfer of the next.
    void setSegmentBytes(std::size_t bytes);
    // Ours: which all-reduce runs (default: the ring). Another backend picks
    // its own and ignores this.
    void setAllReduceAlgorithm(AllReduceAlgorithm algorithm) { m_algorithm = algorithm; }
    AllReduceAlgorithm allReduceAlgorithm() const { return m_algorithm; }
    // The algorithm an all-reduce of `bytes` runs under the current setting.
    AllReduceAlgorithm algorithmFor(std::size_t bytes) const;
    // The next collective this thread calls carries these in its
    // CollectiveInfo::related (they must outlive it); later ones carry none.
    void attachToNext(std::vector<RelatedTensor> related) { m_related = std::move(related); }
    std::size_t segmentBytes() const { return m_segmentBytes; }

    // The ring's chunk i of a buffer of `count` elements over `world` ranks:
    // the first (count % world) chunks hold one element more.
    static ChunkRange chunk(std::size_t count, int world, int index);

    virtual void send(int peer, TensorView buffer, const std::string &name = {},
                      CollectiveKind kind = CollectiveKind::SendRecv);
    virtual void recv(int peer, TensorView buffer, const std::string &name = {},
                      CollectiveKind kind = CollectiveKind::SendRecv);
    virtual void broadcast(TensorView buffer, int root, const std::string &name = {});
    virtual void barrier();
    // In place. Afterwards this rank's chunk(count, N, rank) holds the reduced
    // values; the rest of the buffer is scratch.
    virtual void reduceScatter(TensorView buffer, ReduceOp op, const std::string &name = {});
    // In place. Before, this rank's chunk(count, N, rank) holds its part;
    // afterwards every rank holds every part.
    virtual void allGather(TensorView buffer, const std::string &name = {});
    virtual void allReduce(TensorView buffer, ReduceOp op, const std::string &name = {});
    // `input` has the same count on every rank; on root, `output` holds
    // N * input.count elements in rank order (ignored elsewhere).
    virtual void gather(TensorView input, TensorView output, int root, const std::string &name = {});
    // On root, `input` holds N * output.count elements in rank order; every
    // rank receives its part into `output`.
    virtual void scatter(TensorView input, TensorView output, int root, const std::string &name = {});

protected:
    // For a backend that brings its own transport.
    Communicator(int rank, int worldSize);
    // Sequence numbers carry the group in their top bits (groupOfSeq).
    std::uint64_t nextSeq() { return tagged(m_seq++); }
    std::uint64_t nextSendSeq(int peer) { return tagged(m_sendSeq[std::size_t(peer)]++); }
    std::uint64_t nextRecvSeq(int peer) { return tagged(m_recvSeq[std::size_t(peer)]++); }
    std::uint64_t tagged(std::uint64_t seq) const { return (std::uint64_t(m_group) << kGroupSeqShift) | seq; }
    // For a backend that forms groups of its own: this communicator is group
    // `id` of these world ranks (`members` outlives it).
    void setGroup(std::uint32_t id, const std::vector<int> *members)
    {
        m_group = id;
        m_members = members;
    }
    const std::vector<int> *groupMembers() const { return m_members; }
    void runHook(bool before, const CollectiveInfo &info);
    // What attachToNext left for this collective (empty afterwards).
    std::vector<RelatedTensor> takeRelated() { return std::move(m_related); }

private:
    Transport *m_transport = nullptr;
    int m_rank = 0;
    int m_worldSize = 1;
    CollectiveHook *m_hook = nullptr;
    std::uint32_t m_group = 0;
    const std::vector<int> *m_members = nullptr; // a GroupTransport's
    std::string m_axis;
    std::size_t m_segmentBytes = std::size_t(1) << 20;
    AllReduceAlgorithm m_algorithm = AllReduceAlgorithm::Ring;
    std::vector<RelatedTensor> m_related;
    std::uint64_t m_seq = 0;
    std::vector<std::uint64_t> m_sendSeq; // per destination peer
    std::vector<std::uint64_t> m_recvSeq; // per source peer
};

} // namespace smol::net
