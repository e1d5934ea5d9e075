// What a run will hold and send, predicted from its settings alone (the
// options `smolctl train` takes): per node, the model states it holds
// between steps by category (params, grads, optimizer: the strategy's
// closed forms in its StrategyDescription, or a mesh's plan,
// strategies/mesh_plan.h), the activations at the end of its forward
// (activation_forms.h), and the bytes it sends per optimizer step, in
// total and by mesh axis. Each figure comes with the formula it used.
//
// The bytes of a mesh's axes, per node and optimizer step (e bytes an
// element, S its stage's parameters tp-sliced, G = dp x cp its data group,
// b its replica's rows, s = T/cp its positions, h = n_embd, L its stage's
// blocks, K = --accumulate):
//   dp (cp when dp is 1): 2(G-1)/G x e S, the gradients' all-reduce (ddp) or
//       reduce-scatter + all-gather (zero1, zero2; zero3: the stage's gather
//       once a step + the reduce-scatter);
//   tp: K x L x 4 all-reduces (forward: after attention and after the MLP;
//       backward: before each) of e b s h: 2(t-1)/t each (Megatron-SP's
//       all-gathers and reduce-scatters send the same), + SP's all-reduce
//       of the replicated parameters' gradients: 2(t-1)/t x e R;
//   pp: K x e b s' h forward to the next stage (not the last) and as much
//       backward to the previous (not the first); s' = s/t with SP;
//   cp: K x L x 2(C-1) passes of a K/V block, e b s 2h/t each.
//
// No LibTorch here; predictRun builds the model once (CPU, a few ms) to
// count its parameters, and reads the gpt's vocabulary from its corpus.
#pragma once

#include "engine/strategies/strategy_description.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace smol::engine {
struct TrainConfig;
}

namespace smol::engine::plan {

struct NodePrediction {
    int rank = 0;
    std::string label;               // "rank 1", or a mesh node's "rank 1 (dp0 · tp1)"
    std::optional<HeldBytes> held;   // model states between steps; nullopt: no closed form
    std::optional<std::int64_t> activations;
    std::optional<double> bytesPerStep; // sent per optimizer step
    std::map<std::string, double> bytesByAxis; // a mesh's axes above 1 ("dp", "tp", "pp", "cp")
};

struct RunPrediction {
    std::string strategy;
    std::string mesh;          // DeviceMesh::spec(); "" without one
    std::string model;         // mlp, gpt, PATH.pt
    int nodes = 0;
    std::int64_t params = 0;   // P
    std::int64_t samplesPerStep = 0; // global batch x --accumulate
    std::vector<NodePrediction> ranks; // by rank
    std::optional<WireBytes> bytes;    // mean and busiest over the nodes
    // One line each: "model states: ...", "bytes: ...", "activations: ...".
    std::vector<std::string> formulas;
};

// Throws std::invalid_argument (one line) for a config that cannot run
// (validateConfig's reasons), DataError for a corpus it cannot read.
RunPrediction predictRun(const TrainConfig &config);

} // namespace smol::engine::plan
