// What each node of a device mesh (mesh.h) will hold, planned from the run's
// configuration alone, before any node starts: the shard map and the Memory
// tab's formula for a mesh. It reuses the mesh strategy's own rules, never a
// second version of them:
//   pp: the stage placement (layerSizes + stagePlacement, which mesh.cpp
//       calls too): a node holds its stage's layers only;
//   tp: gpt_parallel::splitOf and sliceOf: a column-parallel parameter's
//       rows (Output) or a row-parallel weight's columns (Input) are cut
//       across the tp group, the rest replicated;
//   cp: positions [c T/C, (c+1) T/C) of every sequence of block size T;
//   dp: the optimizer's shard over the dp x cp group (the data group):
//       ddp all of the node's S local elements, zero1/zero2/zero3
//       Communicator::chunk(S, D x C, its rank in the data group).
// Model-state bytes a node holds between steps (S: its stage's parameters,
// tp-sliced; opt(n) = 8n with Adam, 0 with SGD):
//   ddp           4S params + 4S grads + opt(S)
//   zero1, zero2  4S params + 4S grads + opt(chunk)
//   zero3         4 chunk params + 4 chunk grads + opt(chunk)
// No LibTorch in this header.
#pragma once

#include "engine/placement.h"

#include <cstdint>
#include <string>
#include <vector>

namespace smol::engine {

struct TrainConfig;
class TrainModel;

namespace mesh_plan {

// Each layer's parameter count (TrainModel::layers(), in order).
std::vector<std::int64_t> layerSizes(TrainModel &model);
// The layers on `stages` pp stages: `spec` ("" or "auto": balanced by
// parameter count). Throws PlacementError naming the mesh's pp.
Placement stagePlacement(const std::vector<std::int64_t> &sizes, const std::string &spec, int stages);

} // namespace mesh_plan

struct MeshElementRange {
    std::int64_t begin = 0; // elements [begin, end) of the whole parameter
    std::int64_t end = 0;
    bool operator==(const MeshElementRange &o) const { return begin == o.begin && end == o.end; }
};

// One parameter as one node holds it.
struct MeshParamHolding {
    std::string param;
    std::string layer;
    std::int64_t numel = 0;               // the whole parameter's
    std::vector<MeshElementRange> ranges; // what this node holds; empty: another stage's
    std::int64_t held() const;
};

struct MeshRankPlan {
    int rank = 0;
    std::string coords; // "dp1 · pp0 · tp1" (DeviceMesh::coordsLabel)
    int stage = 0;      // its pp coordinate
    int firstLayer = 0; // its stage's layers, inclusive
    int lastLayer = 0;
    std::vector<MeshParamHolding> params; // every parameter, in the model's order
    std::int64_t blockSize = 0;           // T
    std::int64_t sequenceBegin = 0;       // its positions of every sequence: [begin, end)
    std::int64_t sequenceEnd = 0;
    std::int64_t localElements = 0;  // S: its stage's parameters, tp-sliced
    std::int64_t optimizerBegin = 0; // its optimizer shard of its S-element flat vector
    std::int64_t optimizerEnd = 0;
    int dataGroupSize = 1; // D x C: the nodes sharing its stage's optimizer
    std::int64_t paramsBytes = 0;
    std::int64_t gradsBytes = 0;
    std::int64_t optimizerBytes = 0;
    std::int64_t modelStateBytes() const { return paramsBytes + gradsBytes + optimizerBytes; }
};

struct MeshPlan {
    std::string mesh;                // DeviceMesh::spec()
    std::string dpMode;              // ddp, zero1, zero2, zero3
    std::vector<std::string> layers; // the model's layer names, in order
    std::vector<MeshRankPlan> ranks; // by rank
};

// The plan of `c.mesh` with `c.strategy` on the dp axis for `model` (built
// with the run's config: its parameters are only measured, not changed).
// Throws std::invalid_argument (one line) for a mesh that does not parse, a
// dp mode it does not run, or a placement that does not fit.
MeshPlan planMesh(const TrainConfig &c, TrainModel &model);

} // namespace smol::engine
