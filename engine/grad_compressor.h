// Gradient compression for data parallelism, as PyTorch's DDP communication
// hooks (torch.distributed.algorithms.ddp_comm_hooks) do it, written for our
// buckets: a GradCompressor averages one bucket of float32 gradients over the
// data-parallel communicator in place of a plain all-reduce.
//
//   fp16, bf16: g / N cast to 16 bits, all-reduce sum ("<bucket>.fp16"), cast
//       back. Bytes on the wire: half the plain all-reduce's.
//   powersgd:R: per bucket, its parameters split into matrices worth
//       compressing (n x m with 2 (n + m) R < n m, R <= min(n, m); a conv
//       weight counts as shape[0] x the rest) and the rest (vectors, small
//       matrices), sent uncompressed. For each matrix M (plus its error
//       buffer E from the last step: error feedback):
//         P = M Q                 (Q: the last step's, warm start)
//         all-reduce mean [all P, the uncompressed values]  ("<bucket>.P")
//         orthogonalize each P's columns (Gram-Schmidt)
//         Q = M^T P
//         all-reduce mean [all Q]                             ("<bucket>.Q")
//         M~ = P Q^T;  E = M - M~;  the gradient becomes M~
//       Two small all-reduces per bucket, (n + m) R elements per matrix
//       instead of n m: the uncompressed values ride with P, saving the third
//       all-reduce PyTorch's hook spends on them (one latency less). Before
//       CompressionConfig::startStep the bucket goes out plain, without error
//       feedback. Q starts from the same seeded Gaussian on every node.
//   At P's all-reduce the inspector also sees every matrix's Q (the warm
//   start it was computed with) and error buffer (CollectiveInfo::related).
#pragma once

#include "engine/compression_config.h"

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

namespace smol::net {
class Communicator;
}

namespace smol::engine {

// One parameter inside a bucket: where it starts (elements into the bucket)
// and its shape.
struct BucketPiece {
    std::string name;
    std::int64_t offset = 0;
    std::vector<std::int64_t> shape;
};

class GradCompressor {
public:
    virtual ~GradCompressor() = default;
    // Averages `grads` (a contiguous float32 view of the bucket, written in
    // place) over `comm`; `bucket` numbers the caller's buckets (state is kept
    // per bucket), `name` is the plain all-reduce's name. Every node calls
    // it for the same buckets in the same order. Counts its calls: the
    // bucket's first `startStep` calls go out plain.
    virtual void allReduceMean(net::Communicator &comm, const torch::Tensor &grads, std::size_t bucket,
                               const std::vector<BucketPiece> &pieces, const std::string &name) = 0;
    // Bytes of state kept between steps (PowerSGD's error buffers and Qs).
    virtual std::int64_t stateBytes() const { return 0; }
};

// nullptr for Kind::None.
std::unique_ptr<GradCompressor> makeGradCompressor(const CompressionConfig &config);

} // namespace smol::engine
