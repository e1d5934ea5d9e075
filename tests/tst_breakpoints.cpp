// Breakpoints: the paused tensors equal each node's local gradient bucket
// (single-node autograd on that node's batch share), and after a step the
// result equals their mean. Every node pauses at the same collective; edits
// change the result; bad specs fail in one line. Every wait is bounded and a
// watchdog aborts the controller, so a broken pause fails instead of hanging.
// The pause tests run twice: nodes as threads of runTraining(), and nodes as
// cluster agents whose every collective asks the coordinator's controller
// over the control plane (engine/cluster/).
#include "engine/breakpoints/breakpoints.h"
#include "engine/cluster/coordinator.h"
#include "engine/cluster/node_agent.h"
#include "engine/data/data_source.h"
#include "engine/compression_config.h"
#include "engine/models/model.h"
#include "engine/train_command.h"
#include "engine/trainer.h"

#include <QtTest>

#include <cmath>
#include <functional>
#include <future>
#include <map>
#include <numeric>
#include <thread>

using namespace smol::engine;
using namespace std::chrono_literals;

namespace {

constexpr std::int64_t kBatch = 24;
constexpr std::int64_t kBucketBytes = 64 * 1024;

TrainConfig ddpConfig(const std::string &strategy = "ddp", std::int64_t steps = 3)
{
    TrainConfig c;
    c.strategy = strategy;
    c.nodes = 3;
    c.steps = steps;
    c.globalBatch = kBatch;
    c.seed = 11;
    c.transport = smol::net::TransportKind::Inproc;
    c.optimizer.lr = 0.1;
    c.bucketBytes = kBucketBytes;
    return c;
}

// runTraining (or a coordinator with 3 node agents) on its own thread with
// the controller attached; the destructor aborts the controller (releasing
// any held node) and joins.
class Run {
public:
    Run(BreakpointController &controller, TrainConfig config, bool cluster) : m_controller(controller)
    {
        if (cluster) {
            CoordinatorOptions co;
            co.bindAddress = "127.0.0.1";
            co.token = "tst-breakpoints";
            m_coordinator = std::make_unique<Coordinator>(co);
            m_coordinator->setLogSink([](const std::string &l) { qWarning("coordinator: %s", l.c_str()); });
            for (int k = 0; k < config.nodes; ++k)
                m_agents.emplace_back([this, k] {
                    NodeAgentOptions o;
                    o.port = m_coordinator->port();
                    o.token = "tst-breakpoints";
                    o.bindAddress = "127.0.0.1";
                    o.memorySlot = k;
                    o.inProcess = true;
                    try {
                        runNodeAgent(o, {});
                    } catch (const std::exception &) {
                    }
                });
            m_coordinator->waitForNodes(config.nodes, 20s);
            config.transport = smol::net::TransportKind::Tcp;
            ClusterRunOptions ro;
            ro.nodes = config.nodes;
            ro.breakpoints = &controller;
            ro.recoveryEvery = 0;
            Coordinator *c = m_coordinator.get();
            m_result = std::async(std::launch::async, [c, config, ro] { return c->run(config, ro); });
        } else {
            config.breakpoints = &controller;
            m_result = std::async(std::launch::async, [config] { return runTraining(config); });
        }
        m_watchdog = std::thread([this] {
            std::unique_lock lock(m_mutex);
            if (!m_done.wait_for(lock, 120s, [this] { return m_finished; })) {
                m_controller.abort(); // the test then fails on a missing pause
                if (m_coordinator)
                    m_coordinator->stop();
            }
        });
    }
    ~Run()
    {
        finish();
        if (m_coordinator)
            m_coordinator->shutdownNodes();
        for (auto &t : m_agents)
            t.join();
    }
    bool ended() { return m_result.valid() && m_result.wait_for(0s) == std::future_status::ready; }
    // The next pause after `seen`, or none once the run has ended (or after
    // `limit`): a run with nothing left to pause at does not cost the limit.
    std::shared_ptr<const PauseState> nextPause(std::uint64_t seen, std::chrono::seconds limit)
    {
        const auto until = std::chrono::steady_clock::now() + limit;
        while (std::chrono::steady_clock::now() < until) {
            if (auto pause = m_controller.waitForPause(200ms, seen))
                return pause;
            if (ended())
                return m_controller.waitForPause(0ms, seen);
        }
        return nullptr;
    }
    bool finish()
    {
        m_controller.abort();
        const bool ok = m_result.valid() && m_result.wait_for(60s) == std::future_status::ready;
        {
            std::lock_guard lock(m_mutex);
            m_finished = true;
        }
        m_done.notify_all();
        if (m_watchdog.joinable())
            m_watchdog.join();
        return ok;
    }
    // The run's summary; a failed run gives a NaN final loss (and its reason in the log).
    TrainSummary summary()
    {
        try {
            return m_result.get();
        } catch (const std::exception &e) {
            qWarning("the run failed: %s", e.what());
            QTest::qWait(1000); // the nodes' own accounts reach the coordinator's log
            TrainSummary failed;
            failed.finalLoss = std::nan("");
            return failed;
        }
    }

private:
    BreakpointController &m_controller;
    std::unique_ptr<Coordinator> m_coordinator;
    std::vector<std::thread> m_agents;
    std::future<TrainSummary> m_result;
    std::thread m_watchdog;
    std::mutex m_mutex;
    std::condition_variable m_done;
    bool m_finished = false;
};

void modes()
{
    QTest::addColumn<bool>("cluster");
    QTest::newRow("threads") << false;
    QTest::newRow("cluster") << true;
}

torch::Tensor tensorOf(const TensorSnapshot &s)
{
    return torch::tensor(s.values, torch::kFloat64);
}

} // namespace

class TestBreakpoints : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase() { torch::set_num_threads(1); }
    void pausedTensorsAreLocalGradients_data() { modes(); }
    void pausedTensorsAreLocalGradients();
    void everyNodePausesAtTheSameCollective_data();
    void everyNodePausesAtTheSameCollective();
    void editsChangeTheResult_data() { modes(); }
    void editsChangeTheResult();
    void pausesOneGroupOnAMesh_data() { modes(); }
    void pausesOneGroupOnAMesh();
    void pauseOutlastsTheTransportTimeout_data() { modes(); }
    void pauseOutlastsTheTransportTimeout();
    void parsesSpecs_data();
    void parsesSpecs();
    void rejectsMalformedSpecs_data();
    void rejectsMalformedSpecs();
    void snapshotsLargeTensorsAsSummaries();
    void allGatherShowsOnlyTheOwnChunk_data() { modes(); }
    void allGatherShowsOnlyTheOwnChunk();
    void powerSgdPauseShowsQAndError_data() { modes(); }
    void powerSgdPauseShowsQAndError();
    void relatedTensorsAreBounded();
};

void TestBreakpoints::pausedTensorsAreLocalGradients()
{
    QFETCH(bool, cluster);
    const std::int64_t kStep = 2;
    BreakpointController controller;
    controller.addBreakpoint(parseBreakpoint("allreduce@step=2,name=bucket0"));
    Run run(controller, ddpConfig(), cluster);
    const auto pause = controller.waitForPause(60s);
    QVERIFY2(pause, "no pause within 60 s");
    QVERIFY(pause->complete);
    QCOMPARE(int(pause->inputs.size()), 3);

    // The parameters every node holds entering step 2: those of a 2-step ddp
    // run (deterministic), loaded into a fresh model.
    const TrainSummary twoSteps = runTraining(ddpConfig("ddp", kStep));
    auto data = makeFashionMnist(11);
    ModelConfig mc;
    mc.seed = 11;
    for (int r = 0; r < 3; ++r) {
        const TensorSnapshot &got = pause->inputs[std::size_t(r)];
        QCOMPARE(got.node, r);
        QCOMPARE(got.step, kStep);
        QCOMPARE(got.name, std::string("grads.bucket0"));
        QCOMPARE(got.kind, smol::net::CollectiveKind::AllReduce);
        QCOMPARE(std::int64_t(got.values.size()), got.count);

        auto model = makeModel(mc);
        std::vector<torch::Tensor> params;
        std::int64_t at = 0;
        {
            torch::NoGradGuard noGrad;
            for (auto &[name, p] : model->namedParameters()) {
                p.copy_(twoSteps.finalParams.narrow(0, at, p.numel()).view(p.sizes()));
                at += p.numel();
                params.push_back(p);
            }
        }
        model->loss(data->trainBatch(kStep, kBatch, r, 3)).backward();
        std::vector<torch::Tensor> grads;
        for (auto &p : params)
            grads.push_back(p.grad().reshape({-1}));
        // Bucket 0 holds the last parameters (backward's order): the tail.
        const torch::Tensor flat = torch::cat(grads).to(torch::kFloat64);
        const torch::Tensor want = flat.narrow(0, flat.numel() - got.count, got.count);
        const double diff = (tensorOf(got) - want).abs().max().item<double>();
        QVERIFY2(diff <= 1e-6, qPrintable(QString("node %1: max |paused - local grad| = %2").arg(r).arg(diff)));
    }
    // Different batch shares, different gradients.
    QVERIFY(!torch::allclose(tensorOf(pause->inputs[0]), tensorOf(pause->inputs[1])));

    QVERIFY(controller.step());
    const auto results = controller.waitForStepResults(30s);
    QVERIFY2(results, "no step results within 30 s");
    QCOMPARE(int(results->size()), 3);
    const torch::Tensor mean =
        (tensorOf(pause->inputs[0]) + tensorOf(pause->inputs[1]) + tensorOf(pause->inputs[2])) / 3;
    for (const TensorSnapshot &res : *results) {
        QVERIFY(!res.before);
        QCOMPARE(res.seq, pause->inputs[0].seq);
        const double diff = (tensorOf(res) - mean).abs().max().item<double>();
        QVERIFY2(diff <= 1e-6, qPrintable(QString("node %1: max |result - mean| = %2").arg(res.node).arg(diff)));
    }
    // The step stops everyone again at the next collective, with the results.
    const auto next = controller.waitForPause(30s, pause->id);
    QVERIFY(next);
    QCOMPARE(next->reason, std::string("step"));
    QCOMPARE(int(next->results.size()), 3);
    for (const TensorSnapshot &s : next->inputs)
        QCOMPARE(s.seq, pause->inputs[0].seq + 1);
    controller.clearBreakpoints();
    QVERIFY(controller.resume());
    QVERIFY(run.finish());
    QVERIFY(std::isfinite(run.summary().finalLoss));
}

void TestBreakpoints::everyNodePausesAtTheSameCollective_data()
{
    QTest::addColumn<QString>("strategy");
    QTest::addColumn<QString>("spec");
    QTest::addColumn<bool>("cluster");
    for (bool cluster : {false, true}) {
        const char *mode = cluster ? "cluster/" : "threads/";
        QTest::newRow(qPrintable(QString(mode) + "ddp/next")) << "ddp" << "next" << cluster;
        QTest::newRow(qPrintable(QString(mode) + "ddp/allreduce@step=1")) << "ddp" << "allreduce@step=1" << cluster;
        QTest::newRow(qPrintable(QString(mode) + "zero3/allgather@step=1")) << "zero3" << "allgather@step=1" << cluster;
        QTest::newRow(qPrintable(QString(mode) + "zero2/reducescatter,rank=2"))
            << "zero2" << "reducescatter,rank=2" << cluster;
    }
}

void TestBreakpoints::everyNodePausesAtTheSameCollective()
{
    QFETCH(QString, strategy);
    QFETCH(QString, spec);
    QFETCH(bool, cluster);
    BreakpointController controller;
    controller.addBreakpoint(parseBreakpoint(spec.toStdString()));
    Run run(controller, ddpConfig(strategy.toStdString()), cluster);
    std::uint64_t seen = 0;
    std::uint64_t lastSeq = 0;
    for (int i = 0; i < 4; ++i) { // the breakpoint's pause, then three single steps
        const auto pause = controller.waitForPause(60s, seen);
        QVERIFY2(pause, qPrintable(QString("pause %1 missing").arg(i)));
        seen = pause->id;
        QVERIFY(pause->complete);
        QCOMPARE(int(pause->inputs.size()), 3);
        for (const TensorSnapshot &s : pause->inputs) {
            QCOMPARE(s.seq, pause->inputs[0].seq); // none ran ahead
            QCOMPARE(s.kind, pause->inputs[0].kind);
            QCOMPARE(s.step, pause->inputs[0].step);
        }
        if (i > 0)
            QCOMPARE(pause->inputs[0].seq, lastSeq + 1);
        lastSeq = pause->inputs[0].seq;
        if (i == 0 && spec.contains("step=1"))
            QCOMPARE(pause->inputs[0].step, std::int64_t(1));
        QVERIFY(controller.step());
    }
    controller.clearBreakpoints();
    run.nextPause(seen, 30s);
    controller.resume();
    QVERIFY(run.finish());
    QVERIFY(std::isfinite(run.summary().finalLoss));
}

// --break allreduce@tp on a dp=2 x tp=2 gpt: the hit is a tp group's
// all-reduce; every node is held, each at its own tp group's, and the
// snapshots name the axis and the group's members.
// A 4-node mesh of a small gpt, 2 steps.
static TrainConfig smallGptMesh(const char *mesh)
{
    TrainConfig c = ddpConfig("ddp", 2);
    c.nodes = 4;
    c.mesh = mesh;
    c.globalBatch = 8;
    c.model.kind = "gpt";
    c.model.nEmbd = 32;
    c.model.blockSize = 16;
    return c;
}

void TestBreakpoints::pausesOneGroupOnAMesh()
{
    QFETCH(bool, cluster);
    BreakpointController controller;
    controller.addBreakpoint(parseBreakpoint("allreduce@tp,step=1"));
    Run run(controller, smallGptMesh("dp=2,tp=2"), cluster);
    const auto pause = controller.waitForPause(60s, 0);
    QVERIFY(pause);
    QVERIFY(pause->complete);
    QCOMPARE(int(pause->inputs.size()), 4);
    for (const TensorSnapshot &s : pause->inputs) {
        QCOMPARE(s.kind, smol::net::CollectiveKind::AllReduce);
        QCOMPARE(s.step, std::int64_t(1));
        const QString group = s.node < 2 ? "tp (ranks 0, 1)" : "tp (ranks 2, 3)";
        QVERIFY2(QString::fromStdString(s.name).startsWith(group), s.name.c_str());
    }
    controller.clearBreakpoints();
    controller.resume();
    QVERIFY(run.finish());
    QVERIFY(std::isfinite(run.summary().finalLoss));
}

// A pause on a tp group of tp=2,pp=2 holds stage 0 while stage 1 waits in a
// receive for its activations: held longer than the transport's 10 s
// timeout, the receive must go on waiting (Transport::holdWaits), and the
// run end normally after the resume.
void TestBreakpoints::pauseOutlastsTheTransportTimeout()
{
    QFETCH(bool, cluster);
    BreakpointController controller;
    controller.addBreakpoint(parseBreakpoint("allreduce@tp,step=1"));
    Run run(controller, smallGptMesh("tp=2,pp=2"), cluster);
    const auto pause = controller.waitForPause(60s, 0);
    QVERIFY(pause);
    std::this_thread::sleep_for(12s); // the transport's timeout is 10 s
    controller.clearBreakpoints();
    controller.resume();
    QVERIFY2(run.finish(), "the run failed after a pause longer than the transport timeout");
    QVERIFY(std::isfinite(run.summary().finalLoss));
}

void TestBreakpoints::editsChangeTheResult()
{
    QFETCH(bool, cluster);
    BreakpointController controller;
    controller.addBreakpoint(parseBreakpoint("allreduce@step=1,name=bucket0"));
    Run run(controller, ddpConfig(), cluster);
    const auto pause = controller.waitForPause(60s);
    QVERIFY(pause);
    QCOMPARE(int(pause->inputs.size()), 3);
    QVERIFY(controller.edit(1, TensorEdit{TensorEdit::Op::Zero, 1, -1}));
    QVERIFY(controller.edit(2, TensorEdit{TensorEdit::Op::Scale, 0.5, -1}));
    QVERIFY(controller.edit(0, TensorEdit{TensorEdit::Op::InjectNaN, 1, 5}));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                             controller.edit(0, TensorEdit{TensorEdit::Op::InjectNaN, 1, pause->inputs[0].count}));
    QVERIFY(!controller.edit(7, TensorEdit{})); // no such node held
    controller.clearBreakpoints();
    QVERIFY(controller.step());
    const auto results = controller.waitForStepResults(30s);
    QVERIFY(results);
    QCOMPARE(int(results->size()), 3);
    torch::Tensor want = (tensorOf(pause->inputs[0]) + 0.5 * tensorOf(pause->inputs[2])) / 3;
    for (const TensorSnapshot &res : *results) {
        QVERIFY(res.edited); // every node edited its input
        const torch::Tensor got = tensorOf(res);
        QVERIFY2(std::isnan(got[5].item<double>()), "the injected NaN reaches every node");
        QCOMPARE(res.stats.nanCount, std::int64_t(1));
        got[5] = 0;
        want[5] = 0;
        const double diff = (got - want).abs().max().item<double>();
        QVERIFY2(diff <= 1e-6, qPrintable(QString("node %1: max |result - edited mean| = %2").arg(res.node).arg(diff)));
    }
    controller.waitForPause(30s, pause->id);
    controller.resume();
    QVERIFY(run.finish());
}

void TestBreakpoints::parsesSpecs_data()
{
    QTest::addColumn<QString>("spec");
    QTest::addColumn<int>("kind");
    QTest::addColumn<qint64>("step");
    QTest::addColumn<int>("rank");
    QTest::addColumn<QString>("name");
    QTest::addColumn<QString>("axis");
    using K = smol::net::CollectiveKind;
    QTest::newRow("kind") << "allreduce" << int(K::AllReduce) << qint64(-1) << -1 << "" << "";
    QTest::newRow("step") << "allreduce@step=3" << int(K::AllReduce) << qint64(3) << -1 << "" << "";
    QTest::newRow("all") << "reduce-scatter@step=0,rank=2,name=fc1" << int(K::ReduceScatter) << qint64(0) << 2
                         << "fc1" << "";
    QTest::newRow("no step") << "push,rank=1" << int(K::Push) << qint64(-1) << 1 << "" << "";
    QTest::newRow("any") << "any,name=bucket3" << int(K::None) << qint64(-1) << -1 << "bucket3" << "";
    QTest::newRow("axis") << "allreduce@tp" << int(K::AllReduce) << qint64(-1) << -1 << "" << "tp";
    QTest::newRow("axis, step") << "allreduce@tp,step=2" << int(K::AllReduce) << qint64(2) << -1 << "" << "tp";
    QTest::newRow("step @ axis") << "sendrecv@step=2@pp" << int(K::SendRecv) << qint64(2) << -1 << "" << "pp";
}

void TestBreakpoints::parsesSpecs()
{
    QFETCH(QString, spec);
    QFETCH(int, kind);
    QFETCH(qint64, step);
    QFETCH(int, rank);
    QFETCH(QString, name);
    QFETCH(QString, axis);
    const Breakpoint b = parseBreakpoint(spec.toStdString());
    QCOMPARE(QString::fromStdString(b.axis), axis);
    QCOMPARE(int(b.kind), kind);
    QCOMPARE(b.step, step);
    QCOMPARE(b.rank, rank);
    QCOMPARE(QString::fromStdString(b.name), name);
    QVERIFY(!b.next);
    QVERIFY(parseBreakpoint("next").next);
}

void TestBreakpoints::rejectsMalformedSpecs_data()
{
    QTest::addColumn<QString>("spec");
    for (const char *s : {"", "allreduse", "allreduce@", "allreduce@step=x", "allreduce@step=-1", "allreduce@stp=3",
                          "allreduce@step=3,rank", "allreduce,name=", "next,step=1", "allreduce@ep"})
        QTest::newRow(*s ? s : "(empty)") << QString(s);
}

void TestBreakpoints::rejectsMalformedSpecs()
{
    QFETCH(QString, spec);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, parseBreakpoint(spec.toStdString()));
    // The CLI: exit code 2, one line on stderr, before training starts.
    QString outText, errText;
    QTextStream out(&outText), err(&errText);
    const int code = runTrainCommand({"--strategy", "ddp", "--nodes", "2", "--steps", "1", "--break", spec}, out, err);
    err.flush();
    QCOMPARE(code, 2);
    QCOMPARE(errText.count('\n'), 1);
    QVERIFY2(errText.startsWith("smolctl train: "), qPrintable(errText));
}

void TestBreakpoints::snapshotsLargeTensorsAsSummaries()
{
    std::vector<float> v(1000);
    for (std::size_t i = 0; i < v.size(); ++i)
        v[i] = float(i);
    v[10] = std::nanf("");
    SnapshotOptions small;
    small.fullLimit = 100;
    const TensorSnapshot s = takeSnapshot(smol::net::viewOf(v.data(), v.size()), small);
    QVERIFY(s.values.empty());
    QCOMPARE(s.count, std::int64_t(1000));
    QCOMPARE(s.stats.nanCount, std::int64_t(1));
    QCOMPARE(s.stats.min, 0.0);
    QCOMPARE(s.stats.max, 999.0);
    std::int64_t binned = 0;
    for (auto n : s.histogram)
        binned += n;
    QCOMPARE(binned, std::int64_t(999));
    QCOMPARE(int(s.histogram.size()), 64);
    QCOMPARE(int(s.downsampled.size()), 256);
    const TensorSnapshot full = takeSnapshot(smol::net::viewOf(v.data(), v.size()), SnapshotOptions{});
    QCOMPARE(int(full.values.size()), 1000);

    // Through a session file's JSON and back: every field, the NaN included.
    TensorSnapshot named = full;
    named.node = 2;
    named.step = 7;
    named.kind = smol::net::CollectiveKind::ReduceScatter;
    named.seq = 41;
    named.name = "bucket 1";
    named.before = false;
    const TensorSnapshot back = snapshotFromJson(snapshotToJson(named));
    QCOMPARE(back.node, 2);
    QCOMPARE(back.step, std::int64_t(7));
    QCOMPARE(int(back.kind), int(smol::net::CollectiveKind::ReduceScatter));
    QCOMPARE(back.seq, std::uint64_t(41));
    QCOMPARE(back.name, std::string("bucket 1"));
    QVERIFY(!back.before);
    QCOMPARE(back.count, full.count);
    QCOMPARE(back.shape, full.shape);
    QCOMPARE(back.values.size(), full.values.size());
    QVERIFY(std::isnan(back.values[10]));
    QCOMPARE(back.values[999], 999.0);
    QCOMPARE(back.stats.nanCount, std::int64_t(1));
    QCOMPARE(back.stats.mean, full.stats.mean);
    QCOMPARE(back.histogram, full.histogram);
    QCOMPARE(back.downsampled.size(), full.downsampled.size());
    QCOMPARE(back.histogramMax, full.histogramMax);
    // Not JSON at all: an empty snapshot, no exception.
    QCOMPARE(snapshotFromJson("not json").count, std::int64_t(0));
}

// At an all-gather a node contributes its own chunk; the rest of its buffer
// is not written yet. Every all-gather pause of a zero3 step shows that chunk
// only: values within the parameters' range, no NaN, labelled with its
// elements; after a step, the gathered whole.
void TestBreakpoints::allGatherShowsOnlyTheOwnChunk()
{
    QFETCH(bool, cluster);
    TrainConfig c = ddpConfig("zero3", 4);
    c.nodes = 4;
    BreakpointController controller;
    controller.addBreakpoint(parseBreakpoint("allgather@step=2"));
    Run run(controller, c, cluster);
    const double bound = 1.0; // the mlp's initial weights lie within +-0.09 and move little in 2 steps
    std::uint64_t last = 0;
    int pauses = 0;
    for (;;) {
        const auto pause = run.nextPause(last, 30s);
        if (!pause)
            break;
        last = pause->id;
        ++pauses;
        QCOMPARE(int(pause->inputs.size()), 4);
        for (const TensorSnapshot &t : pause->inputs) {
            QCOMPARE(t.kind, smol::net::CollectiveKind::AllGather);
            const smol::net::ChunkRange own =
                smol::net::Communicator::chunk(std::size_t(t.total), 4, t.node);
            QCOMPARE(t.offset, std::int64_t(own.offset));
            QCOMPARE(t.count, std::int64_t(own.count));
            QCOMPARE(t.stats.nanCount, std::int64_t(0));
            QVERIFY2(std::abs(t.stats.max) <= bound && std::abs(t.stats.min) <= bound,
                     qPrintable(QString("%1 node %2: min %3 max %4").arg(QString::fromStdString(t.name)).arg(t.node)
                                    .arg(t.stats.min).arg(t.stats.max)));
            QVERIFY(partLabel(t).find("'s chunk, elements ") != std::string::npos);
        }
        if (pauses == 1) { // one step: the results are the gathered layer, whole
            QVERIFY(controller.step());
            const auto results = controller.waitForStepResults(30s);
            QVERIFY(results);
            for (const TensorSnapshot &t : *results) {
                QCOMPARE(t.count, t.total);
                QCOMPARE(t.stats.nanCount, std::int64_t(0));
                QVERIFY(std::abs(t.stats.max) <= bound);
            }
        } else {
            QVERIFY(controller.resume());
        }
    }
    QVERIFY2(pauses >= 3, qPrintable(QString("%1 all-gather pauses").arg(pauses))); // forward and backward, per layer
    QVERIFY(run.finish());
}

// PowerSGD (engine/grad_compressor.h): a pause at P's all-reduce shows,
// beside P, each compressed matrix's warm-start Q (cols x R) and error
// buffer (rows x cols), read-only; a name=.Q break holds at Q's all-reduce.
void TestBreakpoints::powerSgdPauseShowsQAndError()
{
    QFETCH(bool, cluster);
    constexpr int kRank = 2;
    TrainConfig c = ddpConfig("ddp", 3);
    c.compression = parseCompression("powersgd:2");
    c.compression.startStep = 0;
    // Each parameter's shape, by name, as the compressor sees it.
    std::map<std::string, std::vector<std::int64_t>> shapes;
    ModelConfig mc;
    mc.seed = 11;
    for (auto &[name, p] : makeModel(mc)->namedParameters())
        shapes[name] = p.sizes().vec();
    BreakpointController controller;
    controller.addBreakpoint(parseBreakpoint("allreduce@step=1,name=.P"));
    Run run(controller, c, cluster);
    const auto pause = run.nextPause(0, 60s);
    QVERIFY2(pause, "no pause at P's all-reduce within 60 s");
    QCOMPARE(int(pause->inputs.size()), 3);
    std::int64_t qElems = 0;
    for (const TensorSnapshot &in : pause->inputs) {
        QCOMPARE(in.name, std::string("grads.bucket0.P"));
        QVERIFY2(!in.related.empty(), "no related tensors at P's all-reduce");
        QCOMPARE(in.related.size() % 2, std::size_t(0)); // a Q and an error buffer per matrix
        qElems = 0;
        for (std::size_t i = 0; i < in.related.size(); i += 2) {
            const TensorSnapshot &q = in.related[i], &e = in.related[i + 1];
            QVERIFY2(q.name.rfind("Q ", 0) == 0, q.name.c_str());
            QCOMPARE(e.name, "error " + q.name.substr(2));
            const auto shape = shapes.find(q.name.substr(2));
            QVERIFY2(shape != shapes.end() && shape->second.size() >= 2, q.name.c_str());
            const std::int64_t rows = shape->second[0];
            const std::int64_t cols = std::accumulate(shape->second.begin() + 1, shape->second.end(),
                                                      std::int64_t(1), std::multiplies<>());
            QCOMPARE(q.count, cols * kRank);
            QCOMPARE(q.shape, (std::vector<std::int64_t>{cols, kRank}));
            QCOMPARE(e.count, rows * cols);
            QCOMPARE(e.shape, (std::vector<std::int64_t>{rows, cols}));
            // Step 1: the error feedback of step 0 is there; Q is the
            // averaged one, the same on every node (its values are kept: small).
            QVERIFY(e.stats.l2 > 0);
            QCOMPARE(q.values.size(), std::size_t(q.count));
            QCOMPARE(q.values, pause->inputs.front().related[i].values);
            qElems += q.count;
        }
    }
    // Different batch shares leave different error buffers.
    QVERIFY(pause->inputs[0].related[1].stats.l2 != pause->inputs[1].related[1].stats.l2);

    controller.clearBreakpoints();
    controller.addBreakpoint(parseBreakpoint("allreduce,name=.Q"));
    QVERIFY(controller.resume());
    const auto atQ = run.nextPause(pause->id, 60s);
    QVERIFY2(atQ, "no pause at Q's all-reduce within 60 s");
    for (const TensorSnapshot &in : atQ->inputs) {
        QCOMPARE(in.name, std::string("grads.bucket0.Q"));
        QCOMPARE(in.step, std::int64_t(1));
        QCOMPARE(in.count, qElems); // every matrix's Q, one after another
        QVERIFY(in.related.empty()); // attached to P's all-reduce only
    }
    controller.clearBreakpoints();
    QVERIFY(controller.resume());
    QVERIFY(run.finish());
    QVERIFY(std::isfinite(run.summary().finalLoss));
}

// What a node sends up with a held buffer stays bounded whatever it claims.
void TestBreakpoints::relatedTensorsAreBounded()
{
    std::vector<float> big(5000, 1.5f), small(6, -2.0f);
    smol::net::CollectiveInfo info;
    info.kind = smol::net::CollectiveKind::AllReduce;
    info.buffer = smol::net::viewOf(small.data(), small.size());
    for (int i = 0; i < 20; ++i)
        info.related.push_back({"error w" + std::to_string(i), smol::net::viewOf(i % 2 ? big.data() : small.data(),
                                                                                i % 2 ? big.size() : small.size())});
    const TensorSnapshot s = takePartSnapshot(info, /*before=*/true, 0, 0, SnapshotOptions{});
    QCOMPARE(s.related.size(), kMaxRelatedTensors);
    QCOMPARE(s.related[0].values.size(), small.size());
    QVERIFY(s.related[1].values.empty()); // over kRelatedFullLimit: figures and curve only
    QCOMPARE(s.related[1].stats.l2, std::sqrt(5000 * 1.5 * 1.5));
    QCOMPARE(s.related[1].downsampled.size(), std::size_t(256));

    // Back from JSON (a node's message, a session file): the same, bounded.
    const TensorSnapshot back = snapshotFromJson(snapshotToJson(s));
    QCOMPARE(back.related.size(), kMaxRelatedTensors);
    QCOMPARE(back.related[3].name, std::string("error w3"));
    QCOMPARE(back.related[3].count, std::int64_t(5000));
    QCOMPARE(back.related[2].values, s.related[2].values);
    QJsonArray hostile = relatedToJson(s.related);
    for (int i = 0; i < 30; ++i)
        hostile.append(QJsonObject{{"name", QString(5000, QChar(u'\n'))}, {"count", 3}});
    const auto bounded = relatedFromJson(hostile);
    QCOMPARE(bounded.size(), kMaxRelatedTensors);
    QVERIFY(relatedFromJson(QJsonArray{QJsonObject{{"name", QString(5000, QChar(u'\n'))}}}).front().name.size() <= 200);
    // A plain collective's snapshot has none, and its JSON no "related" key.
    info.related.clear();
    QVERIFY(!snapshotToJson(takePartSnapshot(info, true, 0, 0, SnapshotOptions{})).contains("related"));
}

QTEST_GUILESS_MAIN(TestBreakpoints)
#include "tst_breakpoints.moc"
