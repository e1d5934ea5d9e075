// Training data as the strategies see it: a deterministic global batch per
// step, split evenly across data-parallel nodes. Every strategy, and the
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
    // Rows [rank * B / nodes, (rank + 1) * B / nodes) of the global batch of
    // `globalBatch` samples for `step` (B must be divisible by nodes; throws
    // std::invalid_argument otherwise). Thread-safe; tensors are allocated on
    // the calling thread.
    virtual Batch trainBatch(std::int64_t step, std::int64_t globalBatch, int rank, int nodes) const = 0;
    // Held-out data for evaluation (may be empty for text corpora: then a
    // fixed set of held-out blocks).
    virtual Batch testSet() const = 0;
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

// Validates a trainBatch() request and returns globalBatch / nodes; throws
// std::invalid_argument with a one-line reason. Shared by the data sources.
std::int64_t rowsPerNode(std::int64_t step, std::int64_t globalBatch, int rank, int nodes);

} // namespace smol::engine
