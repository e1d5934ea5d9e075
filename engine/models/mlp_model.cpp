// The 784-256-128-10 MLP and its loss and accuracy; see mlp_model.h.
#include "engine/models/mlp_model.h"

#include "engine/models/recompute.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <stdexcept>

namespace smol::engine {

namespace {

// A Linear layer initialised like LibTorch's default (weight and bias uniform
// in +-1/sqrt(in)), but from `gen` instead of the global generator.
torch::nn::Linear seededLinear(std::int64_t in, std::int64_t out, at::Generator &gen)
{
    torch::nn::Linear layer(in, out);
    const double bound = 1.0 / std::sqrt(double(in));
    torch::NoGradGuard noGrad;
    layer->weight.uniform_(-bound, bound, gen);
    layer->bias.uniform_(-bound, bound, gen);
    return layer;
}

} // namespace

MlpImpl::MlpImpl(const ModelConfig &config)
    : recompute(config.recompute)
{
    at::Generator gen = at::detail::createCPUGenerator(config.seed);
    fc1 = register_module("fc1", seededLinear(MlpModel::kInputs, /*out=*/256, gen));
    fc2 = register_module("fc2", seededLinear(/*in=*/256, /*out=*/128, gen));
    fc3 = register_module("fc3", seededLinear(/*in=*/128, MlpModel::kClasses, gen));
}

torch::Tensor MlpImpl::forward(const torch::Tensor &x)
{
    torch::Tensor h = hidden(fc1, x.to(fc1->weight.scalar_type())); // (B, 256), images in the weights' dtype
    h = hidden(fc2, h);               // (B, 128)
    return fc3(h);                    // (B, 10)
}

torch::Tensor MlpImpl::hidden(const torch::nn::Linear &layer, const torch::Tensor &x)
{
    auto f = [layer = layer](const torch::Tensor &in) mutable { return torch::relu(layer(in)); };
    return recompute == Recompute::Full ? recomputed(f, x, layer->parameters()) : f(x);
}

MlpModel::MlpModel(const ModelConfig &config)
    : m_net(config)
{
}

std::vector<std::pair<std::string, torch::Tensor>> MlpModel::namedParameters()
{
    std::vector<std::pair<std::string, torch::Tensor>> out;
    for (const auto &item : m_net->named_parameters(/*recurse=*/true))
        out.emplace_back(item.key(), item.value());
    return out;
}

namespace {

void checkImages(const Batch &batch)
{
    const torch::Tensor &x = batch.input;
    if (x.dim() != 2 || x.size(1) != MlpModel::kInputs || batch.target.dim() != 1 ||
        batch.target.size(0) != x.size(0))
        throw std::invalid_argument("mlp expects input (B, 784) and target (B); got input " +
                                    c10::str(x.sizes()) + " and target " + c10::str(batch.target.sizes()));
}

} // namespace

torch::Tensor MlpModel::loss(const Batch &batch)
{
    checkImages(batch);
    return lossFromOutput(m_net->forward(batch.input), batch); // ()
}

double MlpModel::accuracy(const Batch &batch)
{
    checkImages(batch);
    if (batch.input.size(0) == 0)
        return 0.0;
    torch::NoGradGuard noGrad;
    const torch::Tensor predicted = m_net->forward(batch.input).argmax(/*dim=*/1); // (B)
    return predicted.eq(batch.target).to(torch::kFloat64).mean().item<double>();
}

std::vector<ModelLayer> MlpModel::layers()
{
    Mlp net = m_net;
    return {
        {"fc1", {"fc1.weight", "fc1.bias"},
         [net](const torch::Tensor &x) mutable { // images in the weights' dtype
             return net->hidden(net->fc1, x.to(net->fc1->weight.scalar_type()));
         }},
        {"fc2", {"fc2.weight", "fc2.bias"}, [net](const torch::Tensor &x) mutable { return net->hidden(net->fc2, x); }},
        {"fc3", {"fc3.weight", "fc3.bias"}, [net](const torch::Tensor &x) mutable { return net->fc3(x); }},
    };
}

torch::Tensor MlpModel::lossFromOutput(const torch::Tensor &output, const Batch &batch)
{
    // In float32 whatever the logits' dtype (bf16 under --precision bf16):
    // the loss reported, and backward's start.
    return torch::nn::functional::cross_entropy(output.to(torch::kFloat32), batch.target); // ()
}

} // namespace smol::engine
