// A device mesh: the nodes of a run as a grid with one axis per kind of
// parallelism (picotron's `arange(world).view(dp, pp, cp, tp)`):
//   dp: data parallel replicas (ddp, zero1-3 across them)
//   pp: pipeline stages
//   cp: context parallel blocks of the sequence (ring attention)
//   tp: tensor parallel slices of each layer (Megatron)
// Rank order: tp fastest, then cp, then pp, then dp:
//   rank = ((dp * PP + pp) * CP + cp) * TP + tp
// so tp neighbours have adjacent ranks (on one machine in a real cluster),
// and a dp replica is a contiguous run of PP x CP x TP ranks.
//
// Each axis has one process group per combination of the other coordinates
// (the ranks that differ in that coordinate alone); gradients are reduced
// over dp x cp (the ranks that differ in dp or cp alone). Groups of one axis
// are disjoint, so the axis is enough to tell two groups sharing ranks apart
// (groupId). No LibTorch, no Qt: the window reads it as the engine does.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace smol::net {

enum class MeshAxis { Dp, Pp, Cp, Tp };
constexpr std::array<MeshAxis, 4> kMeshAxes{MeshAxis::Dp, MeshAxis::Pp, MeshAxis::Cp, MeshAxis::Tp};
const char *meshAxisName(MeshAxis axis); // "dp", "pp", "cp", "tp"

struct MeshCoords {
    int dp = 0, pp = 0, cp = 0, tp = 0;
    int of(MeshAxis axis) const;
};

class DeviceMesh {
public:
    DeviceMesh() = default; // 1 x 1 x 1 x 1
    DeviceMesh(int dp, int pp, int cp, int tp);

    // "dp=2,tp=2,pp=2": any subset of the four axes, each at most once, sizes
    // 1..64; missing axes are 1; and "sp": tp with sequence parallelism
    // (Megatron-SP; needs tp above 1). Throws std::invalid_argument with one
    // line naming what is wrong. `nodes` > 0: the product must equal it.
    static DeviceMesh parse(const std::string &spec, int nodes = 0);

    int size(MeshAxis axis) const;
    // tp's LayerNorm and residual regions sharded along the sequence
    // (all-gather and reduce-scatter in place of tp's all-reduce).
    bool sequenceParallel() const { return m_sp; }
    int nodes() const { return m_dp * m_pp * m_cp * m_tp; }
    bool trivial() const { return nodes() == 1; }

    int rankOf(const MeshCoords &c) const;
    MeshCoords coordsOf(int rank) const;
    // The world ranks of `rank`'s group along `axis`, in that axis's order
    // (group rank i has coordinate i).
    std::vector<int> group(int rank, MeshAxis axis) const;
    // The ranks that differ from `rank` in dp or cp alone, dp-major: where a
    // parameter's gradients are reduced.
    std::vector<int> dataGroup(int rank) const;
    // Group ids for GroupTransport: one per axis, and one for dp x cp.
    static std::uint32_t groupId(MeshAxis axis);
    static constexpr std::uint32_t kDataGroupId = 5;

    // Bytes by the mesh's axes (those above 1) from bytes by process group
    // (the group id in a frame's seq, groupOfSeq; index = group id): the
    // gradients' dp x cp group counts as dp (as cp when dp is 1).
    std::map<std::string, std::uint64_t> byAxis(const std::vector<std::uint64_t> &byGroup) const;

    // "dp=2,pp=2,tp=2": the axes above 1 in dp, pp, cp, tp order, then "sp"
    // ("" when trivial); parse(spec()) gives the same mesh.
    std::string spec() const;
    // "dp1 · pp0 · tp1": a node's coordinates on the axes above 1.
    std::string coordsLabel(int rank) const;

    bool operator==(const DeviceMesh &o) const
    {
        return m_dp == o.m_dp && m_pp == o.m_pp && m_cp == o.m_cp && m_tp == o.m_tp && m_sp == o.m_sp;
    }

private:
    int m_dp = 1, m_pp = 1, m_cp = 1, m_tp = 1;
    bool m_sp = false;
};

} // namespace smol::net
