// The recomputed layer as a custom autograd function; see recompute.h.
#include "engine/models/recompute.h"

#include "engine/strategy.h"

#include <torch/csrc/autograd/custom_function.h>

#include <cstddef>
#include <utility>

namespace smol::engine {

namespace {

// What the autograd node holds besides the saved inputs: the forward and the
// parameters it uses. Kept in the node's saved_data as a capsule, so it lives
// exactly as long as the node (also when backward never runs).
struct Recomputation : torch::CustomClassHolder {
    LayerForward forward;
    std::vector<torch::Tensor> params;
};

constexpr const char *kKey = "recomputation";

struct RecomputedLayer : torch::autograd::Function<RecomputedLayer> {
    // `all`: the layer's inputs, then its parameters (inputs here only so
    // that the node has edges to their gradient accumulators).
    static torch::Tensor forward(torch::autograd::AutogradContext *ctx, torch::TensorList all,
                                 c10::intrusive_ptr<Recomputation> r)
    {
        const std::vector<torch::Tensor> inputs(all.begin(), all.end() - std::ptrdiff_t(r->params.size()));
        ctx->save_for_backward(inputs);
        ctx->saved_data[kKey] = c10::IValue::make_capsule(r);
        return r->forward(inputs); // the gradient is off here (Function::apply)
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext *ctx,
                                                   torch::autograd::variable_list gradOutputs)
    {
        const c10::intrusive_ptr<torch::CustomClassHolder> held = ctx->saved_data.at(kKey).toCapsule();
        const Recomputation *r = static_cast<const Recomputation *>(held.get());
        const std::vector<torch::Tensor> saved = ctx->get_saved_variables();
        const std::size_t n = saved.size();
        // One gradient per tensor of `all`, then none for the Recomputation.
        torch::autograd::variable_list grads(n + r->params.size() + 1);
        std::vector<torch::Tensor> inputs, wrt;
        std::vector<std::size_t> slotOf; // wrt[k]'s position in `grads`
        for (std::size_t i = 0; i < n; ++i) {
            torch::Tensor x = saved[i].detach();
            if (ctx->needs_input_grad(i)) {
                x.requires_grad_(true);
                wrt.push_back(x);
                slotOf.push_back(i);
            }
            inputs.push_back(x);
        }
        for (std::size_t j = 0; j < r->params.size(); ++j)
            if (ctx->needs_input_grad(n + j)) {
                wrt.push_back(r->params[j]);
                slotOf.push_back(n + j);
            }
        if (wrt.empty())
            return grads;
        torch::Tensor out;
        {
            torch::AutoGradMode enable(true);
            out = r->forward(inputs);
        }
        noteStepMemory(); // the layer's activations are all held again now
        if (!out.requires_grad())
            return grads; // forward used none of what needs a gradient
        const auto taken = torch::autograd::grad({out}, wrt, {gradOutputs.at(0)}, /*retain_graph=*/false,
                                                 /*create_graph=*/false, /*allow_unused=*/true);
        for (std::size_t k = 0; k < wrt.size(); ++k)
            grads[slotOf[k]] = taken[k];
        return grads;
    }
};

} // namespace

torch::Tensor recomputed(LayerForward forward, const std::vector<torch::Tensor> &inputs,
                         const std::vector<torch::Tensor> &params)
{
    if (!torch::GradMode::is_enabled())
        return forward(inputs);
    auto r = c10::make_intrusive<Recomputation>();
    r->forward = std::move(forward);
    r->params = params;
    std::vector<torch::Tensor> all = inputs;
    all.insert(all.end(), params.begin(), params.end());
    return RecomputedLayer::apply(torch::TensorList(all), r);
}

torch::Tensor recomputed(std::function<torch::Tensor(const torch::Tensor &)> forward,
                         const torch::Tensor &input, const std::vector<torch::Tensor> &params)
{
    return recomputed([f = std::move(forward)](const std::vector<torch::Tensor> &in) { return f(in.at(0)); },
                      {input}, params);
}

} // namespace smol::engine
