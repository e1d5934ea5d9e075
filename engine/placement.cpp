#include "placement.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <sstream>

namespace smol::engine {

namespace {

std::string layerList(int first, int last)
{
    return first == last ? std::to_string(first) : std::to_string(first) + "-" + std::to_string(last);
}

std::string trim(const std::string &s)
{
    std::size_t b = 0, e = s.size();
    while (b < e && std::isspace(static_cast<unsigned char>(s[b])))
        ++b;
    while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1])))
        --e;
    return s.substr(b, e - b);
}

// A non-negative decimal number, or -1.
int number(const std::string &s)
{
    if (s.empty() || s.size() > 6 ||
        !std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
        return -1;
    return std::stoi(s);
}

} // namespace

Placement PlacementEdit::placement() const
{
    return Placement(nodeOfLayer, nodes);
}

Placement::Placement(int layers, int nodes)
    : m_nodeOfLayer(std::size_t(std::max(0, layers)), kUnplaced)
    , m_nodes(nodes)
{
}

Placement::Placement(std::vector<int> nodeOfLayer, int nodes)
    : m_nodeOfLayer(std::move(nodeOfLayer))
    , m_nodes(nodes)
{
}

Placement Placement::parse(const std::string &specIn, int layers, int nodes)
{
    const std::string spec = trim(specIn);
    if (spec.empty())
        throw PlacementError("placement is empty (expected e.g. \"0-1:0,2-3:1\")");
    Placement p(layers, nodes);
    std::stringstream items(spec);
    std::string item;
    while (std::getline(items, item, ',')) {
        item = trim(item);
        const std::size_t colon = item.find(':');
        if (item.empty())
            throw PlacementError("placement \"" + spec + "\" has an empty item");
        if (colon == std::string::npos)
            throw PlacementError("placement item \"" + item + "\" has no ':NODE' (expected FIRST-LAST:NODE)");
        const std::string range = trim(item.substr(0, colon));
        const std::string nodeText = trim(item.substr(colon + 1));
        const std::size_t dash = range.find('-');
        const int first = number(trim(range.substr(0, dash)));
        const int last = dash == std::string::npos ? first : number(trim(range.substr(dash + 1)));
        const int node = number(nodeText);
        if (first < 0 || last < 0)
            throw PlacementError("placement item \"" + item + "\": \"" + range +
                                 "\" is not a layer or a FIRST-LAST range of layers");
        if (node < 0)
            throw PlacementError("placement item \"" + item + "\": \"" + nodeText +
                                 "\" is not a node number");
        if (first > last)
            throw PlacementError("placement item \"" + item + "\": range " + range + " runs backwards");
        if (last >= layers)
            throw PlacementError("layer " + std::to_string(last) + " does not exist (the model has " +
                                 std::to_string(layers) + " layers, 0-" + std::to_string(layers - 1) + ")");
        if (node >= nodes)
            throw PlacementError("node " + std::to_string(node) + " does not exist (" +
                                 std::to_string(nodes) + " nodes, 0-" + std::to_string(nodes - 1) + ")");
        for (int l = first; l <= last; ++l) {
            int &slot = p.m_nodeOfLayer[std::size_t(l)];
            if (slot != kUnplaced)
                throw PlacementError("layer " + std::to_string(l) + " is placed twice (on node " +
                                     std::to_string(slot) + " and node " + std::to_string(node) + ")");
            slot = node;
        }
    }
    if (spec.back() == ',')
        throw PlacementError("placement \"" + spec + "\" has an empty item");
    p.validate();
    return p;
}

Placement Placement::balanced(const std::vector<std::int64_t> &w, int nodes)
{
    const int L = int(w.size());
    if (nodes < 1)
        throw PlacementError("a pipeline needs at least 1 node");
    if (L < nodes)
        throw PlacementError("the model has " + std::to_string(L) + " layers, too few for " +
                             std::to_string(nodes) + " pipeline stages (one per node)");
    // best[k][i]: the smallest possible largest stage for layers [0, i) in
    // k stages; cut[k][i]: where the last of those stages starts.
    const std::int64_t inf = std::numeric_limits<std::int64_t>::max();
    std::vector<std::int64_t> prefix(std::size_t(L) + 1, 0);
    for (int i = 0; i < L; ++i)
        prefix[std::size_t(i) + 1] = prefix[std::size_t(i)] + w[std::size_t(i)];
    std::vector<std::vector<std::int64_t>> best(std::size_t(nodes) + 1,
                                                std::vector<std::int64_t>(std::size_t(L) + 1, inf));
    std::vector<std::vector<int>> cut(std::size_t(nodes) + 1, std::vector<int>(std::size_t(L) + 1, 0));
    best[0][0] = 0;
    for (int k = 1; k <= nodes; ++k)
        for (int i = k; i <= L; ++i)
            for (int j = k - 1; j < i; ++j) { // last stage = layers [j, i)
                if (best[std::size_t(k) - 1][std::size_t(j)] == inf)
                    continue;
                const std::int64_t worst = std::max(best[std::size_t(k) - 1][std::size_t(j)],
                                                    prefix[std::size_t(i)] - prefix[std::size_t(j)]);
                if (worst < best[std::size_t(k)][std::size_t(i)]) {
                    best[std::size_t(k)][std::size_t(i)] = worst;
                    cut[std::size_t(k)][std::size_t(i)] = j;
                }
            }
    std::vector<int> nodeOfLayer(std::size_t(L), 0);
    for (int k = nodes, i = L; k >= 1; --k) {
        const int j = cut[std::size_t(k)][std::size_t(i)];
        for (int l = j; l < i; ++l)
            nodeOfLayer[std::size_t(l)] = k - 1;
        i = j;
    }
    return Placement(nodeOfLayer, nodes);
}

std::string Placement::structuralError() const
{
    if (m_nodes < 1)
        return "a placement needs at least 1 node";
    if (m_nodeOfLayer.empty())
        return "the model has no layers to place";
    std::vector<int> lastSeen(std::size_t(m_nodes), -1);
    for (int l = 0; l < layers(); ++l) {
        const int n = m_nodeOfLayer[std::size_t(l)];
        if (n == kUnplaced)
            continue;
        if (n < 0 || n >= m_nodes)
            return "layer " + std::to_string(l) + " is on node " + std::to_string(n) +
                   ", which does not exist (" + std::to_string(m_nodes) + " nodes, 0-" +
                   std::to_string(m_nodes - 1) + ")";
        const int prev = lastSeen[std::size_t(n)];
        if (prev >= 0 && prev != l - 1)
            return "node " + std::to_string(n) + " holds layers " + std::to_string(prev) + " and " +
                   std::to_string(l) + " but not the ones between: a stage must be one contiguous range";
        lastSeen[std::size_t(n)] = l;
    }
    return {};
}

std::string Placement::error() const
{
    std::string e = structuralError();
    if (!e.empty())
        return e;
    for (int l = 0; l < layers(); ++l)
        if (m_nodeOfLayer[std::size_t(l)] == kUnplaced)
            return "layer " + std::to_string(l) + " is not placed on any node";
    for (int n = 0; n < m_nodes; ++n)
        if (std::find(m_nodeOfLayer.begin(), m_nodeOfLayer.end(), n) == m_nodeOfLayer.end())
            return "node " + std::to_string(n) + " holds no layers (every node must hold a stage)";
    return {};
}

void Placement::validate() const
{
    const std::string e = error();
    if (!e.empty())
        throw PlacementError(e);
}

std::vector<PipelineStage> Placement::stages() const
{
    validate();
    std::vector<PipelineStage> out;
    for (int l = 0; l < layers(); ++l) {
        const int n = m_nodeOfLayer[std::size_t(l)];
        if (out.empty() || out.back().node != n)
            out.push_back({n, l, l});
        else
            out.back().lastLayer = l;
    }
    return out;
}

int Placement::stageOf(int node) const
{
    const auto s = stages();
    for (std::size_t i = 0; i < s.size(); ++i)
        if (s[i].node == node)
            return int(i);
    return -1;
}

PlacementEdit Placement::assign(int layer, int node) const
{
    PlacementEdit edit;
    edit.nodes = m_nodes;
    edit.nodeOfLayer = m_nodeOfLayer;
    if (layer < 0 || layer >= layers())
        edit.reason = "layer " + std::to_string(layer) + " does not exist (the model has " +
                      std::to_string(layers()) + " layers)";
    else if (node != kUnplaced && (node < 0 || node >= m_nodes))
        edit.reason =
            "node " + std::to_string(node) + " does not exist (" + std::to_string(m_nodes) + " nodes)";
    if (!edit.ok())
        return edit;
    edit.nodeOfLayer[std::size_t(layer)] = node;
    const std::string e = Placement(edit.nodeOfLayer, m_nodes).structuralError();
    if (!e.empty()) {
        edit.reason = e;
        edit.nodeOfLayer = m_nodeOfLayer;
    }
    return edit;
}

std::string Placement::toString() const
{
    std::string out;
    for (int l = 0; l < layers();) {
        const int n = m_nodeOfLayer[std::size_t(l)];
        int last = l;
        while (last + 1 < layers() && m_nodeOfLayer[std::size_t(last) + 1] == n)
            ++last;
        if (n != kUnplaced)
            out += (out.empty() ? "" : ",") + layerList(l, last) + ":" + std::to_string(n);
        l = last + 1;
    }
    return out;
}

} // namespace smol::engine
