// net::Communicator over c10d's ProcessGroupGloo; what runs for each
// collective and what it costs is in the header. Every call has one shape:
//   1. take the sequence number, run the hook (before)
//   2. wrap the caller's memory in tensors (torch::from_blob: no copy)
//   3. run the Gloo collective and wait for it on this thread
//   4. emit one trace event, run the hook (after)
#include "engine/gloo/gloo_communicator.h"

#include "net/errors.h"
#include "net/trace.h"

#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <algorithm>
#include <deque>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/torch.h>

#include <atomic>
#include <exception>
#include <stdexcept>
#include <string>

namespace smol::engine {

namespace {

// c10d::Store over a RendezvousClient (the coordinator's board, reached over
// the node's control connection).
class RelayStore : public c10d::Store {
public:
    explicit RelayStore(std::shared_ptr<RendezvousClient> client)
        : m_client(std::move(client))
    {
    }
    void set(const std::string &key, const std::vector<uint8_t> &value) override
    {
        m_client->set(key, value);
    }
    std::vector<uint8_t> get(const std::string &key) override { return m_client->get(key, timeout_); }
    int64_t add(const std::string &key, int64_t value) override { return m_client->add(key, value); }
    bool deleteKey(const std::string &key) override { return m_client->deleteKey(key); }
    bool check(const std::vector<std::string> &keys) override { return m_client->check(keys); }
    int64_t getNumKeys() override { return m_client->numKeys(); }
    void wait(const std::vector<std::string> &keys) override { m_client->wait(keys, timeout_); }
    void wait(const std::vector<std::string> &keys, const std::chrono::milliseconds &timeout) override
    {
        m_client->wait(keys, timeout);
    }

private:
    std::shared_ptr<RendezvousClient> m_client;
};

} // namespace

struct GlooStore::Impl {
    c10::intrusive_ptr<c10d::Store> store;
};

GlooStore::GlooStore()
    : m_impl(std::make_unique<Impl>())
{
    m_impl->store = c10::make_intrusive<c10d::HashStore>();
}

GlooStore::GlooStore(std::shared_ptr<RendezvousClient> client)
    : m_impl(std::make_unique<Impl>())
{
    m_impl->store = c10::make_intrusive<RelayStore>(std::move(client));
}
GlooStore::GlooStore(GlooStore &parent, const std::string &prefix)
    : m_impl(std::make_unique<Impl>())
{
    m_impl->store = c10::make_intrusive<c10d::PrefixStore>(prefix, parent.impl().store);
}

GlooStore::~GlooStore() = default;

struct GlooCommunicator::Group {
    c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;
    std::atomic<bool> failed{false}; // a collective threw: peers may be gone, skip the farewell barrier
    // Sends on their way, oldest first, each with its own copy of the data.
    // Gloo's send completes only once the peer has posted its receive; ours
    // returns once the data has left the caller's buffer, so a pipeline's
    // 1F1B (both neighbours sending before either receives) runs on both.
    std::deque<std::pair<c10::intrusive_ptr<c10d::Work>, at::Tensor>> sends;

    // Takes the finished sends off (all of them, waiting: `all`), throwing
    // the first one's failure.
    void finishSends(bool all)
    {
        while (!sends.empty() && (all || sends.front().first->isCompleted())) {
            const auto work = sends.front().first;
            sends.pop_front();
            work->wait();
        }
    }
};

namespace {

at::ScalarType scalarTypeOf(net::DType dtype)
{
    switch (dtype) {
    case net::DType::Float32:
        return at::kFloat;
    case net::DType::Float64:
        return at::kDouble;
    case net::DType::Int64:
        return at::kLong;
    case net::DType::Int32:
        return at::kInt;
    case net::DType::UInt8:
        return at::kByte;
    case net::DType::Float16:
        return at::kHalf;
    case net::DType::BFloat16:
        return at::kBFloat16;
    }
    throw std::invalid_argument("gloo backend: unknown dtype");
}

// (count,) over the caller's memory, no copy.
at::Tensor tensorOf(const net::TensorView &v)
{
    return torch::from_blob(v.data, {std::int64_t(v.count)},
                            torch::TensorOptions().dtype(scalarTypeOf(v.dtype)));
}

// Our average divides the sum by N; integer types truncate (reduce_kernels.cpp).
void divideInPlace(at::Tensor t, int world)
{
    if (at::isFloatingType(t.scalar_type()))
        t.div_(world);
    else
        t.div_(world, "trunc");
}

template <typename Work> void wait(const Work &work)
{
    work->wait();
}

std::string firstLine(const std::string &text)
{
    return text.substr(0, text.find('\n'));
}

// A point-to-point call's peer: another rank of the group.
void requirePeer(const char *op, int peer, int rank, int world)
{
    if (peer < 0 || peer >= world || peer == rank)
        throw std::invalid_argument(std::string("gloo ") + op + ": rank " + std::to_string(rank) +
                                    " has no peer " + std::to_string(peer));
}

// Gather and scatter in a world of one: the output is the input. True when
// that is so and the copy is made.
bool copiedAlone(int world, const net::TensorView &input, const net::TensorView &output)
{
    if (world != 1)
        return false;
    tensorOf(output).copy_(tensorOf(input));
    return true;
}

// The root's buffer of N parts of `count` elements as c10d's gather and
// scatter take it (one list, rank r's part at r); the other ranks pass none.
std::vector<std::vector<at::Tensor>> partsAtRoot(bool atRoot, const net::TensorView &whole, std::size_t count,
                                                 int N)
{
    std::vector<std::vector<at::Tensor>> parts;
    if (!atRoot)
        return parts;
    const at::Tensor t = tensorOf(whole);
    parts.emplace_back();
    for (int r = 0; r < N; ++r)
        parts[0].push_back(t.narrow(0, std::int64_t(r * count), std::int64_t(count)));
    return parts;
}

} // namespace

GlooCommunicator::GlooCommunicator(GlooStore &store, int rank, int worldSize, const std::string &bindAddress,
                                   std::chrono::milliseconds timeout)
    : Communicator(rank, worldSize)
    , m_group(std::make_unique<Group>())
    , m_store(&store)
    , m_bindAddress(bindAddress)
    , m_timeout(timeout)
{
    try {
        auto options = c10d::ProcessGroupGloo::Options::create(timeout);
        options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(bindAddress));
        m_group->pg =
            c10::make_intrusive<c10d::ProcessGroupGloo>(store.impl().store, rank, worldSize, options);
    } catch (const c10::Error &e) {
        throw std::runtime_error("gloo backend: rank " + std::to_string(rank) + " (device on " + bindAddress +
                                 ") could not join: " + firstLine(e.what_without_backtrace()));
    } catch (const std::exception &e) { // gloo's own (an address it cannot bind) and the rendezvous's
        throw std::runtime_error("gloo backend: rank " + std::to_string(rank) + " (device on " + bindAddress +
                                 ") could not join: " + firstLine(e.what()));
    }
}

GlooCommunicator::~GlooCommunicator()
{
    // No rank tears down its Gloo pairs while a peer may still be reading from
    // them; on a failure the peers are not coming, so do not wait for them.
    if (m_group->failed || std::uncaught_exceptions() > 0)
        return;
    try {
        m_group->finishSends(/*all=*/true);
        m_group->pg->barrier()->wait();
    } catch (const std::exception &) {
        // Teardown: nothing left to report to.
    }
}

template <typename Body> void GlooCommunicator::run(net::CollectiveKind kind, std::uint64_t seq, int peer,
                                                    net::TensorView buffer, const std::string &name,
                                                    Body &&body, bool receiving)
{
    const std::vector<int> *members = groupMembers();
    net::CollectiveInfo info{kind, seq, name, rank(), worldSize(), peer, buffer, receiving,
                             group(),   axis(), members};
    info.related = takeRelated();
    runHook(true, info);
    net::FrameEvent event;
    event.src = event.dst = members ? (*members)[std::size_t(rank())] : rank(); // the node's rank
    event.bytes = buffer.bytes();
    event.kind = kind;
    event.seq = seq;
    if (receiving) // a recv's bytes are not this rank's sent bytes
        event.side = net::FrameEvent::Side::Receive;
    event.sendStartNs = net::monotonicNs();
    try {
        body();
    } catch (const std::exception &e) { // c10::Error, and gloo's IoException from its worker threads
        m_group->failed = true;
        const auto *c10 = dynamic_cast<const c10::Error *>(&e);
        const std::string what = std::string("gloo ") + net::collectiveName(kind) + " #" +
                                 std::to_string(seq) + " on rank " + std::to_string(rank()) + ": " +
                                 firstLine(c10 ? c10->what_without_backtrace() : e.what());
        if (kind == net::CollectiveKind::SendRecv || kind == net::CollectiveKind::Push ||
            kind == net::CollectiveKind::Pull)
            throw net::PeerError(peer, what, __FILE__, __LINE__);
        throw std::runtime_error(what);
    }
    event.sendCompleteNs = net::monotonicNs();
    if (m_sink)
        m_sink->onFrame(event);
    runHook(false, info);
}

std::unique_ptr<net::Communicator> GlooCommunicator::makeGroup(std::vector<int> members, std::uint32_t id,
                                                               std::string axis)
{
    const int self = groupMembers() ? (*groupMembers())[std::size_t(rank())] : rank(); // its world rank
    const auto me = std::find(members.begin(), members.end(), self);
    if (me == members.end())
        throw std::invalid_argument("gloo backend: rank " + std::to_string(rank()) + " is not in its group");
    const std::string prefix = "group" + std::to_string(id) + "." + std::to_string(members.front()) + "/";
    auto store = std::make_unique<GlooStore>(*m_store, prefix);
    auto group = std::make_unique<GlooCommunicator>(*store, int(me - members.begin()), int(members.size()),
                                                    m_bindAddress, m_timeout);
    group->m_ownStore = std::move(store);
    group->m_members = std::move(members);
    group->setGroup(id, &group->m_members);
    group->setAxis(std::move(axis));
    group->setHook(hook());
    group->setTraceSink(m_sink);
    return group;
}

void GlooCommunicator::send(int peer, net::TensorView buffer, const std::string &name,
                            net::CollectiveKind kind)
{
    requirePeer("send", peer, rank(), worldSize());
    const std::uint64_t seq = nextSendSeq(peer);
    run(kind, seq, peer, buffer, name, [&] {
        m_group->finishSends(/*all=*/false);
        std::vector<at::Tensor> t{tensorOf(buffer).clone()}; // the caller may reuse its buffer at once
        m_group->sends.emplace_back(m_group->pg->send(t, peer, int(seq & 0x7fffffff)), t.front());
    });
}

void GlooCommunicator::recv(int peer, net::TensorView buffer, const std::string &name,
                            net::CollectiveKind kind)
{
    requirePeer("recv", peer, rank(), worldSize());
    const std::uint64_t seq = nextRecvSeq(peer);
    run(
        kind, seq, peer, buffer, name,
        [&] {
            std::vector<at::Tensor> t{tensorOf(buffer)};
            wait(m_group->pg->recv(t, peer, int(seq & 0x7fffffff)));
        },
        /*receiving=*/true);
}

void GlooCommunicator::broadcast(net::TensorView buffer, int root, const std::string &name)
{
    run(net::CollectiveKind::Broadcast, nextSeq(), root, buffer, name, [&] {
        if (buffer.count == 0 || worldSize() == 1)
            return;
        std::vector<at::Tensor> t{tensorOf(buffer)};
        c10d::BroadcastOptions opts;
        opts.rootRank = root;
        wait(m_group->pg->broadcast(t, opts));
    });
}

void GlooCommunicator::barrier()
{
    run(net::CollectiveKind::Barrier, nextSeq(), -1, net::TensorView{}, "barrier",
        [&] { wait(m_group->pg->barrier()); });
}

void GlooCommunicator::allReduce(net::TensorView buffer, net::ReduceOp op, const std::string &name)
{
    run(net::CollectiveKind::AllReduce, nextSeq(), -1, buffer, name, [&] {
        if (buffer.count == 0 || worldSize() == 1)
            return;
        std::vector<at::Tensor> t{tensorOf(buffer)};
        wait(m_group->pg->allreduce(t));
        if (op == net::ReduceOp::Average)
            divideInPlace(t[0], worldSize());
    });
}

void GlooCommunicator::reduceScatter(net::TensorView buffer, net::ReduceOp op, const std::string &name)
{
    run(net::CollectiveKind::ReduceScatter, nextSeq(), -1, buffer, name, [&] {
        if (buffer.count == 0)
            return;
        std::vector<at::Tensor> t{tensorOf(buffer)};
        if (worldSize() > 1)
            wait(m_group->pg->allreduce(t)); // every chunk summed; ours is the one we keep
        if (op == net::ReduceOp::Average) {
            const net::ChunkRange mine = chunk(buffer.count, worldSize(), rank());
            divideInPlace(t[0].narrow(0, std::int64_t(mine.offset), std::int64_t(mine.count)), worldSize());
        }
    });
}

void GlooCommunicator::allGather(net::TensorView buffer, const std::string &name)
{
    run(net::CollectiveKind::AllGather, nextSeq(), -1, buffer, name, [&] {
        const int N = worldSize();
        if (buffer.count == 0 || N == 1)
            return;
        const at::Tensor full = tensorOf(buffer);
        const net::ChunkRange mine = chunk(buffer.count, N, rank());
        const auto part = [&](const at::Tensor &t, int r) {
            const net::ChunkRange c = chunk(buffer.count, N, r);
            return t.narrow(0, std::int64_t(c.offset), std::int64_t(c.count));
        };
        if (buffer.count % std::size_t(N) == 0) {
            // Equal chunks: Gloo gathers straight into our buffer.
            std::vector<at::Tensor> input{part(full, rank())};
            std::vector<std::vector<at::Tensor>> outputs(1);
            for (int r = 0; r < N; ++r)
                outputs[0].push_back(part(full, r));
            wait(m_group->pg->allgather(outputs, input));
            return;
        }
        // Uneven chunks: every part padded to the largest, (N, padded).
        const std::int64_t padded = std::int64_t(chunk(buffer.count, N, 0).count);
        at::Tensor scratch = torch::zeros({N, padded}, full.options());
        scratch[rank()].narrow(0, 0, std::int64_t(mine.count)).copy_(part(full, rank()));
        std::vector<at::Tensor> input{scratch[rank()]};
        std::vector<std::vector<at::Tensor>> outputs(1);
        for (int r = 0; r < N; ++r)
            outputs[0].push_back(scratch[r]);
        wait(m_group->pg->allgather(outputs, input));
        for (int r = 0; r < N; ++r) {
            at::Tensor dst = part(full, r);
            dst.copy_(scratch[r].narrow(0, 0, dst.numel()));
        }
    });
}

void GlooCommunicator::gather(net::TensorView input, net::TensorView output, int root,
                              const std::string &name)
{
    run(net::CollectiveKind::Gather, nextSeq(), root, input, name, [&] {
        const int N = worldSize();
        if (copiedAlone(N, input, output))
            return;
        std::vector<at::Tensor> inputs{tensorOf(input)};
        std::vector<std::vector<at::Tensor>> outputs = partsAtRoot(rank() == root, output, input.count, N);
        c10d::GatherOptions opts;
        opts.rootRank = root;
        wait(m_group->pg->gather(outputs, inputs, opts));
    });
}

void GlooCommunicator::scatter(net::TensorView input, net::TensorView output, int root,
                               const std::string &name)
{
    run(net::CollectiveKind::Scatter, nextSeq(), root, output, name, [&] {
        const int N = worldSize();
        if (copiedAlone(N, input, output))
            return;
        std::vector<at::Tensor> outputs{tensorOf(output)};
        std::vector<std::vector<at::Tensor>> inputs = partsAtRoot(rank() == root, input, output.count, N);
        c10d::ScatterOptions opts;
        opts.rootRank = root;
        wait(m_group->pg->scatter(outputs, inputs, opts));
    });
}

} // namespace smol::engine
