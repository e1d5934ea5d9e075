// `smolctl bench allreduce`: our TCP ring all-reduce against c10d's
// ProcessGroupGloo, side by side in one run over loopback. Both sides use the
// same ranks (threads of this process), the same float32 inputs
// (benchInputValue: integer-valued, so every summation order gives the same
// bits), the same warm-up and timed iterations. Rounds alternate ours/gloo so
// machine noise hits both alike; each side reports its median round.
//
// busbw = S / t x 2(N-1)/N: the bytes each rank must move, per second (the
// nccl-tests convention), comparable across N.
#include "allreduce_bench.h"

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

struct Options {
    std::vector<int> nodes{2, 4};
    std::vector<std::size_t> sizes{256 << 10, 4 << 20, 64 << 20};
    int warmup = 2;
    int iters = 0; // 0 = by size
    int rounds = 3;
    bool vsGloo = false;
    std::size_t segment = 0; // 0 = communicator default
};

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

OursResult runOurs(int nodes, std::size_t bytes, int warmup, int iters, std::size_t segment)
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

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
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

} // namespace

int runAllreduceBench(const QStringList &args, QTextStream &out, QTextStream &err)
{
    Options opt;
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
        } else {
            err << "smolctl bench allreduce: unknown or incomplete argument '" << a
                << "' (see smolctl bench --help)\n";
            return 2;
        }
    }

    out << "# ring all-reduce over loopback TCP, float32, ranks as threads; busbw = S/t x 2(N-1)/N\n";
    out << "# " << opt.rounds << " alternating rounds per case, median round shown\n";
    out << QString("%1 %2 %3 %4 %5 %6\n")
               .arg("size", -6)
               .arg("nodes", 5)
               .arg("iters", 6)
               .arg("ours GB/s", 10)
               .arg(opt.vsGloo ? "gloo GB/s" : "", 10)
               .arg(opt.vsGloo ? "ours/gloo" : "", 9);
    out.flush();
    double minRatio = -1;
    bool allMatch = true;
    try {
        for (std::size_t bytes : opt.sizes) {
            for (int nodes : opt.nodes) {
                const int iters = opt.iters ? opt.iters : int(std::clamp<std::size_t>((std::size_t(512) << 20) / bytes, 5, 50));
                std::vector<double> ours, gloo;
                for (int round = 0; round < opt.rounds; ++round) {
                    OursResult o = runOurs(nodes, bytes, opt.warmup, iters, opt.segment);
                    ours.push_back(busbw(bytes, nodes, o.secondsPerIter));
                    bool match = matchesClosedForm(o.result, nodes);
                    if (opt.vsGloo) {
                        GlooAllreduceResult g = runGlooAllreduce(nodes, bytes, opt.warmup, iters);
                        gloo.push_back(busbw(bytes, nodes, g.secondsPerIter));
                        match = match && g.ranksAgree && g.result == o.result;
                    }
                    allMatch = allMatch && match;
                }
                QString row = QString("%1 %2 %3 %4")
                                  .arg(sizeLabel(bytes), -6)
                                  .arg(nodes, 5)
                                  .arg(iters, 6)
                                  .arg(median(ours), 10, 'f', 3);
                if (opt.vsGloo) {
                    const double ratio = median(gloo) > 0 ? median(ours) / median(gloo) : 0;
                    row += QString(" %1 %2").arg(median(gloo), 10, 'f', 3).arg(ratio, 9, 'f', 2);
                    if (bytes >= (std::size_t(4) << 20) && nodes > 1)
                        minRatio = minRatio < 0 ? ratio : std::min(minRatio, ratio);
                }
                out << row << "\n";
                out.flush();
            }
        }
    } catch (const std::exception &e) {
        err << "smolctl bench allreduce: " << e.what() << "\n";
        return 1;
    }
    out << "results " << (opt.vsGloo ? "(ours vs gloo vs closed form)" : "(ours vs closed form)") << ": "
        << (allMatch ? "identical" : "MISMATCH") << "\n";
    if (opt.vsGloo) {
        if (minRatio < 0)
            out << "allreduce ratio ours/gloo (min over rows >= 4M): n/a (no row of 4M or more with 2+ nodes)\n";
        else
            out << "allreduce ratio ours/gloo (min over rows >= 4M): " << QString::number(minRatio, 'f', 2) << "\n";
    }
    return allMatch ? 0 : 1;
}

} // namespace smol::engine
