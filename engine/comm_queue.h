// A node's communication thread, as PyTorch's DDP reducer and FSDP use a
// separate stream for collectives: the compute thread hands it jobs (each one
// or more collectives on the node's Communicator) and goes on computing; the
// jobs run one at a time in the order they were submitted, so every node
// issues the same sequence of collectives whatever its timing. wait(ticket)
// blocks until that job (and every earlier one) has run.
//
// Once a strategy uses a queue, every collective of its steps goes through
// it (a Communicator is called from one thread at a time); between steps,
// with the queue drained, the compute thread may call the Communicator
// directly (fullParameters, checkpoints).
//
// The thread charges its allocations to the node's memory slot, and the
// collective hooks (spans, memory, breakpoints) run on it: a pause holds the
// communication thread while backward goes on up to the point where it must
// wait for that collective's result.
//
// A job that throws (a peer failed, a breakpoint was aborted) fails every
// later job unrun; wait() and drain() rethrow the first error. The
// destructor, if a job is still running (the compute thread left by an
// exception), calls `abandon` first (abort the transport: the collective
// fails at once instead of waiting for a peer that waits for us), then joins.
// No LibTorch in this header.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace smol::engine {

class CommQueue {
public:
    CommQueue(int memorySlot, std::function<void()> abandon);
    ~CommQueue();
    CommQueue(const CommQueue &) = delete;
    CommQueue &operator=(const CommQueue &) = delete;

    // Returns the job's ticket (1, 2, ... in submission order).
    std::uint64_t submit(std::function<void()> job);
    // Blocks until job `ticket` has run; rethrows the queue's first error.
    void wait(std::uint64_t ticket);
    // wait() for everything submitted so far.
    void drain();
    // Nanoseconds the compute thread spent blocked in wait()/drain() since
    // the last call (the part of communication not hidden under compute).
    std::int64_t takeWaitNs();

private:
    void loop();

    int m_slot;
    std::function<void()> m_abandon;
    std::mutex m_mutex;
    std::condition_variable m_cv;
    std::deque<std::function<void()>> m_jobs;
    std::uint64_t m_submitted = 0;
    std::uint64_t m_done = 0;  // jobs finished (run or skipped)
    bool m_running = false;    // a job is executing
    bool m_stop = false;
    std::exception_ptr m_error;
    std::int64_t m_waitNs = 0;
    std::thread m_thread;
};

} // namespace smol::engine
