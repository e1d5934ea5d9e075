// A model's parameters flattened into one contiguous buffer of their dtype
// (float32, or bfloat16 under --precision bf16), each parameter becoming a
// view of its slice (FSDP's FlatParameter; DDP's
// gradients-as-bucket-views). Collectives then move ranges of one buffer,
// and a shard is simply a contiguous range.
//
// Gradients get the same treatment on request: one flat buffer, each
// parameter's .grad a view of it, so backward accumulates straight into it.
#pragma once

#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

namespace smol::engine {

struct ParamSlot {
    std::string name;
    std::vector<std::int64_t> shape;
    std::int64_t offset = 0; // elements into the flat buffer
    std::int64_t numel = 0;
    torch::Tensor param;     // the model's parameter (a view of the flat buffer while attached)
};

class FlatParams {
public:
    // Copies the parameters' values into a new flat buffer and re-points each
    // parameter at its slice. Throws std::invalid_argument (one line) for a
    // parameter that is neither float32 nor bfloat16, or whose dtype differs
    // from the first one's.
    explicit FlatParams(const std::vector<std::pair<std::string, torch::Tensor>> &named);

    std::int64_t numel() const { return m_numel; }
    // The parameters' (and so the values' and gradients') dtype: float32 or
    // bfloat16; float32 when there are none.
    torch::ScalarType dtype() const { return m_dtype; }
    const std::vector<ParamSlot> &slots() const { return m_slots; }
    torch::Tensor values() const { return m_values; } // (numel)

    // Flat gradient buffer (the parameters' dtype): allocate (zeroed) and
    // point every .grad at it.
    torch::Tensor attachGrads();
    // Drop .grad and the flat gradient buffer.
    void detachGrads();
    torch::Tensor grads() const { return m_grads; }

    // Drop the flat values (zero3 keeps only a shard); parameters become empty.
    void releaseValues();
    // Point the parameters at a full flat buffer again (zero3 gathers one).
    void adoptValues(const torch::Tensor &flat);

private:
    std::vector<ParamSlot> m_slots;
    std::int64_t m_numel = 0;
    torch::ScalarType m_dtype = torch::kFloat32;
    torch::Tensor m_values;
    torch::Tensor m_grads;
};

} // namespace smol::engine
