// BreakpointController: decides where the cluster pauses, holds each node in
// its Communicator hook, publishes snapshots of the held buffers, and applies
// the user's resume/step/edit commands. Spec parsing is in breakpoint_spec.cpp,
// snapshot building in tensor_snapshot.cpp.
#include "breakpoints.h"

#include "engine/span_hook.h"

#include <algorithm>
#include <stdexcept>

namespace smol::engine {

void recordPause(const PauseState &pause, SessionEventSink &sink, std::int64_t nowNs)
{
    for (const auto *list : {&pause.inputs, &pause.results})
        for (const TensorSnapshot &t : *list)
            sink.onTensor(TensorRecord{nowNs, pause.id, t.node, t.step, t.kind, t.seq, t.name, t.before,
                                       snapshotToJson(t)});
}


using Clock = std::chrono::steady_clock;

namespace {

bool isFloat(net::DType d)
{
    return d == net::DType::Float32 || d == net::DType::Float64;
}

// Which thread's collective a step() released: its after() reports the result.
struct StepTicket {
    const void *controller = nullptr;
    std::uint64_t stepId = 0;
    bool edited = false;
};
thread_local StepTicket t_ticket;

} // namespace

// ---- the hook ---------------------------------------------------------------

class BreakpointController::Hook : public net::CollectiveHook {
public:
    Hook(BreakpointController *owner, int node, const std::atomic<std::int64_t> *step)
        : m_owner(owner), m_node(node), m_step(step) {}
    void before(const net::CollectiveInfo &info) override { m_owner->before(m_node, stepNow(), info); }
    void after(const net::CollectiveInfo &info) override { m_owner->after(m_node, stepNow(), info); }

private:
    std::int64_t stepNow() const { return m_step ? m_step->load() : 0; }
    BreakpointController *m_owner;
    int m_node;
    const std::atomic<std::int64_t> *m_step;
};

// A thread held in before(), on that thread's stack.
struct BreakpointController::Held {
    int node;
    std::int64_t step;
    net::CollectiveInfo info;
    net::TensorView buffer;
    std::vector<TensorEdit> edits;
    bool stepped = false;
    std::vector<TensorSnapshot> related; // a remote node's (info.related is empty then)
};

BreakpointController::BreakpointController(SnapshotOptions options) : m_options(options) {}

BreakpointController::~BreakpointController()
{
    abort();
}

void BreakpointController::addBreakpoint(const Breakpoint &breakpoint)
{
    std::lock_guard lock(m_mutex);
    if (breakpoint.next && !m_paused) {
        m_pendingPause = true;
        m_pendingReason = "next";
    }
    m_breakpoints.push_back(breakpoint);
}

void BreakpointController::clearBreakpoints()
{
    std::lock_guard lock(m_mutex);
    m_breakpoints.clear();
}

std::vector<Breakpoint> BreakpointController::breakpoints() const
{
    std::lock_guard lock(m_mutex);
    return m_breakpoints;
}

void BreakpointController::setPausedCallback(PausedCallback callback)
{
    std::lock_guard lock(m_mutex);
    m_callback = std::move(callback);
}

void BreakpointController::setSettleTimeout(std::chrono::milliseconds timeout)
{
    std::lock_guard lock(m_mutex);
    m_settleTimeout = timeout;
}

void BreakpointController::beginRun(int nodes)
{
    std::lock_guard lock(m_mutex);
    m_nodes = nodes;
    m_finished.clear();
    m_aborted = false;
    m_decisions.clear();
    m_paused = false;
    m_held.clear();
}

std::unique_ptr<net::CollectiveHook> BreakpointController::makeHook(int node, const std::atomic<std::int64_t> *step)
{
    return std::make_unique<Hook>(this, node, step);
}

void BreakpointController::nodeFinished(int node)
{
    Lock lock(m_mutex);
    m_finished.insert(node);
    notify(lock, publishIfReady()); // the pause may now hold every running node
}

void BreakpointController::abort()
{
    {
        std::lock_guard lock(m_mutex);
        m_aborted = true;
        m_pendingPause = false;
        if (m_paused)
            release(/*stepping=*/false);
        m_changed.notify_all();
    }
    announceHold();
}

void BreakpointController::pauseAtNext()
{
    std::lock_guard lock(m_mutex);
    if (!m_paused && !m_aborted) {
        m_pendingPause = true;
        m_pendingReason = "pause";
    }
}

bool BreakpointController::isPaused() const
{
    std::lock_guard lock(m_mutex);
    return m_paused;
}

std::shared_ptr<const PauseState> BreakpointController::waitForPause(std::chrono::milliseconds timeout,
                                                                     std::uint64_t afterId)
{
    Lock lock(m_mutex);
    m_changed.wait_for(lock, timeout, [&] { return m_published && m_published->id > afterId; });
    return m_published && m_published->id > afterId ? m_published : nullptr;
}

bool BreakpointController::resume()
{
    {
        std::lock_guard lock(m_mutex);
        if (!m_paused)
            return false;
        m_resultsInNextPause = false;
        release(/*stepping=*/false);
    }
    announceHold();
    return true;
}

bool BreakpointController::step()
{
    {
        std::lock_guard lock(m_mutex);
        if (!m_paused)
            return false;
        m_pendingPause = true;
        m_pendingReason = "step";
        m_resultsInNextPause = true;
        release(/*stepping=*/true);
    }
    announceHold();
    return true;
}

void BreakpointController::setHoldCallback(HoldCallback callback)
{
    std::lock_guard hold(m_holdMutex);
    m_holdCallback = std::move(callback);
    m_announcedHeld = false;
}

void BreakpointController::announceHold()
{
    std::lock_guard hold(m_holdMutex);
    bool paused = false;
    {
        std::lock_guard lock(m_mutex);
        paused = m_paused;
    }
    if (paused == m_announcedHeld)
        return;
    m_announcedHeld = paused;
    if (m_holdCallback)
        m_holdCallback(paused);
}

bool BreakpointController::edit(int node, const TensorEdit &e)
{
    std::lock_guard lock(m_mutex);
    if (!m_paused)
        return false;
    for (Held *h : m_held) {
        if (h->node != node || h->buffer.count == 0)
            continue;
        if (e.op == TensorEdit::Op::InjectNaN && !isFloat(h->buffer.dtype))
            throw std::invalid_argument("node " + std::to_string(node) + " holds " +
                                        net::dtypeName(h->buffer.dtype) + " values: no NaN to inject");
        if (e.op == TensorEdit::Op::InjectNaN && e.index >= std::int64_t(h->buffer.count))
            throw std::invalid_argument("element " + std::to_string(e.index) + " is outside node " +
                                        std::to_string(node) + "'s " + std::to_string(h->buffer.count) +
                                        " elements");
        h->edits.push_back(e);
        return true;
    }
    return false;
}

std::shared_ptr<const std::vector<TensorSnapshot>>
BreakpointController::waitForStepResults(std::chrono::milliseconds timeout)
{
    Lock lock(m_mutex);
    const std::uint64_t id = m_stepId;
    if (!m_changed.wait_for(lock, timeout, [&] { return m_stepId != id || m_stepResults.size() >= m_stepExpected; }) ||
        m_stepId != id || id == 0)
        return nullptr;
    auto results = std::make_shared<std::vector<TensorSnapshot>>(m_stepResults);
    std::sort(results->begin(), results->end(), [](const auto &a, const auto &b) { return a.node < b.node; });
    return results;
}

// ---- node side --------------------------------------------------------------

bool BreakpointController::matchesAny(const net::CollectiveInfo &info, std::int64_t atStep, int node,
                                      std::string *reason) const
{
    for (const Breakpoint &b : m_breakpoints)
        if (!b.next && b.matches(info, atStep, node)) {
            *reason = b.text;
            return true;
        }
    return false;
}

void BreakpointController::startPause(const std::string &reason, int hitNode)
{
    m_paused = true;
    ++m_pauseId;
    m_reason = reason;
    m_hitNode = hitNode;
    m_pauseStart = Clock::now();
    m_pendingPause = false;
    m_held.clear();
}

void BreakpointController::before(int node, std::int64_t atStep, const net::CollectiveInfo &info)
{
    const std::uint64_t pauseId = decide(node, atStep, info);
    if (pauseId != 0)
        holdFor(pauseId, node, atStep, info, {});
}

std::uint64_t BreakpointController::decide(int node, std::int64_t atStep, const net::CollectiveInfo &info)
{
    bool began = false;
    const std::uint64_t pauseId = decideHeld(node, atStep, info, began);
    if (began) // a pause this call began holds every transport's waits (not on every collective's path)
        announceHold();
    return pauseId;
}

std::uint64_t BreakpointController::decideHeld(int node, std::int64_t atStep, const net::CollectiveInfo &info,
                                               bool &began)
{
    t_ticket = StepTicket{};
    Lock lock(m_mutex);
    if (m_aborted)
        return 0;
    std::string reason;
    if (!isPointToPoint(info.kind)) {
        // Decided once per collective (of a group: the group's members are
        // the arrivals), by the first node to get there.
        auto [it, fresh] = m_decisions.try_emplace(std::make_pair(info.seq, info.leader()));
        Decision &d = it->second;
        if (fresh) {
            if (m_paused) {
                d.pauseId = m_pauseId;
            } else if (m_pendingPause || matchesAny(info, atStep, node, &reason)) {
                startPause(reason.empty() ? m_pendingReason : reason, node);
                began = true;
                d.pauseId = m_pauseId;
            }
        }
        const std::uint64_t pauseId = d.pauseId;
        if (++d.arrivals >= (info.members ? std::min(info.worldSize, m_nodes) : m_nodes))
            m_decisions.erase(it);
        if (pauseId == 0 || !m_paused || pauseId != m_pauseId)
            return 0; // S runs through (or its pause is already over)
        return pauseId;
    }
    if (!m_paused) {
        if (!m_pendingPause && !matchesAny(info, atStep, node, &reason))
            return 0;
        startPause(reason.empty() ? m_pendingReason : reason, node);
        began = true;
    }
    return m_pauseId;
}

bool BreakpointController::holdFor(std::uint64_t pauseId, int node, std::int64_t atStep,
                                   const net::CollectiveInfo &info, std::vector<TensorSnapshot> related)
{
    Lock lock(m_mutex);
    if (m_aborted || !m_paused || m_pauseId != pauseId)
        return false; // released while the caller fetched the buffer
    hold(lock, node, atStep, info, std::move(related));
    return t_ticket.controller == this;
}

void BreakpointController::hold(Lock &lock, int node, std::int64_t atStep, const net::CollectiveInfo &info,
                                std::vector<TensorSnapshot> related)
{
    noteHeldAtCollective(); // the timeline's Pause span (span_hook.h)
    // Only what this node contributes is shown and edited (an all-gather's
    // own chunk; nothing of a recv): the rest is not written yet.
    const net::BufferPart part = net::contributedPart(info, /*before=*/true);
    // The related tensors are shown, never edited: only the buffer is.
    Held held{node, atStep, info, part.whole ? info.buffer : info.buffer.slice(part.offset, part.count), {}, false,
              std::move(related)};
    m_held.push_back(&held);
    // Before notify(): it unlocks, and a command may release us meanwhile.
    const std::uint64_t generation = m_generation;
    notify(lock, publishIfReady());
    while (m_generation == generation && !m_aborted) {
        m_changed.wait_for(lock, std::chrono::milliseconds(100));
        if (m_generation == generation)
            notify(lock, publishIfReady()); // the settle timeout may have passed
    }
    // Released: release() already took us off m_held.
    for (const TensorEdit &e : held.edits)
        applyEdit(info.buffer, e);
    if (held.stepped)
        t_ticket = StepTicket{this, m_stepId, !held.edits.empty()};
}

void BreakpointController::after(int node, std::int64_t atStep, const net::CollectiveInfo &info)
{
    if (t_ticket.controller != this)
        return;
    const StepTicket ticket = t_ticket;
    t_ticket = StepTicket{};
    TensorSnapshot s = takePartSnapshot(info, /*before=*/false, node, atStep, m_options);
    s.edited = ticket.edited;
    std::lock_guard lock(m_mutex);
    if (ticket.stepId != m_stepId)
        return;
    m_stepResults.push_back(std::move(s));
    m_changed.notify_all();
}

std::shared_ptr<const PauseState> BreakpointController::publishIfReady()
{
    if (!m_paused || m_held.empty() || (m_published && m_published->id == m_pauseId))
        return nullptr;
    std::set<int> heldNodes;
    for (const Held *h : m_held)
        heldNodes.insert(h->node);
    bool everyone = true;
    for (int n = 0; n < m_nodes; ++n)
        everyone = everyone && (m_finished.count(n) || heldNodes.count(n));
    if (!everyone && Clock::now() - m_pauseStart < m_settleTimeout)
        return nullptr;
    auto state = std::make_shared<PauseState>();
    state->id = m_pauseId;
    state->reason = m_reason;
    state->hitNode = m_hitNode;
    state->complete = everyone;
    // Held threads are blocked and their buffers unchanged until released.
    for (const Held *h : m_held) {
        state->inputs.push_back(takePartSnapshot(h->info, /*before=*/true, h->node, h->step, m_options));
        if (state->inputs.back().related.empty())
            state->inputs.back().related = h->related;
    }
    std::stable_sort(state->inputs.begin(), state->inputs.end(), [](const auto &a, const auto &b) { return a.node < b.node; });
    if (m_resultsInNextPause)
        state->results = m_stepResults;
    std::sort(state->results.begin(), state->results.end(), [](const auto &a, const auto &b) { return a.node < b.node; });
    m_published = state;
    return state;
}

void BreakpointController::notify(Lock &lock, const std::shared_ptr<const PauseState> &state)
{
    if (!state)
        return;
    m_changed.notify_all();
    const PausedCallback callback = m_callback;
    lock.unlock();
    if (callback)
        callback(state);
    lock.lock();
}

void BreakpointController::release(bool stepping)
{
    if (stepping) {
        ++m_stepId;
        m_stepExpected = m_held.size();
        m_stepResults.clear();
    }
    for (Held *h : m_held)
        h->stepped = stepping;
    m_held.clear();
    m_paused = false;
    ++m_generation;
    m_changed.notify_all();
}

} // namespace smol::engine
