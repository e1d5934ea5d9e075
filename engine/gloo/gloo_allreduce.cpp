// c10d's ProcessGroupGloo all-reduce, timed: the yardstick our own TCP ring
// is compared against in `smolctl bench allreduce`.
//
// What it does: starts `nodes` threads; each builds its own tcp device on
// 127.0.0.1 and its own ProcessGroupGloo (rendezvous through one shared
// HashStore), exactly as separate processes would. Then, per iteration:
//   1. refill the input (the all-reduce is in place)          -- untimed
//   2. meet every rank at a barrier, so all start together
//   3. allreduce(SUM) + wait(), timed with steady_clock      -- per rank
// An iteration costs its slowest rank; secondsPerIter is the mean over the
// timed iterations. Gloo picks its ring (reduce-scatter then all-gather):
// each rank sends and receives 2 (N-1)/N x bytes per iteration.
//
// What it does not do: no GPUs, no other collectives, no multi-process or
// multi-host runs, no tuning: Gloo keeps torch.distributed's defaults (two
// worker threads per group, its own algorithm choice). It leaves LibTorch's
// global state (e.g. intra-op threads) alone.
#include "engine/gloo/gloo_allreduce.h"

#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

namespace smol::engine {

namespace {

constexpr std::chrono::seconds kGlooTimeout{60};

struct BarrierAborted {};

// std::barrier is C++20. This one can be aborted, so that one failing rank
// releases the others instead of leaving them waiting forever.
class AbortableBarrier {
public:
    explicit AbortableBarrier(int count) : m_count(count) {}

    void arriveAndWait()
    {
        std::unique_lock lock(m_mutex);
        if (m_aborted) throw BarrierAborted{};
        const long generation = m_generation;
        if (++m_arrived == m_count) {
            m_arrived = 0;
            ++m_generation;
            m_cv.notify_all();
            return;
        }
        m_cv.wait(lock, [&] { return m_generation != generation || m_aborted; });
        if (m_generation == generation) throw BarrierAborted{};
    }

    void abort()
    {
        std::lock_guard lock(m_mutex);
        m_aborted = true;
        m_cv.notify_all();
    }

private:
    std::mutex m_mutex;
    std::condition_variable m_cv;
    const int m_count;
    int m_arrived = 0;
    long m_generation = 0;
    bool m_aborted = false;
};

// (count,) = (r + 1) * ((i % 251) + 1), without a division per element.
void fillInput(float *data, std::size_t count, int rank)
{
    for (std::size_t i = 0; i < count;) {
        for (int k = 1; k <= 251 && i < count; ++k, ++i)
            data[i] = float((rank + 1) * k);
    }
}

std::string firstLine(const std::string &text)
{
    return text.substr(0, text.find('\n'));
}

} // namespace

GlooAllreduceResult runGlooAllreduce(int nodes, std::size_t bytes, int warmup, int iters)
{
    if (nodes < 1 || bytes < sizeof(float) || bytes % sizeof(float) != 0 || warmup < 0 || iters < 1)
        throw std::runtime_error("gloo all-reduce: need nodes >= 1, bytes a positive multiple of 4, "
                                 "warmup >= 0, iters >= 1");
    const std::size_t count = bytes / sizeof(float);
    auto store = c10::make_intrusive<c10d::HashStore>();
    AbortableBarrier barrier(nodes);
    std::vector<std::vector<double>> seconds(nodes, std::vector<double>(iters)); // (rank, iter)
    std::vector<at::Tensor> outputs(nodes);
    std::vector<std::string> errors(nodes);
    std::atomic<int> firstFailed{-1}; // the rank that failed first-hand, not one it aborted

    auto rankMain = [&](int rank) {
        try {
            auto options = c10d::ProcessGroupGloo::Options::create(kGlooTimeout);
            options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
            auto group = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, nodes, options);
            std::vector<at::Tensor> tensors{torch::empty({int64_t(count)}, torch::kFloat32)};
            for (int it = 0; it < warmup + iters; ++it) {
                fillInput(tensors[0].data_ptr<float>(), count, rank);
                barrier.arriveAndWait();
                const auto start = std::chrono::steady_clock::now();
                group->allreduce(tensors)->wait();
                const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
                if (it >= warmup) seconds[rank][it - warmup] = took.count();
            }
            outputs[rank] = tensors[0];
            barrier.arriveAndWait(); // no rank tears down its pairs while a peer still uses them
            return;
        } catch (const BarrierAborted &) {
            return;
        } catch (const c10::Error &e) {
            errors[rank] = firstLine(e.what_without_backtrace());
        } catch (const std::exception &e) {
            errors[rank] = firstLine(e.what());
        }
        int none = -1;
        firstFailed.compare_exchange_strong(none, rank);
        barrier.abort();
    };

    std::vector<std::thread> threads;
    for (int rank = 0; rank < nodes; ++rank)
        threads.emplace_back(rankMain, rank);
    for (auto &thread : threads)
        thread.join();

    if (const int rank = firstFailed.load(); rank >= 0)
        throw std::runtime_error("gloo all-reduce: rank " + std::to_string(rank) + ": " + errors[rank]);

    GlooAllreduceResult result;
    for (int it = 0; it < iters; ++it) {
        double slowest = 0;
        for (int rank = 0; rank < nodes; ++rank)
            slowest = std::max(slowest, seconds[rank][it]);
        result.secondsPerIter += slowest / iters;
    }
    const float *first = outputs[0].data_ptr<float>();
    result.result.assign(first, first + count);
    result.ranksAgree = std::all_of(outputs.begin(), outputs.end(), [&](const at::Tensor &out) {
        return std::memcmp(out.data_ptr<float>(), first, bytes) == 0;
    });
    return result;
}

} // namespace smol::engine
