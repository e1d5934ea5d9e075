// Parameters and optimizer moments as they travel on the control plane (the
// blob of assign, failed and checkpoint messages): P float32 parameters,
// then, when the JSON says "moments": true, Adam's first and second moments
// (P float32 each). Little-endian hosts only (x86-64, ARM64), like the
// data plane's float payloads.
#pragma once

#include "engine/strategy.h"

#include <QByteArray>

#include <cstring>
#include <stdexcept>

namespace smol::engine {

struct TrainingState {
    torch::Tensor params;     // undefined: none
    OptimizerMoments moments; // undefined: none
};

inline void appendFloats(QByteArray &out, const torch::Tensor &t)
{
    const torch::Tensor c = t.to(torch::kFloat32).contiguous();
    out.append(static_cast<const char *>(c.data_ptr()), qsizetype(c.numel()) * 4);
}

inline QByteArray packState(const TrainingState &s)
{
    QByteArray out;
    if (!s.params.defined())
        return out;
    appendFloats(out, s.params);
    if (s.moments.defined()) {
        appendFloats(out, s.moments.exp);
        appendFloats(out, s.moments.expSq);
    }
    return out;
}

inline torch::Tensor floatsFrom(const char *data, std::int64_t n)
{
    torch::Tensor t = torch::empty({n}, torch::kFloat32);
    std::memcpy(t.data_ptr(), data, std::size_t(n) * 4);
    return t;
}

// Throws std::runtime_error for a blob of the wrong size.
inline TrainingState unpackState(const QByteArray &blob, bool hasMoments)
{
    TrainingState s;
    if (blob.isEmpty())
        return s;
    const qsizetype parts = hasMoments ? 3 : 1;
    if (blob.size() % (4 * parts) != 0)
        throw std::runtime_error("a state blob of " + std::to_string(blob.size()) + " bytes is not " +
                                 std::to_string(parts) + " float32 vectors");
    const std::int64_t n = blob.size() / (4 * parts);
    s.params = floatsFrom(blob.constData(), n);
    if (hasMoments) {
        s.moments.exp = floatsFrom(blob.constData() + 4 * n, n);
        s.moments.expSq = floatsFrom(blob.constData() + 8 * n, n);
    }
    return s;
}

} // namespace smol::engine
