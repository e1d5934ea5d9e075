// One epoch of a cluster node (Agent::epochMain), on its own thread, from
// the coordinator's `assign` to the node's report. The life of an epoch:
//
//   1. set up      the epoch's config (rank, world size); one LibTorch and
//                  BLAS thread; the run's data (kept across epochs); the
//                  node's memory slot reset.
//   2. listen      the data plane: a TCP transport on a port of its own
//                  (links shaped as the config says), an in-memory one for
//                  a 1-node world, none for Gloo; `listening` with the port.
//   3. meet        TCP: wait for `peers`, dial every lower rank, wait for
//                  the higher ones. Gloo: meet in the coordinator's store
//                  for this epoch and connect Gloo's pairs. Then `ready`,
//                  and wait for `start`.
//   4. wire        the communicator and its collective hooks
//                  (engine/node_hooks.h): memory samples and spans for the
//                  trace batches, remote breakpoints.
//   5. train       runNode() (engine/trainer.h, the same code as an
//                  in-process node); each step goes up as `step`, held-out
//                  losses as `test_loss`, and every K steps the full
//                  parameters are kept in memory (to re-form from) and rank
//                  0 sends `checkpoint` for the coordinator to keep (every
//                  100 steps or 10 s) and for the disk.
//   6. report      `done` with the node's figures (rank 0: its final
//                  parameters), or `failed` with the error and the newest
//                  in-memory checkpoint. An abort from the coordinator, a
//                  lost peer or the node's own error all end here.
//   7. close       the trace's tail, then the report, then the data plane:
//                  a done node's links stay open until the next epoch.
#include "node_agent_private.h"

#include "config_json.h"
#include "state_blob.h"

#include "engine/blas_threads.h"
#include "engine/memory_tracker.h"
#include "net/errors.h"

#include <QHostAddress>
#include <QJsonArray>
#include <QNetworkInterface>

#include <numeric>

namespace smol::engine::node {

void Agent::epochMain(Assignment a)
{
    Epoch e;
    e.a = std::move(a);
    e.ckpt = e.a.initial;
    e.ckptSteps = e.a.firstStep;
    e.keptSteps = e.a.firstStep;
    e.keptAt = std::chrono::steady_clock::now();
    try {
        EpochTraining t; // gone before the report, as the collectives' peers expect
        setUpEpoch(e, t);
        openDataPlane(e, t);
        meetPeers(e, t);
        wireCommunicator(e, t);
        reportDone(e, t, train(e, t));
    } catch (const std::exception &error) {
        reportFailed(e, error);
    }
    closeEpoch(e);
}

// 1. The epoch's config, threads, data and memory slot.
void Agent::setUpEpoch(Epoch &e, EpochTraining &t)
{
    t.config = e.a.config;
    t.config.model.seed = t.config.seed;
    t.config.nodes = e.a.world;
    t.currentStep = e.a.firstStep;
    memory::install();
    torch::set_num_threads(1);
    limitBlasToOneThread();
    t.data = dataFor(t.config);
    memory::resetNode(m_opts.memorySlot);
    t.gloo = t.config.backend == TrainConfig::Backend::Gloo && e.a.world > 1;
}

// 2. The data plane's port, announced as `listening`.
void Agent::openDataPlane(Epoch &e, EpochTraining &t)
{
    std::uint16_t port = 0;
    if (e.a.world > 1 && !t.gloo) {
        net::TransportOptions topt;
        topt.bindAddress = m_opts.bindAddress;
        e.transport = std::make_unique<net::TcpTransport>(e.a.rank, e.a.world, m_opts.token, topt);
        for (const TrainConfig::Link &l : t.config.links) {
            if (l.a == e.a.rank && l.b < e.a.world)
                e.transport->setLinkLimit(l.b, l.limit);
            if (l.b == e.a.rank && l.a < e.a.world)
                e.transport->setLinkLimit(l.a, l.limit);
        }
        e.transport->setTraceSink(&e.telemetry);
        port = e.transport->listenPort();
    } else if (!t.gloo) {
        e.alone = net::makeLocalMesh(net::TransportKind::Inproc, 1, m_opts.token);
    }
    {
        std::lock_guard lock(m_mutex);
        if (m_aborted)
            throw std::runtime_error("aborted by the coordinator");
        m_transport = e.transport ? static_cast<net::Transport *>(e.transport.get())
                                  : (e.alone.empty() ? nullptr : e.alone.front().get());
        m_telemetry = &e.telemetry;
    }
    m_channel->send(QJsonObject{{"type", "listening"}, {"epoch", e.a.epoch}, {"port", int(port)}});
}

// 3. Connected to every peer (or Gloo's pairs), then `ready`, then `start`.
void Agent::meetPeers(Epoch &e, EpochTraining &t)
{
    if (e.transport)
        connectTcpPeers(e);
    if (t.gloo)
        connectGloo(e, t);
    m_channel->send(QJsonObject{{"type", "ready"}, {"epoch", e.a.epoch}});
    waitFor([&] { return m_started; }, "the start signal");
}

void Agent::connectTcpPeers(Epoch &e)
{
    waitFor([&] { return m_peers.has_value(); }, "the peer list");
    std::vector<std::pair<std::string, std::uint16_t>> peers;
    {
        std::lock_guard lock(m_mutex);
        peers = *m_peers;
    }
    if (int(peers.size()) != e.a.world)
        throw std::runtime_error("the peer list has " + std::to_string(peers.size()) + " entries for " +
                                 std::to_string(e.a.world) + " ranks");
    for (int j = 0; j < e.a.rank; ++j)
        connectToPeer(*e.transport, j, peers[std::size_t(j)]);
    e.transport->waitForPeers(std::chrono::seconds(30));
}

// Dial a lower rank at the address the coordinator gave for it. A
// failure names the address and where it came from: the usual cause
// across machines is a node that cannot be reached at the address it
// was seen at (several interfaces, NAT), fixed with --advertise.
void Agent::connectToPeer(net::TcpTransport &transport, int peer,
                          const std::pair<std::string, std::uint16_t> &address)
{
    try {
        transport.connectTo(peer, address.first, address.second);
    } catch (const net::NetError &e) {
        throw std::runtime_error(
            std::string(e.what()) + " (rank " + std::to_string(peer) + "'s data-plane address " +
            address.first + ":" + std::to_string(address.second) +
            ", as the coordinator gave it; if that node cannot be reached there, start it "
            "with --advertise ADDR, or give the coordinator --advertise ADDR for its own "
            "nodes; docs/runtime.md)");
    }
}

// Every member is past `listening`: meet in this epoch's store and connect
// Gloo's pairs. The device binds to one address: --bind if given, else the
// one the coordinator assigned.
void Agent::connectGloo(Epoch &e, EpochTraining &t)
{
    waitFor([&] { return m_peers.has_value(); }, "the peer list");
    // Gloo binds where it advertises: an address the coordinator saw through
    // NAT is not one of ours, so then the interface this node reaches the
    // coordinator on.
    std::string bind = m_opts.bindAddress != "0.0.0.0" ? m_opts.bindAddress : e.a.glooBind;
    if (bind.empty() || bind == "0.0.0.0" ||
        (bind != m_opts.bindAddress &&
         !QNetworkInterface::allAddresses().contains(QHostAddress(QString::fromStdString(bind)))))
        bind = m_channel->localAddress();
    t.glooStore = std::make_unique<GlooStore>(std::make_shared<ControlRendezvous>(*this, e.a.epoch));
    auto comm = std::make_unique<GlooCommunicator>(*t.glooStore, e.a.rank, e.a.world, bind);
    comm->setTraceSink(&e.telemetry); // one event per collective (gloo_communicator.h)
    t.comm = std::move(comm);
}

// 4. The communicator and its hooks: memory by category at every collective
// boundary and collective spans, for the trace batches; remote breakpoints.
void Agent::wireCommunicator(Epoch &e, EpochTraining &t)
{
    if (!t.comm)
        t.comm = std::make_unique<net::Communicator>(e.transport ? static_cast<net::Transport &>(*e.transport)
                                                                 : *e.alone.front());
    NodeHookPlan plan;
    plan.rank = e.a.rank;
    plan.memorySlot = m_opts.memorySlot;
    plan.step = &t.currentStep;
    if (e.a.record) {
        plan.onMemory = [this](const MemorySnapshot &m) { addMemory(m); };
        plan.onSpan = [this](const SpanEvent &s) { addSpan(s); };
    }
    if (e.a.remoteBreakpoints)
        plan.breakpoints = std::make_unique<RemoteHook>(*this, e.a.epoch, &t.currentStep);
    t.hooks.install(*t.comm, std::move(plan));
}

// 5. Train, reporting as runNode() goes.
NodeResult Agent::train(Epoch &e, EpochTraining &t)
{
    const NodeResult result = runNode(t.config, nodeRunOf(e, t));
    if (result.momentsRestarted && e.a.rank == 0)
        log("Adam's moments restart at step " + std::to_string(e.a.firstStep) +
            " (no optimizer state to continue from)");
    return result;
}

NodeRun Agent::nodeRunOf(Epoch &e, EpochTraining &t)
{
    const Assignment &a = e.a;
    NodeRun run;
    run.rank = a.rank;
    run.memorySlot = m_opts.memorySlot;
    run.comm = t.comm.get();
    run.data = t.data;
    run.currentStep = &t.currentStep;
    run.firstStep = a.firstStep;
    if (a.record)
        run.onSpan = [this](const SpanEvent &s) { addSpan(s); };
    run.onTestLoss = [this, &e](std::int64_t k, double loss) {
        m_channel->send(
            QJsonObject{{"type", "test_loss"}, {"epoch", e.a.epoch}, {"step", double(k)}, {"loss", loss}});
    };
    run.initialParams = a.initial.params;
    run.initialMoments = a.initial.moments;
    // The in-memory checkpoint the cluster re-forms from when a node is
    // lost (every step: at most the interrupted step is redone), and the
    // coordinator's and the disk's checkpoints, which rank 0 sends from the
    // same gather. An asynchronous strategy's server (rank 0) copies its
    // own parameters, no gather: every step, to send when one is due.
    const bool lockStep = !makeStrategy(t.config.strategy, t.config.mesh)->isAsynchronous();
    std::int64_t every = 0;
    if (lockStep && a.world > 1 && a.recoveryEvery > 0)
        every = a.recoveryEvery;
    for (std::int64_t k : {a.diskEvery, a.keepEvery})
        if (k > 0)
            every = std::gcd(every, k);
    if (!lockStep)
        every = a.rank == 0 && a.keepEvery > 0 ? 1 : 0;
    run.checkpointEvery = every;
    run.onStep = [this, &e, &t](std::int64_t k, double loss, const StepMemory &mem) {
        const std::uint64_t sentNow = e.telemetry.bytesSent();
        t.bytesInSteps += sentNow - std::min(t.bytesMark, sentNow);
        t.bytesMark = sentNow;
        const std::vector<std::uint64_t> byGroup = e.telemetry.bytesSentByGroup();
        t.bytesInStepsByGroup.resize(byGroup.size());
        t.bytesMarkByGroup.resize(byGroup.size());
        for (std::size_t g = 0; g < byGroup.size(); ++g) {
            t.bytesInStepsByGroup[g] += byGroup[g] - std::min(t.bytesMarkByGroup[g], byGroup[g]);
            t.bytesMarkByGroup[g] = byGroup[g];
        }
        {
            // A strategy that sends nothing (single, a 1-node world) learns
            // of an abort here, at its step boundary.
            std::lock_guard lock(m_mutex);
            if (m_aborted)
                throw std::runtime_error("aborted by the coordinator");
        }
        m_channel->send(QJsonObject{{"type", "step"},
                                    {"epoch", e.a.epoch},
                                    {"rank", e.a.rank},
                                    {"step", double(k)},
                                    {"loss", loss},
                                    {"t", QString::number(net::monotonicNs())},
                                    {"memory", memoryToJson(mem.atEnd)},
                                    {"peak", memoryToJson(mem.peak)}});
    };
    run.onCheckpoint = [this, &e, &t, lockStep](std::int64_t stepsDone, const torch::Tensor &params,
                                                const OptimizerMoments &moments) {
        onCheckpoint(e, t, lockStep, stepsDone, params, moments);
    };
    return run;
}

// A checkpoint point (every K steps, the full state in hand): the in-memory
// copy to re-form from; rank 0 sends it up when the coordinator's copy
// (every keepEvery steps or keepInterval) or the disk's is due.
void Agent::onCheckpoint(Epoch &e, EpochTraining &t, bool lockStep, std::int64_t stepsDone,
                         const torch::Tensor &params, const OptimizerMoments &moments)
{
    t.bytesMark = e.telemetry.bytesSent();
    t.bytesMarkByGroup = e.telemetry.bytesSentByGroup();
    if (lockStep && e.a.recoveryEvery > 0 && stepsDone % e.a.recoveryEvery == 0) {
        memory::NodeScope uncharged(-1); // the runtime's copy, not the training's memory
        e.ckpt.params = params.clone();
        // (a bf16 run's master weights are `params`: no copy of them here)
        e.ckpt.moments = moments.defined()
                             ? OptimizerMoments{moments.exp.clone(), moments.expSq.clone(), {}}
                             : OptimizerMoments{};
        e.ckptSteps = stepsDone;
    }
    if (e.a.rank != 0)
        return;
    const bool disk = e.a.diskEvery > 0 && stepsDone % e.a.diskEvery == 0;
    const auto now = std::chrono::steady_clock::now();
    const bool keep = e.a.keepEvery > 0 &&
                      (stepsDone - e.keptSteps >= e.a.keepEvery || now - e.keptAt >= e.a.keepInterval);
    if (!disk && !keep)
        return;
    e.keptSteps = stepsDone;
    e.keptAt = now;
    m_channel->send(QJsonObject{{"type", "checkpoint"},
                                {"epoch", e.a.epoch},
                                {"rank", e.a.rank},
                                {"steps_done", double(stepsDone)},
                                {"moments", moments.defined()},
                                {"disk", disk}},
                    packState({params, moments}));
}

// 6. `done`: the node's figures; rank 0's final parameters in the blob.
void Agent::reportDone(Epoch &e, const EpochTraining &t, const NodeResult &result)
{
    QJsonObject stats;
    for (const auto &[key, value] : result.stats)
        stats.insert(QString::fromStdString(key), value);
    QJsonArray byGroup;
    for (std::uint64_t bytes : t.bytesInStepsByGroup)
        byGroup.append(double(bytes));
    e.outcome = QJsonObject{{"type", "done"},
                            {"epoch", e.a.epoch},
                            {"rank", e.a.rank},
                            {"seconds", result.seconds},
                            {"bytes_sent", double(e.telemetry.bytesSent())},
                            {"bytes_in_steps", double(t.bytesInSteps)},
                            {"bytes_in_steps_by_group", byGroup},
                            {"memory", memoryToJson(result.memory)},
                            {"peak", double(memory::usage(m_opts.memorySlot).peak)},
                            {"stats", stats}};
    const AsyncStats &as = result.async;
    if (as.updates > 0)
        e.outcome.insert("async", QJsonObject{{"updates", double(as.updates)},
                                              {"max_staleness", double(as.maxStaleness)},
                                              {"pushes", jsonNumbers(as.pushes)},
                                              {"discarded", jsonNumbers(as.discarded)},
                                              {"waits", jsonNumbers(as.waits)},
                                              {"joined_at", jsonNumbers(as.joinedAt)},
                                              {"lost", jsonNumbers(as.lost)},
                                              {"histogram", jsonNumbers(as.stalenessHistogram)}});
    if (e.a.rank == 0)
        e.outcomeBlob = packState({result.finalParams, {}});
}

// 6. `failed`: why, whether the coordinator asked for it, and the newest
// in-memory checkpoint to re-form from.
void Agent::reportFailed(Epoch &e, const std::exception &error)
{
    bool aborted = false; // told to stop, so not this node's own failure
    {
        std::lock_guard lock(m_mutex);
        aborted = m_aborted;
    }
    log("epoch " + std::to_string(e.a.epoch) + " (rank " + std::to_string(e.a.rank) +
        ") ended: " + error.what());
    e.outcome = QJsonObject{{"type", "failed"},
                            {"epoch", e.a.epoch},
                            {"rank", e.a.rank},
                            {"aborted", aborted},
                            {"error", error.what()},
                            {"ckpt_steps", double(e.ckptSteps)},
                            {"moments", e.ckpt.moments.defined()}};
    e.outcomeBlob = packState(e.ckpt);
}

// 7. The trace's tail, the report, then the data plane.
void Agent::closeEpoch(Epoch &e)
{
    {
        std::lock_guard lock(m_mutex);
        m_transport = nullptr;
        m_telemetry = nullptr;
    }
    if (e.transport)
        e.transport->setTraceSink(nullptr);
    const QByteArray tail = e.telemetry.take();
    QJsonArray spans, memory;
    {
        std::lock_guard lock(m_mutex);
        spans.swap(m_spans);
        memory.swap(m_memory);
    }
    if (!tail.isEmpty() || !spans.isEmpty() || !memory.isEmpty())
        sendQuietly(QJsonObject{{"type", "trace"},
                                {"epoch", e.a.epoch},
                                {"rank", e.a.rank},
                                {"spans", spans},
                                {"memory", memory}},
                    tail);
    // Report first, then close the data plane: a failure's own reason
    // reaches the coordinator before its peers' "connection closed".
    sendQuietly(e.outcome, e.outcomeBlob);
    if (e.outcome.value(QStringLiteral("type")).toString() == QLatin1String("done")) {
        // Peers may still be finishing their last collective (a ring's
        // last frames): a closed link would fail them. The links stay up
        // until the coordinator, having every node's result, moves on.
        std::lock_guard lock(m_mutex);
        m_finishedTransport = std::move(e.transport);
    }
    e.transport.reset();
}

} // namespace smol::engine::node
