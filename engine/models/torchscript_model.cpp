// Loading a TorchScript model and checking its contract; see
// torchscript_model.h.
#include "engine/models/torchscript_model.h"

#include <torch/csrc/jit/serialization/import.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace smol::engine {

namespace {

constexpr std::int64_t kInputs = 28 * 28;
constexpr std::int64_t kClasses = 10;

std::string firstLine(const std::string &s)
{
    return s.substr(0, s.find('\n'));
}

} // namespace

TorchScriptModel::TorchScriptModel(const std::string &path)
    : m_path(path)
{
    // LibTorch's own message for a missing file is cryptic ("errno 2 on fopen").
    if (!std::ifstream(path, std::ios::binary))
        throw DataError("cannot load TorchScript model " + path + ": " + std::strerror(errno));
    try {
        m_module = torch::jit::load(path);
    } catch (const c10::Error &e) {
        throw DataError("cannot load TorchScript model " + path + ": " +
                        firstLine(e.what_without_backtrace()));
    } catch (const std::exception &e) {
        throw DataError("cannot load TorchScript model " + path + ": " + firstLine(e.what()));
    }
    m_module.train(/*on=*/true);
    for (const auto &item : m_module.named_parameters(/*recurse=*/true)) {
        if (item.value.scalar_type() != torch::kFloat32)
            throw DataError("TorchScript model " + path + ": parameter " + item.name + " is " +
                            c10::toString(item.value.scalar_type()) + ", expected float32");
        item.value.requires_grad_(true);
        m_parameters.emplace_back(item.name, item.value);
    }
    if (m_parameters.empty())
        throw DataError("TorchScript model " + path + " has no parameters to train");
}

torch::Tensor TorchScriptModel::logits(const torch::Tensor &input)
{
    if (input.dim() != 2 || input.size(1) != kInputs)
        throw std::invalid_argument("TorchScript models take (B, 784) images; got " +
                                    c10::str(input.sizes()));
    const c10::IValue out = m_module.forward({input});
    if (!out.isTensor())
        throw DataError("TorchScript model " + m_path + ": forward returned " + out.tagKind() +
                        ", expected a (B, 10) tensor");
    torch::Tensor result = out.toTensor();
    if (result.dim() != 2 || result.size(0) != input.size(0) || result.size(1) != kClasses)
        throw DataError("TorchScript model " + m_path + ": forward returned " + c10::str(result.sizes()) +
                        " for input " + c10::str(input.sizes()) + ", expected (B, 10) logits");
    return result;
}

torch::Tensor TorchScriptModel::loss(const Batch &batch)
{
    return torch::nn::functional::cross_entropy(logits(batch.input), batch.target); // ()
}

double TorchScriptModel::accuracy(const Batch &batch)
{
    if (batch.input.size(0) == 0)
        return 0.0;
    torch::NoGradGuard noGrad;
    const torch::Tensor predicted = logits(batch.input).argmax(/*dim=*/1); // (B)
    return predicted.eq(batch.target).to(torch::kFloat64).mean().item<double>();
}

std::vector<ModelLayer> TorchScriptModel::layers()
{
    ModelLayer all{"module", {}, [this](const torch::Tensor &x) { return logits(x); }};
    for (const auto &[name, p] : m_parameters)
        all.paramNames.push_back(name);
    return {all};
}

torch::Tensor TorchScriptModel::lossFromOutput(const torch::Tensor &output, const Batch &batch)
{
    return torch::nn::functional::cross_entropy(output, batch.target); // ()
}

} // namespace smol::engine
