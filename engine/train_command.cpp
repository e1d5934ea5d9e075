// `smolctl train`: one command's life as a small state machine
// (TrainCommand, driven by runTrainCommand at the bottom). Each phase may
// end the command with its exit code:
//
//   1. parse    the arguments into a TrainConfig, the cluster options
//               (cluster_commands.h) and this command's own (--json,
//               --break, --break-hold, --record); then the defaults that
//               depend on another option: --nodes on the strategy (single:
//               1, the others 2), --lr on the optimizer (adam: 0.001).
//               -h: the usage, exit 0. A bad value: one line, exit 2.
//   2. plan     check the model, and for an embedded run the whole config
//               (validateConfig); a cluster run is checked by
//               runClusterTraining, its own options first. Embedded or
//               cluster: any cluster option (--listen, --local-nodes,
//               --checkpoint-every, ...) runs through a coordinator. Open
//               the --record session file now, so a bad path costs no
//               training (exit 1).
//   3. run      start the break console (--break), then train: embedded
//               (runTraining: every node a thread of this process) or
//               through a coordinator (runClusterTraining: local node
//               threads and/or nodes that join over the network). Progress
//               reaches stdout step by step (ProgressPrinter). A config the
//               run rejects: one line, exit 2, and no session file; a
//               failure: one line, exit 1, the session finished as far as
//               it got.
//   4. report   the summary, exit 0.
//
// Plain output: a progress line (step, loss, samples/s) and a summary.
// --json: one JSON object per line: {"type":"step",...} per step, then
// {"type":"summary",...} with the fields docs/architecture.md's headless contract
// lists.
#include "train_command.h"

#include "engine/breakpoints/break_console.h"
#include "engine/compression_config.h"
#include "cluster/cluster_commands.h"
#include "cluster/config_json.h"
#include "engine/data/data_source.h"
#include "net/device_mesh.h"
#include "net/trace.h"
#include "session/session_recorder.h"
#include "trainer.h"

#include <QFile>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <mutex>
#include <optional>
#include <unistd.h>

namespace smol::engine {

const char kTrainUsage[] = R"(Usage: smolctl train [OPTIONS]

Trains a model on an in-process cluster: every node is a thread of this
process, connected to the others by real TCP over loopback (or in-memory
queues with --transport inproc).

Options:
  --strategy S        single|ddp|zero1|zero2|zero3|syncps|edp|pipeline|tensor
                      (default ddp)
  --nodes N           1 to 64 (default 2; single: 1, the only count it runs
                      on; --mesh: the product of its axes)
  --model M           mlp (Fashion-MNIST) | gpt (characters) | PATH.pt
                      (a TorchScript module taking (B,784) images, returning
                      (B,10) logits) (default mlp)
  --steps K           optimisation steps; edp: server updates (default 100)
  --global-batch B    samples per step over all nodes, at least one per
                      data-parallel node; split as evenly as it goes (the
                      first B mod N nodes take one more) (default 120)
  --accumulate K      gradient accumulation: K micro-steps of --global-batch
                      samples each per optimizer step, gradients synchronised
                      once after the last (ddp's all-reduce, zero's
                      reduce-scatter); a step then takes K x B samples, the
                      same ones --global-batch K x B takes; data-parallel
                      strategies and a mesh's dp axis (1 to 1024, default 1)
  --recompute R       none|full|selective: activation recomputation; full
                      keeps each layer's input and runs its forward again in
                      backward (mlp, gpt), selective only the gpt's attention
                      core (default none)
  --precision P       fp32|bf16: bf16 parameters, activations and gradients
                      (compute and wire), fp32 master weights and Adam
                      moments in the optimizer (default fp32)
  --seed S            seed for weights and sample order (default 0)
  --transport T       tcp|inproc (default tcp)
  --backend B         ours|gloo: who runs the collectives, our transport or
                      c10d's ProcessGroupGloo (threads: over loopback; node
                      processes: rendezvous through the coordinator, Gloo's
                      unauthenticated TCP pairs between the nodes; bytes
                      sent then counts each collective's payload, not the
                      wire; docs/runtime.md, "Backends") (default ours)
  --optimizer O       sgd|adam (default sgd)
  --lr X              learning rate (default 0.1 for sgd, 0.001 for adam)
  --bucket-bytes N    ddp gradient bucket size (default 262144)
  --compress C        ddp (alone or as a mesh's dp axis): none|fp16|bf16|
                      powersgd:R: average the gradients in 16 bits (half the
                      bytes) or as PowerSGD's rank-R factors P and Q with
                      error feedback (docs/strategies.md, "Compression")
                      (default none)
  --compress-start K  powersgd: plain all-reduces for the first K steps
                      (default 10, as PyTorch's hook)
  --allreduce A       ring|doubling|auto: our all-reduce; auto takes
                      recursive doubling for buffers up to 64 KiB, the ring
                      above (default: ring, or auto with --compress)
  --staleness K       edp: no gradient is applied more than K updates after
                      the weights it was computed on; workers further behind
                      wait for fresh weights (default 4)
  --placement SPEC    pipeline: layers to nodes, e.g. 0-1:0,2-4:1,5:2 (each
                      node one contiguous range of layers; stage i is the
                      node holding the i-th range) or auto: balanced by
                      parameter count, stage i on node i (default auto)
  --micro-batches M   pipeline: micro-batches per step, dividing the global
                      batch (default 1)
  --schedule S        pipeline: gpipe|1f1b (default 1f1b)
  --mesh AXES         combine parallelisms on a device mesh, e.g.
                      dp=2,tp=2,pp=2 (any of dp, tp, pp, cp; their product is
                      --nodes; rank order tp fastest, then cp, pp, dp; add
                      ,sp for Megatron sequence parallelism on tp);
                      --strategy says what dp does (ddp, zero1, zero2, zero3);
                      --placement, --micro-batches, --schedule apply to pp;
                      tp and cp need --model gpt (docs/strategies.md, "Mesh")
  --slowdown R:F      node R computes F times slower (F >= 1; e.g. 1:4 for a
                      Raspberry Pi next to desktops); repeatable
  --link A-B:MBIT:MS  emulate a slow link between nodes A and B, both
                      directions: MBIT Mbit/s (0 = unlimited) and MS ms
                      one-way latency (e.g. 0-3:20:5 for Wi-Fi); repeatable;
                      --link all:MBIT:MS sets every pair at once
  --corpus FILE       gpt: text to train on (default: the GPL-3 text that
                      Debian's base-files installs)
  --n-layer N --n-head N --n-embd N --block-size N   gpt sizes (2, 4, 64, 64)
  --break SPEC        pause every node at a collective and print each node's
                      tensor stats; SPEC is KIND[@step=N][,rank=R][,name=SUBSTR]
                      (KIND: allreduce, reducescatter, allgather, broadcast,
                      sendrecv, push, pull, any) or next; repeatable
  --break-hold SEC    resume a pause after SEC seconds or on a line from
                      stdin, whichever comes first (default: a line from
                      stdin; at EOF on stdin, at once)
  --test-every K      every K steps (and after the last) measure the loss on
                      the first 1000 held-out samples (lock-step strategies;
                      default 0: never)
  --record FILE       record the run to a session file (SQLite; see
                      `smolctl info`, `smolctl export`, docs/session-format.md):
                      every frame, collective and step span, memory per
                      step, metrics, log lines, and the tensors at pauses
  --json              one JSON object per line instead of progress text
  -h, --help          show this help

Exit code 0 on success, 1 when the run fails, 2 on bad arguments.
)";

namespace {

void printJson(QTextStream &out, const QJsonObject &o)
{
    out << QJsonDocument(o).toJson(QJsonDocument::Compact) << "\n";
    out.flush();
}

class ProgressPrinter : public TrainObserver {
public:
    ProgressPrinter(QTextStream &out, bool json, std::int64_t steps)
        : m_out(out)
        , m_json(json)
        , m_steps(steps)
    {
        m_tty = isatty(fileno(stdout));
    }
    std::mutex &outputMutex() { return m_mutex; } // shared with the break console
    void onStep(const StepReport &r) override
    {
        std::lock_guard lock(m_mutex);
        if (m_json) {
            QJsonArray live;
            for (const auto &m : r.memory)
                live.append(double(m.live));
            printJson(m_out, QJsonObject{{"type", "step"},
                                         {"step", double(r.step)},
                                         {"loss", r.loss},
                                         {"samples_per_s", r.samplesPerS},
                                         {"seconds", r.seconds},
                                         {"live_bytes_per_node", live}});
            return;
        }
        const std::int64_t done = r.step + 1;
        if (!m_tty && done != m_steps && done % std::max<std::int64_t>(1, m_steps / 10) != 0)
            return;
        const int width = 30;
        const int filled = int(width * done / m_steps);
        m_out << (m_tty ? "\r" : "") << "[" << QString(filled, '#') << QString(width - filled, '.')
              << "] step " << done << "/" << m_steps << "  loss " << QString::number(r.loss, 'f', 4) << "  "
              << QString::number(r.samplesPerS, 'f', 0) << " samples/s" << (m_tty ? "" : "\n");
        if (m_tty && done == m_steps)
            m_out << "\n";
        m_out.flush();
    }

    void onTestLoss(std::int64_t step, double loss) override
    {
        std::lock_guard lock(m_mutex);
        if (m_json)
            printJson(m_out, QJsonObject{{"type", "test"}, {"step", double(step)}, {"test_loss", loss}});
        else
            m_out << (m_tty ? "\n" : "") << "step " << step + 1 << ": held-out loss "
                  << QString::number(loss, 'f', 4) << "\n";
        m_out.flush();
    }

private:
    QTextStream &m_out;
    bool m_json;
    std::int64_t m_steps;
    bool m_tty = false;
    std::mutex m_mutex;
};

// What the arguments ask for: parse()'s result.
struct TrainRequest {
    TrainConfig config;
    ClusterCliOptions cluster; // cluster.enabled: run through a coordinator
    std::optional<int> nodes;  // --nodes; unset: the strategy's default
    bool lrGiven = false;
    bool json = false;
    std::vector<Breakpoint> breaks;
    double breakHold = -1; // -1: until a line on stdin
    QString recordPath;
};

// The options that take an integer in [lo, hi], and where it goes.
struct IntegerOption {
    const char *name;
    std::int64_t lo, hi;
    void (*set)(TrainRequest &, std::int64_t);
};
const IntegerOption kIntegerOptions[] = {
    {"--nodes", 1, kMaxNodes, [](TrainRequest &r, std::int64_t n) { r.nodes = int(n); }},
    {"--steps", 1, 100000000, [](TrainRequest &r, std::int64_t n) { r.config.steps = n; }},
    {"--global-batch", 1, 1 << 20, [](TrainRequest &r, std::int64_t n) { r.config.globalBatch = n; }},
    {"--seed", 0, std::numeric_limits<std::int64_t>::max(),
     [](TrainRequest &r, std::int64_t n) { r.config.seed = std::uint64_t(n); }},
    {"--bucket-bytes", 4, std::int64_t(1) << 30,
     [](TrainRequest &r, std::int64_t n) { r.config.bucketBytes = n; }},
    {"--compress-start", 0, 100000000,
     [](TrainRequest &r, std::int64_t n) { r.config.compression.startStep = n; }},
    {"--test-every", 0, 100000000, [](TrainRequest &r, std::int64_t n) { r.config.testEvery = n; }},
    {"--staleness", 0, 1000000, [](TrainRequest &r, std::int64_t n) { r.config.maxStaleness = n; }},
    {"--n-layer", 1, 64, [](TrainRequest &r, std::int64_t n) { r.config.model.nLayer = n; }},
    {"--n-head", 1, 64, [](TrainRequest &r, std::int64_t n) { r.config.model.nHead = n; }},
    {"--n-embd", 1, 4096, [](TrainRequest &r, std::int64_t n) { r.config.model.nEmbd = n; }},
    {"--block-size", 1, 4096, [](TrainRequest &r, std::int64_t n) { r.config.model.blockSize = n; }},
    {"--micro-batches", 1, 1 << 20, [](TrainRequest &r, std::int64_t n) { r.config.microBatches = n; }},
    {"--accumulate", 1, kMaxAccumulate, [](TrainRequest &r, std::int64_t n) { r.config.accumulate = n; }},
};

// --slowdown R:F. Returns the error, empty when `v` is good.
QString parseSlowdown(const QString &v, TrainConfig &c)
{
    const QStringList parts = v.split(':');
    bool rankOk = false, factorOk = false;
    const int rank = parts.size() == 2 ? parts[0].toInt(&rankOk) : -1;
    const double factor = parts.size() == 2 ? parts[1].toDouble(&factorOk) : 0;
    if (!rankOk || !factorOk || rank < 0 || rank >= kMaxNodes || !std::isfinite(factor) || factor < 1)
        return "bad value '" + v + "' for --slowdown (expected RANK:FACTOR with FACTOR >= 1, e.g. 1:4)";
    if (c.behaviour.size() <= std::size_t(rank))
        c.behaviour.resize(std::size_t(rank) + 1);
    c.behaviour[std::size_t(rank)].slowdown = factor;
    return {};
}

// --link all:MBIT:MS until expandAllLinks() knows the nodes.
constexpr int kAllLinks = -1;

// Every pair of `nodes` for each `all` link, in place (a pair's own --link,
// given after, replaces it: the later entry wins).
void expandAllLinks(TrainConfig &c)
{
    std::vector<TrainConfig::Link> out;
    for (const TrainConfig::Link &l : c.links) {
        if (l.a != kAllLinks) {
            out.push_back(l);
            continue;
        }
        for (int a = 0; a < c.nodes; ++a)
            for (int b = a + 1; b < c.nodes; ++b)
                out.push_back(TrainConfig::Link{a, b, l.limit});
    }
    c.links = std::move(out);
}

// --link A-B:MBIT:MS. Returns the error, empty when `v` is good.
QString parseLink(const QString &v, TrainConfig &c)
{
    static const QRegularExpression spec(R"(^(?:(\d+)-(\d+)|all):(\d+(?:\.\d*)?):(\d+(?:\.\d*)?)$)");
    const QRegularExpressionMatch m = spec.match(v);
    TrainConfig::Link link;
    if (m.hasMatch()) {
        const bool all = m.captured(1).isEmpty(); // every pair: expanded once --nodes is known
        link.a = all ? kAllLinks : m.captured(1).toInt();
        link.b = all ? kAllLinks : m.captured(2).toInt();
        link.limit.bitsPerSecond = m.captured(3).toDouble() * 1e6;
        link.limit.latency = std::chrono::nanoseconds(std::int64_t(m.captured(4).toDouble() * 1e6));
    }
    if (!m.hasMatch() || (link.a == link.b && link.a != kAllLinks) || link.limit.latency > std::chrono::seconds(10))
        return "bad value '" + v + "' for --link (expected A-B:MBITS:MS with A != B, e.g. 0-3:20:5, or all:MBITS:MS)";
    c.links.push_back(link);
    return {};
}

// One `smolctl train`: its phases in the order runTrainCommand calls them.
// A phase that returns an exit code ends the command there.
class TrainCommand {
public:
    TrainCommand(QTextStream &out, QTextStream &err)
        : m_out(out)
        , m_err(err)
    {
    }

    const TrainRequest &request() const { return m_request; } // what parse() made of the arguments

    // 1. Arguments -> m_request, then the defaults that depend on others.
    std::optional<int> parse(const QStringList &args)
    {
        TrainRequest &r = m_request;
        for (int i = 0; i < args.size(); ++i) {
            const QString a = args[i];
            if (a == "--json") {
                r.json = true;
                continue;
            }
            if (a == "-h" || a == "--help") {
                m_out << kTrainUsage << kClusterTrainUsage;
                return 0;
            }
            QString error;
            if (parseClusterOption(args, i, r.cluster, error)) {
                if (!error.isEmpty())
                    return bad(error);
                continue;
            }
            if (i + 1 >= args.size())
                return bad("'" + a + "' is unknown or needs a value (see smolctl train --help)");
            error = parseValue(a, args[++i]);
            if (!error.isEmpty())
                return bad(error);
        }
        // single runs on one node only: that is its default, not an error.
        r.config.nodes = r.nodes.value_or(r.config.strategy == "single" ? 1 : TrainConfig{}.nodes);
        if (!r.nodes && !r.config.mesh.empty()) { // a mesh's nodes are its product
            try {
                r.config.nodes = net::DeviceMesh::parse(r.config.mesh).nodes();
            } catch (const std::invalid_argument &) { // validateConfig says why
            }
        }
        if (!r.lrGiven && r.config.optimizer.kind == OptimizerConfig::Kind::Adam)
            r.config.optimizer.lr = 1e-3;
        expandAllLinks(r.config);
        return {};
    }

    // 2. Check what can be checked before training; the progress printer,
    // breakpoints and session file the run reports to.
    std::optional<int> plan()
    {
        TrainConfig &c = m_request.config;
        if (c.model.kind != "mlp" && c.model.kind != "gpt" &&
            !QString::fromStdString(c.model.kind).endsWith(".pt"))
            return bad("--model takes mlp, gpt or a TorchScript file ending in .pt, got '" +
                       QString::fromStdString(c.model.kind) + "'");
        try {
            if (!m_request.cluster.enabled)
                validateConfig(c);
            else
                checkBackend(c); // refused before any node is waited for
        } catch (const std::invalid_argument &e) {
            return bad(e.what());
        }
        m_progress.emplace(m_out, m_request.json, c.steps);
        for (const Breakpoint &b : m_request.breaks)
            m_breakpoints.addBreakpoint(b);
        if (!m_request.breaks.empty()) {
            c.breakpoints = &m_breakpoints;
            m_request.cluster.breakpoints = &m_breakpoints;
        }
        if (m_request.recordPath.isEmpty())
            return {};
        const SessionHeader h = sessionHeaderFor(c, m_request.cluster.listen ? "" : "127.0.0.1");
        try {
            m_recorder = std::make_unique<SessionRecorder>(m_request.recordPath, h);
        } catch (const std::exception &e) {
            m_err << "smolctl train: " << e.what() << "\n";
            return 1;
        }
        SessionRecorder *rec = m_recorder.get();
        c.events = rec;
        m_request.cluster.events = rec;
        m_breakpoints.setPausedCallback([rec](std::shared_ptr<const PauseState> pause) {
            recordPause(*pause, *rec, net::monotonicNs());
        });
        return {};
    }

    // 3. Train, embedded or through a coordinator; finish the session.
    std::optional<int> run()
    {
        const TrainRequest &r = m_request;
        if (!r.breaks.empty()) {
            m_console.emplace(m_breakpoints, m_out, m_progress->outputMutex(), r.json, r.breakHold);
            m_console->start();
        }
        try {
            m_summary = r.cluster.enabled ? runClusterTraining(r.config, r.cluster, &*m_progress, m_err)
                                          : runTraining(r.config, &*m_progress);
        } catch (const std::invalid_argument &e) {
            discardRecording(); // nothing ran: no session
            return bad(e.what());
        } catch (const std::exception &e) {
            m_err << "smolctl train: " << e.what() << "\n";
            finishRecording(std::nullopt);
            return 1;
        }
        finishRecording(m_summary.finalLoss);
        return {};
    }

    // 4. The summary on stdout.
    int report()
    {
        if (m_request.json)
            printJson(m_out, summaryJson());
        else
            printSummaryText();
        return 0;
    }

private:
    int bad(const QString &why)
    {
        m_err << "smolctl train: " << why << "\n";
        m_err.flush();
        return 2;
    }

    // One option with its value `v`. Returns the error, empty when good.
    QString parseValue(const QString &a, const QString &v)
    {
        TrainRequest &r = m_request;
        TrainConfig &c = r.config;
        bool ok = true;
        if (const auto it = std::find_if(std::begin(kIntegerOptions), std::end(kIntegerOptions),
                                         [&](const IntegerOption &o) { return a == o.name; });
            it != std::end(kIntegerOptions)) {
            const qlonglong n = v.toLongLong(&ok);
            ok = ok && n >= it->lo && n <= it->hi;
            it->set(r, n);
        } else if (a == "--strategy") {
            c.strategy = v.toStdString();
        } else if (a == "--model") {
            c.model.kind = v.toStdString();
        } else if (a == "--corpus") {
            c.corpus = v.toStdString();
        } else if (a == "--placement") {
            c.placement = v.toStdString();
        } else if (a == "--mesh") {
            c.mesh = v.toStdString();
        } else if (a == "--transport") {
            ok = v == "tcp" || v == "inproc";
            c.transport = v == "inproc" ? net::TransportKind::Inproc : net::TransportKind::Tcp;
        } else if (a == "--optimizer") {
            ok = v == "sgd" || v == "adam";
            c.optimizer.kind = v == "adam" ? OptimizerConfig::Kind::Adam : OptimizerConfig::Kind::Sgd;
        } else if (a == "--lr") {
            c.optimizer.lr = v.toDouble(&ok);
            ok = ok && c.optimizer.lr > 0;
            r.lrGiven = true;
        } else if (a == "--precision") {
            ok = parsePrecision(v.toStdString(), &c.model.precision);
        } else if (a == "--recompute") {
            ok = parseRecompute(v.toStdString(), &c.model.recompute);
        } else if (a == "--schedule") {
            ok = v == "gpipe" || v == "1f1b";
            c.schedule = v == "gpipe" ? PipelineSchedule::GPipe : PipelineSchedule::OneFOneB;
        } else if (a == "--backend") {
            ok = v == "ours" || v == "gloo";
            c.backend = v == "gloo" ? TrainConfig::Backend::Gloo : TrainConfig::Backend::Ours;
        } else if (a == "--slowdown") {
            return parseSlowdown(v, c);
        } else if (a == "--link") {
            return parseLink(v, c);
        } else if (a == "--compress") {
            try {
                const std::int64_t start = c.compression.startStep; // --compress-start may come first
                c.compression = parseCompression(v.toStdString());
                c.compression.startStep = start;
            } catch (const std::invalid_argument &e) {
                return e.what();
            }
        } else if (a == "--allreduce") {
            net::AllReduceAlgorithm algorithm;
            ok = net::parseAllReduceAlgorithm(v.toStdString(), &algorithm);
            c.allReduce = v.toStdString();
        } else if (a == "--break") {
            try {
                r.breaks.push_back(parseBreakpoint(v.toStdString()));
            } catch (const std::invalid_argument &e) {
                return e.what();
            }
        } else if (a == "--break-hold") {
            r.breakHold = v.toDouble(&ok);
            ok = ok && std::isfinite(r.breakHold) && r.breakHold >= 0;
        } else if (a == "--record") {
            r.recordPath = v;
            ok = !v.isEmpty();
        } else {
            return "unknown option '" + a + "' (see smolctl train --help)";
        }
        return ok ? QString() : QString("bad value '" + v + "' for " + a);
    }

    // The run rejected its config before training: remove the session file.
    void discardRecording()
    {
        if (!m_recorder)
            return;
        m_recorder->close();
        m_recorder.reset();
        for (const char *suffix : {"", "-wal", "-shm"})
            QFile::remove(m_request.recordPath + suffix);
    }

    void finishRecording(std::optional<double> finalLoss)
    {
        if (!m_recorder)
            return;
        try {
            m_recorder->finish(finalLoss);
            m_err << "smolctl train: recorded " << m_recorder->eventsWritten() << " events to "
                  << m_request.recordPath << "\n";
        } catch (const std::exception &e) {
            m_err << "smolctl train: the recording failed: " << e.what() << "\n";
        }
        m_err.flush();
    }

    // {"type":"summary",...}: docs/architecture.md's headless contract.
    QJsonObject summaryJson() const
    {
        const TrainSummary &s = m_summary;
        const TrainConfig &c = m_request.config;
        QJsonArray memory;
        for (const auto &m : s.memoryPerNode)
            memory.append(memoryToJson(m));
        QJsonObject o{{"type", "summary"},
                      {"strategy", QString::fromStdString(s.strategy)},
                      {"nodes", s.nodes},
                      {"steps", double(s.steps)},
                      {"accumulate", double(c.accumulate)},
                      {"recompute", recomputeName(c.model.recompute)},
                      {"precision", precisionName(c.model.precision)},
                      {"model", QString::fromStdString(c.model.kind)},
                      {"optimizer", optimizerName(c.optimizer.kind)},
                      {"transport", net::transportName(c.transport)},
                      {"backend", c.backend == TrainConfig::Backend::Gloo ? "gloo" : "ours"},
                      {"final_loss", s.finalLoss},
                      {"param_count", double(s.paramCount)},
                      {"param_checksum", s.paramChecksum},
                      {"param_l2", s.paramL2},
                      {"samples_per_s", s.samplesPerS},
                      {"seconds", s.seconds},
                      {"bytes_sent_per_node", jsonNumbers(s.bytesSentPerNode)},
                      {"peak_bytes_per_node", jsonNumbers(s.peakBytesPerNode)},
                      {"memory_per_node", memory}};
        if (s.testAccuracy >= 0)
            o.insert("test_accuracy", s.testAccuracy);
        if (!c.mesh.empty()) {
            o.insert("mesh", QString::fromStdString(net::DeviceMesh::parse(c.mesh).spec()));
            QJsonArray byAxis;
            for (const auto &node : s.bytesInStepsByAxis) {
                QJsonObject axes;
                for (const auto &[axis, bytes] : node)
                    axes.insert(QString::fromStdString(axis), double(bytes));
                byAxis.append(axes);
            }
            o.insert("bytes_in_steps_by_axis", byAxis);
        }
        if (s.async.updates > 0) {
            o.insert("updates_applied", double(s.async.updates));
            o.insert("max_staleness", double(s.async.maxStaleness));
            o.insert("pushes_per_node", jsonNumbers(s.async.pushes));
            o.insert("bound_waits_per_node", jsonNumbers(s.async.waits));
            o.insert("discarded_pushes_per_node", jsonNumbers(s.async.discarded));
            o.insert("staleness_histogram", jsonNumbers(s.async.stalenessHistogram));
        }
        for (const auto &[key, value] : s.extra)
            o.insert(QString::fromStdString(key), value);
        o.insert("compress", QString::fromStdString(m_request.config.compression.text()));
        o.insert("allreduce", net::allReduceAlgorithmName(allReduceAlgorithmOf(m_request.config)));
        if (!s.lostRanks.empty()) {
            QJsonArray lost;
            for (int r : s.lostRanks)
                lost.append(r);
            o.insert("lost_ranks", lost);
        }
        return o;
    }

    // Loss and speed; each node's bytes and memory; edp's server and
    // workers; pipeline's bubble, measured beside the formula.
    void printSummaryText()
    {
        const TrainSummary &s = m_summary;
        const TrainConfig &c = m_request.config;
        QTextStream &out = m_out;
        const bool gloo = c.backend == TrainConfig::Backend::Gloo;
        out << s.strategy.c_str() << (c.mesh.empty() ? QString() : " on mesh " + QString::fromStdString(net::DeviceMesh::parse(c.mesh).spec())) << " on "
            << s.nodes << " node(s)" << (gloo ? " (collectives on Gloo)" : "")
            << ", " << s.steps << " steps"
            << (c.accumulate > 1 ? QString(" of %1 micro-steps x %2 samples").arg(c.accumulate).arg(c.globalBatch)
                                 : QString())
            << ": final loss " << QString::number(s.finalLoss, 'f', 4);
        if (s.testAccuracy >= 0)
            out << ", test accuracy " << QString::number(100 * s.testAccuracy, 'f', 1) << "%";
        out << ", " << QString::number(s.samplesPerS, 'f', 0) << " samples/s\n";
        if (s.extra.count("reforms") && s.extra.at("reforms") > 0)
            out << "cluster re-formed " << s.extra.at("reforms") << " time(s) after losing nodes\n";
        out << "parameters: " << s.paramCount << ", checksum " << QString::number(s.paramChecksum, 'g', 10)
            << ", L2 " << QString::number(s.paramL2, 'g', 10) << "\n";
        for (int r = 0; r < s.nodes; ++r) {
            if (std::find(s.lostRanks.begin(), s.lostRanks.end(), r) != s.lostRanks.end()) {
                out << "node " << r << ": lost mid-run\n";
                continue;
            }
            const net::MemoryByCategory &m = s.memoryPerNode[std::size_t(r)];
            out << "node " << r << (gloo ? ": handed to Gloo " : ": sent ")
                << s.bytesSentPerNode[std::size_t(r)] << " B; memory params " << m.params << " grads "
                << m.grads << " optimizer " << m.optimizer << " activations " << m.activations << " comm "
                << m.comm << " peak " << s.peakBytesPerNode[std::size_t(r)] << " B\n";
        }
        if (s.async.updates > 0) {
            out << "server: " << s.async.updates << " updates applied, max staleness " << s.async.maxStaleness
                << " (bound " << c.maxStaleness << ")\n";
            for (int r = 1; r < s.nodes; ++r)
                out << "worker " << r << ": " << s.async.pushes[std::size_t(r)] << " pushes applied, "
                    << s.async.waits[std::size_t(r)] << " waits for the bound, "
                    << s.async.discarded[std::size_t(r)] << " discarded at the end"
                    << (std::size_t(r) < s.async.lost.size() && s.async.lost[std::size_t(r)]
                            ? " (lost mid-run)"
                            : "")
                    << "\n";
        }
        printCompression();
        const auto bubble = s.extra.find("bubble_fraction");
        const auto formula = s.extra.find("bubble_fraction_formula");
        if (bubble != s.extra.end() && formula != s.extra.end())
            out << "pipeline bubble (" << pipelineScheduleName(c.schedule) << ", " << c.microBatches
                << " micro-batches): stages idle " << QString::number(100 * bubble->second, 'f', 1)
                << "% of a step (measured), (p-1)/(m+p-1) = "
                << QString::number(100 * formula->second, 'f', 1) << "%\n";
    }

    // What compression sent: bytes per node per step on the wire from its
    // first compressed step on.
    void printCompression()
    {
        const TrainConfig &c = m_request.config;
        const auto perStep = m_summary.extra.find("bytes_per_node_per_step");
        if (!c.compression.isOn() || perStep == m_summary.extra.end())
            return;
        const bool gloo = c.backend == TrainConfig::Backend::Gloo;
        m_out << "compression " << c.compression.text().c_str() << " (all-reduce "
              << (gloo ? "Gloo's" : net::allReduceAlgorithmName(allReduceAlgorithmOf(c))) << "): "
              << QString::number(perStep->second, 'f', 0) << (gloo ? " B handed to Gloo" : " B sent")
              << " per node per step from step "
              << c.compression.firstCompressedStep() + 1 << " on\n";
    }

    QTextStream &m_out;
    QTextStream &m_err;
    TrainRequest m_request;
    // Declared in the order they are needed: destroyed the other way round,
    // the console (which waits on the breakpoints and prints under the
    // progress printer's mutex) before either.
    BreakpointController m_breakpoints;
    std::optional<ProgressPrinter> m_progress;
    std::optional<BreakConsole> m_console;
    std::unique_ptr<SessionRecorder> m_recorder;
    TrainSummary m_summary;
};

} // namespace

// The run's settings alone, through TrainCommand's parse (its option table
// and defaults): what `smolctl plan` takes.
QString parseRunOptions(const QStringList &args, TrainConfig &config)
{
    QString outText, errText;
    QTextStream out(&outText), err(&errText);
    TrainCommand command(out, err);
    if (const auto exit = command.parse(args)) {
        err.flush();
        return *exit == 0 ? QStringLiteral("-h is not a run setting")
                          : errText.trimmed().remove(QRegularExpression(QStringLiteral("^smolctl train: ")));
    }
    const TrainRequest &r = command.request();
    if (r.cluster.enabled || !r.breaks.empty() || !r.recordPath.isEmpty() || r.json)
        return QStringLiteral("takes the run's settings only, not cluster options, --break, --record or --json");
    config = r.config;
    return {};
}

int runTrainCommand(const QStringList &args, QTextStream &out, QTextStream &err)
{
    TrainCommand command(out, err);
    if (const auto exit = command.parse(args))
        return *exit;
    if (const auto exit = command.plan())
        return *exit;
    if (const auto exit = command.run())
        return *exit;
    return command.report();
}

} // namespace smol::engine
