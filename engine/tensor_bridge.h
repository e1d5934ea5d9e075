// Where tensors cross into net/: a contiguous CPU tensor as a zero-copy
// net::TensorView (pointer, length, dtype, shape). The tensor must outlive the
// view and must not be reallocated while a collective uses it.
#pragma once

#include "net/tensor_view.h"

#include <torch/torch.h>

namespace smol::engine {

net::TensorView viewOf(const torch::Tensor &tensor);

} // namespace smol::engine
