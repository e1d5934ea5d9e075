// A model's parameters flattened into one contiguous float32 buffer, each
// parameter becoming a view of its slice (FSDP's FlatParameter; DDP's
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
    // parameter at its slice. Throws std::invalid_argument for a non-float32
    // parameter.
    explicit FlatParams(const std::vector<std::pair<std::string, torch::Tensor>> &named);

    std::int64_t numel() const { return m_numel; }
    const std::vector<ParamSlot> &slots() const { return m_slots; }
    torch::Tensor values() const { return m_values; } // (numel)

    // Flat gradient buffer: allocate (zeroed) and point every .grad at it.
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
    torch::Tensor m_values;
    torch::Tensor m_grads;
};

} // namespace smol::engine
