// edp: elastic asynchronous parameter server, for clusters of unequal machines.
//
// Rank 0 is the server: it holds the parameters, the optimizer state and a
// version (the number of updates applied so far) and computes nothing. Ranks
// 1..N-1 are workers; each of their steps takes B/(N-1) samples (when N-1
// does not divide B, workers 1..B % (N-1) take one more, and weight their
// loss by rows x (N-1) / B, batchWeight: pushes are applied one at a time,
// so without it a sample in a smaller share would move the weights more; with
// it every sample counts the same, whichever worker drew it). Nobody waits
// for everybody: every worker loops at its own pace,
//   1. pull: asks the server for weights; the reply is (version v, params)
//      or "stop";
//   2. computes gradients of its samples on version v;
//   3. push: sends (v, loss, gradients) to the server, and goes back to 1
//      (the push doubles as the next pull request).
// The server runs one handler thread per worker and applies pushes one at a
// time, in arrival order:
//   staleness s = server version now - v    (updates others made meanwhile)
//   params <- optimizer(params, grad / (1 + s));  version += 1
// so a gradient computed on older weights counts for less.
//
// Staleness bound K (maxStaleness), enforced by the protocol: no push is
// applied with s > K. A worker is "in flight" from the pull that hands it
// version v until its push is applied. A push is applied only if, after it,
// every other in-flight worker could still land within K were the pushes
// applied oldest first; otherwise it is held, and its sender waits for fresh
// weights until the straggler's push lands. The oldest in-flight push is
// always admissible, so the bound never deadlocks. At most K+1 workers are in
// flight at once; further workers queue for weights, first come first served.
//
// Elastic: a worker may leave (its last push says so; the server forgets it);
// a worker whose connection is lost (its process killed, its machine gone)
// is forgotten the same way, and its push in flight with it; a worker that
// joins late starts with a pull, so it computes on the current weights. After `steps` updates the server answers every request with
// "stop"; pushes still in flight are discarded. The server's parameters go
// to the coordinator every 100 updates or 10 s (kept_checkpoint.h): when the
// server is lost, the cluster re-forms from them, the server's version
// counting on from the checkpoint's (NodeContext::firstStep).
//
// Holds: server: parameters, optimizer state, and per worker one gradient
// buffer and one parameter snapshot for its pulls (4P each); workers:
// parameters and gradients.
// Bytes on the wire per worker step: 4P + 32 up (header, gradients) and
// 4P + 32 down (header, parameters). Per server update the server's link
// carries the same 8P + 64, but no worker waits for the slowest one.
#include "edp.h"

#include "engine/strategy.h"

#include "engine/flat_params.h"
#include "engine/memory_tracker.h"
#include "engine/tensor_bridge.h"
#include "net/communicator.h"
#include "net/errors.h"
#include "net/transport.h"

#include <QtGlobal>

#include <algorithm>
#include <array>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace smol::engine {

namespace {

using Clock = std::chrono::steady_clock;

// Every message starts with 4 float64 (exact up to 2^53): type, version,
// the worker's step, its loss.
enum class Msg { Hello = 1, Push = 2, PushAndLeave = 3, Params = 4, Stop = 5 };

struct Header {
    Msg type = Msg::Hello;
    std::int64_t version = 0;
    std::int64_t step = 0;
    double loss = 0;
};

void sendHeader(net::Communicator &comm, int peer, const Header &h, net::CollectiveKind kind)
{
    std::array<double, 4> raw{double(h.type), double(h.version), double(h.step), h.loss};
    comm.send(peer, net::TensorView{raw.data(), raw.size(), net::DType::Float64, net::Shape::vector(4)},
              "edp.header", kind);
}

Header recvHeader(net::Communicator &comm, int peer, net::CollectiveKind kind)
{
    std::array<double, 4> raw{};
    comm.recv(peer, net::TensorView{raw.data(), raw.size(), net::DType::Float64, net::Shape::vector(4)},
              "edp.header", kind);
    if (!(raw[0] >= double(Msg::Hello) && raw[0] <= double(Msg::Stop)))
        throw std::runtime_error("edp: message of unknown type " + std::to_string(raw[0]) + " from rank " +
                                 std::to_string(peer));
    return Header{Msg(int(raw[0])), std::int64_t(raw[1]), std::int64_t(raw[2]), raw[3]};
}

class EdpStrategy : public Strategy {
public:
    ~EdpStrategy() override
    {
        {
            std::lock_guard lock(m_mutex);
            m_stopped = true;
        }
        m_changed.notify_all();
        joinHandlers();
    }

    std::string name() const override { return strategies::kEdp.name; }

    void setup(NodeContext &ctx) override
    {
        if (ctx.nodes < 2)
            throw std::invalid_argument("edp needs at least 2 nodes (a server and a worker)");
        if (ctx.maxStaleness < 0)
            throw std::invalid_argument("edp: the staleness bound must be at least 0");
        if (ctx.steps < 1)
            throw std::invalid_argument("edp: --steps must be at least 1");
        m_ctx = ctx;
        m_flat = std::make_unique<FlatParams>(ctx.model->namedParameters());
        if (ctx.firstStep < 0 || ctx.firstStep >= ctx.steps)
            throw std::invalid_argument("edp: cannot resume at update " + std::to_string(ctx.firstStep) + " of " +
                                        std::to_string(ctx.steps));
        m_version = ctx.firstStep; // a resumed server counts on from its checkpoint
        if (!isServer()) {
            m_flat->attachGrads();
            return;
        }
        m_opt = std::make_unique<FlatOptimizer>(ctx.optimizer, m_flat->numel());
        m_workers.assign(std::size_t(ctx.nodes), Worker{});
        m_updateLoss.assign(std::size_t(ctx.steps), std::nan(""));
        m_histogram.assign(std::size_t(ctx.maxStaleness + 1), 0);
        for (int w = 1; w < ctx.nodes; ++w) {
            m_workers[std::size_t(w)].grads = torch::empty({m_flat->numel()}, m_flat->dtype());
            m_workers[std::size_t(w)].snapshot = torch::empty({m_flat->numel()}, m_flat->dtype());
        }
        m_liveHandlers = ctx.nodes - 1;
        for (int w = 1; w < ctx.nodes; ++w)
            m_handlers.emplace_back([this, w] { serve(w); });
    }

    // Server: waits for update `step` (applied by a handler) and returns the
    // loss its worker pushed. Worker: one pull-compute-push round.
    double step(std::int64_t step) override { return isServer() ? awaitUpdate(step) : work(step); }

    net::MemoryByCategory memory() const override
    {
        net::MemoryByCategory m;
        m.params = m_flat->values().nbytes();
        if (isServer()) {
            for (const auto &t : m_opt->state())
                m.optimizer += t.nbytes();
            for (const auto &w : m_workers)
                if (w.grads.defined()) {
                    m.grads += w.grads.nbytes();
                    m.comm += w.snapshot.nbytes();
                }
        } else {
            m.grads = m_flat->grads().nbytes();
        }
        return m;
    }

    torch::Tensor fullParameters() override
    {
        std::lock_guard lock(m_mutex);
        return m_flat->values().clone();
    }

    std::vector<ShardRange> shards() const override
    {
        std::vector<ShardRange> out;
        for (const auto &s : m_flat->slots())
            out.push_back({s.name, 0, s.numel, 0, true}); // updated by the server, copied to workers
        return out;
    }

    bool isDataParallel() const override { return false; }
    bool isAsynchronous() const override { return true; }
    void checkContext(const ModelConfig &, const NodeContext &ctx) const override
    {
        refuseAccumulation(ctx, "edp is asynchronous: each worker pushes its own gradients as soon as it has them; "
                                "give it a larger --global-batch instead");
    }
    bool finished() const override { return m_finished; }
    // One update is one worker's push: B/(N-1) samples (rounded down when the
    // shares differ by a row).
    std::int64_t samplesPerStep(std::int64_t globalBatch, int nodes) const override
    {
        return nodes > 1 ? globalBatch / (nodes - 1) : globalBatch;
    }

    AsyncStats asyncStats() const override
    {
        AsyncStats s;
        if (!isServer())
            return s;
        std::lock_guard lock(m_mutex);
        s.updates = m_version;
        s.maxStaleness = m_maxStaleness;
        s.stalenessHistogram = m_histogram;
        for (const auto &w : m_workers) {
            s.pushes.push_back(w.pushes);
            s.discarded.push_back(w.discarded);
            s.waits.push_back(w.waits);
            s.joinedAt.push_back(w.joinedAt);
            s.lost.push_back(w.lost);
        }
        s.joinedAt[0] = -1;
        return s;
    }

private:
    // The server's view of one worker. Guarded by m_mutex, except the two
    // buffers, which only that worker's handler touches outside the lock.
    struct Worker {
        bool inFlight = false; // holds version `version` and owes a push
        std::int64_t version = 0;
        std::int64_t pushes = 0;
        std::int64_t discarded = 0;
        std::int64_t waits = 0; // times the bound made it wait
        std::int64_t joinedAt = -1;
        std::int64_t lost = 0;  // 1: its connection was lost mid-run
        torch::Tensor grads;    // (P) the push being applied
        torch::Tensor snapshot; // (P) the parameters of its last pull
    };

    bool isServer() const { return m_ctx.rank == 0; }

    // ---- worker ----------------------------------------------------------

    double work(std::int64_t step)
    {
        net::Communicator &comm = *m_ctx.comm;
        if (!m_joined) {
            m_joined = true;
            sendHeader(comm, 0, Header{Msg::Hello, -1, step, 0}, net::CollectiveKind::Push);
            if (!pull())
                return std::nan("");
        }
        m_flat->grads().zero_();
        const auto t0 = Clock::now();
        const Batch batch = m_ctx.data->trainBatch(step, m_ctx.globalBatch, m_ctx.rank - 1, m_ctx.nodes - 1);
        const torch::Tensor lossTensor = timed(m_ctx, SpanEvent::Kind::Forward, step, [&] { return m_ctx.model->loss(batch); });
        const double weight = batchWeight(m_ctx.globalBatch, m_ctx.rank - 1, m_ctx.nodes - 1);
        timed(m_ctx, SpanEvent::Kind::Backward, step, [&] { weightedLoss(lossTensor, weight).backward(); });
        stretchCompute(m_ctx, t0);
        const double loss = lossTensor.item<double>();
        ++m_localSteps;
        const bool leaving = m_ctx.behaviour.leaveAfter > 0 && m_localSteps >= m_ctx.behaviour.leaveAfter;
        sendHeader(comm, 0, Header{leaving ? Msg::PushAndLeave : Msg::Push, m_version, step, loss},
                   net::CollectiveKind::Push);
        comm.send(0, viewOf(m_flat->grads()), "grads", net::CollectiveKind::Push);
        if (leaving)
            m_finished = true;
        else
            pull();
        return loss;
    }

    // The server's reply: fresh parameters (true) or stop (false).
    bool pull()
    {
        const Header h = recvHeader(*m_ctx.comm, 0, net::CollectiveKind::Pull);
        if (h.type == Msg::Stop) {
            m_finished = true;
            return false;
        }
        if (h.type != Msg::Params)
            throw std::runtime_error("edp: expected parameters or stop from the server");
        m_ctx.comm->recv(0, viewOf(m_flat->values()), "params", net::CollectiveKind::Pull);
        m_version = h.version;
        return true;
    }

    // ---- server ----------------------------------------------------------

    double awaitUpdate(std::int64_t step)
    {
        std::unique_lock lock(m_mutex);
        m_changed.wait(lock, [&] { return m_version > step || !m_error.empty() || m_liveHandlers == 0; });
        if (!m_error.empty())
            throw std::runtime_error(m_error);
        if (m_version <= step)
            throw std::runtime_error("edp: every worker left after " + std::to_string(m_version) + " of " +
                                     std::to_string(m_ctx.steps) + " updates");
        const double loss = m_updateLoss[std::size_t(step)];
        lock.unlock();
        if (step + 1 == m_ctx.steps) { // the last update: every worker is told to stop
            joinHandlers();
            if (!m_error.empty())
                throw std::runtime_error(m_error);
        }
        return loss;
    }

    // One thread per worker on the server, charged to node 0.
    void serve(int w)
    {
        memory::NodeScope scope(0);
        net::Communicator &comm = *m_ctx.comm;
        try {
            if (recvHeader(comm, w, net::CollectiveKind::Push).type != Msg::Hello)
                throw std::runtime_error("expected hello");
            while (reply(w)) {
                const Header h = recvHeader(comm, w, net::CollectiveKind::Push);
                if (h.type != Msg::Push && h.type != Msg::PushAndLeave)
                    throw std::runtime_error("expected a push");
                comm.recv(w, viewOf(m_workers[std::size_t(w)].grads), "grads", net::CollectiveKind::Push);
                apply(w, h);
                if (h.type == Msg::PushAndLeave)
                    break;
            }
        } catch (const net::PeerError &e) {
            // The worker is gone (killed, or its link broke): carry on without it.
            std::lock_guard lock(m_mutex);
            ++m_workers[std::size_t(w)].lost;
            qWarning("edp server: worker %d lost, training on without it: %s", w, e.what());
        } catch (const std::exception &e) {
            {
                std::lock_guard lock(m_mutex);
                if (m_error.empty())
                    m_error = "edp server, handling worker " + std::to_string(w) + ": " + e.what();
                m_stopped = true;
            }
            try {
                comm.transport().abort(); // the others' waits on this node fail now, not at a timeout
            } catch (const net::NetError &) {
                // --backend gloo has no transport of ours: its waits end at Gloo's timeout.
            }
        }
        std::lock_guard lock(m_mutex);
        m_workers[std::size_t(w)].inFlight = false;
        --m_liveHandlers;
        admitWaiting();
    }

    // Queue w for fresh weights; send them when admitted, or stop.
    bool reply(int w)
    {
        Worker &me = m_workers[std::size_t(w)];
        bool admitted = false;
        std::int64_t version = 0;
        {
            std::unique_lock lock(m_mutex);
            if (!m_stopped) {
                m_queue.push_back(w);
                admitWaiting();
                if (!me.inFlight && !m_stopped)
                    ++me.waits; // K+1 workers already in flight
                m_changed.wait(lock, [&] { return me.inFlight || m_stopped; });
            }
            m_queue.erase(std::remove(m_queue.begin(), m_queue.end(), w), m_queue.end());
            admitted = me.inFlight && !m_stopped;
            me.inFlight = admitted;
            version = me.version;
        }
        if (!admitted) {
            sendHeader(*m_ctx.comm, w, Header{Msg::Stop, 0, 0, 0}, net::CollectiveKind::Pull);
            return false;
        }
        sendHeader(*m_ctx.comm, w, Header{Msg::Params, version, 0, 0}, net::CollectiveKind::Pull);
        m_ctx.comm->send(w, viewOf(me.snapshot), "params", net::CollectiveKind::Pull);
        return true;
    }

    // Under m_mutex: hand the current weights to queued workers while fewer
    // than K+1 are in flight. Their snapshot is taken now, at their version.
    void admitWaiting()
    {
        auto inFlight = [&] {
            return std::count_if(m_workers.begin(), m_workers.end(),
                                 [](const Worker &x) { return x.inFlight; });
        };
        while (!m_stopped && !m_queue.empty() && inFlight() <= m_ctx.maxStaleness) {
            Worker &x = m_workers[std::size_t(m_queue.front())];
            m_queue.pop_front();
            x.inFlight = true;
            x.version = m_version;
            if (x.joinedAt < 0)
                x.joinedAt = m_version;
            x.snapshot.copy_(m_flat->values());
        }
        m_changed.notify_all();
    }

    // Under m_mutex: with w's push applied, could every other in-flight
    // worker still land within K if the rest were applied oldest first?
    bool othersStayWithinBound(int w) const
    {
        std::vector<std::int64_t> versions;
        for (std::size_t u = 0; u < m_workers.size(); ++u)
            if (int(u) != w && m_workers[u].inFlight)
                versions.push_back(m_workers[u].version);
        std::sort(versions.begin(), versions.end());
        for (std::size_t i = 0; i < versions.size(); ++i)
            if (m_version + 1 + std::int64_t(i) - versions[i] > m_ctx.maxStaleness)
                return false;
        return true;
    }

    void apply(int w, const Header &h)
    {
        Worker &me = m_workers[std::size_t(w)];
        std::unique_lock lock(m_mutex);
        if (h.version != me.version)
            throw std::runtime_error("push computed on version " + std::to_string(h.version) +
                                     ", but it was sent " + std::to_string(me.version));
        if (!m_stopped && !othersStayWithinBound(w)) {
            ++me.waits;
            m_changed.wait(lock, [&] { return m_stopped || othersStayWithinBound(w); });
        }
        me.inFlight = false;
        if (m_stopped) {
            ++me.discarded;
            admitWaiting();
            return;
        }
        const std::int64_t staleness = m_version - me.version;
        if (staleness < 0 || staleness > m_ctx.maxStaleness)
            throw std::logic_error("edp: staleness " + std::to_string(staleness) + " outside [0, " +
                                   std::to_string(m_ctx.maxStaleness) + "]");
        me.grads.mul_(1.0 / double(1 + staleness));
        m_opt->step(m_flat->values(), me.grads);
        m_updateLoss[std::size_t(m_version)] = h.loss;
        ++m_version;
        ++me.pushes;
        ++m_histogram[std::size_t(staleness)];
        m_maxStaleness = std::max(m_maxStaleness, staleness);
        if (m_version == m_ctx.steps)
            m_stopped = true;
        admitWaiting();
    }

    void joinHandlers()
    {
        for (auto &t : m_handlers)
            if (t.joinable())
                t.join();
    }

    NodeContext m_ctx;
    std::unique_ptr<FlatParams> m_flat;

    // worker
    bool m_joined = false;
    bool m_finished = false;
    std::int64_t m_version = 0; // worker: version of its parameters; server: updates applied
    std::int64_t m_localSteps = 0;

    // server (m_mutex guards everything below, and m_version on the server)
    std::unique_ptr<FlatOptimizer> m_opt;
    mutable std::mutex m_mutex;
    std::condition_variable m_changed;
    std::vector<Worker> m_workers; // by rank; [0] unused
    std::deque<int> m_queue;       // waiting for fresh weights
    std::vector<double> m_updateLoss;
    std::vector<std::int64_t> m_histogram;
    std::int64_t m_maxStaleness = 0;
    int m_liveHandlers = 0;
    bool m_stopped = false;
    std::string m_error;
    std::vector<std::thread> m_handlers;
};

} // namespace

std::unique_ptr<Strategy> strategies::makeEdp() { return std::make_unique<EdpStrategy>(); }

} // namespace smol::engine
