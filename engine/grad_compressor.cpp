// The gradient compressors of engine/grad_compressor.h: fp16/bf16 casts and
// PowerSGD.
#include "grad_compressor.h"

#include "engine/tensor_bridge.h"
#include "net/communicator.h"

#include <ATen/CPUGeneratorImpl.h>

#include <map>

namespace smol::engine {

namespace {

// fp16 / bf16: divide first (as PyTorch's hook: the sum of N halves stays in
// range), all-reduce the 16-bit sum, widen back into the bucket.
class CastCompressor : public GradCompressor {
public:
    CastCompressor(torch::ScalarType type, const char *suffix) : m_type(type), m_suffix(suffix) {}

    void allReduceMean(net::Communicator &comm, const torch::Tensor &grads, std::size_t,
                       const std::vector<BucketPiece> &, const std::string &name) override
    {
        grads.mul_(1.0 / comm.worldSize()); // in place: no float32 copy of the bucket
        torch::Tensor narrow = grads.to(m_type).contiguous();
        comm.allReduce(viewOf(narrow), net::ReduceOp::Sum, name + "." + m_suffix);
        grads.copy_(narrow);
    }

private:
    torch::ScalarType m_type;
    const char *m_suffix;
};

class PowerSgdCompressor : public GradCompressor {
public:
    explicit PowerSgdCompressor(const CompressionConfig &config) : m_config(config) {}

    void allReduceMean(net::Communicator &comm, const torch::Tensor &grads, std::size_t bucket,
                       const std::vector<BucketPiece> &pieces, const std::string &name) override
    {
        BucketState &b = stateOf(bucket, pieces);
        if (b.calls++ < m_config.startStep || b.matrices.empty()) {
            comm.allReduce(viewOf(grads), net::ReduceOp::Average, name);
            return;
        }
        compressed(comm, grads, b, name);
    }

    std::int64_t stateBytes() const override { return m_stateBytes; }

private:
    struct Matrix {
        std::string name;
        std::int64_t offset, rows, cols;
        torch::Tensor q;     // cols x R: the warm start
        torch::Tensor error; // rows x cols: what the last approximation missed
    };
    struct Span {
        std::int64_t offset, numel;
    };
    struct BucketState {
        std::vector<Matrix> matrices;
        std::vector<Span> rest; // sent uncompressed, with P
        std::int64_t pElems = 0, qElems = 0, restElems = 0;
        std::int64_t calls = 0;
        torch::Tensor pBuf, qBuf; // the two all-reduces' buffers, kept from step to step
    };

    BucketState &stateOf(std::size_t bucket, const std::vector<BucketPiece> &pieces)
    {
        auto it = m_buckets.find(bucket);
        if (it != m_buckets.end())
            return it->second;
        BucketState &b = m_buckets[bucket];
        const std::int64_t R = m_config.rank;
        for (const BucketPiece &p : pieces) {
            std::int64_t numel = 1;
            for (std::int64_t d : p.shape)
                numel *= d;
            const std::int64_t rows = p.shape.size() >= 2 ? p.shape[0] : 0;
            const std::int64_t cols = rows ? numel / rows : 0;
            // Worth it only if the factors are well under the matrix (PyTorch's
            // min_compression_rate of 2).
            if (rows && R <= std::min(rows, cols) && 2 * (rows + cols) * R < rows * cols) {
                // The same seeded Gaussian on every node, one seed per matrix.
                auto gen = at::make_generator<at::CPUGeneratorImpl>(0x9e3779b9u + bucket * 4096 + b.matrices.size());
                Matrix m{p.name, p.offset, rows, cols, torch::randn({cols, R}, gen),
                         torch::zeros({rows, cols})};
                b.pElems += rows * R;
                b.qElems += cols * R;
                m_stateBytes += (rows * cols + cols * R) * 4;
                b.matrices.push_back(std::move(m));
            } else {
                b.rest.push_back(Span{p.offset, numel});
                b.restElems += numel;
            }
        }
        return b;
    }

    // Gram-Schmidt on P's columns, in place (every node computes the same
    // bits from the same averaged P).
    static void orthogonalize(torch::Tensor p)
    {
        for (std::int64_t i = 0; i < p.size(1); ++i) {
            torch::Tensor col = p.select(1, i);
            for (std::int64_t j = 0; j < i; ++j) {
                const torch::Tensor prev = p.select(1, j);
                col.sub_(prev * torch::dot(col, prev));
            }
            col.div_(col.norm() + 1e-8);
        }
    }

    void compressed(net::Communicator &comm, const torch::Tensor &grads, BucketState &b, const std::string &name)
    {
        const std::int64_t R = m_config.rank;
        std::vector<torch::Tensor> ms, ps, qs;
        if (!b.pBuf.defined()) {
            b.pBuf = torch::empty({b.pElems + b.restElems});
            b.qBuf = torch::empty({b.qElems});
        }
        const torch::Tensor &pBuf = b.pBuf, &qBuf = b.qBuf;
        std::vector<net::RelatedTensor> related;
        std::int64_t po = 0, qo = 0;
        for (Matrix &m : b.matrices) {
            torch::Tensor M = grads.narrow(0, m.offset, m.rows * m.cols).view({m.rows, m.cols});
            M.add_(m.error); // error feedback
            torch::Tensor P = pBuf.narrow(0, po, m.rows * R).view({m.rows, R});
            torch::mm_out(P, M, m.q);
            ms.push_back(M);
            ps.push_back(P);
            qs.push_back(qBuf.narrow(0, qo, m.cols * R).view({m.cols, R}));
            related.push_back({"Q " + m.name, viewOf(m.q)});
            related.push_back({"error " + m.name, viewOf(m.error)});
            po += m.rows * R;
            qo += m.cols * R;
        }
        for (const Span &s : b.rest) {
            pBuf.narrow(0, po, s.numel).copy_(grads.narrow(0, s.offset, s.numel));
            po += s.numel;
        }
        comm.attachToNext(std::move(related));
        comm.allReduce(viewOf(pBuf), net::ReduceOp::Average, name + ".P");
        po = b.pElems;
        for (const Span &s : b.rest) {
            grads.narrow(0, s.offset, s.numel).copy_(pBuf.narrow(0, po, s.numel));
            po += s.numel;
        }
        for (std::size_t i = 0; i < ms.size(); ++i) {
            orthogonalize(ps[i]);
            torch::mm_out(qs[i], ms[i].t(), ps[i]);
        }
        comm.allReduce(viewOf(qBuf), net::ReduceOp::Average, name + ".Q");
        for (std::size_t i = 0; i < ms.size(); ++i) {
            Matrix &m = b.matrices[i];
            const torch::Tensor approx = torch::mm(ps[i], qs[i].t());
            torch::sub_out(m.error, ms[i], approx);
            ms[i].copy_(approx);
            m.q.copy_(qs[i]);
        }
    }

    CompressionConfig m_config;
    std::map<std::size_t, BucketState> m_buckets;
    std::int64_t m_stateBytes = 0;
};

} // namespace

std::unique_ptr<GradCompressor> makeGradCompressor(const CompressionConfig &config)
{
    switch (config.kind) {
    case CompressionConfig::Kind::None: return nullptr;
    case CompressionConfig::Kind::Fp16: return std::make_unique<CastCompressor>(torch::kHalf, "fp16");
    case CompressionConfig::Kind::Bf16: return std::make_unique<CastCompressor>(torch::kBFloat16, "bf16");
    case CompressionConfig::Kind::PowerSgd: return std::make_unique<PowerSgdCompressor>(config);
    }
    return nullptr;
}

} // namespace smol::engine
