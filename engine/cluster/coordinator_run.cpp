// One run of a cluster (Coordinator::run) as a small state machine. The
// life of a run:
//
//   1. prepare      check the config; the first epoch's members are the
//                   first idle nodes in join order; load the data (gpt's
//                   vocabulary, test accuracy); read the --resume checkpoint.
//   2. form         check the epoch's config for its world size (strategy,
//                   batch split, placement); ranks in member order; every
//                   member gets `assign` (rank, world, config, first step,
//                   starting parameters).
//   3. connect      each member opens its data port (`listening`); once all
//                   have, each gets `peers`, every rank's address as that
//                   member can reach it; each dials the lower ranks (`ready`).
//   4. train        all ready: `start`. Steps, test losses, checkpoints and
//                   trace batches flow in until every member is `done`;
//                   the newest checkpoint is kept here (kept_checkpoint.h).
//   5. supervise    throughout 3 and 4: a lost node (edp: its server), a
//                   node's failure or the user's stop sends `abort` to
//                   every member; the epoch ends when each has settled
//                   (done, failed or lost; after a stop, one second at most).
//   6. re-form      a node was lost: the survivors plus nodes that joined
//                   meanwhile start a new epoch (back to 2) from the newest
//                   checkpoint a survivor holds, at most maxReforms times.
//                   Every node lost: wait up to rejoinTimeout for nodes to
//                   join again, and resume from the checkpoint kept here
//                   (edp too: its server's). A failure that lost no node
//                   ends the run.
//   7. finish       every member done: the summary from rank 0's parameters
//                   and every member's figures.
#include "coordinator.h"
#include "coordinator_private.h"

#include "config_json.h"
#include "kept_checkpoint.h"
#include "state_blob.h"

#include "engine/checkpoint_file.h"
#include "engine/models/model.h"
#include "engine/strategy.h"
#include "net/communicator.h"
#include "net/device_mesh.h"

#include <QJsonDocument>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace smol::engine {

namespace {

using namespace coord;

// After the user's stop, how long run() waits for the nodes to report their
// abort before it returns anyway.
constexpr std::chrono::milliseconds kStopGrace{1000};
// After every node was lost and one joined again, how long to wait for
// more before re-forming with those that came.
constexpr std::chrono::milliseconds kRejoinSettle{2000};

std::int64_t paramCountOf(const ModelConfig &model)
{
    std::int64_t n = 0;
    for (const auto &[name, p] : makeModel(model)->namedParameters())
        n += p.numel();
    return n;
}

std::vector<std::int64_t> intVector(const QJsonValue &v)
{
    std::vector<std::int64_t> out;
    for (const QJsonValue &x : v.toArray())
        out.push_back(std::int64_t(x.toDouble()));
    return out;
}

} // namespace

// One run's state machine. Its phases, named functions of a screenful each.
class Coordinator::Run {
public:
    Run(Private &d, const TrainConfig &config, const ClusterRunOptions &options, TrainObserver *observer)
        : d(d), m_options(options), m_config(config), m_observer(observer), m_kind(makeStrategy(config.strategy, config.mesh)),
          m_async(m_kind->isAsynchronous()), m_ctl(options.breakpoints), m_events(options.events),
          m_kept(options.keepBudgetBytes, [&d](const std::string &line) { d.log(line); })
    {
        m_config.model.seed = m_config.seed;
    }

    TrainSummary run()
    {
        prepare();
        for (;;) {
            formEpoch();
            superviseEpoch();
            if (m_epoch.stopped)
                throw std::runtime_error("stopped by the user");
            if (!m_epoch.aborting)
                return finish();
            planReform(); // throws when the run cannot go on
        }
    }

private:
    // What one epoch knows, by rank.
    struct Epoch {
        int id = 0;
        int world = 0;
        std::vector<std::uint16_t> ports;
        std::vector<bool> listening, ready, finished, lost, failed;
        std::vector<QJsonObject> done;
        std::vector<std::int64_t> stepStart; // for Step spans
        torch::Tensor finalParams;
        std::string firstError;
        std::int64_t bestCkptSteps = -1;
        TrainingState bestCkpt;
        bool aborting = false;
        bool started = false;
        bool stopped = false;
        Clock::time_point deadline;
    };

    // 1. Check the config, pick the first members, load data, read --resume.
    void prepare()
    {
        if (m_config.transport != net::TransportKind::Tcp)
            throw std::invalid_argument("a cluster of node processes talks TCP (--transport tcp)");
        if (m_options.checkpointEvery > 0 && m_options.checkpointDir.isEmpty())
            throw std::invalid_argument("--checkpoint-every needs --checkpoint-dir");
        if (m_async && (m_options.checkpointEvery > 0 || !m_options.resumeDir.isEmpty()))
            throw std::invalid_argument(m_config.strategy +
                                        " keeps no checkpoints (its server's updates are asynchronous)");
        {
            std::lock_guard lock(d.mutex);
            for (const auto &c : d.conns)
                if (c->info.state == ClusterNode::State::Idle &&
                    (m_options.nodes <= 0 || int(m_members.size()) < m_options.nodes))
                    m_members.push_back(c->info.id);
        }
        if (m_members.empty() || (m_options.nodes > 0 && int(m_members.size()) < m_options.nodes))
            throw std::invalid_argument("the cluster has " + std::to_string(m_members.size()) +
                                        " idle node(s), the run needs " + std::to_string(std::max(1, m_options.nodes)));
        // The coordinator loads the data too: gpt's vocabulary, and test accuracy.
        m_data = loadTrainingData(m_config);
        m_paramCount = paramCountOf(m_config.model);
        if (!m_options.resumeDir.isEmpty())
            readResumeCheckpoint();
        m_configText = QJsonDocument(configToJson(m_config)).toJson(QJsonDocument::Compact);
        m_board = std::make_unique<StepAggregator>(
            m_config.steps,
            m_kind->samplesPerStep(m_config.globalBatch * m_config.accumulate, int(m_members.size())), m_async,
            m_observer);
        m_board->setResumedAt(m_startStep);
        m_resumedAt = m_startStep;
        m_runStart = Clock::now();
    }

    void readResumeCheckpoint()
    {
        const Checkpoint ck = readCheckpoint(m_options.resumeDir);
        if (std::int64_t(ck.params.size()) != m_paramCount)
            throw std::invalid_argument("checkpoint " + checkpointPath(m_options.resumeDir).toStdString() + " holds " +
                                        std::to_string(ck.params.size()) + " parameters; this model has " +
                                        std::to_string(m_paramCount));
        if (ck.stepsDone >= m_config.steps)
            throw std::invalid_argument("checkpoint is at step " + std::to_string(ck.stepsDone) +
                                        ", not before --steps " + std::to_string(m_config.steps));
        m_startStep = ck.stepsDone;
        m_start = stateFromCheckpoint(ck);
        d.log("resuming from " + checkpointPath(m_options.resumeDir).toStdString() + " at step " +
              std::to_string(m_startStep));
    }

    // 2. Check the epoch's config for its world size, give ranks, assign.
    void formEpoch()
    {
        const int world = int(m_members.size());
        TrainConfig epochConfig = m_config;
        epochConfig.nodes = world;
        try {
            validateConfig(epochConfig);
            checkBatchSplit(*m_kind, epochConfig.globalBatch, world);
            m_kind->checkContext(epochConfig.model, nodeContextOf(epochConfig, /*rank=*/0));
        } catch (const std::invalid_argument &e) {
            if (m_reforms == 0)
                throw;
            throw std::runtime_error("cannot re-form with " + std::to_string(world) + " node(s): " + e.what());
        }
        m_epoch = Epoch{};
        Epoch &e = m_epoch;
        e.id = ++d.epochCounter;
        e.world = world;
        e.ports.assign(std::size_t(world), 0);
        for (auto *v : {&e.listening, &e.ready, &e.finished, &e.lost, &e.failed})
            v->assign(std::size_t(world), false);
        e.done.assign(std::size_t(world), QJsonObject{});
        e.stepStart.assign(std::size_t(world), net::monotonicNs());
        e.deadline = Clock::now() + m_options.setupTimeout;
        {
            std::lock_guard lock(d.mutex);
            d.traceEpoch = e.id;
            d.epochNodeOfRank = m_members;
            d.breakpointEpoch = e.id; // messages of earlier epochs are skipped by their epoch number
            for (int r = 0; r < world; ++r) {
                ClusterNode &info = d.conn(m_members[std::size_t(r)]).info;
                info.rank = r;
                info.state = ClusterNode::State::Running;
                info.lastError.clear();
            }
        }
        m_board->beginEpoch(world, m_startStep, lossRows(*m_kind, m_config.globalBatch, world, m_config.accumulate));
        if (m_ctl) {
            m_ctl->beginRun(world);
            m_ctl->setHoldCallback([&d = d](bool held) { d.holdWaits(held); });
        }
        const QJsonObject configJson = configToJson(epochConfig);
        const QByteArray startBlob = packState(m_start);
        // Gloo: a fresh store for this epoch (no stale keys after a re-form),
        // and the address each node's device binds to.
        d.board.beginEpoch(e.id, m_members);
        std::vector<std::string> glooBind(static_cast<std::size_t>(world));
        if (m_config.backend == TrainConfig::Backend::Gloo) {
            std::lock_guard lock(d.mutex);
            for (int r = 0; r < world; ++r)
                glooBind[std::size_t(r)] = d.glooBindAddressFor(d.conn(m_members[std::size_t(r)]), m_members);
        }
        for (int r = 0; r < world; ++r)
            d.send(m_members[std::size_t(r)],
                   QJsonObject{{"type", "assign"},
                               {"gloo_bind", QString::fromStdString(glooBind[std::size_t(r)])},
                               {"epoch", e.id},
                               {"rank", r},
                               {"world", world},
                               {"first_step", double(m_startStep)},
                               {"checkpoint_every", double(m_options.checkpointEvery)},
                               {"recovery_every", double(m_options.recoveryEvery)},
                               {"keep_every", double(m_options.keepEvery)},
                               {"keep_ms", double(m_options.keepInterval.count())},
                               {"breakpoints", m_ctl != nullptr},
                               {"record", m_events != nullptr},
                               {"moments", m_start.moments.defined()},
                               {"config", configJson}},
                   startBlob);
    }

    // 3-5. Connect, start, train, and watch for losses, failures and the
    // user's stop, until every member has settled (done, failed or lost).
    void superviseEpoch()
    {
        Epoch &e = m_epoch;
        while (!allSettled()) {
            const std::optional<Event> ev = d.nextEvent(e.deadline);
            if (!ev && e.stopped)
                break; // the user's stop: nodes that have not settled finish their abort on their own
            if (!ev) {
                onSetupTimeout();
                continue;
            }
            if (ev->stop) {
                e.stopped = true;
                e.firstError = "stopped by the user";
                abortAll();
                e.deadline = Clock::now() + kStopGrace; // Stop always stops, within a second
                continue;
            }
            const int r = rankOf(ev->node);
            if (r < 0)
                continue; // a node outside this epoch (a late joiner): it waits for the next re-form
            if (ev->lost) {
                onLost(r, ev->node, ev->reason);
                continue;
            }
            const net::ControlMessage &m = ev->message;
            if (!m.json.value(QStringLiteral("epoch")).isDouble() ||
                m.json.value(QStringLiteral("epoch")).toInt() != e.id)
                continue;
            if (!fromItsRank(r, ev->node, m))
                continue;
            dispatch(r, ev->node, m);
        }
        settleEpoch();
    }

    void dispatch(int r, int node, const net::ControlMessage &m)
    {
        const std::string type = m.type();
        if (type == "listening")
            onListening(r, m);
        else if (type == "ready")
            onReady(r);
        else if (type == "step")
            onStep(r, node, m);
        else if (type == "test_loss")
            onTestLoss(m);
        else if (type == "checkpoint")
            onCheckpoint(r, m);
        else if (type == "done")
            onDone(r, m);
        else if (type == "failed")
            onFailed(r, node, m);
    }

    // A message that names a rank must name the sender's: anything else is
    // refused (one line per node and epoch), never applied to another rank.
    bool fromItsRank(int r, int node, const net::ControlMessage &m)
    {
        const QJsonValue rank = m.json.value(QStringLiteral("rank"));
        if (rank.isUndefined() || (rank.isDouble() && rank.toInt() == r))
            return true;
        if (m_refusedRank.insert({m_epoch.id, node}).second)
            d.log(nameOf(r) + " sent a '" + printableText(m.type(), 32) + "' about rank " +
                  (rank.isDouble() ? std::to_string(rank.toInt()) : std::string("(not a number)")) +
                  "; ignored (and any more like it this epoch)");
        return false;
    }

    void onListening(int r, const net::ControlMessage &m)
    {
        Epoch &e = m_epoch;
        const int port = m.json.value(QStringLiteral("port")).toInt(-1);
        if (port < 0 || port > 65535)
            return;
        e.listening[std::size_t(r)] = true;
        e.ports[std::size_t(r)] = std::uint16_t(port);
        if (e.aborting || !std::all_of(e.listening.begin(), e.listening.end(), [](bool b) { return b; }))
            return;
        // Each node gets the list as it can reach it (Private::dataAddressFor).
        std::vector<QJsonArray> peersFor(static_cast<std::size_t>(e.world));
        {
            std::lock_guard lock(d.mutex);
            for (int q = 0; q < e.world; ++q)
                for (int p = 0; p < e.world; ++p)
                    peersFor[std::size_t(q)].append(QJsonObject{
                        {"host", QString::fromStdString(d.dataAddressFor(d.conn(m_members[std::size_t(p)]),
                                                                        d.conn(m_members[std::size_t(q)])))},
                        {"port", int(e.ports[std::size_t(p)])}});
        }
        for (int q = 0; q < e.world; ++q)
            d.send(m_members[std::size_t(q)],
                   QJsonObject{{"type", "peers"}, {"epoch", e.id}, {"peers", peersFor[std::size_t(q)]}});
        e.deadline = Clock::now() + m_options.setupTimeout;
    }

    void onReady(int r)
    {
        Epoch &e = m_epoch;
        e.ready[std::size_t(r)] = true;
        if (e.aborting || !std::all_of(e.ready.begin(), e.ready.end(), [](bool b) { return b; }))
            return;
        for (int q = 0; q < e.world; ++q)
            d.send(m_members[std::size_t(q)], QJsonObject{{"type", "start"}, {"epoch", e.id}});
        e.started = true;
        // A node's first step starts now, not when the epoch began forming.
        std::fill(e.stepStart.begin(), e.stepStart.end(), net::monotonicNs());
        e.deadline = Clock::time_point::max();
        d.log("epoch " + std::to_string(e.id) + ": " + std::to_string(e.world) + " node(s) training " +
              m_config.strategy + " from step " + std::to_string(m_startStep));
    }

    void onStep(int r, int node, const net::ControlMessage &m)
    {
        const QJsonValue step = m.json.value(QStringLiteral("step"));
        if (!step.isDouble())
            return;
        const std::int64_t k = std::int64_t(step.toDouble());
        const double loss = m.json.value(QStringLiteral("loss")).toDouble(std::nan(""));
        StepMemory mem;
        mem.atEnd = memoryFromJson(m.json.value(QStringLiteral("memory")).toObject());
        // An older node sends no peaks: all zero, and no peak sample is kept.
        mem.peak = memoryFromJson(m.json.value(QStringLiteral("peak")).toObject());
        if (m_events) {
            std::int64_t offset = 0;
            {
                std::lock_guard lock(d.mutex);
                offset = d.conn(node).clock.offsetNs();
            }
            std::int64_t &start = m_epoch.stepStart[std::size_t(r)];
            const std::int64_t end = bigInt(m.json.value(QStringLiteral("t"))) - offset;
            emitStepEvents(*m_events, r, k, loss, mem, std::min(start, end), end);
            start = end;
        }
        m_board->report(r, k, loss, mem.atEnd);
    }

    void onTestLoss(const net::ControlMessage &m)
    {
        const std::int64_t k = std::int64_t(m.json.value(QStringLiteral("step")).toDouble());
        const double loss = m.json.value(QStringLiteral("loss")).toDouble(std::nan(""));
        if (m_events)
            m_events->onMetric(MetricSample{net::monotonicNs(), k, -1, "test_loss", loss});
        if (m_observer)
            m_observer->onTestLoss(k, loss);
    }

    // Rank 0's full state: kept here (the newest), and written to
    // --checkpoint-dir when the message says it is that checkpoint's turn
    // (a node of an older build says nothing: every one is).
    void onCheckpoint(int r, const net::ControlMessage &m)
    {
        if (r != 0)
            return;
        const bool moments = m.json.value(QStringLiteral("moments")).toBool();
        const std::int64_t steps = std::int64_t(m.json.value(QStringLiteral("steps_done")).toDouble(-1));
        if (steps < 0 || steps > m_config.steps)
            return;
        try {
            m_kept.keep(steps, moments, m.blob, m_paramCount, m_configText.toStdString());
        } catch (const std::exception &e) {
            if (!m_keepRefused)
                d.log(std::string("checkpoint not kept: ") + e.what());
            m_keepRefused = true;
            return;
        }
        if (m_options.checkpointDir.isEmpty() || !m.json.value(QStringLiteral("disk")).toBool(true))
            return;
        try {
            writeCheckpoint(m_options.checkpointDir,
                            checkpointOfBlob(steps, m_configText.toStdString(), m.blob, m_paramCount, moments));
            d.log("checkpoint at step " + std::to_string(steps) + " written to " +
                  checkpointPath(m_options.checkpointDir).toStdString());
        } catch (const std::exception &e) {
            d.log(std::string("checkpoint not written: ") + e.what());
        }
    }

    void onDone(int r, const net::ControlMessage &m)
    {
        m_epoch.finished[std::size_t(r)] = true;
        if (m_ctl)
            m_ctl->nodeFinished(r); // a pause no longer waits for it
        m_epoch.done[std::size_t(r)] = m.json;
        if (r == 0) {
            try {
                m_epoch.finalParams = unpackState(m.blob, /*hasMoments=*/false).params;
            } catch (const std::exception &e) {
                d.log(nameOf(r) + " sent unusable final parameters: " + e.what());
            }
        }
    }

    void onFailed(int r, int node, const net::ControlMessage &m)
    {
        Epoch &e = m_epoch;
        e.finished[std::size_t(r)] = true;
        e.failed[std::size_t(r)] = true;
        const std::int64_t steps = std::int64_t(m.json.value(QStringLiteral("ckpt_steps")).toDouble(-1));
        const bool moments = m.json.value(QStringLiteral("moments")).toBool();
        if (steps > e.bestCkptSteps || (steps == e.bestCkptSteps && moments && !e.bestCkpt.moments.defined())) {
            try {
                e.bestCkpt = m.blob.isEmpty() ? m_start : unpackState(m.blob, moments);
                e.bestCkptSteps = steps;
            } catch (const std::exception &ex) {
                d.log(nameOf(r) + " sent an unusable checkpoint: " + ex.what());
            }
        }
        const std::string error = printableText(m.json.value(QStringLiteral("error")).toString().toStdString(), 2000);
        // Its own failure: not one it was told to make, and not a peer's
        // close after the user's stop (nodes that had not heard of the stop
        // yet see their peers go first).
        if (!m.json.value(QStringLiteral("aborted")).toBool() && !e.stopped) {
            std::lock_guard lock(d.mutex);
            d.conn(node).info.lastError = error;
        }
        if (e.aborting) // the rest are aborted and report why they stopped
            return;
        if (e.firstError.empty())
            e.firstError = nameOf(r) + ": " + error;
        abortAll();
        e.deadline = Clock::now() + m_options.setupTimeout;
    }

    void onLost(int r, int node, const std::string &reason)
    {
        Epoch &e = m_epoch;
        if (e.lost[std::size_t(r)] || (e.finished[std::size_t(r)] && !e.failed[std::size_t(r)]))
            return;
        e.lost[std::size_t(r)] = true; // also after its own failure report: it will not re-form
        m_lostEver.insert(node);
        if (e.finished[std::size_t(r)])
            return;
        if (m_async && r != 0 && e.started) {
            d.log(m_config.strategy + " trains on without rank " + std::to_string(r));
            return;
        }
        if (e.firstError.empty())
            e.firstError = nameOf(r) + " lost: " + reason;
        abortAll();
        e.deadline = Clock::now() + m_options.setupTimeout;
    }

    // Someone is stuck in set-up (or in an abort): give up on it.
    void onSetupTimeout()
    {
        Epoch &e = m_epoch;
        for (int r = 0; r < e.world; ++r) {
            if (e.lost[std::size_t(r)] || e.finished[std::size_t(r)] || (e.started && !e.aborting))
                continue;
            Private::Conn &c = d.conn(m_members[std::size_t(r)]);
            d.markLost(c, "did not answer within " + std::to_string(m_options.setupTimeout.count() / 1000) + " s");
            e.lost[std::size_t(r)] = true; // its loss event, if any, is then skipped
            m_lostEver.insert(c.info.id);
            if (e.firstError.empty())
                e.firstError = nameOf(r) + " did not answer";
            abortAll();
        }
        e.deadline = Clock::now() + m_options.setupTimeout;
    }

    // The epoch is over: release held proxies, members back to idle.
    void settleEpoch()
    {
        d.stopProxies();
        std::lock_guard lock(d.mutex);
        for (int q = 0; q < m_epoch.world; ++q) {
            auto &info = d.conn(m_members[std::size_t(q)]).info;
            if (info.state == ClusterNode::State::Lost && !m_epoch.lost[std::size_t(q)] &&
                m_epoch.failed[std::size_t(q)]) {
                m_epoch.lost[std::size_t(q)] = true; // died after it reported (its loss event is still queued)
                m_lostEver.insert(info.id);
            }
            if (info.state == ClusterNode::State::Running)
                info.state = ClusterNode::State::Idle;
        }
    }

    // 6. Re-form after a loss: survivors plus nodes that joined meanwhile,
    // from the newest checkpoint a survivor holds or this coordinator kept;
    // every node lost: wait.
    void planReform()
    {
        Epoch &e = m_epoch;
        if (std::none_of(e.lost.begin(), e.lost.end(), [](bool b) { return b; }))
            throw std::runtime_error(e.firstError.empty() ? "the run was aborted" : e.firstError);
        if (m_async && m_kept.steps() < 0)
            throw std::runtime_error(e.firstError + " (" + m_config.strategy +
                                     " cannot re-form without its server, and no checkpoint of it was kept yet)");
        if (++m_reforms > m_options.maxReforms)
            throw std::runtime_error(e.firstError + " (gave up after " + std::to_string(m_options.maxReforms) +
                                     " re-formations)");
        if (e.bestCkptSteps >= 0) {
            m_startStep = e.bestCkptSteps;
            m_start = e.bestCkpt;
        }
        std::vector<int> next = reformMembers();
        if (next.empty())
            next = waitForRejoin(e.firstError);
        newerKeptCheckpoint(); // every node lost: the nodes' own copies went with them
        d.log("re-forming (attempt " + std::to_string(m_reforms) + " of " + std::to_string(m_options.maxReforms) +
              "): " + e.firstError + "; " + std::to_string(next.size()) + " node(s) resume from step " +
              std::to_string(m_startStep));
        if (m_observer)
            m_observer->onReform(m_reforms, m_options.maxReforms, int(next.size()), m_startStep, e.firstError);
        m_members = next;
    }

    std::vector<int> reformMembers()
    {
        std::vector<int> next;
        std::lock_guard lock(d.mutex);
        for (int q = 0; q < m_epoch.world; ++q)
            if (!m_epoch.lost[std::size_t(q)] &&
                d.conn(m_members[std::size_t(q)]).info.state != ClusterNode::State::Lost)
                next.push_back(m_members[std::size_t(q)]);
        for (int id : candidates())
            next.push_back(id); // joined during the epoch
        return next;
    }

    // Every node lost (a lid closed, the Wi-Fi gone): wait for nodes to join
    // again, then take whoever came within a short settle time. Each such
    // episode waits the whole rejoinTimeout from its own start.
    std::vector<int> waitForRejoin(const std::string &why)
    {
        const auto timeout = m_options.rejoinTimeout;
        const std::int64_t resumeAt = std::max(m_startStep, m_kept.steps());
        d.log("every node is lost (" + why + "); waiting up to " +
              QString::number(double(timeout.count()) / 1000.0).toStdString() + " s for nodes to join, to resume from step " + std::to_string(resumeAt));
        if (m_observer)
            m_observer->onWaitingForNodes(timeout.count() / 1000.0);
        const auto began = Clock::now();
        const auto giveUp = began + timeout;
        std::vector<int> next;
        while (next.empty() && Clock::now() < giveUp) {
            {
                std::unique_lock lock(d.mutex);
                d.changed.wait_until(lock, giveUp, [&] { return hasStop() || !candidates().empty(); });
                if (!hasStop() && !candidates().empty()) // others may be a moment behind the first
                    d.changed.wait_until(lock, std::min(giveUp, Clock::now() + kRejoinSettle),
                                         [&] { return hasStop(); });
                if (hasStop())
                    throw std::runtime_error("stopped by the user");
            }
            next = reformMembers(); // empty again when the one that came is gone already
        }
        const double waited = std::chrono::duration<double>(Clock::now() - began).count();
        const std::string seconds = QString::number(waited, 'f', 1).toStdString();
        if (next.empty())
            throw std::runtime_error(why + " (no node joined again: waited " + seconds + " s of --rejoin-timeout " +
                                     QString::number(double(timeout.count()) / 1000.0).toStdString() + " s)");
        d.log(std::to_string(next.size()) + " node(s) joined after " + seconds + " s of waiting");
        return next;
    }

    // Idle nodes outside the last epoch: who would re-form now. Under d.mutex.
    std::vector<int> candidates() const
    {
        std::vector<int> out;
        for (const auto &c : d.conns)
            if (c->info.state == ClusterNode::State::Idle &&
                std::find(m_members.begin(), m_members.end(), c->info.id) == m_members.end())
                out.push_back(c->info.id);
        return out;
    }

    // The checkpoint kept here, when it is newer than where the run would
    // resume.
    void newerKeptCheckpoint()
    {
        if (m_kept.steps() <= m_startStep && !(m_async && m_kept.steps() >= 0))
            return;
        try {
            TrainingState kept = m_kept.state();
            if (kept.params.numel() != m_paramCount)
                return;
            m_startStep = m_kept.steps();
            m_start = std::move(kept);
        } catch (const std::exception &e) {
            d.log(std::string("the kept checkpoint is unusable: ") + e.what());
        }
    }

    bool hasStop() // under d.mutex
    {
        return std::any_of(d.events.begin(), d.events.end(), [](const Event &e) { return e.stop; });
    }

    // 7. Every member done: the summary.
    TrainSummary finish()
    {
        const Epoch &e = m_epoch;
        TrainSummary s = TrainSummary::of(m_config.strategy, e.world, m_config.steps, m_board->curve());
        if (!e.finalParams.defined() || e.finalParams.numel() != m_paramCount)
            throw std::runtime_error("rank 0 finished without sending its parameters");
        s.setFinalParams(e.finalParams);
        s.seconds = std::chrono::duration<double>(Clock::now() - m_runStart).count();
        const std::int64_t samples = (m_config.steps - m_resumedAt) *
                                     m_kind->samplesPerStep(m_config.globalBatch * m_config.accumulate, e.world);
        s.samplesPerS = s.seconds > 0 ? double(samples) / s.seconds : 0;
        std::map<std::string, std::vector<double>> stats;
        for (int q = 0; q < e.world; ++q) {
            if (e.lost[std::size_t(q)])
                s.lostRanks.push_back(q);
            const QJsonObject &o = e.done[std::size_t(q)];
            s.bytesSentPerNode.push_back(std::uint64_t(o.value(QStringLiteral("bytes_sent")).toDouble()));
            // Of those, the bytes sent inside its steps (not the recovery
            // gathers between them), per rank: extra["bytes_in_steps@R"].
            if (o.contains(QStringLiteral("bytes_in_steps")))
                s.extra["bytes_in_steps@" + std::to_string(q)] = o.value(QStringLiteral("bytes_in_steps")).toDouble();
            if (!m_config.mesh.empty()) { // a mesh's: by axis, from the node's by group
                std::vector<std::uint64_t> byGroup;
                for (const QJsonValue &v : o.value(QStringLiteral("bytes_in_steps_by_group")).toArray())
                    if (byGroup.size() <= net::kMaxGroupId)
                        byGroup.push_back(std::uint64_t(std::clamp(v.toDouble(), 0.0, 9e15)));
                s.bytesInStepsByAxis.push_back(net::DeviceMesh::parse(m_config.mesh).byAxis(byGroup));
            }
            s.peakBytesPerNode.push_back(std::int64_t(o.value(QStringLiteral("peak")).toDouble()));
            s.memoryPerNode.push_back(memoryFromJson(o.value(QStringLiteral("memory")).toObject()));
            const QJsonObject st = o.value(QStringLiteral("stats")).toObject();
            for (auto it = st.begin(); it != st.end(); ++it)
                stats[it.key().toStdString()].push_back(it.value().toDouble());
        }
        for (const auto &[key, values] : stats)
            s.extra[key] = std::accumulate(values.begin(), values.end(), 0.0) / double(values.size());
        const QJsonObject as = e.done[0].value(QStringLiteral("async")).toObject();
        if (!as.isEmpty()) {
            s.async.updates = std::int64_t(as.value(QStringLiteral("updates")).toDouble());
            s.async.maxStaleness = std::int64_t(as.value(QStringLiteral("max_staleness")).toDouble());
            s.async.pushes = intVector(as.value(QStringLiteral("pushes")));
            s.async.discarded = intVector(as.value(QStringLiteral("discarded")));
            s.async.waits = intVector(as.value(QStringLiteral("waits")));
            s.async.joinedAt = intVector(as.value(QStringLiteral("joined_at")));
            s.async.lost = intVector(as.value(QStringLiteral("lost")));
            s.async.stalenessHistogram = intVector(as.value(QStringLiteral("histogram")));
        }
        s.extra["reforms"] = m_reforms;
        s.extra["nodes_lost"] = double(m_lostEver.size());
        s.testAccuracy = testAccuracyOf(m_config, *m_data, e.finalParams);
        if (m_events && s.testAccuracy >= 0)
            m_events->onMetric(
                MetricSample{net::monotonicNs(), m_config.steps - 1, -1, "test_accuracy", s.testAccuracy});
        return s;
    }

    void abortAll()
    {
        Epoch &e = m_epoch;
        if (e.aborting)
            return;
        e.aborting = true;
        if (m_ctl)
            m_ctl->abort(); // release held nodes: they are told to stop next
        for (int r = 0; r < e.world; ++r)
            if (!e.lost[std::size_t(r)] && !e.finished[std::size_t(r)])
                d.send(m_members[std::size_t(r)], QJsonObject{{"type", "abort"}, {"epoch", e.id}});
    }

    bool allSettled() const
    {
        for (int r = 0; r < m_epoch.world; ++r)
            if (!m_epoch.lost[std::size_t(r)] && !m_epoch.finished[std::size_t(r)])
                return false;
        return true;
    }

    int rankOf(int node) const
    {
        auto it = std::find(m_members.begin(), m_members.end(), node);
        return it == m_members.end() ? -1 : int(it - m_members.begin());
    }

    std::string nameOf(int rank)
    {
        std::lock_guard lock(d.mutex);
        return "node " + std::to_string(m_members[std::size_t(rank)]) + " '" +
               d.conn(m_members[std::size_t(rank)]).info.name + "' (rank " + std::to_string(rank) + ")";
    }

    Private &d;
    const ClusterRunOptions m_options;
    TrainConfig m_config;
    TrainObserver *m_observer;
    const std::unique_ptr<Strategy> m_kind;
    const bool m_async;
    BreakpointController *const m_ctl;
    SessionEventSink *const m_events;

    std::vector<int> m_members; // node ids by rank, this epoch
    std::shared_ptr<const DataSource> m_data;
    std::int64_t m_paramCount = 0;
    std::int64_t m_startStep = 0;
    std::int64_t m_resumedAt = 0;
    TrainingState m_start; // undefined params: the seed's weights
    QByteArray m_configText;
    std::unique_ptr<StepAggregator> m_board;
    Clock::time_point m_runStart;
    int m_reforms = 0;
    std::set<int> m_lostEver;
    std::set<std::pair<int, int>> m_refusedRank; // (epoch, node) already told off
    KeptCheckpoint m_kept;     // the newest full state rank 0 sent
    bool m_keepRefused = false; // said once
    Epoch m_epoch;
};

TrainSummary Coordinator::runStreamed(const TrainConfig &config, const ClusterRunOptions &options,
                                      TrainObserver *observer)
{
    {
        std::lock_guard lock(d->mutex); // a stop() between runs does not stop this one
        d->events.erase(std::remove_if(d->events.begin(), d->events.end(), [](const Event &e) { return e.stop; }),
                        d->events.end());
    }
    {
        std::lock_guard lock(d->mutex);
        d->breakpoints = options.breakpoints;
        d->eventSink = options.events;
    }
    struct ProxyGuard { // whichever way run() ends, no proxy outlives it
        Private &p;
        BreakpointController *ctl;
        ~ProxyGuard()
        {
            if (ctl)
                ctl->setHoldCallback(nullptr);
            p.stopProxies();
            std::lock_guard lock(p.mutex);
            p.breakpoints = nullptr;
            p.eventSink = nullptr;
            p.traceEpoch = -1; // between runs no node's message is queued (coordinator_readers.cpp)
        }
    } proxyGuard{*d, options.breakpoints};
    std::unique_ptr<TrainObserver> metricEmitter;
    if (options.events) {
        metricEmitter = makeMetricEmitter(options.events, observer);
        observer = metricEmitter.get();
    }
    return Run(*d, config, options, observer).run();
}

} // namespace smol::engine
