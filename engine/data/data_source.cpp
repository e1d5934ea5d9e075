#include "data_source.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace smol::engine {

RowRange batchRows(std::int64_t globalBatch, int share, int shares)
{
    const std::int64_t base = globalBatch / shares, extra = globalBatch % shares;
    return {share * base + std::min<std::int64_t>(share, extra), base + (share < extra ? 1 : 0)};
}

RowRange checkedBatchRows(std::int64_t step, std::int64_t globalBatch, int rank, int nodes)
{
    if (step < 0)
        throw std::invalid_argument("step " + std::to_string(step) + " is negative");
    if (globalBatch <= 0 || nodes <= 0 || rank < 0 || rank >= nodes)
        throw std::invalid_argument("bad batch split: global batch " + std::to_string(globalBatch) + ", rank " +
                                    std::to_string(rank) + " of " + std::to_string(nodes) + " nodes");
    if (globalBatch < nodes)
        throw std::invalid_argument("global batch " + std::to_string(globalBatch) + " is smaller than the " +
                                    std::to_string(nodes) + " nodes: rank " + std::to_string(rank) +
                                    " gets no rows");
    return batchRows(globalBatch, rank, nodes);
}

} // namespace smol::engine

namespace smol::engine {

Batch DataSource::testSlice(std::int64_t first, std::int64_t count) const
{
    const Batch all = testSet();
    const std::int64_t n = all.input.defined() ? all.input.size(0) : 0;
    first = std::clamp<std::int64_t>(first, 0, n);
    count = std::clamp<std::int64_t>(count, 0, n - first);
    if (n == 0)
        return all;
    return Batch{all.input.narrow(0, first, count).clone(), all.target.narrow(0, first, count).clone()};
}

} // namespace smol::engine
