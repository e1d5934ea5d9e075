// A process group over a world transport: the ranks `members` (world ranks,
// in group order) talk as ranks 0..members.size()-1 of their own, so every
// collective in net/collectives/ runs on a group unchanged (a Communicator
// over a GroupTransport). This is how a device mesh gives each axis its own
// communicator (engine/mesh/): tp, cp, pp and dp groups over one set of links.
//
// Frames of different groups between the same two ranks never match each
// other: a group's frames carry its id in the top bits of the frame's seq
// (groupOfSeq), each group counting its own collectives below them. So the
// frames on the wire name their group, and the trace, the timeline and a
// recording can tell which group a frame belongs to.
#pragma once

#include "communicator.h"
#include "transport.h"

#include <cstdint>
#include <vector>

namespace smol::net {

class GroupTransport final : public Transport {
public:
    // `world` outlives this group. `members` holds distinct world ranks, this
    // rank among them; groupId is in [1, kMaxGroupId] and the same on every
    // member, distinct from every other group sharing two of its members.
    // Throws NetError otherwise.
    GroupTransport(Transport &world, std::vector<int> members, std::uint32_t groupId);

    TransportKind kind() const override { return m_world.kind(); }
    SendTicket send(int peer, const FrameMeta &meta, const void *data, std::size_t bytes) override;
    Message recv(int peer, const FrameMeta &meta) override;
    void recvInto(int peer, const FrameMeta &meta, void *dst, std::size_t bytes) override;
    RecvHandle postRecv(int peer, const FrameMeta &meta, void *dst, std::size_t bytes) override;
    void waitRecv(RecvHandle &handle) override;
    void cancelRecv(RecvHandle &handle) noexcept override;
    // Aborts the world transport: a group cannot fail alone.
    void abort() override;

    std::uint32_t groupId() const { return m_group; }
    const std::vector<int> &members() const { return m_members; }
    int worldRankOf(int groupRank) const;

private:
    int worldPeer(int peer) const;
    FrameMeta tagged(const FrameMeta &meta) const;

    Transport &m_world;
    std::vector<int> m_members;
    std::uint32_t m_group;
};

} // namespace smol::net
