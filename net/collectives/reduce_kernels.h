// The element-wise sum the reducing collectives use, shared with the
// transports: the TCP transport adds a reduce-scatter segment into place as
// its bytes arrive (Transport::postRecvReduce), the others after receiving.
// Element-wise and in index order within each element, so who runs it and in
// how many pieces never changes a bit of the result.
#pragma once

#include "../dtype.h"

#include <cstddef>

namespace smol::net::detail {

// acc[i] += in[i] for `count` elements of `dtype`.
void reduceSum(DType dtype, void *acc, const void *in, std::size_t count);

} // namespace smol::net::detail
