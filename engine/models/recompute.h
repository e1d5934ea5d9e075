// Activation recomputation (--recompute; model.h's Recompute): a layer's
// forward run so that autograd keeps only the layer's inputs, and run again
// in backward to take its gradients (gradient checkpointing).
//
// What it does: recomputed(f, inputs, params) runs f(inputs) with the
// gradient off (nothing f computes inside is kept) as one autograd node
// whose inputs are `inputs` and `params`; that node saves the inputs only.
// Its backward runs f again, with the gradient on, on detached copies of
// the inputs, and takes the gradients of the recomputed output with respect
// to those copies and to `params` (a reentrant torch::autograd::grad, as
// PyTorch's reentrant checkpoint runs backward), which it returns as its
// own. So the parameters' gradients reach them through their usual
// AccumulateGrad nodes (.grad accumulates, and post-hooks on the grad
// accumulators fire, as ddp's bucket hooks need), and
// torch::autograd::grad with respect to the parameters (zero3) sees them
// too. The same operations on the same values in the same order: the
// gradients are bit-identical to running f plainly, when f is deterministic
// (no dropout, nothing random). Right after each recomputed forward the
// node's memory is probed (noteStepMemory, strategy.h: on the CPU the
// backward pass runs on the thread that called backward, the node's), so a
// step's activation peak includes the recomputation's.
//
// What it does not do: no double backward (the saved inputs are released by
// the first backward), no RNG state replay (f must not be random), no
// non-reentrant (saved-tensor hook) variant.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <vector>

namespace smol::engine {

// A layer's forward from its inputs. It may use `params` (closing over its
// module), and nothing else that takes gradients.
using LayerForward = std::function<torch::Tensor(const std::vector<torch::Tensor> &inputs)>;

// forward(inputs), keeping only `inputs` for backward, where it runs again.
// `params`: every tensor forward uses that needs a gradient besides the
// inputs (the module's parameters, leaves). Inputs that need no gradient
// (images, token ids) get none. With the gradient off, forward(inputs)
// plainly. The output must be a new tensor (not an input or a view of one).
torch::Tensor recomputed(LayerForward forward, const std::vector<torch::Tensor> &inputs,
                         const std::vector<torch::Tensor> &params);
// The same with one input.
torch::Tensor recomputed(std::function<torch::Tensor(const torch::Tensor &)> forward,
                         const torch::Tensor &input, const std::vector<torch::Tensor> &params);

} // namespace smol::engine
