#include "group_transport.h"

#include "errors.h"

#include <algorithm>
#include <set>

namespace smol::net {

namespace {

int groupRankIn(const Transport &world, const std::vector<int> &members, std::uint32_t groupId)
{
    const std::string who = "rank " + std::to_string(world.rank()) + ": group " + std::to_string(groupId);
    if (groupId == 0 || groupId > kMaxGroupId)
        SMOL_THROW(NetError, who + ": a group id is between 1 and " + std::to_string(kMaxGroupId));
    if (std::set<int>(members.begin(), members.end()).size() != members.size())
        SMOL_THROW(NetError, who + ": a member is named twice");
    for (int m : members)
        if (m < 0 || m >= world.worldSize())
            SMOL_THROW(NetError, who + ": member " + std::to_string(m) + " is not a rank of the world");
    const auto me = std::find(members.begin(), members.end(), world.rank());
    if (me == members.end())
        SMOL_THROW(NetError, who + ": this rank is not a member");
    return int(me - members.begin());
}

} // namespace

GroupTransport::GroupTransport(Transport &world, std::vector<int> members, std::uint32_t groupId)
    : Transport(groupRankIn(world, members, groupId), int(members.size()), world.options())
    , m_world(world)
    , m_members(std::move(members))
    , m_group(groupId)
{
}

int GroupTransport::worldRankOf(int groupRank) const
{
    if (groupRank < 0 || groupRank >= int(m_members.size()))
        SMOL_THROW(NetError, "group " + std::to_string(m_group) + " has no rank " + std::to_string(groupRank));
    return m_members[std::size_t(groupRank)];
}

int GroupTransport::worldPeer(int peer) const { return worldRankOf(peer); }

FrameMeta GroupTransport::tagged(const FrameMeta &meta) const
{
    FrameMeta m = meta;
    m.seq = (std::uint64_t(m_group) << kGroupSeqShift) | seqInGroup(meta.seq);
    return m;
}

SendTicket GroupTransport::send(int peer, const FrameMeta &meta, const void *data, std::size_t bytes)
{
    return m_world.send(worldPeer(peer), tagged(meta), data, bytes);
}

Message GroupTransport::recv(int peer, const FrameMeta &meta)
{
    Message m = m_world.recv(worldPeer(peer), tagged(meta));
    m.src = peer;
    m.meta.seq = meta.seq;
    return m;
}

void GroupTransport::recvInto(int peer, const FrameMeta &meta, void *dst, std::size_t bytes)
{
    m_world.recvInto(worldPeer(peer), tagged(meta), dst, bytes);
}

// The handle is the world's (its peer a world rank), so waiting on and
// cancelling it go straight to the world transport.
RecvHandle GroupTransport::postRecv(int peer, const FrameMeta &meta, void *dst, std::size_t bytes)
{
    return m_world.postRecv(worldPeer(peer), tagged(meta), dst, bytes);
}

void GroupTransport::waitRecv(RecvHandle &handle) { m_world.waitRecv(handle); }

void GroupTransport::cancelRecv(RecvHandle &handle) noexcept { m_world.cancelRecv(handle); }

void GroupTransport::abort() { m_world.abort(); }

namespace {

// A communicator that owns its group's transport (constructed first).
struct OwnedGroupTransport {
    std::unique_ptr<GroupTransport> owned;
};
class GroupCommunicator : private OwnedGroupTransport, public Communicator {
public:
    explicit GroupCommunicator(std::unique_ptr<GroupTransport> t)
        : OwnedGroupTransport{std::move(t)}
        , Communicator(*owned)
    {
    }
};

} // namespace

std::unique_ptr<Communicator> Communicator::makeGroup(std::vector<int> members, std::uint32_t id, std::string axis)
{
    auto group = std::make_unique<GroupCommunicator>(
        std::make_unique<GroupTransport>(transport(), std::move(members), id));
    group->setHook(hook());
    group->setSegmentBytes(segmentBytes());
    group->setAllReduceAlgorithm(allReduceAlgorithm());
    group->setAxis(std::move(axis));
    return group;
}

} // namespace smol::net
