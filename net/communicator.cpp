#include "communicator.h"

#include "collectives/collective.h"
#include "errors.h"
#include "group_transport.h"
#include "transport.h"

#include <algorithm>

namespace smol::net {

Communicator::Communicator(Transport &transport)
    : Communicator(transport.rank(), transport.worldSize())
{
    m_transport = &transport;
    if (const auto *group = dynamic_cast<const GroupTransport *>(&transport))
        setGroup(group->groupId(), &group->members());
}

Communicator::Communicator(int rank, int worldSize)
    : m_rank(rank)
    , m_worldSize(worldSize)
    , m_sendSeq(std::size_t(worldSize), 0)
    , m_recvSeq(std::size_t(worldSize), 0)
{
}

Transport &Communicator::transport()
{
    if (!m_transport)
        SMOL_THROW(NetError, "rank " + std::to_string(m_rank) + ": this communicator has no net::Transport");
    return *m_transport;
}

void Communicator::setSegmentBytes(std::size_t bytes)
{
    m_segmentBytes = std::max<std::size_t>(bytes, 64);
}

const char *allReduceAlgorithmName(AllReduceAlgorithm algorithm)
{
    switch (algorithm) {
    case AllReduceAlgorithm::Ring: return "ring";
    case AllReduceAlgorithm::Doubling: return "doubling";
    case AllReduceAlgorithm::Auto: return "auto";
    }
    return "?";
}

bool parseAllReduceAlgorithm(const std::string &text, AllReduceAlgorithm *out)
{
    for (AllReduceAlgorithm a : {AllReduceAlgorithm::Ring, AllReduceAlgorithm::Doubling, AllReduceAlgorithm::Auto}) {
        if (text == allReduceAlgorithmName(a)) {
            *out = a;
            return true;
        }
    }
    return false;
}

AllReduceAlgorithm Communicator::algorithmFor(std::size_t bytes) const
{
    if (m_algorithm != AllReduceAlgorithm::Auto)
        return m_algorithm;
    return bytes <= kDoublingMaxBytes ? AllReduceAlgorithm::Doubling : AllReduceAlgorithm::Ring;
}

ChunkRange Communicator::chunk(std::size_t count, int world, int index)
{
    const std::size_t n = std::size_t(world);
    const std::size_t base = count / n;
    const std::size_t extra = count % n;
    const std::size_t i = std::size_t(index);
    return ChunkRange{i * base + std::min(i, extra), base + (i < extra ? 1 : 0)};
}

void Communicator::runHook(bool before, const CollectiveInfo &info)
{
    if (!m_hook)
        return;
    if (before)
        m_hook->before(info);
    else
        m_hook->after(info);
}

namespace {

void checkPeer(const Communicator &comm, int peer, const char *what)
{
    if (peer < 0 || peer >= comm.worldSize() || peer == comm.rank())
        SMOL_THROW(NetError, std::string(what) + ": rank " + std::to_string(comm.rank()) +
                                 " has no peer " + std::to_string(peer) + " in a world of " +
                                 std::to_string(comm.worldSize()));
}

void checkRoot(const Communicator &comm, int root, const char *what)
{
    if (root < 0 || root >= comm.worldSize())
        SMOL_THROW(NetError, std::string(what) + ": root " + std::to_string(root) + " outside a world of " +
                                 std::to_string(comm.worldSize()));
}

} // namespace

// Every entry point has the same shape: take a sequence number, describe the
// call for the hook, run the hook, run the algorithm, run the hook again.
#define SMOL_COLLECTIVE_R(KIND, SEQ, PEER, BUF, NAME, RECEIVING, BODY)                                      \
    do {                                                                                                    \
        const std::uint64_t seq_ = SEQ;                                                                     \
        CollectiveInfo info{KIND, seq_, NAME, rank(), worldSize(), PEER, BUF, RECEIVING, m_group, m_axis, m_members}; \
        info.related = takeRelated();                                                                       \
        runHook(true, info);                                                                                \
        const detail::Call call{*m_transport, rank(), worldSize(), KIND, seq_, m_segmentBytes};             \
        BODY;                                                                                               \
        runHook(false, info);                                                                               \
    } while (0)
#define SMOL_COLLECTIVE(KIND, SEQ, PEER, BUF, NAME, BODY) SMOL_COLLECTIVE_R(KIND, SEQ, PEER, BUF, NAME, false, BODY)

std::string CollectiveInfo::label() const
{
    if (axis.empty() && !members)
        return name;
    std::string out = axis.empty() ? "group" : axis;
    if (members) {
        out += " (ranks ";
        for (std::size_t i = 0; i < members->size(); ++i)
            out += (i ? ", " : "") + std::to_string((*members)[i]);
        out += ")";
    }
    return out + " \u00b7 " + name;
}

BufferPart contributedPart(const CollectiveInfo &info, bool before)
{
    const std::size_t all = info.buffer.count;
    auto own = [&] {
        const ChunkRange c = Communicator::chunk(all, std::max(1, info.worldSize), std::max(0, info.rank));
        return BufferPart{c.offset, c.count, c.count == all};
    };
    switch (info.kind) {
    case CollectiveKind::AllGather:
        return before ? own() : BufferPart{0, all, true};
    case CollectiveKind::ReduceScatter:
        return before ? BufferPart{0, all, true} : own();
    case CollectiveKind::Broadcast:
        return before && info.rank != info.peer ? BufferPart{0, 0, all == 0} : BufferPart{0, all, true};
    case CollectiveKind::Scatter:
        return before ? BufferPart{0, 0, all == 0} : BufferPart{0, all, true};
    default:
        break;
    }
    if (info.receiving && before)
        return BufferPart{0, 0, all == 0};
    return BufferPart{0, all, true};
}

void Communicator::send(int peer, TensorView buffer, const std::string &name, CollectiveKind kind)
{
    checkPeer(*this, peer, "send");
    const std::uint64_t seq = nextSendSeq(peer);
    SMOL_COLLECTIVE(kind, seq, peer, buffer, name, detail::sendSegments(call, peer, buffer));
}

void Communicator::recv(int peer, TensorView buffer, const std::string &name, CollectiveKind kind)
{
    checkPeer(*this, peer, "recv");
    const std::uint64_t seq = nextRecvSeq(peer);
    SMOL_COLLECTIVE_R(kind, seq, peer, buffer, name, true, detail::recvSegments(call, peer, buffer));
}

void Communicator::broadcast(TensorView buffer, int root, const std::string &name)
{
    checkRoot(*this, root, "broadcast");
    SMOL_COLLECTIVE(CollectiveKind::Broadcast, nextSeq(), root, buffer, name,
                    detail::chainBroadcast(call, buffer, root));
}

void Communicator::barrier()
{
    SMOL_COLLECTIVE(CollectiveKind::Barrier, nextSeq(), -1, TensorView{}, std::string("barrier"),
                    detail::disseminationBarrier(call));
}

void Communicator::reduceScatter(TensorView buffer, ReduceOp op, const std::string &name)
{
    SMOL_COLLECTIVE(CollectiveKind::ReduceScatter, nextSeq(), -1, buffer, name,
                    detail::ringReduceScatter(call, buffer, op));
}

void Communicator::allGather(TensorView buffer, const std::string &name)
{
    SMOL_COLLECTIVE(CollectiveKind::AllGather, nextSeq(), -1, buffer, name, detail::ringAllGather(call, buffer));
}

void Communicator::allReduce(TensorView buffer, ReduceOp op, const std::string &name)
{
    // The macro's shape, with the algorithm named before the hook sees the call.
    const std::uint64_t seq = nextSeq();
    const bool doubling = algorithmFor(buffer.bytes()) == AllReduceAlgorithm::Doubling;
    CollectiveInfo info{CollectiveKind::AllReduce, seq, name, rank(), worldSize(), -1, buffer, false,
                        m_group, m_axis, m_members};
    info.algorithm = doubling ? "doubling" : "ring";
    info.related = takeRelated();
    runHook(true, info);
    const detail::Call call{*m_transport, rank(), worldSize(), CollectiveKind::AllReduce, seq, m_segmentBytes};
    if (doubling)
        detail::doublingAllReduce(call, buffer, op);
    else
        detail::ringAllReduce(call, buffer, op);
    runHook(false, info);
}

void Communicator::gather(TensorView input, TensorView output, int root, const std::string &name)
{
    checkRoot(*this, root, "gather");
    SMOL_COLLECTIVE(CollectiveKind::Gather, nextSeq(), root, input, name,
                    detail::gatherToRoot(call, input, output, root));
}

void Communicator::scatter(TensorView input, TensorView output, int root, const std::string &name)
{
    checkRoot(*this, root, "scatter");
    SMOL_COLLECTIVE(CollectiveKind::Scatter, nextSeq(), root, output, name,
                    detail::scatterFromRoot(call, input, output, root));
}

#undef SMOL_COLLECTIVE

} // namespace smol::net
