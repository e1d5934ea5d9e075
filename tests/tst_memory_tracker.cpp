// The tracking CPU allocator: exact bytes per node, frees charged back to the
// allocating node from any thread, nodes as concurrent threads, autograd, and
// the raw_allocate path LibTorch's oneDNN glue uses.
#include "engine/memory_tracker.h"

#include <c10/core/CPUAllocator.h>
#include <torch/torch.h>

#include <QtTest>

#include <atomic>
#include <random>
#include <thread>
#include <vector>

using namespace smol::engine;

class TestMemoryTracker : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase();
    void init();
    void chargesExactBytes();
    void freeOnAnotherThreadChargesTheOwner();
    void concurrentNodes();
    void peakAndResetPeak();
    void windowPeakIsApartFromPeak();
    void nestedScopes();
    void resetNodeForgetsOutstanding();
    void autogradChargesTheNode();
    void rawAllocateAndMkldnn();
    void storageBytesCountsViewsOnce();
    void preInstallAllocationsFreeFine();

private:
    torch::Tensor m_before;      // made by the default allocator
    void *m_rawBefore = nullptr; // likewise, through the raw interface
    c10::Allocator *m_default = nullptr;
};

namespace {
std::int64_t nbytes(const torch::Tensor &t)
{
    return static_cast<std::int64_t>(t.nbytes());
}
} // namespace

void TestMemoryTracker::initTestCase()
{
    torch::set_num_threads(1); // no intra-op workers: they carry no NodeScope
    m_default = c10::GetCPUAllocator();
    m_before = torch::ones({1000});
    m_rawBefore = m_default->raw_allocate(4096);
    QVERIFY(!memory::installed());
    memory::install();
    QVERIFY(memory::installed());
    c10::Allocator *tracker = c10::GetCPUAllocator();
    QVERIFY(tracker != m_default);
    memory::install(); // idempotent
    QCOMPARE(c10::GetCPUAllocator(), tracker);
    QCOMPARE(memory::currentNode(), -1);
}

void TestMemoryTracker::init()
{
    for (int n = 0; n < memory::kMaxNodes; ++n)
        memory::resetNode(n);
}

void TestMemoryTracker::chargesExactBytes()
{
    memory::NodeScope scope(3);
    torch::Tensor t = torch::empty({1000}, torch::kFloat);
    QCOMPARE(memory::usage(3).live, 4000);
    QCOMPARE(memory::usage(3).allocations, 1);
    torch::Tensor none = torch::empty({0}); // zero bytes: nothing to charge
    QCOMPARE(memory::usage(3).allocations, 1);
    t.reset();
    QCOMPARE(memory::usage(3).live, 0);
    QCOMPARE(memory::usage(3).peak, 4000);
    QCOMPARE(memory::usage(2).allocations, 0);
}

void TestMemoryTracker::freeOnAnotherThreadChargesTheOwner()
{
    torch::Tensor t;
    std::thread([&] {
        memory::NodeScope scope(1);
        t = torch::empty({256}, torch::kDouble);
    }).join();
    QCOMPARE(memory::usage(1).live, 2048);
    std::thread([&] {
        memory::NodeScope scope(2);
        t.reset();
    }).join();
    QCOMPARE(memory::usage(1).live, 0);
    QCOMPARE(memory::usage(2).live, 0);
    QCOMPARE(memory::usage(2).allocations, 0);
}

void TestMemoryTracker::concurrentNodes()
{
    constexpr int kNodes = 4;
    constexpr int kSteps = 3000;
    std::vector<std::vector<torch::Tensor>> held(kNodes);
    std::atomic<int> ready{0};
    std::vector<std::thread> threads;
    for (int node = 0; node < kNodes; ++node) {
        threads.emplace_back([&, node] {
            memory::NodeScope scope(node);
            std::mt19937 rng(node);
            auto &mine = held[node];
            ready.fetch_add(1);
            while (ready.load() < kNodes) { }
            for (int i = 0; i < kSteps; ++i) {
                mine.push_back(torch::empty({int64_t(rng() % 4096 + 1)}, torch::kFloat));
                if (rng() % 3 == 0) { // its address is soon reused, maybe by another node
                    std::swap(mine[rng() % mine.size()], mine.back());
                    mine.pop_back();
                }
            }
        });
    }
    for (auto &t : threads)
        t.join();
    for (int node = 0; node < kNodes; ++node) {
        std::int64_t want = 0;
        for (const auto &t : held[node])
            want += nbytes(t);
        const memory::Usage u = memory::usage(node);
        QCOMPARE(u.live, want);
        QCOMPARE(u.allocations, kSteps);
        QVERIFY(u.peak >= u.live);
    }
    held.clear(); // freed on this thread, with no scope: still charged back
    for (int node = 0; node < kNodes; ++node)
        QCOMPARE(memory::usage(node).live, 0);
}

void TestMemoryTracker::peakAndResetPeak()
{
    memory::NodeScope scope(4);
    torch::Tensor a = torch::empty({1000});
    torch::Tensor b = torch::empty({2000});
    b.reset();
    QCOMPARE(memory::usage(4).live, 4000);
    QCOMPARE(memory::usage(4).peak, 12000);
    memory::resetPeak(4);
    QCOMPARE(memory::usage(4).peak, 4000);
    torch::Tensor c = torch::empty({250});
    c.reset();
    QCOMPARE(memory::usage(4).peak, 5000);
}

// A step's window: its high-water mark from resetWindowPeak on, while the
// run's peak keeps the highest ever.
void TestMemoryTracker::windowPeakIsApartFromPeak()
{
    memory::NodeScope scope(5);
    torch::Tensor a = torch::empty({1000});
    torch::Tensor b = torch::empty({2000});
    b.reset();
    QCOMPARE(memory::usage(5).windowPeak, 12000);
    memory::resetWindowPeak(5);
    QCOMPARE(memory::usage(5).windowPeak, 4000);
    QCOMPARE(memory::usage(5).peak, 12000);
    torch::Tensor c = torch::empty({500});
    c.reset();
    QCOMPARE(memory::usage(5).windowPeak, 6000);
    QCOMPARE(memory::usage(5).peak, 12000);
    QVERIFY_THROWS_EXCEPTION(std::out_of_range, memory::resetWindowPeak(memory::kMaxNodes));
}

void TestMemoryTracker::nestedScopes()
{
    torch::Tensor outer, inner, none;
    {
        memory::NodeScope a(1);
        {
            memory::NodeScope b(2);
            QCOMPARE(memory::currentNode(), 2);
            inner = torch::empty({10});
            {
                memory::NodeScope c(-1);
                none = torch::empty({10});
            }
        }
        QCOMPARE(memory::currentNode(), 1);
        outer = torch::empty({20});
    }
    QCOMPARE(memory::currentNode(), -1);
    QCOMPARE(memory::usage(1).live, 80);
    QCOMPARE(memory::usage(2).live, 40);
    QCOMPARE(memory::usage(1).allocations + memory::usage(2).allocations, 2);
    QVERIFY_THROWS_EXCEPTION(std::out_of_range, memory::NodeScope bad(memory::kMaxNodes));
    QVERIFY_THROWS_EXCEPTION(std::out_of_range, memory::usage(-1));
}

void TestMemoryTracker::resetNodeForgetsOutstanding()
{
    memory::NodeScope scope(6);
    torch::Tensor old = torch::empty({100});
    memory::resetNode(6);
    torch::Tensor fresh = torch::empty({50});
    old.reset(); // allocated before the reset: not charged back
    QCOMPARE(memory::usage(6).live, 200);
    QCOMPARE(memory::usage(6).allocations, 1);
}

void TestMemoryTracker::autogradChargesTheNode()
{
    memory::NodeScope scope(5);
    torch::manual_seed(0);
    torch::Tensor w1 = torch::randn({64, 32}).requires_grad_();
    torch::Tensor w2 = torch::randn({32, 16}).requires_grad_();
    torch::Tensor x = torch::randn({8, 64});
    const std::int64_t inputs = nbytes(w1) + nbytes(w2) + nbytes(x);
    QCOMPARE(memory::usage(5).live, inputs);
    {
        torch::Tensor loss = torch::relu(x.mm(w1)).mm(w2).sum(); // (8, 32) -> (8, 16) -> ()
        QVERIFY(memory::usage(5).live > inputs);                 // activations held by the graph
        loss.backward();
    }
    QVERIFY(w1.grad().defined() && w2.grad().defined());
    // Backward ran on this thread: the grads are node 5's, the graph is gone.
    QCOMPARE(memory::usage(5).live, memory::storageBytes({w1, w2, x, w1.grad(), w2.grad()}));
    QCOMPARE(memory::usage(5).live, inputs + nbytes(w1) + nbytes(w2));
    QVERIFY(memory::usage(5).peak > memory::usage(5).live);
}

void TestMemoryTracker::rawAllocateAndMkldnn()
{
    memory::NodeScope scope(8);
    c10::Allocator *tracker = c10::GetCPUAllocator();
    QVERIFY(tracker->raw_deleter() != nullptr);
    void *p = tracker->raw_allocate(1024);
    QVERIFY(reinterpret_cast<std::uintptr_t>(p) % 64 == 0);
    QCOMPARE(memory::usage(8).live, 1024);
    tracker->raw_deallocate(p);
    QCOMPARE(memory::usage(8).live, 0);
    {
        // oneDNN (ideep) allocates its buffers through raw_allocate.
        torch::Tensor y = torch::conv2d(torch::randn({4, 3, 32, 32}), torch::randn({8, 3, 3, 3}));
        QCOMPARE(y.size(1), 8);
        QVERIFY(memory::usage(8).live >= nbytes(y));
    }
    QCOMPARE(memory::usage(8).live, 0);
}

void TestMemoryTracker::storageBytesCountsViewsOnce()
{
    torch::Tensor t = torch::empty({10, 10});
    torch::Tensor other = torch::empty({3}, torch::kDouble);
    QCOMPARE(memory::storageBytes({t, t[0], t.t(), t.view({100})}), 400);
    QCOMPARE(memory::storageBytes({t.narrow(0, 0, 1)}), 400); // a view costs its whole storage
    QCOMPARE(memory::storageBytes({torch::Tensor(), t, other, other}), 424);
    QCOMPARE(memory::storageBytes({}), 0);
}

void TestMemoryTracker::preInstallAllocationsFreeFine()
{
    memory::NodeScope scope(7);
    QCOMPARE(m_before.storage().allocator(), m_default);
    m_before.resize_({5000}); // the storage keeps the allocator it was made with
    QCOMPARE(memory::usage(7).allocations, 0);
    m_before.reset();
    c10::GetCPUAllocator()->raw_deallocate(m_rawBefore); // not ours: handed to the default
    m_rawBefore = nullptr;
    const memory::Usage u = memory::usage(7);
    QCOMPARE(u.live, 0);
    QCOMPARE(u.allocations, 0);
}

QTEST_GUILESS_MAIN(TestMemoryTracker)
#include "tst_memory_tracker.moc"
