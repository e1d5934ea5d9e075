// Completion state behind a SendTicket; shared by the transports.
#pragma once

#include "transport.h"

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>

namespace smol::net {

struct SendTicket::State {
    std::mutex mutex;
    std::condition_variable cv;
    bool done = false;
    std::string error; // non-empty: the send failed
    int peer = -1;
    std::size_t bytes = 0;
    std::chrono::milliseconds timeout{10000};
    // Called on a timed-out wait: must stop the transport from touching the
    // caller's buffer (TCP closes the link) before the wait throws.
    std::function<void()> cancel;

    static std::shared_ptr<State> make(int peer, std::size_t bytes, std::chrono::milliseconds timeout);
    void finish(const std::string &error = {});
};

} // namespace smol::net
