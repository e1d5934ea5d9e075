// Training data as the strategies see it: a deterministic global batch per
// step, split as evenly as it goes across data-parallel nodes (batchRows).
// Every strategy, and the
// single-node reference, draws the same samples for the same (seed, step),
// which is what makes their parameters comparable.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <stdexcept>
#include <string>

namespace smol::engine {

// Missing or unreadable data; the message says what to install or fix.
class DataError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

struct Batch {
    torch::Tensor input;  // mlp: (B, 784) float32 in [0, 1]; gpt: (B, T) int64 token ids
    torch::Tensor target; // mlp: (B) int64 class; gpt: (B, T) int64 next token
};

class DataSource {
public:
    virtual ~DataSource() = default;
    virtual std::string name() const = 0;
    // Rows batchRows(globalBatch, rank, nodes) of the global batch of
    // `globalBatch` samples for `step` (every rank needs a row: throws
    // std::invalid_argument for B < nodes, see checkedBatchRows). Thread-safe;
    // tensors are allocated on the calling thread.
    virtual Batch trainBatch(std::int64_t step, std::int64_t globalBatch, int rank, int nodes) const = 0;
    // Held-out data for evaluation (may be empty for text corpora: then a
    // fixed set of held-out blocks).
    virtual Batch testSet() const = 0;
    // Rows [first, first + count) of testSet() (clamped to it), holding only
    // those rows: an evaluation in slices never has the whole set as floats.
    virtual Batch testSlice(std::int64_t first, std::int64_t count) const;
    virtual std::int64_t testRows() const { return testSet().input.size(0); }
    // Token vocabulary for text sources, 0 for images.
    virtual std::int64_t vocabSize() const { return 0; }
};

// Fashion-MNIST from Debian's dataset-fashion-mnist package (gzip IDX files
// under dataDir), decompressed once into cacheDir and read with
// torch::data::datasets::MNIST. Empty cacheDir = $XDG_CACHE_HOME/smolcluster/
// fashion-mnist (or ~/.cache/...). The sample order is a permutation fixed by
// `seed`. Throws DataError naming the package when files are missing. Loads
// everything on construction (about a second); share one per process.
std::shared_ptr<DataSource> makeFashionMnist(std::uint64_t seed,
                                             const std::string &dataDir = "/usr/share/datasets/fashion-mnist",
                                             const std::string &cacheDir = {});

// A character-level corpus: every byte value that occurs becomes a token;
// samples are blocks of blockSize + 1 characters at offsets fixed by `seed`;
// the last 10% of the text is held out. Empty path = defaultCorpusPath().
// Throws DataError for unreadable or too-short files (each part needs a
// block), std::invalid_argument for blockSize < 1.
std::shared_ptr<DataSource> makeCharCorpus(std::uint64_t seed, std::int64_t blockSize, const std::string &path = {});

// /usr/share/common-licenses/GPL-3: English text (35 kB, 76 distinct bytes)
// that every Debian system has, from base-files.
std::string defaultCorpusPath();

// Rows [first, first + count) of a global batch.
struct RowRange {
    std::int64_t first = 0;
    std::int64_t count = 0;
};

// Share `share` of a global batch of B rows cut into `shares` contiguous
// parts, in share order, as evenly as it goes: shares s < B % shares take
// B / shares + 1 rows, the others B / shares (B = 10 over 4: 3, 3, 2, 2).
// The union over the shares is exactly the whole batch. No checks.
RowRange batchRows(std::int64_t globalBatch, int share, int shares);

// Validates a trainBatch() request and returns batchRows(globalBatch, rank,
// nodes); throws std::invalid_argument with a one-line reason (also when a
// rank would get no rows). Shared by the data sources.
RowRange checkedBatchRows(std::int64_t step, std::int64_t globalBatch, int rank, int nodes);

} // namespace smol::engine
