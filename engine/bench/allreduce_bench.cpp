// `smolctl bench allreduce`: our TCP ring all-reduce against c10d's
// ProcessGroupGloo, side by side in one run over loopback. Both sides use the
// same ranks (threads of this process), the same float32 inputs
// (benchInputValue: integer-valued, so every summation order gives the same
// bits), the same warm-up and timed iterations. Rounds alternate ours/gloo so
// machine noise hits both alike; each side reports its median round.
//
// busbw = S / t x 2(N-1)/N: the bytes each rank must move, per second (the
// nccl-tests convention), comparable across N.
//
// Cases under 1 MiB are about latency, not bandwidth: each runs every
// all-reduce algorithm of ours (ring, doubling, auto; --allreduce picks one)
// and prints milliseconds per all-reduce beside Gloo's. Larger cases run the
// ring (or the --allreduce choice) as a bandwidth table row.
#include "allreduce_bench.h"
#include "step_clock.h"

#include "engine/gloo/gloo_allreduce.h"
#include "net/communicator.h"
#include "net/transport.h"
#include "engine/strategy.h"

#include <QRandomGenerator>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

namespace smol::engine {

namespace {

// Below this size a case is about latency: every algorithm runs (unless
// --allreduce picks one) and its row reads in milliseconds.
constexpr std::size_t kSmallBytes = std::size_t(1) << 20;

struct Options {
    std::vector<int> nodes{2, 4};
    std::vector<std::size_t> sizes{4 << 10, 64 << 10, 256 << 10, 4 << 20, 64 << 20};
    int warmup = 2;
    int iters = 0; // 0 = by size
    int rounds = 3;
    bool vsGloo = false;
    std::size_t segment = 0; // 0 = communicator default
    bool algorithmGiven = false;
    net::AllReduceAlgorithm algorithm = net::AllReduceAlgorithm::Ring;
};

std::vector<net::AllReduceAlgorithm> algorithmsFor(const Options &opt, std::size_t bytes)
{
    using A = net::AllReduceAlgorithm;
    if (opt.algorithmGiven)
        return {opt.algorithm};
    if (bytes < kSmallBytes)
        return {A::Ring, A::Doubling, A::Auto};
    return {A::Ring};
}

bool parseSize(const QString &text, std::size_t &out)
{
    QString t = text.trimmed().toUpper();
    std::size_t mult = 1;
    if (t.endsWith('K'))
        mult = std::size_t(1) << 10;
    else if (t.endsWith('M'))
        mult = std::size_t(1) << 20;
    else if (t.endsWith('G'))
        mult = std::size_t(1) << 30;
    if (mult != 1)
        t.chop(1);
    bool ok = false;
    const qulonglong v = t.toULongLong(&ok);
    out = std::size_t(v) * mult;
    return ok && v > 0;
}

QString sizeLabel(std::size_t bytes)
{
    if (bytes % (1 << 20) == 0)
        return QString::number(bytes >> 20) + "M";
    if (bytes % (1 << 10) == 0)
        return QString::number(bytes >> 10) + "K";
    return QString::number(bytes);
}

// Reusable thread barrier (C++17 has no std::barrier).
class Rendezvous {
public:
    explicit Rendezvous(int n) : m_n(n) {}
    void arrive()
    {
        std::unique_lock lock(m_mutex);
        const int gen = m_generation;
        if (++m_count == m_n) {
            m_count = 0;
            ++m_generation;
            m_cv.notify_all();
        } else {
            m_cv.wait(lock, [&] { return gen != m_generation; });
        }
    }

private:
    std::mutex m_mutex;
    std::condition_variable m_cv;
    int m_n, m_count = 0, m_generation = 0;
};

struct OursResult {
    double secondsPerIter = 0;
    std::vector<float> result;
};

OursResult runOurs(int nodes, std::size_t bytes, int warmup, int iters, std::size_t segment,
                   net::AllReduceAlgorithm algorithm)
{
    const std::size_t count = bytes / 4;
    const std::string token = QString::number(QRandomGenerator::system()->generate64(), 16).toStdString();
    auto ranks = net::makeLocalMesh(net::TransportKind::Tcp, nodes, token);
    Rendezvous sync(nodes);
    std::vector<std::vector<double>> times(static_cast<std::size_t>(nodes));
    std::vector<std::vector<float>> outputs(static_cast<std::size_t>(nodes));
    std::mutex errMutex;
    std::string error;
    std::vector<std::thread> threads;
    for (int r = 0; r < nodes; ++r) {
        threads.emplace_back([&, r] {
            try {
                net::Communicator comm(*ranks[std::size_t(r)]);
                if (segment)
                    comm.setSegmentBytes(segment);
                comm.setAllReduceAlgorithm(algorithm);
                std::vector<float> buf(count);
                for (int it = 0; it < warmup + iters; ++it) {
                    for (std::size_t i = 0; i < count; ++i)
                        buf[i] = benchInputValue(r, i);
                    sync.arrive();
                    const auto t0 = std::chrono::steady_clock::now();
                    comm.allReduce(net::viewOf(buf.data(), count), net::ReduceOp::Sum, "bench");
                    const auto t1 = std::chrono::steady_clock::now();
                    if (it >= warmup)
                        times[std::size_t(r)].push_back(std::chrono::duration<double>(t1 - t0).count());
                }
                outputs[std::size_t(r)] = std::move(buf);
            } catch (const std::exception &e) {
                std::lock_guard lock(errMutex);
                if (error.empty())
                    error = e.what();
            }
        });
    }
    for (auto &t : threads)
        t.join();
    if (!error.empty())
        throw std::runtime_error("our all-reduce: " + error);
    OursResult res;
    for (int it = 0; it < iters; ++it) {
        double worst = 0;
        for (int r = 0; r < nodes; ++r)
            worst = std::max(worst, times[std::size_t(r)][std::size_t(it)]);
        res.secondsPerIter += worst / iters;
    }
    for (int r = 1; r < nodes; ++r)
        if (outputs[std::size_t(r)] != outputs[0])
            throw std::runtime_error("our all-reduce: rank " + std::to_string(r) + " disagrees with rank 0");
    res.result = std::move(outputs[0]);
    return res;
}

double busbw(std::size_t bytes, int nodes, double seconds)
{
    if (seconds <= 0)
        return 0;
    return double(bytes) / seconds * 2.0 * (nodes - 1) / nodes / 1e9;
}

bool matchesClosedForm(const std::vector<float> &out, int nodes)
{
    for (std::size_t i = 0; i < out.size(); ++i) {
        float want = 0;
        for (int r = 0; r < nodes; ++r)
            want += benchInputValue(r, i);
        if (out[i] != want)
            return false;
    }
    return true;
}

QString kibLabel(std::size_t bytes)
{
    if (bytes % (1 << 20) == 0)
        return QString::number(bytes >> 20) + " MiB";
    if (bytes % (1 << 10) == 0)
        return QString::number(bytes >> 10) + " KiB";
    return QString::number(bytes) + " B";
}

int defaultIters(std::size_t bytes)
{
    // Small cases take microseconds an iteration: more of them steady the median.
    if (bytes < kSmallBytes)
        return 200;
    return int(std::clamp<std::size_t>((std::size_t(512) << 20) / bytes, 5, 50));
}

// One (size, nodes) case: seconds per iteration of each round, per algorithm
// of ours (in algorithmsFor order) and of gloo.
struct CaseTimes {
    std::vector<net::AllReduceAlgorithm> algorithms;
    std::vector<std::vector<double>> ours; // [algorithm][round]
    std::vector<double> gloo;              // [round]
    bool match = true;
};

CaseTimes runCase(const Options &opt, std::size_t bytes, int nodes, int iters)
{
    CaseTimes t;
    t.algorithms = algorithmsFor(opt, bytes);
    t.ours.resize(t.algorithms.size());
    for (int round = 0; round < opt.rounds; ++round) {
        std::vector<float> first;
        for (std::size_t a = 0; a < t.algorithms.size(); ++a) {
            OursResult o = runOurs(nodes, bytes, opt.warmup, iters, opt.segment, t.algorithms[a]);
            t.ours[a].push_back(o.secondsPerIter);
            t.match = t.match && matchesClosedForm(o.result, nodes) && (a == 0 || o.result == first);
            if (a == 0)
                first = std::move(o.result);
        }
        if (opt.vsGloo) {
            GlooAllreduceResult g = runGlooAllreduce(nodes, bytes, opt.warmup, iters);
            t.gloo.push_back(g.secondsPerIter);
            t.match = t.match && g.ranksAgree && g.result == first;
        }
    }
    return t;
}

double ratioOf(double ourSeconds, double glooSeconds)
{
    return ourSeconds > 0 ? glooSeconds / ourSeconds : 0;
}

// "4 KiB, 4 nodes: ring 0.21 ms, doubling 0.09 ms, gloo 0.15 ms; ring/gloo 0.71x, doubling/gloo 1.67x"
QString latencyRow(const CaseTimes &t, std::size_t bytes, int nodes)
{
    QString row = kibLabel(bytes) + ", " + QString::number(nodes) + " nodes:";
    QString ratios;
    for (std::size_t a = 0; a < t.algorithms.size(); ++a) {
        const QString name = net::allReduceAlgorithmName(t.algorithms[a]);
        const double sec = bench::median(t.ours[a]);
        row += QString(" %1 %2 ms,").arg(name).arg(sec * 1e3, 0, 'f', 3);
        if (!t.gloo.empty())
            ratios += QString(" %1/gloo %2x,").arg(name).arg(ratioOf(sec, bench::median(t.gloo)), 0, 'f', 2);
    }
    if (!t.gloo.empty())
        row += QString(" gloo %1 ms;").arg(bench::median(t.gloo) * 1e3, 0, 'f', 3) + ratios;
    row.chop(1);
    return row;
}

struct Summary {
    double minRatio = -1;  // ours/gloo over table rows >= 4 MiB with 2+ nodes
    double ring4M = -1;    // ring/gloo, 4 nodes
    double ring64M = -1;
    bool allMatch = true;
};

// The bandwidth table's row of a large case (one algorithm: ring unless --allreduce).
QString bandwidthRow(const CaseTimes &t, std::size_t bytes, int nodes, int iters, Summary &sum)
{
    std::vector<double> ours, gloo;
    for (double sec : t.ours[0])
        ours.push_back(busbw(bytes, nodes, sec));
    for (double sec : t.gloo)
        gloo.push_back(busbw(bytes, nodes, sec));
    QString row = QString("%1 %2 %3 %4")
                      .arg(sizeLabel(bytes), -6)
                      .arg(nodes, 5)
                      .arg(iters, 6)
                      .arg(bench::median(ours), 10, 'f', 3);
    if (!gloo.empty()) {
        const double ratio = bench::median(gloo) > 0 ? bench::median(ours) / bench::median(gloo) : 0;
        row += QString(" %1 %2").arg(bench::median(gloo), 10, 'f', 3).arg(ratio, 9, 'f', 2);
        if (bytes >= (std::size_t(4) << 20) && nodes > 1)
            sum.minRatio = sum.minRatio < 0 ? ratio : std::min(sum.minRatio, ratio);
        if (nodes == 4 && t.algorithms[0] == net::AllReduceAlgorithm::Ring) {
            if (bytes == (std::size_t(4) << 20))
                sum.ring4M = ratio;
            if (bytes == (std::size_t(64) << 20))
                sum.ring64M = ratio;
        }
    }
    return row;
}

// Parses the arguments into opt; returns 0, or 2 after printing why not.
int parseArgs(const QStringList &args, Options &opt, QTextStream &err)
{
    for (int i = 0; i < args.size(); ++i) {
        const QString a = args[i];
        auto value = [&](QString &v) {
            if (i + 1 >= args.size())
                return false;
            v = args[++i];
            return true;
        };
        QString v;
        if (a == "--vs-gloo") {
            opt.vsGloo = true;
        } else if (a == "--nodes" && value(v)) {
            opt.nodes.clear();
            for (const QString &p : v.split(',')) {
                bool ok = false;
                const int n = p.toInt(&ok);
                if (!ok || n < 1 || n > kMaxNodes) {
                    err << "smolctl bench allreduce: --nodes takes counts from 1 to " << kMaxNodes
                        << ", got '" << p << "'\n";
                    return 2;
                }
                opt.nodes.push_back(n);
            }
        } else if (a == "--sizes" && value(v)) {
            opt.sizes.clear();
            for (const QString &p : v.split(',')) {
                std::size_t s = 0;
                if (!parseSize(p, s) || s % 4 != 0 || s > (std::size_t(1) << 30)) {
                    err << "smolctl bench allreduce: --sizes takes byte counts like 256K,4M,64M (multiples of 4, "
                           "at most 1G), got '"
                        << p << "'\n";
                    return 2;
                }
                opt.sizes.push_back(s);
            }
        } else if ((a == "--iters" || a == "--warmup" || a == "--rounds") && value(v)) {
            bool ok = false;
            const int n = v.toInt(&ok);
            if (!ok || n < (a == "--warmup" ? 0 : 1) || n > 10000) {
                err << "smolctl bench allreduce: " << a << " takes a count, got '" << v << "'\n";
                return 2;
            }
            (a == "--iters" ? opt.iters : a == "--warmup" ? opt.warmup : opt.rounds) = n;
        } else if (a == "--segment" && value(v)) {
            if (!parseSize(v, opt.segment)) {
                err << "smolctl bench allreduce: --segment takes a byte count, got '" << v << "'\n";
                return 2;
            }
        } else if (a == "--allreduce" && value(v)) {
            if (!net::parseAllReduceAlgorithm(v.toStdString(), &opt.algorithm)) {
                err << "smolctl bench allreduce: --allreduce takes ring, doubling or auto, got '"
                    << v.left(40) << "'\n";
                return 2;
            }
            opt.algorithmGiven = true;
        } else {
            err << "smolctl bench allreduce: unknown or incomplete argument '" << a
                << "' (see smolctl bench --help)\n";
            return 2;
        }
    }
    return 0;
}

QString ratioText(double r)
{
    return r < 0 ? QString("n/a") : QString::number(r, 'f', 2);
}

void printSummary(const Options &opt, const Summary &sum, QTextStream &out)
{
    out << "results " << (opt.vsGloo ? "(ours vs gloo vs closed form)" : "(ours vs closed form)") << ": "
        << (sum.allMatch ? "identical" : "MISMATCH") << "\n";
    if (!opt.vsGloo)
        return;
    if (sum.minRatio < 0)
        out << "allreduce ratio ours/gloo (min over rows >= 4M): n/a (no row of 4M or more with 2+ nodes)\n";
    else
        out << "allreduce ratio ours/gloo (min over rows >= 4M): " << ratioText(sum.minRatio) << "\n";
    out << "ring/gloo at 4M: " << ratioText(sum.ring4M) << ", at 64M: " << ratioText(sum.ring64M)
        << " (4 nodes)\n";
}

} // namespace

int runAllreduceBench(const QStringList &args, QTextStream &out, QTextStream &err)
{
    Options opt;
    if (const int rc = parseArgs(args, opt, err))
        return rc;

    out << "# all-reduce over loopback TCP, float32, ranks as threads; busbw = S/t x 2(N-1)/N\n";
    out << "# " << opt.rounds << " alternating rounds per case, median round shown; cases under 1M: ms per "
        << "all-reduce of each algorithm" << (opt.vsGloo ? " and gloo/ours" : "") << "; larger: "
        << (opt.algorithmGiven ? net::allReduceAlgorithmName(opt.algorithm) : "ring") << "\n";
    out << QString("%1 %2 %3 %4 %5 %6\n")
               .arg("size", -6)
               .arg("nodes", 5)
               .arg("iters", 6)
               .arg("ours GB/s", 10)
               .arg(opt.vsGloo ? "gloo GB/s" : "", 10)
               .arg(opt.vsGloo ? "ours/gloo" : "", 9);
    out.flush();
    Summary sum;
    try {
        for (std::size_t bytes : opt.sizes) {
            for (int nodes : opt.nodes) {
                const int iters = opt.iters ? opt.iters : defaultIters(bytes);
                const CaseTimes t = runCase(opt, bytes, nodes, iters);
                sum.allMatch = sum.allMatch && t.match;
                out << (bytes < kSmallBytes ? latencyRow(t, bytes, nodes) : bandwidthRow(t, bytes, nodes, iters, sum))
                    << "\n";
                out.flush();
            }
        }
    } catch (const std::exception &e) {
        err << "smolctl bench allreduce: " << e.what() << "\n";
        return 1;
    }
    printSummary(opt, sum, out);
    return sum.allMatch ? 0 : 1;
}

} // namespace smol::engine
