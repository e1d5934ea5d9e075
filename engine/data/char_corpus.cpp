// A character-level text corpus as a DataSource, for the gpt model.
//
// What it does: reads a file once; every distinct byte becomes a token, in
// byte order (so token ids are stable for a given text). The first 90% of
// the text is for training, the last 10% is held out. A training sample is a
// block of blockSize + 1 consecutive characters: input = the first blockSize,
// target = the same shifted by one. Step s draws its B block offsets from a
// std::mt19937_64 seeded with a hash of (seed, s), with our own bounded draw,
// so every node, on any machine, computes the same global batch and keeps
// its rows of it (batchRows: contiguous, as even as B allows). testSet() is
// 64 blocks evenly spaced over the held-out text, the same for every seed.
//
// What it does not do: no subword tokenisation, no Unicode awareness (a
// multi-byte UTF-8 character is several tokens), no epochs: offsets are drawn
// with replacement.
#include "engine/data/data_source.h"
#include "engine/data/seeded_random.h"

#include <torch/torch.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace smol::engine {

namespace {

constexpr const char *kDefaultCorpus = "/usr/share/common-licenses/GPL-3";
constexpr std::int64_t kTestBlocks = 64;

std::uint64_t splitmix64(std::uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}


class CharCorpus : public DataSource {
public:
    CharCorpus(std::uint64_t seed, std::int64_t blockSize, const std::string &path)
        : m_seed(seed)
        , m_blockSize(blockSize)
    {
        if (blockSize <= 0)
            throw std::invalid_argument("block size " + std::to_string(blockSize) + " must be positive");
        std::ifstream file(path, std::ios::binary);
        if (!file)
            throw DataError("cannot read corpus " + path + ": " + std::strerror(errno));
        const std::string text{std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
        if (file.bad())
            throw DataError("cannot read corpus " + path + ": " + std::strerror(errno));

        const auto size = std::int64_t(text.size());
        m_trainEnd = size - size / 10;
        // Both parts must hold at least one block of blockSize + 1 characters.
        if (size / 10 < blockSize + 1)
            throw DataError("corpus " + path + " has " + std::to_string(size) + " bytes; block size " +
                            std::to_string(blockSize) + " needs at least " +
                            std::to_string(10 * (blockSize + 1)));

        std::array<bool, 256> seen{};
        for (const char c : text)
            seen[static_cast<unsigned char>(c)] = true;
        std::array<std::uint8_t, 256> tokenOf{};
        for (int byte = 0; byte < 256; ++byte)
            if (seen[std::size_t(byte)])
                tokenOf[std::size_t(byte)] = std::uint8_t(m_vocabSize++);
        m_tokens.reserve(text.size());
        for (const char c : text)
            m_tokens.push_back(tokenOf[static_cast<unsigned char>(c)]);
        m_name = "chars:" + path.substr(path.find_last_of('/') + 1);
    }

    std::string name() const override { return m_name; }
    std::int64_t vocabSize() const override { return m_vocabSize; }

    Batch trainBatch(std::int64_t step, std::int64_t globalBatch, int rank, int nodes) const override
    {
        const RowRange mine = checkedBatchRows(step, globalBatch, rank, nodes);
        const std::int64_t first = mine.first, rows = mine.count;
        // Offsets o with o + blockSize + 1 <= m_trainEnd.
        const auto offsets = std::uint64_t(m_trainEnd - m_blockSize);

        std::mt19937_64 rng(splitmix64(splitmix64(m_seed) ^ std::uint64_t(step)));
        std::vector<std::int64_t> starts(static_cast<std::size_t>(rows));
        for (std::int64_t row = 0; row < first + rows; ++row) {
            const auto offset = std::int64_t(uniformBelow(rng, offsets)); // every row draws: ranks agree
            if (row >= first)
                starts[std::size_t(row - first)] = offset;
        }
        return blocks(starts);
    }

    Batch testSet() const override
    {
        const std::int64_t heldOut = std::int64_t(m_tokens.size()) - m_trainEnd;
        const std::int64_t span = heldOut - (m_blockSize + 1); // last valid offset in the held-out part
        std::vector<std::int64_t> starts(static_cast<std::size_t>(kTestBlocks));
        for (std::int64_t i = 0; i < kTestBlocks; ++i)
            starts[std::size_t(i)] = m_trainEnd + i * span / (kTestBlocks - 1);
        return blocks(starts);
    }

private:
    Batch blocks(const std::vector<std::int64_t> &starts) const
    {
        const auto rows = std::int64_t(starts.size());
        Batch batch;
        batch.input = torch::empty({rows, m_blockSize}, torch::kInt64);  // (B, T)
        batch.target = torch::empty({rows, m_blockSize}, torch::kInt64); // (B, T)
        auto input = batch.input.accessor<std::int64_t, 2>();
        auto target = batch.target.accessor<std::int64_t, 2>();
        for (std::int64_t b = 0; b < rows; ++b) {
            const std::uint8_t *block = m_tokens.data() + starts[std::size_t(b)];
            for (std::int64_t t = 0; t < m_blockSize; ++t) {
                input[b][t] = block[t];
                target[b][t] = block[t + 1];
            }
        }
        return batch;
    }

    std::uint64_t m_seed;
    std::int64_t m_blockSize;
    std::int64_t m_vocabSize = 0;
    std::int64_t m_trainEnd = 0;        // tokens [0, m_trainEnd) train, the rest is held out
    std::vector<std::uint8_t> m_tokens; // token id of every byte of the text
    std::string m_name;
};

} // namespace

std::string defaultCorpusPath()
{
    return kDefaultCorpus;
}

std::shared_ptr<DataSource> makeCharCorpus(std::uint64_t seed, std::int64_t blockSize,
                                           const std::string &path)
{
    return std::make_shared<CharCorpus>(seed, blockSize, path.empty() ? defaultCorpusPath() : path);
}

} // namespace smol::engine
