#include "data_source.h"

#include <stdexcept>
#include <string>

namespace smol::engine {

std::int64_t rowsPerNode(std::int64_t step, std::int64_t globalBatch, int rank, int nodes)
{
    if (step < 0)
        throw std::invalid_argument("step " + std::to_string(step) + " is negative");
    if (globalBatch <= 0 || nodes <= 0 || rank < 0 || rank >= nodes)
        throw std::invalid_argument("bad batch split: global batch " + std::to_string(globalBatch) + ", rank " +
                                    std::to_string(rank) + " of " + std::to_string(nodes) + " nodes");
    if (globalBatch % nodes != 0)
        throw std::invalid_argument("global batch " + std::to_string(globalBatch) + " is not divisible by the " +
                                    std::to_string(nodes) + " nodes");
    return globalBatch / nodes;
}

} // namespace smol::engine
