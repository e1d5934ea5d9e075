// Several collective hooks on one Communicator, called in order before and in
// reverse order after (the trainer's memory snapshots, then breakpoints).
#pragma once

#include "net/communicator.h"

#include <vector>

namespace smol::engine {

class HookChain : public net::CollectiveHook {
public:
    void add(net::CollectiveHook *hook) { m_hooks.push_back(hook); } // not owned
    bool empty() const { return m_hooks.empty(); }
    void before(const net::CollectiveInfo &info) override
    {
        for (auto *h : m_hooks)
            h->before(info);
    }
    void after(const net::CollectiveInfo &info) override
    {
        for (auto it = m_hooks.rbegin(); it != m_hooks.rend(); ++it)
            (*it)->after(info);
    }

private:
    std::vector<net::CollectiveHook *> m_hooks;
};

} // namespace smol::engine
