// Which node holds which layers of a model split into pipeline stages (the
// pipeline strategy's --placement, and what the GUI edits when a user clicks
// layers onto nodes). Plain data: no LibTorch, so widgets/ may use it.
//
// A placement maps each of L layers (TrainModel::layers(), in order) to one
// of N nodes. It is runnable when every layer is placed, every node holds at
// least one layer and each node's layers form one contiguous range. The
// stages are those ranges in layer order: stage i is the node holding the
// i-th range. Stage order need not follow rank order ("0-1:2,2-3:0,4:1" puts
// the first stage on node 2), so a user may place layers on any machine.
//
// Text form: comma-separated FIRST-LAST:NODE or LAYER:NODE items, layers and
// nodes counted from 0, e.g. "0-1:0,2-4:1,5:2".
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace smol::engine {

// A placement that cannot run; what() is one line saying why.
class PlacementError : public std::invalid_argument {
public:
    using std::invalid_argument::invalid_argument;
};

struct PipelineStage {
    int node = 0;
    int firstLayer = 0; // inclusive
    int lastLayer = 0;  // inclusive
};

class Placement;

// The result of an edit: the new placement, or why the edit was refused.
struct PlacementEdit {
    std::string reason; // empty: accepted
    std::vector<int> nodeOfLayer;
    int nodes = 0;
    bool ok() const { return reason.empty(); }
    Placement placement() const;
};

class Placement {
public:
    static constexpr int kUnplaced = -1;

    Placement() = default;
    // Every layer unplaced: the GUI's starting point before any click.
    Placement(int layers, int nodes);
    // Any assignment, possibly not runnable (see error()).
    Placement(std::vector<int> nodeOfLayer, int nodes);

    // Parses the text form for a model of `layers` layers on `nodes` nodes
    // and validates it. Throws PlacementError (syntax, a layer placed twice,
    // or any reason error() gives).
    static Placement parse(const std::string &spec, int layers, int nodes);
    // Contiguous stages in rank order (stage i on node i) whose largest
    // parameter count is as small as possible. Throws PlacementError when
    // there are fewer layers than nodes.
    static Placement balanced(const std::vector<std::int64_t> &layerParams, int nodes);

    int layers() const { return int(m_nodeOfLayer.size()); }
    int nodes() const { return m_nodes; }
    int nodeOf(int layer) const { return m_nodeOfLayer.at(std::size_t(layer)); }
    const std::vector<int> &nodeOfLayer() const { return m_nodeOfLayer; }

    // Why it cannot run, in one line; empty when it can.
    std::string error() const;
    bool isValid() const { return error().empty(); }
    // Throws PlacementError with error() unless valid.
    void validate() const;

    // The stages in layer order. Requires a valid placement (throws otherwise).
    std::vector<PipelineStage> stages() const;
    // Stage index of `node` (-1 when it holds nothing).
    int stageOf(int node) const;

    // Puts `layer` on `node` (kUnplaced removes it). Refused with a reason
    // when the layer or node does not exist or when a node's layers would
    // stop being one contiguous range; an incomplete result (unplaced
    // layers, empty nodes) is accepted, so a placement can be built click by
    // click. error() says when it becomes runnable.
    PlacementEdit assign(int layer, int node) const;

    // The text form, ranges merged ("0-1:0,2-4:1"); unplaced layers omitted.
    std::string toString() const;

    bool operator==(const Placement &o) const
    {
        return m_nodes == o.m_nodes && m_nodeOfLayer == o.m_nodeOfLayer;
    }
    bool operator!=(const Placement &o) const { return !(*this == o); }

private:
    // Layer and node ranges, then contiguity; ignores unplaced layers and
    // empty nodes.
    std::string structuralError() const;

    std::vector<int> m_nodeOfLayer; // by layer; kUnplaced or a node
    int m_nodes = 0;
};

} // namespace smol::engine
