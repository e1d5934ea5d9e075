#include "mesh_health_check.h"

#include "communicator.h"
#include "trace.h"
#include "transport.h"

#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <stdexcept>
#include <thread>

namespace smol::net {

namespace {

// 1000 floats: not a multiple of most world sizes, so the ring's uneven
// chunks are exercised too.
constexpr std::size_t kCount = 1000;

// Counts payload bytes per rank. One instance is attached to every
// transport; onFrame runs on their I/O threads.
class ByteCounter : public TraceSink {
public:
    explicit ByteCounter(std::size_t ranks)
        : m_sent(ranks)
        , m_received(ranks)
    {
    }

    void onFrame(const FrameEvent &event) override
    {
        const bool send = event.side == FrameEvent::Side::Send;
        const int rank = send ? event.src : event.dst;
        if (rank < 0 || std::size_t(rank) >= m_sent.size())
            return;
        auto &counter = send ? m_sent[std::size_t(rank)] : m_received[std::size_t(rank)];
        counter.fetch_add(event.bytes, std::memory_order_relaxed);
    }

    std::uint64_t sent(std::size_t rank) const { return m_sent[rank].load(std::memory_order_relaxed); }
    std::uint64_t received(std::size_t rank) const
    {
        return m_received[rank].load(std::memory_order_relaxed);
    }

    std::uint64_t totalSent() const { return total(m_sent); }
    std::uint64_t totalReceived() const { return total(m_received); }

private:
    static std::uint64_t total(const std::vector<std::atomic<std::uint64_t>> &counters)
    {
        std::uint64_t sum = 0;
        for (const auto &c : counters)
            sum += c.load(std::memory_order_relaxed);
        return sum;
    }

    std::vector<std::atomic<std::uint64_t>> m_sent;
    std::vector<std::atomic<std::uint64_t>> m_received;
};

void checkRank(Transport &transport, int worldSize, RankHealth &health)
{
    Communicator comm(transport);
    comm.barrier();

    std::vector<float> buffer(kCount, float(transport.rank() + 1));
    comm.allReduce(viewOf(buffer.data(), buffer.size()), ReduceOp::Sum, "health-check");

    // Small integers: the float sum is exact whatever the reduction order.
    const float expected = float(worldSize) * float(worldSize + 1) / 2.0f;
    for (std::size_t i = 0; i < buffer.size(); ++i) {
        if (buffer[i] != expected) {
            health.error = "all-reduce element " + std::to_string(i) + " is " + std::to_string(buffer[i]) +
                           ", expected " + std::to_string(expected);
            return;
        }
    }
    health.ok = true;
}

} // namespace

std::vector<RankHealth> runMeshHealthCheck(std::vector<Transport *> ranks)
{
    const int worldSize = int(ranks.size());
    std::vector<RankHealth> results(ranks.size());
    ByteCounter counter(ranks.size());

    std::vector<TraceSink *> previous;
    for (Transport *t : ranks) {
        previous.push_back(t->traceSink());
        t->setTraceSink(&counter);
    }

    std::vector<std::thread> threads;
    for (int r = 0; r < worldSize; ++r) {
        threads.emplace_back([&, r] {
            Transport &transport = *ranks[std::size_t(r)];
            RankHealth &health = results[std::size_t(r)];
            health.rank = transport.rank();
            try {
                if (transport.rank() != r || transport.worldSize() != worldSize)
                    throw std::invalid_argument("transport " + std::to_string(r) + " is rank " +
                                                std::to_string(transport.rank()) + " of " +
                                                std::to_string(transport.worldSize()));
                checkRank(transport, worldSize, health);
            } catch (const std::exception &e) {
                health.error = e.what();
            }
            if (!health.ok)
                transport.abort(); // peers fail now instead of at their timeout
        });
    }
    for (std::thread &t : threads)
        t.join();

    // An I/O thread may report a frame's arrival just after the receiver
    // took it. On a healthy mesh every payload byte sent is received: wait
    // (briefly) for the two totals to agree before reading and detaching.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (counter.totalSent() != counter.totalReceived() && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));

    for (std::size_t r = 0; r < ranks.size(); ++r) {
        ranks[r]->setTraceSink(previous[r]);
        results[r].bytesSent = counter.sent(r);
        results[r].bytesReceived = counter.received(r);
    }
    return results;
}

} // namespace smol::net
