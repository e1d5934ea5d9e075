// The activations a node holds at the end of its forward pass, where a
// step's activations peak, in closed form, written once for each model and
// counted from the tensors autograd keeps for backward in OUR code
// (engine/models/gpt_model.cpp, mlp_model.cpp, strategies/gpt_parallel.cpp),
// not measured. `smolctl plan` prints the formula beside the figure and
// --check prints its error against the measured peak.
//
// gpt, per block, e bytes an element (4 in fp32), b rows, s positions, h =
// n_embd, a = n_head, tp slices t: Megatron's s b h (34 + 5 a s / h) counted
// for our block (no dropout, separate q/k/v, fp32, matmul's copies):
//   kept in full (4 s b h): the block input (ln1's), ln1's output (q/k/v's
//     input), the residual after attention (ln2's), ln2's output (fc's);
//   split over tp (12 s b h / t): the contiguous copies of q and k^T and v
//     that matmul makes (bmm keeps them), the heads' output made contiguous
//     (proj's input), fc's output (gelu's input), gelu's output (proj's);
//   the two LayerNorms' mean and rstd: 4 s b;
//   the softmax output: a/t x b x s^2;
//   so e (16 s b h + 4 s b + a s^2 b) per block with t = 1.
// --recompute selective drops the a s^2 b term (q, k, v are kept instead of
// their copies: the same count); full keeps each block's input alone, and
// adds one block's recompute during backward.
// Outside the blocks: the batch (token ids and targets, int64: 16 b T),
// the positions (int64: 8 s), ln_final's input and output with their mean
// and rstd (e (2 s b h + 2 s b)), log-softmax's output over the vocabulary
// (e s b V), and every block's causal mask buffer (bool: n_layer T^2).
//
// mlp (784-256-128-10), b rows: the images (float32: 4 x 784 b) and labels
// (int64: 8 b), the ReLU outputs (e 256 b, e 128 b: fc2's and fc3's inputs)
// and log-softmax's output (e 10 b). --recompute full keeps the same (the
// layer inputs are those) plus fc1's recomputed output during backward.
//
// No LibTorch here.
#pragma once

#include "engine/models/model_config.h"

#include <cstdint>
#include <optional>
#include <string>

namespace smol::engine::plan {

// One node's forward: its rows and positions and its cut of the model.
struct ActivationInput {
    ModelConfig model;               // kind, sizes (vocabSize set), recompute
    std::int64_t rows = 0;           // b: samples in one forward (a micro-batch)
    std::int64_t batchRows = 0;      // rows of the batch tensors alive during the step
    std::int64_t positions = 0;      // s: positions this node computes (T / cp)
    int tp = 1;                      // t: the tp group's size
    bool sequenceParallel = false;   // Megatron-SP: the residual regions on s / t positions
    int firstLayer = 0;              // the layers it runs (TrainModel::layers() order)
    int lastLayer = -1;              // -1: to the last
    bool holdsInput = true;          // the batch's inputs are alive (a first stage)
    bool holdsTargets = true;        // the batch's targets are alive (a last stage)
    std::int64_t inFlight = 1;       // micro-batches whose activations are held at once
    bool keepsOutput = false;        // a pipeline stage before the last keeps what it sent
    int elementBytes = 4;            // e: an activation element's bytes (a precision sets it)
};

struct ActivationForm {
    std::optional<std::int64_t> bytes; // nullopt: no closed form for this model
    std::string formula;               // one line: the form and the values it took
};

ActivationForm activationBytes(const ActivationInput &in);

} // namespace smol::engine::plan
