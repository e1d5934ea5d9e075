#include "device_mesh.h"

#include <set>
#include <stdexcept>

namespace smol::net {

namespace {
constexpr int kMaxAxis = 64;
}

const char *meshAxisName(MeshAxis axis)
{
    switch (axis) {
    case MeshAxis::Dp: return "dp";
    case MeshAxis::Pp: return "pp";
    case MeshAxis::Cp: return "cp";
    case MeshAxis::Tp: return "tp";
    }
    return "?";
}

int MeshCoords::of(MeshAxis axis) const
{
    switch (axis) {
    case MeshAxis::Dp: return dp;
    case MeshAxis::Pp: return pp;
    case MeshAxis::Cp: return cp;
    case MeshAxis::Tp: return tp;
    }
    return 0;
}

DeviceMesh::DeviceMesh(int dp, int pp, int cp, int tp)
    : m_dp(dp)
    , m_pp(pp)
    , m_cp(cp)
    , m_tp(tp)
{
    for (int s : {dp, pp, cp, tp})
        if (s < 1 || s > kMaxAxis)
            throw std::invalid_argument("--mesh: every axis is between 1 and " + std::to_string(kMaxAxis));
}

DeviceMesh DeviceMesh::parse(const std::string &spec, int nodes)
{
    const std::string where = "--mesh " + spec + ": ";
    if (spec.empty())
        throw std::invalid_argument("--mesh: empty; give axes as dp=D,tp=T,pp=P,cp=C");
    int sizes[4] = {1, 1, 1, 1};
    bool sp = false;
    std::set<std::string> seen;
    std::size_t at = 0;
    while (at <= spec.size()) {
        const std::size_t comma = std::min(spec.find(',', at), spec.size());
        const std::string item = spec.substr(at, comma - at);
        if (item == "sp") {
            if (sp)
                throw std::invalid_argument(where + "sp is named twice");
            sp = true;
            at = comma + 1;
            continue;
        }
        const std::size_t eq = item.find('=');
        if (eq == std::string::npos)
            throw std::invalid_argument(where + "'" + item + "' is not AXIS=SIZE (dp, tp, pp or cp)");
        const std::string axis = item.substr(0, eq), value = item.substr(eq + 1);
        int index = -1;
        for (std::size_t i = 0; i < kMeshAxes.size(); ++i)
            if (axis == meshAxisName(kMeshAxes[i]))
                index = int(i);
        if (index < 0)
            throw std::invalid_argument(where + "unknown axis '" + axis + "' (dp, tp, pp or cp)");
        if (!seen.insert(axis).second)
            throw std::invalid_argument(where + "axis " + axis + " is named twice");
        if (value.empty() || value.size() > 2 || value.find_first_not_of("0123456789") != std::string::npos ||
            std::stoi(value) < 1 || std::stoi(value) > kMaxAxis)
            throw std::invalid_argument(where + axis + " must be a whole number from 1 to " +
                                        std::to_string(kMaxAxis) + ", not '" + value + "'");
        sizes[index] = std::stoi(value);
        at = comma + 1;
    }
    DeviceMesh mesh(sizes[0], sizes[1], sizes[2], sizes[3]);
    if (sp && mesh.m_tp == 1)
        throw std::invalid_argument(where + "sp (sequence parallelism) is an option of tp: it needs tp above 1");
    mesh.m_sp = sp;
    if (nodes > 0 && mesh.nodes() != nodes)
        throw std::invalid_argument(where + "the axes multiply to " + std::to_string(mesh.nodes()) +
                                    " nodes, not the run's " + std::to_string(nodes));
    return mesh;
}

int DeviceMesh::size(MeshAxis axis) const
{
    switch (axis) {
    case MeshAxis::Dp: return m_dp;
    case MeshAxis::Pp: return m_pp;
    case MeshAxis::Cp: return m_cp;
    case MeshAxis::Tp: return m_tp;
    }
    return 1;
}

int DeviceMesh::rankOf(const MeshCoords &c) const { return ((c.dp * m_pp + c.pp) * m_cp + c.cp) * m_tp + c.tp; }

MeshCoords DeviceMesh::coordsOf(int rank) const
{
    MeshCoords c;
    c.tp = rank % m_tp;
    rank /= m_tp;
    c.cp = rank % m_cp;
    rank /= m_cp;
    c.pp = rank % m_pp;
    c.dp = rank / m_pp;
    return c;
}

std::vector<int> DeviceMesh::group(int rank, MeshAxis axis) const
{
    std::vector<int> members;
    MeshCoords c = coordsOf(rank);
    for (int i = 0; i < size(axis); ++i) {
        switch (axis) {
        case MeshAxis::Dp: c.dp = i; break;
        case MeshAxis::Pp: c.pp = i; break;
        case MeshAxis::Cp: c.cp = i; break;
        case MeshAxis::Tp: c.tp = i; break;
        }
        members.push_back(rankOf(c));
    }
    return members;
}

std::vector<int> DeviceMesh::dataGroup(int rank) const
{
    std::vector<int> members;
    MeshCoords c = coordsOf(rank);
    for (int d = 0; d < m_dp; ++d)
        for (int k = 0; k < m_cp; ++k) {
            c.dp = d;
            c.cp = k;
            members.push_back(rankOf(c));
        }
    return members;
}

std::uint32_t DeviceMesh::groupId(MeshAxis axis) { return std::uint32_t(axis) + 1; }

std::map<std::string, std::uint64_t> DeviceMesh::byAxis(const std::vector<std::uint64_t> &byGroup) const
{
    auto of = [&](std::uint32_t group) { return group < byGroup.size() ? byGroup[group] : 0; };
    std::map<std::string, std::uint64_t> out;
    for (MeshAxis axis : kMeshAxes)
        if (size(axis) > 1)
            out[meshAxisName(axis)] = of(groupId(axis));
    if (m_dp * m_cp > 1)
        out[m_dp > 1 ? "dp" : "cp"] += of(kDataGroupId);
    return out;
}

std::string DeviceMesh::spec() const
{
    std::string out;
    for (MeshAxis a : kMeshAxes)
        if (size(a) > 1)
            out += (out.empty() ? "" : ",") + std::string(meshAxisName(a)) + "=" + std::to_string(size(a));
    return m_sp ? out + ",sp" : out;
}

std::string DeviceMesh::coordsLabel(int rank) const
{
    const MeshCoords c = coordsOf(rank);
    std::string out;
    for (MeshAxis a : kMeshAxes)
        if (size(a) > 1)
            out += (out.empty() ? "" : " \u00b7 ") + std::string(meshAxisName(a)) + std::to_string(c.of(a));
    return out;
}

} // namespace smol::net
