// mesh (mesh.cpp): the parallelisms combined on a device mesh
// (net/device_mesh.h), as large models are trained: `--mesh
// dp=D,tp=T,pp=P,cp=C` over D x T x P x C nodes.
//   tp: each layer's matrices cut across the tp group (gpt_parallel.h);
//       with ",sp" in the mesh, Megatron's sequence parallelism too;
//   cp: the sequence cut across the cp group, ring attention (gpt_parallel.h);
//   pp: the layers placed in stages along the pp group (--placement,
//       --micro-batches, --schedule as the pipeline strategy);
//   dp: replicas, each on 1/D of the global batch; gradients reduced over
//       the dp x cp group of each (pp, tp) position before the update, by
//       what --strategy names: ddp (all-reduce, the whole optimizer on every
//       node) or zero1 / zero2 (reduce-scatter, 1/(D C) of the optimizer
//       state, all-gather of the updated parameters) or zero3 (between
//       steps 1/(D C) of the stage's parameters, gradients and optimizer
//       state; the stage all-gathered at the start of each step for all
//       its micro-batches, reduce-scatter, freed).
// Each axis has its own communicator (net/group_transport.h), its
// collectives traced with their axis (CollectiveInfo::axis).
//
// Bytes on the wire per node per step (B global batch, M micro-batches, T
// block, C' embedding width, L blocks, S the node's parameter count):
//   tp: 4 L' all-reduces of (B/(D) x T/CP x C') float32, L' the blocks of
//       its stage: 4 L' x 2(T-1)/T x 4 B T C' / (D CP) sent;
//   pp: a stage other than the last sends B/D x T/CP x C' x 4 forward (its
//       M micro-batches), one other than the first as many backward;
//   cp: each block's K/V ring, 2 x (CP-1) passes of (B/D x T/CP x 2C'/TP) x 4;
//   dp: the ring over the node's parameters, 2(G-1)/G x 4 S, G = D x CP.
// docs/strategies.md has them in full.
#pragma once

#include <memory>
#include <string>

namespace smol::engine {

class Strategy;

namespace strategies {

// The mesh strategy for `mesh` ("dp=2,tp=2"), its dp axis doing `dp` (ddp,
// zero1, zero2, zero3). Throws std::invalid_argument (one line) for a mesh that does
// not parse or a dp strategy the mesh does not run.
std::unique_ptr<Strategy> makeMesh(const std::string &dp, const std::string &mesh);

} // namespace strategies
} // namespace smol::engine
