// `smolctl bench train`'s compression part (compress_bench.h).
#include "compress_bench.h"
#include "step_clock.h"

#include "engine/compression_config.h"
#include "engine/trainer.h"

#include <algorithm>
#include <vector>

namespace smol::engine {

namespace {

constexpr int kNodes = 4;
constexpr std::int64_t kBatch = 120;
constexpr std::int64_t kAccuracySteps = 600;
constexpr std::int64_t kSlowSteps = 40; // measured, after the start steps

TrainConfig configOf(const std::string &compress, std::int64_t steps)
{
    TrainConfig c;
    c.strategy = "ddp";
    c.nodes = kNodes;
    c.globalBatch = kBatch;
    c.steps = steps;
    c.optimizer.lr = 0.1;
    c.transport = net::TransportKind::Tcp;
    c.compression = parseCompression(compress);
    return c;
}

QString fixed(double v, int digits) { return QString::number(v, 'f', digits); }

} // namespace

int runCompressionBench(int rounds, QTextStream &out, QTextStream &err)
{
    const std::vector<std::string> kinds{"none", "fp16", "powersgd:2"};
    try {
        // 1. Bytes and accuracy.
        out << "# compression: ddp, mlp, 4 nodes, sgd lr 0.1, global batch 120, TCP loopback\n";
        out.flush();
        std::vector<double> bytes, accuracy;
        for (const std::string &k : kinds) {
            const TrainSummary s = runTraining(configOf(k, kAccuracySteps));
            bytes.push_back(s.extra.at("bytes_per_node_per_step"));
            accuracy.push_back(100 * s.testAccuracy);
        }
        out << "bytes per node per step: ddp " << fixed(bytes[0], 0) << " B, ddp+fp16 " << fixed(bytes[1], 0)
            << " B, ddp+powersgd:2 " << fixed(bytes[2], 0) << " B (from its step 11 on)\n";
        out << "ratio bytes per node per step ddp+fp16/ddp: " << fixed(bytes[1] / bytes[0], 4)
            << " (target 0.50 within 1%)\n";
        out << "ratio bytes per node per step ddp+powersgd:2/ddp on the mlp: " << fixed(bytes[2] / bytes[0], 4)
            << " (target <= 0.03)\n";
        out << "test accuracy after 600 steps (sgd, lr 0.1, global batch 120, 4 nodes): ddp " << fixed(accuracy[0], 1)
            << "%, ddp+fp16 " << fixed(accuracy[1], 1) << "%, ddp+powersgd:2 " << fixed(accuracy[2], 1)
            << "% (target: within 2 points of ddp)\n";
        out.flush();

        // 2. Slow links, rounds alternating the three.
        const std::int64_t from = CompressionConfig{}.startStep;
        std::vector<std::vector<double>> speed(kinds.size());
        for (int r = 0; r < rounds; ++r) {
            for (std::size_t i = 0; i < kinds.size(); ++i) {
                TrainConfig c = configOf(kinds[i], from + kSlowSteps);
                for (int a = 0; a < kNodes; ++a)
                    for (int b = a + 1; b < kNodes; ++b)
                        c.links.push_back(TrainConfig::Link{a, b, net::LinkLimit{100e6, std::chrono::milliseconds(1)}});
                bench::StepClock clock(from); // the steady state, after PowerSGD's plain start
                runTraining(c, &clock);
                speed[i].push_back(clock.samplesPerS(kBatch));
            }
        }
        const double plain = bench::median(speed[0]), psgd = bench::median(speed[2]), half = bench::median(speed[1]);
        out << "# every link 100 Mbit/s, 1 ms; samples/s over steps " << from + 1 << ".." << from + kSlowSteps
            << ", median of " << rounds << " rounds: ddp " << fixed(plain, 0) << ", ddp+powersgd:2 "
            << fixed(psgd, 0) << ", ddp+fp16 " << fixed(half, 0) << "\n";
        out << "ratio ddp+powersgd:2/ddp samples/s on 100 Mbit links (4 nodes): " << fixed(plain > 0 ? psgd / plain : 0, 2)
            << "\n";
        out << "ratio ddp+fp16/ddp samples/s on 100 Mbit links (4 nodes): " << fixed(plain > 0 ? half / plain : 0, 2)
            << "\n";
        out.flush();

        // 3. Loopback, global batch 64, 2 nodes: fp16 against single.
        std::vector<double> single, ddp, fp16;
        for (int r = 0; r < rounds; ++r) {
            TrainConfig s = configOf("none", 3200), d = configOf("none", 3200), f = configOf("fp16", 3200);
            s.strategy = "single";
            s.nodes = 1;
            d.nodes = f.nodes = 2;
            s.globalBatch = d.globalBatch = f.globalBatch = 64;
            d.countBytes = f.countBytes = false;
            single.push_back(runTraining(s).samplesPerS);
            ddp.push_back(runTraining(d).samplesPerS);
            fp16.push_back(runTraining(f).samplesPerS);
        }
        const double one = bench::median(single);
        out << "ratio ddp/single at global batch 64 with fp16: " << fixed(one > 0 ? bench::median(fp16) / one : 0, 2)
            << " (plain: " << fixed(one > 0 ? bench::median(ddp) / one : 0, 2) << "; target 0.85)\n";
    } catch (const std::exception &e) {
        err << "smolctl bench train: " << e.what() << "\n";
        return 1;
    }
    return 0;
}

} // namespace smol::engine
