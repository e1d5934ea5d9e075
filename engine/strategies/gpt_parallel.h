// The gpt (engine/models/gpt_model.h) cut across nodes, written once for the
// tensor strategy (tensor.cpp) and the device mesh (mesh.cpp):
//
// tp (Megatron): each block's query, key, value and fc are split by output
// feature (column-parallel: node r of N owns heads [rH/N, (r+1)H/N) and
// hidden features [r4C/N, (r+1)4C/N)), attn.proj and proj by input feature
// (row-parallel). Each half of a block is then
//   f -> column-parallel -> local -> row-parallel -> g
//   f: identity forward; all-reduce (sum) of the input's gradient backward;
//   g: all-reduce (sum) of the partial outputs forward; identity backward.
// The row-parallel bias is added once, after g. Everything else (embeddings,
// LayerNorms, row-parallel biases, ln_final, lm_head) is replicated and gets
// identical gradients on every tp node.
//
// tp with sequence parallelism (Megatron-SP): the residual stream, the
// LayerNorms and the row-parallel biases work on 1/N of the positions (node
// r: [r T'/N, (r+1) T'/N) of its T' positions): f becomes an all-gather
// along the sequence (its backward a reduce-scatter), g a reduce-scatter
// along the sequence (its backward an all-gather): the same bytes as tp's
// all-reduces, 1/N of the activations between them. The replicated
// parameters then see only their node's positions: their gradients are
// summed over the tp group (the strategy's part, with each node's loss
// scaled by 1/N), and the head's loss is each node's positions'.
//
// cp (ring attention): node c of C holds positions [cT/C, (c+1)T/C) of every
// sequence. Attention needs every earlier position's keys and values: each
// node's K/V block travels the cp ring (C-1 passes per block forward, each
// node sending its current block to the right and receiving the left's),
// and each node folds the blocks into its output with an online softmax
// (running log-sum-exp; the causal mask on its own block, nothing from later
// blocks). Backward runs the ring the other way (each pass's gradient goes
// back to its sender), so a block's K/V gradients end where the block was
// made. The ring is uniform: every node passes every block on, and a block
// it may not look at (a later position) still enters its graph with weight
// 0, so every node's backward takes the same passes as its neighbours'.
// Bytes per block per node: (C-1) x B x T/C x 2C x 4 sent forward, as many
// backward.
#pragma once

#include "engine/models/model.h"

#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

namespace smol::net {
class Communicator;
}

namespace smol::engine {

class GptModel;

namespace gpt_parallel {

// How a parameter is laid out across the tp nodes. Output: dim 0 of the
// torch weight (out, in), the column-parallel layer; Input: dim 1, the
// row-parallel layer.
enum class Split { Replicated, Output, Input };
Split splitOf(const std::string &name);

// Node `rank` of `nodes`'s part of `full` (a copy, contiguous).
torch::Tensor sliceOf(const torch::Tensor &full, Split split, int rank, int nodes);

// Throws std::invalid_argument (one line) unless `kind` is gpt and tp nodes
// divide its heads.
void checkTensorParallel(const std::string &kind, std::int64_t nHead, int nodes);

struct NodeCut {
    net::Communicator *tp = nullptr; // null: tp = 1
    int tpRank = 0, tpNodes = 1;
    net::Communicator *cp = nullptr; // null: cp = 1
    int cpRank = 0, cpNodes = 1;
    bool sequenceParallel = false;   // tp's Megatron-SP (needs tp)
};

// The gpt's layers (embed, block0.., head; the names and parameter names of
// GptModel::layers()) over this node's parameters `local` (by name, each
// this node's slice), computing with the node's cut: the embed layer takes
// the node's (B, T/C) tokens (with sequence parallelism it embeds its tp
// share of them, and every layer passes (B, T/(C N), C') on). `model` gives
// the sizes and the causal mask.
std::vector<ModelLayer> layers(GptModel &model, const std::map<std::string, torch::Tensor> &local,
                               const NodeCut &cut);

// The full parameters of `slots` (this node's slices, in order, with their
// splits), assembled by all-gathering every tp node's slices: a collective on
// `tp` (null: the slices are whole). Flat, in slot order.
torch::Tensor assembleFull(const std::vector<torch::Tensor> &slices, const std::vector<Split> &splits,
                           net::Communicator *tp, int tpRank, int tpNodes);

} // namespace gpt_parallel
} // namespace smol::engine
