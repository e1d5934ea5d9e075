// What one pipeline stage sends its neighbours (pipeline.cpp, and the pp axis
// of mesh.cpp): the forward activation of each micro-batch to the next stage,
// its gradient back to the previous one; the activation's shape once per run
// before the first (a 72-byte header: ndim, then up to 8 sizes).
#pragma once

#include "engine/tensor_bridge.h"
#include "net/communicator.h"

#include <torch/torch.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace smol::engine {

class StageLink {
public:
    static constexpr std::int64_t kShapeSlots = 1 + 8;

    // `comm` ranks: prev/next are the neighbouring stages' (-1: none).
    // Activations and their gradients travel in `dtype`, the parameters'
    // (float32, or bfloat16 under --precision bf16).
    StageLink(net::Communicator *comm, int prev, int next, torch::ScalarType dtype = torch::kFloat32)
        : m_comm(comm), m_prev(prev), m_next(next), m_dtype(dtype)
    {
    }

    // Micro-batch j's input from the previous stage (a leaf requiring grad).
    torch::Tensor receiveActivation(std::int64_t j)
    {
        if (m_inShape.empty()) { // once per run: the activation's shape
            torch::Tensor header = torch::empty({kShapeSlots}, torch::kInt64);
            m_comm->recv(m_prev, viewOf(header), "activation.shape");
            m_inShape.assign(header.data_ptr<std::int64_t>() + 1,
                             header.data_ptr<std::int64_t>() + 1 + header[0].item<std::int64_t>());
        }
        torch::Tensor input = torch::empty(m_inShape, m_dtype);
        m_comm->recv(m_prev, viewOf(input), "activation." + std::to_string(j));
        return input.requires_grad_(true);
    }

    // Micro-batch j's output to the next stage. `stage` names it in an error.
    void sendActivation(const torch::Tensor &output, std::int64_t j, int stage)
    {
        const torch::Tensor out = output.detach().contiguous();
        if (out.scalar_type() != m_dtype || out.dim() > kShapeSlots - 1)
            throw std::logic_error("pipeline: stage " + std::to_string(stage) + " must output a " +
                                   c10::toString(m_dtype) + " tensor of at most 8 dimensions");
        if (!m_shapeSent) {
            torch::Tensor header = torch::zeros({kShapeSlots}, torch::kInt64);
            header[0] = out.dim();
            for (int d = 0; d < out.dim(); ++d)
                header[d + 1] = out.size(d);
            m_comm->send(m_next, viewOf(header), "activation.shape");
            m_shapeSent = true;
        }
        m_comm->send(m_next, viewOf(out), "activation." + std::to_string(j));
    }

    // The gradient of micro-batch j's output, from the next stage.
    torch::Tensor receiveGradient(const torch::Tensor &output, std::int64_t j)
    {
        torch::Tensor grad = torch::empty(output.sizes(), output.scalar_type());
        m_comm->recv(m_next, viewOf(grad), "activation.grad." + std::to_string(j));
        return grad;
    }

    // The gradient of micro-batch j's input, to the previous stage.
    void sendGradient(const torch::Tensor &inputGrad, std::int64_t j)
    {
        m_comm->send(m_prev, viewOf(inputGrad), "activation.grad." + std::to_string(j));
    }

private:
    net::Communicator *m_comm;
    int m_prev, m_next;
    torch::ScalarType m_dtype;
    std::vector<std::int64_t> m_inShape; // of the activation received
    bool m_shapeSent = false;
};

} // namespace smol::engine
