// Keeps BLAS to one thread per caller. Each node runs one LibTorch thread;
// an OpenBLAS that spawned its own threads per call would oversubscribe the
// cores and charge work to no node.
#pragma once

namespace smol::engine {

// Idempotent. Returns false when the BLAS in use has no such control (the
// reference BLAS is single-threaded anyway).
bool limitBlasToOneThread();

} // namespace smol::engine
