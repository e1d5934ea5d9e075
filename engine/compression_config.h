// What --compress asks of the gradients' all-reduce (engine/grad_compressor.h
// does it): none, fp16 or bf16 (cast, average in 16 bits, cast back: half the
// bytes), or PowerSGD of rank R (Vogels et al., NeurIPS 2019: each matrix M
// sent as two thin factors, P = MQ and Q = M^T P, with error feedback and a
// warm start). No LibTorch here: the options, the window and the lessons
// read it.
#pragma once

#include <cstdint>
#include <string>

namespace smol::engine {

struct CompressionConfig {
    enum class Kind { None, Fp16, Bf16, PowerSgd };
    Kind kind = Kind::None;
    int rank = 1;                  // PowerSGD's R (1 .. kMaxPowerSgdRank)
    // PowerSGD sends plain all-reduces for its first `startStep` steps (as
    // PyTorch's hook: the early, fast-changing gradients converge badly
    // compressed). fp16 and bf16 compress from the first step, as PyTorch's
    // fp16_compress_hook does.
    std::int64_t startStep = 10;

    bool isOn() const { return kind != Kind::None; }
    // The first step that sends compressed gradients.
    std::int64_t firstCompressedStep() const { return kind == Kind::PowerSgd ? startStep : 0; }
    // "none", "fp16", "bf16", "powersgd:2": what --compress takes.
    std::string text() const;
};

constexpr int kMaxPowerSgdRank = 64;

// Parses --compress's value; throws std::invalid_argument with one line.
CompressionConfig parseCompression(const std::string &text);

} // namespace smol::engine
