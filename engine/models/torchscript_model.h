// A user's own model, loaded from a TorchScript file (torch.jit.save).
//
// Contract for the file: it is trained on Fashion-MNIST, so forward(x) takes
// x of shape (B, 784), float32 pixels in [0, 1], and returns (B, 10) logits.
// Every parameter must be float32. The loss is mean cross-entropy.
// Example, in Python:
//   torch.jit.script(MyNet()).save("mynet.pt")   # then --model mynet.pt
//
// What it does: loads the module, puts it in training mode, and exposes
// module.named_parameters(recurse=True) in the module's own order, with
// requires_grad set. The initial weights are those in the file: the config
// seed plays no part.
//
// What it does not do: no other input contract (text models, images of
// other sizes), no buffers as trainable state (batch-norm statistics are
// updated by forward as TorchScript does, but not synchronised across nodes),
// no GPU placement.
#pragma once

#include "engine/models/model.h"

#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

namespace smol::engine {

class TorchScriptModel : public TrainModel {
public:
    // Throws DataError (path and reason, one line) when the file cannot be
    // read, is not TorchScript, or breaks the contract above.
    explicit TorchScriptModel(const std::string &path);
    std::string name() const override { return "torchscript:" + m_path; }
    std::vector<std::pair<std::string, torch::Tensor>> namedParameters() override { return m_parameters; }
    // Throws DataError when forward's output is not (B, 10).
    torch::Tensor loss(const Batch &batch) override;
    double accuracy(const Batch &batch) override;
    std::vector<ModelLayer> layers() override;
    torch::Tensor lossFromOutput(const torch::Tensor &output, const Batch &batch) override;

private:
    torch::Tensor logits(const torch::Tensor &input); // (B, 784) -> (B, 10)

    std::string m_path;
    torch::jit::Module m_module;
    std::vector<std::pair<std::string, torch::Tensor>> m_parameters;
};

} // namespace smol::engine
