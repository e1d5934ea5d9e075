#include "comm_queue.h"

#include "memory_tracker.h"

#include <chrono>

namespace smol::engine {

namespace {
std::int64_t nowNs()
{
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}
} // namespace

CommQueue::CommQueue(int memorySlot, std::function<void()> abandon)
    : m_slot(memorySlot)
    , m_abandon(std::move(abandon))
    , m_thread([this] { loop(); })
{
}

CommQueue::~CommQueue()
{
    bool busy = false;
    {
        std::lock_guard lock(m_mutex);
        m_stop = true;
        busy = m_running;
        m_jobs.clear(); // not started: dropped (counted done below for any waiter)
        m_done = m_submitted - (busy ? 1 : 0);
    }
    m_cv.notify_all();
    if (busy && m_abandon)
        m_abandon();
    m_thread.join();
}

std::uint64_t CommQueue::submit(std::function<void()> job)
{
    std::uint64_t ticket = 0;
    {
        std::lock_guard lock(m_mutex);
        m_jobs.push_back(std::move(job));
        ticket = ++m_submitted;
    }
    m_cv.notify_all();
    return ticket;
}

void CommQueue::wait(std::uint64_t ticket)
{
    const std::int64_t t0 = nowNs();
    std::unique_lock lock(m_mutex);
    m_cv.wait(lock, [&] { return m_done >= ticket || m_error; });
    m_waitNs += nowNs() - t0;
    if (m_error)
        std::rethrow_exception(m_error);
}

void CommQueue::drain()
{
    std::uint64_t last = 0;
    {
        std::lock_guard lock(m_mutex);
        last = m_submitted;
    }
    wait(last);
}

std::int64_t CommQueue::takeWaitNs()
{
    std::lock_guard lock(m_mutex);
    const std::int64_t ns = m_waitNs;
    m_waitNs = 0;
    return ns;
}

void CommQueue::loop()
{
    memory::NodeScope scope(m_slot);
    std::unique_lock lock(m_mutex);
    for (;;) {
        m_cv.wait(lock, [&] { return m_stop || !m_jobs.empty(); });
        if (m_stop)
            return;
        std::function<void()> job = std::move(m_jobs.front());
        m_jobs.pop_front();
        const bool skip = bool(m_error);
        m_running = true;
        lock.unlock();
        std::exception_ptr error;
        if (!skip) {
            try {
                job();
            } catch (...) {
                error = std::current_exception();
            }
        }
        job = nullptr; // its captures go on this thread, before the waiter runs on
        lock.lock();
        m_running = false;
        if (error && !m_error)
            m_error = error;
        ++m_done;
        m_cv.notify_all();
    }
}

} // namespace smol::engine
