// The activation closed forms of activation_forms.h, one function per model.
#include "activation_forms.h"

#include <algorithm>

namespace smol::engine::plan {

namespace {

std::string n(std::int64_t v)
{
    return std::to_string(v);
}

// The gpt: layer 0 the embeddings, 1..L the blocks, L+1 ln_final and the head.
ActivationForm gptForm(const ActivationInput &in)
{
    const ModelConfig &m = in.model;
    const std::int64_t e = in.elementBytes, b = in.rows, s = in.positions, h = m.nEmbd, t = in.tp;
    const std::int64_t a = m.nHead, V = m.vocabSize, T = m.blockSize, L = m.nLayer;
    const std::int64_t sr = in.sequenceParallel ? s / t : s; // the residual stream's positions
    const int last = in.lastLayer < 0 ? int(L) + 1 : in.lastLayer;
    const std::int64_t blocks =
        std::max<std::int64_t>(0, std::min<std::int64_t>(last, L) - std::max(in.firstLayer, 1) + 1);
    const bool embed = in.firstLayer == 0, head = last == L + 1;

    // One block without recomputation; the softmax output is its a s^2 b term.
    const std::int64_t scores = a * b * s * s / t;
    const std::int64_t blockNone = e * (b * h * (2 * sr + 2 * s) + 12 * b * s * h / t + 4 * b * sr + scores);
    std::int64_t block = blockNone;
    std::string blockText = "e(2sbh + 2s'bh + 12sbh/t + 4s'b + a s^2 b/t)";
    if (m.recompute == Recompute::Selective) {
        block = blockNone - e * scores;
        blockText = "e(2sbh + 2s'bh + 12sbh/t + 4s'b) [selective: no a s^2 b]";
    } else if (m.recompute == Recompute::Full) {
        block = e * b * sr * h;
        blockText = "e s'bh [full: the block's input]";
    }
    const std::int64_t perMicro = (embed ? 8 * sr : 0) + blocks * block +
                                  (head ? e * (2 * b * sr * h + 2 * b * sr + b * sr * V) : 0) +
                                  (in.keepsOutput ? e * b * sr * h : 0);
    // full: during backward one block is recomputed at a time, beside the
    // inputs kept. (selective's attention core, recomputed when backward
    // has already freed the head's and the block's later tensors, stays
    // under the forward's end: measured so on the gpt.)
    const std::int64_t recompute = blocks > 0 && m.recompute == Recompute::Full ? blockNone - e * b * sr * h : 0;
    const std::int64_t batch = (in.holdsInput ? 8 : 0) * in.batchRows * T + (in.holdsTargets ? 8 : 0) * in.batchRows * T;
    const std::int64_t masks = L * T * T;
    const std::int64_t total = in.inFlight * perMicro + recompute + batch + masks;

    std::string f = "gpt: ";
    if (in.inFlight > 1)
        f += n(in.inFlight) + " micro-batches x (";
    f += (embed ? std::string("8s' (positions) + ") : "") + n(blocks) + " blocks x " + blockText +
         (head ? " + e(2s'bh + 2s'b + s'bV) (ln_final, head, log-softmax)" : "") +
         (in.keepsOutput ? " + e s'bh (the activation sent on)" : "") + (in.inFlight > 1 ? ")" : "");
    if (recompute > 0)
        f += " + one block's recompute in backward (" + n(recompute) + " B)";
    f += " + 8bT per batch tensor held (ids, targets) + L T^2 (causal masks); e=" + n(e) + " b=" + n(b) +
         " s=" + n(s) + " s'=" + n(sr) + " h=" + n(h) + " a=" + n(a) + " t=" + n(t) + " V=" + n(V) + " T=" + n(T) +
         " L=" + n(L) + " = " + n(total) + " B";
    return {total, f};
}

// The mlp: layer 0 fc1 (+ReLU), 1 fc2 (+ReLU), 2 fc3 and the loss; each
// layer's term is its input (fc1's: the batch's images).
ActivationForm mlpForm(const ActivationInput &in)
{
    const std::int64_t e = in.elementBytes, b = in.rows;
    const int last = in.lastLayer < 0 ? 2 : in.lastLayer;
    auto runs = [&](int layer) { return layer >= in.firstLayer && layer <= last; };
    const std::int64_t perMicro = (runs(1) ? e * 256 * b : 0) + (runs(2) ? e * (128 + 10) * b : 0) +
                                  (in.keepsOutput ? e * (last == 0 ? 256 : 128) * b : 0);
    const std::int64_t recompute = in.model.recompute == Recompute::Full ? e * 256 * b : 0;
    const std::int64_t batch = (in.holdsInput ? 4 * 784 : 0) * in.batchRows + (in.holdsTargets ? 8 : 0) * in.batchRows;
    const std::int64_t total = in.inFlight * perMicro + recompute + batch;
    std::string f = "mlp: 4 x 784 b (images) + 8b (labels) + e(256 + 128) b (ReLU outputs) + e 10 b (log-softmax)";
    if (recompute > 0)
        f += " + e 256 b (fc1 recomputed in backward)";
    if (in.firstLayer > 0 || last < 2 || in.inFlight > 1)
        f += " [this stage's layers " + n(in.firstLayer) + "-" + n(last) + ", " + n(in.inFlight) + " in flight]";
    f += "; e=" + n(e) + " b=" + n(b) + " = " + n(total) + " B";
    return {total, f};
}

} // namespace

ActivationForm activationBytes(const ActivationInput &in)
{
    if (in.model.kind == "gpt")
        return gptForm(in);
    if (in.model.kind == "mlp")
        return mlpForm(in);
    return {std::nullopt, "no closed form for a TorchScript model's activations"};
}

} // namespace smol::engine::plan
