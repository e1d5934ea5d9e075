// Fashion-MNIST as a DataSource: 60000 training and 10000 test images of
// 28x28 grey pixels in 10 classes, from Debian's dataset-fashion-mnist.
//
// What it does: decompresses the package's gzip IDX files once into a cache
// directory (each through a temporary file renamed into place, so concurrent
// processes and threads never read half a file), reads the IDX files
// straight into bytes when the DataSource is made and keeps the pixels so
// (47 MB instead of 188 MB of float32; a batch is made float when drawn). The training order is
// a permutation fixed by the seed, made with our own Fisher-Yates shuffle over
// std::mt19937_64: both are fully specified by the C++ standard, so nodes on
// different machines draw the same samples. Step s of global batch B takes
// permutation entries s*B, s*B + 1, ... (mod 60000), wrapping into the next
// epoch with the same order; rank r of N gets its rows batchRows(B, r, N)
// (contiguous, as even as B allows).
//
// What it does not do: no augmentation, no per-epoch reshuffle, no
// normalisation beyond [0, 1]. A valid cache file is recognised by its size
// only: point cacheDir elsewhere when dataDir holds a different data set in
// the same format (e.g. the original MNIST).
#include "engine/data/data_source.h"
#include "engine/data/seeded_random.h"

#include <torch/torch.h>
#include <zlib.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace smol::engine {

namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kPixels = 28 * 28;
constexpr std::int64_t kTrainSize = 60000;
constexpr std::int64_t kTestSize = 10000;
constexpr std::int64_t kTrainPixels = kTrainSize * kPixels;
constexpr std::int64_t kTestPixels = kTestSize * kPixels;
constexpr const char *kInstallHint =
    "install Debian's dataset-fashion-mnist: apt-get install dataset-fashion-mnist";

// The names MNIST's reader expects, and their uncompressed sizes (IDX header
// of 16 bytes for images, 8 for labels, then one byte per pixel or label).
struct IdxFile {
    const char *name;
    std::uintmax_t bytes;
};
constexpr IdxFile kIdxFiles[] = {
    {"train-images-idx3-ubyte", 16 + kTrainPixels},
    {"train-labels-idx1-ubyte", 8 + kTrainSize},
    {"t10k-images-idx3-ubyte", 16 + kTestPixels},
    {"t10k-labels-idx1-ubyte", 8 + kTestSize},
};

fs::path defaultCacheDir()
{
    // XDG: a relative XDG_CACHE_HOME is invalid and must be ignored.
    if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && xdg[0] == '/')
        return fs::path(xdg) / "smolcluster" / "fashion-mnist";
    if (const char *home = std::getenv("HOME"); home && home[0] != '\0')
        return fs::path(home) / ".cache" / "smolcluster" / "fashion-mnist";
    return fs::temp_directory_path() / "smolcluster-cache" / "fashion-mnist";
}

// A file created next to its destination; removed unless committed.
class TempFile {
public:
    explicit TempFile(const fs::path &destination)
        : m_path(destination.string() + ".tmp.XXXXXX")
    {
        m_fd = mkstemp(m_path.data());
        if (m_fd < 0)
            throw DataError("cannot create a temporary file in " + destination.parent_path().string() + ": " +
                            std::strerror(errno));
    }
    ~TempFile()
    {
        if (m_fd >= 0)
            ::close(m_fd);
        if (!m_committed)
            ::unlink(m_path.c_str());
    }
    TempFile(const TempFile &) = delete;
    TempFile &operator=(const TempFile &) = delete;

    void write(const char *data, std::size_t bytes)
    {
        while (bytes > 0) {
            const ssize_t n = ::write(m_fd, data, bytes);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                throw DataError("cannot write " + m_path + ": " + std::strerror(errno));
            data += n;
            bytes -= std::size_t(n);
        }
    }

    // Atomic on POSIX: readers see the old file, no file, or all of this one.
    void commitAs(const fs::path &destination)
    {
        const int fd = m_fd;
        m_fd = -1;
        if (::close(fd) != 0)
            throw DataError("cannot write " + m_path + ": " + std::strerror(errno));
        std::error_code ec;
        fs::rename(m_path, destination, ec);
        if (ec)
            throw DataError("cannot rename " + m_path + " to " + destination.string() + ": " + ec.message());
        m_committed = true;
    }

private:
    std::string m_path;
    int m_fd = -1;
    bool m_committed = false;
};

// gunzip `gz` to `out` unless `out` already has the expected size.
void decompressOnce(const fs::path &gz, const fs::path &out, std::uintmax_t expectedBytes)
{
    std::error_code ec;
    if (fs::file_size(out, ec) == expectedBytes && !ec)
        return;

    TempFile tmp(out);
    gzFile in = gzopen(gz.c_str(), "rb");
    if (!in)
        throw DataError("cannot open " + gz.string() + ": " + std::strerror(errno));
    std::vector<char> buffer(1 << 20);
    std::uintmax_t total = 0;
    for (;;) {
        const int n = gzread(in, buffer.data(), unsigned(buffer.size()));
        if (n < 0) {
            int code = 0;
            const std::string reason = gzerror(in, &code);
            gzclose(in);
            throw DataError("cannot decompress " + gz.string() + ": " + reason);
        }
        if (n == 0)
            break;
        tmp.write(buffer.data(), std::size_t(n));
        total += std::uintmax_t(n);
    }
    gzclose(in);
    if (total != expectedBytes)
        throw DataError(gz.string() + " decompresses to " + std::to_string(total) + " bytes, expected " +
                        std::to_string(expectedBytes) +
                        " (truncated or not Fashion-MNIST?); reinstall it: " + kInstallHint);
    tmp.commitAs(out);
}


class FashionMnist : public DataSource {
public:
    FashionMnist(std::uint64_t seed, const fs::path &dataDir, const fs::path &cacheDir)
    {
        for (const IdxFile &f : kIdxFiles) {
            const fs::path gz = dataDir / (std::string(f.name) + ".gz");
            std::error_code ec;
            if (!fs::is_regular_file(gz, ec))
                throw DataError("Fashion-MNIST is missing (" + gz.string() + " not found); " + kInstallHint);
        }
        std::error_code ec;
        fs::create_directories(cacheDir, ec);
        if (ec)
            throw DataError("cannot create the cache directory " + cacheDir.string() + ": " + ec.message());
        for (const IdxFile &f : kIdxFiles)
            decompressOnce(dataDir / (std::string(f.name) + ".gz"), cacheDir / f.name, f.bytes);

        // Read straight into bytes: LibTorch's MNIST reader makes float32
        // copies (220 MB, and a process keeps that peak resident).
        m_trainImages = readIdx(cacheDir / kIdxFiles[0].name, 2051, kTrainSize, kPixels); // (60000, 784)
        m_trainLabels = readIdx(cacheDir / kIdxFiles[1].name, 2049, kTrainSize, 1).view({kTrainSize}).to(torch::kInt64);
        m_testImages = readIdx(cacheDir / kIdxFiles[2].name, 2051, kTestSize, kPixels); // (10000, 784)
        m_testLabels = readIdx(cacheDir / kIdxFiles[3].name, 2049, kTestSize, 1).view({kTestSize}).to(torch::kInt64);

        // Fisher-Yates, last position first.
        m_order.resize(std::size_t(kTrainSize));
        for (std::int64_t i = 0; i < kTrainSize; ++i)
            m_order[std::size_t(i)] = i;
        std::mt19937_64 rng(seed);
        for (std::size_t i = m_order.size() - 1; i > 0; --i)
            std::swap(m_order[i], m_order[uniformBelow(rng, i + 1)]);
    }

    std::string name() const override { return "fashion-mnist"; }

    Batch trainBatch(std::int64_t step, std::int64_t globalBatch, int rank, int nodes) const override
    {
        const RowRange mine = checkedBatchRows(step, globalBatch, rank, nodes);
        const std::int64_t rows = mine.count;
        // (step * B + first row) mod 60000, without overflow for any step.
        const std::int64_t start =
            ((step % kTrainSize) * (globalBatch % kTrainSize) + mine.first) % kTrainSize;

        torch::Tensor index = torch::empty({rows}, torch::kInt64); // (rows)
        std::int64_t *at = index.data_ptr<std::int64_t>();
        for (std::int64_t i = 0; i < rows; ++i)
            at[i] = m_order[std::size_t((start + i) % kTrainSize)];

        Batch batch;
        batch.input =
            m_trainImages.index_select(/*dim=*/0, index).to(torch::kFloat32).div_(255); // (rows, 784)
        batch.target = m_trainLabels.index_select(/*dim=*/0, index);                    // (rows)
        return batch;
    }

    Batch testSet() const override
    {
        Batch batch;
        batch.input = m_testImages.to(torch::kFloat32).div_(255); // (10000, 784)
        batch.target = m_testLabels.clone();                      // (10000)
        return batch;
    }
    Batch testSlice(std::int64_t first, std::int64_t count) const override
    {
        const std::int64_t n = m_testImages.size(0);
        first = std::clamp<std::int64_t>(first, 0, n);
        count = std::clamp<std::int64_t>(count, 0, n - first);
        Batch batch;
        batch.input = m_testImages.narrow(0, first, count).to(torch::kFloat32).div_(255); // (count, 784)
        batch.target = m_testLabels.narrow(0, first, count).clone();                      // (count)
        return batch;
    }
    std::int64_t testRows() const override { return m_testImages.size(0); }

private:
    // An IDX file (big-endian magic 2051 for images: 16-byte header with
    // count, rows, columns; 2049 for labels: 8-byte header with count), its
    // header checked against what Fashion-MNIST holds, read into (count,
    // width) bytes. A file that does not match is a DataError naming it.
    static torch::Tensor readIdx(const fs::path &path, std::uint32_t magic, std::int64_t count, std::int64_t width)
    {
        std::FILE *f = std::fopen(path.c_str(), "rb");
        if (!f)
            throw DataError("cannot open " + path.string() + ": " + std::strerror(errno));
        struct Closer {
            std::FILE *f;
            ~Closer() { std::fclose(f); }
        } closer{f};
        const int words = magic == 2051 ? 4 : 2;
        unsigned char header[16] = {};
        auto be = [&](int i) {
            return std::uint32_t(header[4 * i]) << 24 | std::uint32_t(header[4 * i + 1]) << 16 |
                   std::uint32_t(header[4 * i + 2]) << 8 | std::uint32_t(header[4 * i + 3]);
        };
        if (std::fread(header, 4, std::size_t(words), f) != std::size_t(words) || be(0) != magic ||
            be(1) != std::uint32_t(count) || (words == 4 && (be(2) != 28 || be(3) != 28)))
            throw DataError("cannot read Fashion-MNIST from " + path.string() + ": not the expected IDX header");
        torch::Tensor out = torch::empty({count, width}, torch::kUInt8);
        if (std::fread(out.data_ptr<std::uint8_t>(), 1, std::size_t(count * width), f) != std::size_t(count * width))
            throw DataError("cannot read Fashion-MNIST from " + path.string() + ": truncated");
        return out;
    }

    torch::Tensor m_trainImages;       // (60000, 784) uint8, read-only after construction
    torch::Tensor m_trainLabels;       // (60000) int64
    torch::Tensor m_testImages;        // (10000, 784) uint8
    torch::Tensor m_testLabels;        // (10000) int64
    std::vector<std::int64_t> m_order; // training sample at each position of an epoch
};

} // namespace

std::shared_ptr<DataSource> makeFashionMnist(std::uint64_t seed, const std::string &dataDir,
                                             const std::string &cacheDir)
{
    return std::make_shared<FashionMnist>(seed, dataDir,
                                          cacheDir.empty() ? defaultCacheDir() : fs::path(cacheDir));
}

} // namespace smol::engine
