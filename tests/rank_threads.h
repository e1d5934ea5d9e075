// Test helper: run one function per rank, each on its own thread, over a
// local mesh, and report the first failure with its rank.
#pragma once

#include "net/communicator.h"
#include "net/transport.h"

#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace smol::test {

inline std::string runRanks(std::vector<std::unique_ptr<net::Transport>> &ranks,
                            const std::function<void(int rank, net::Communicator &comm)> &body)
{
    std::mutex mutex;
    std::string firstError;
    std::vector<std::thread> threads;
    for (std::size_t r = 0; r < ranks.size(); ++r) {
        threads.emplace_back([&, r] {
            try {
                net::Communicator comm(*ranks[r]);
                comm.setSegmentBytes(64 * 1024); // several segments per chunk even in small cases
                body(int(r), comm);
            } catch (const std::exception &e) {
                std::lock_guard lock(mutex);
                if (firstError.empty())
                    firstError = "rank " + std::to_string(r) + ": " + e.what();
            }
        });
    }
    for (auto &t : threads)
        t.join();
    return firstError;
}

} // namespace smol::test
