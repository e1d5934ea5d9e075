#include "local_nodes.h"

#include "engine/cluster/coordinator.h"

#include <atomic>
#include <chrono>

namespace smol::app {

LocalNodes::LocalNodes(engine::Coordinator &coordinator, const engine::NodeAgentOptions &agent)
    : m_coordinator(coordinator)
    , m_agent(agent)
{
}

LocalNodes::~LocalNodes()
{
    stop();
    join();
}

void LocalNodes::add()
{
    engine::NodeAgentOptions o = m_agent;
    o.port = m_coordinator.port();
    o.memorySlot = count();
    o.inProcess = true;
    m_threads.emplace_back([this, o] { runAgent(o); });
}

void LocalNodes::runAgent(engine::NodeAgentOptions o)
{
    {
        std::unique_lock lock(m_mutex);
        m_cv.wait(lock, [this] { return !m_joining || m_closing; });
        if (m_closing)
            return;
        m_joining = true;
    }
    std::once_flag joined;
    const auto letNextJoin = [this, &joined] {
        std::call_once(joined, [this] {
            {
                std::lock_guard lock(m_mutex);
                m_joining = false;
            }
            m_cv.notify_all();
        });
    };
    std::atomic<bool> inCluster{false};
    for (int attempt = 1;; ++attempt) {
        o.name = "local-" + std::to_string(m_coordinator.nodes().size());
        try {
            engine::runNodeAgent(o, [&](const std::string &line) {
                if (line.rfind("joined the coordinator", 0) == 0) {
                    inCluster = true;
                    letNextJoin();
                }
            });
            break;
        } catch (const std::exception &e) {
            std::unique_lock lock(m_mutex);
            if (inCluster || m_closing || attempt >= kJoinAttempts) {
                if (!inCluster && !m_closing)
                    m_failures.push_back(o.name + ": " + e.what());
                break;
            }
            m_cv.wait_for(lock, std::chrono::milliseconds(50 * attempt), [this] { return m_closing; });
        }
    }
    letNextJoin(); // it could not join, or it has left
}

std::vector<std::string> LocalNodes::takeFailures()
{
    std::lock_guard lock(m_mutex);
    return std::exchange(m_failures, {});
}

void LocalNodes::stop()
{
    std::unique_lock lock(m_mutex);
    m_closing = true;
    m_cv.notify_all();
    m_cv.wait(lock, [this] { return !m_joining; });
}

void LocalNodes::join()
{
    for (auto &t : m_threads)
        if (t.joinable())
            t.join();
}

} // namespace smol::app
