// `--backend gloo`: a net::Communicator whose collectives run on c10d's
// ProcessGroupGloo (Debian's LibTorch) instead of our ring over a
// net::Transport. The strategies cannot tell the difference: same in-place
// semantics and chunk layout (Communicator::chunk), same sequence numbers,
// same hook before and after every collective.
//
// What Gloo runs, per collective, and its cost next to ours (S = buffer bytes):
//   allReduce      Gloo allreduce (SUM), then divide for the average.
//                  Gloo picks its algorithm; a ring sends 2(N-1)/N x S.
//   reduceScatter  Gloo allreduce, then divide this rank's chunk: the rest of
//                  the buffer is scratch anyway. ProcessGroupGloo 1.13 has no
//                  reduce-scatter, so this costs 2(N-1)/N x S instead of our
//                  ring's (N-1)/N x S: twice the bytes, chosen for exactness
//                  (uneven chunks need no padding) over speed.
//   allGather      Gloo allgather of equal parts: with uneven chunks each part
//                  is padded to the largest (ceil(count/N)) in a scratch
//                  buffer of N x that, then copied back into our layout.
//   broadcast, barrier, gather, scatter, send, recv: their Gloo namesakes
//                  (send/recv tagged with the per-pair sequence number). A
//                  send copies the buffer and returns without waiting for
//                  the peer's receive, as ours does (Gloo's completes only
//                  once the peer has posted it: 1F1B would deadlock).
//
// Tracing: Gloo's frames are invisible to us, so each collective becomes one
// net::FrameEvent (side Send, src = dst = rank, tag 0, bytes = the caller's
// buffer size, sendStart/sendComplete = the collective's start and end) to
// the trace sink. bytes_sent for this backend therefore counts the payload
// each node handed to collectives, not bytes on the wire.
//
// Rendezvous: the ranks find each other through a key-value store with
// c10d::Store's semantics. In one process it is a c10d::HashStore; across
// machines it is a RendezvousClient, which the node agent implements over its
// authenticated control connection to the coordinator (engine/cluster/
// rendezvous_board.h): no store port is opened anywhere, and only the nodes
// of the epoch can read or write its keys. Gloo's own TCP pairs (the data
// plane) are NOT authenticated: each rank's device binds to one address,
// never to all interfaces, and the addresses travel through the store.
//
// No LibTorch in this header.
#pragma once

#include "net/communicator.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace smol::net {
class TraceSink;
}

namespace smol::engine {

// The operations a c10d::Store needs, for a store that lives elsewhere (the
// coordinator). get() and wait() block until the keys exist or the timeout
// passes (std::runtime_error); every call may throw when the run is aborted.
class RendezvousClient {
public:
    virtual ~RendezvousClient() = default;
    virtual void set(const std::string &key, const std::vector<std::uint8_t> &value) = 0;
    virtual std::vector<std::uint8_t> get(const std::string &key, std::chrono::milliseconds timeout) = 0;
    virtual std::int64_t add(const std::string &key, std::int64_t delta) = 0;
    virtual bool check(const std::vector<std::string> &keys) = 0;
    virtual void wait(const std::vector<std::string> &keys, std::chrono::milliseconds timeout) = 0;
    virtual bool deleteKey(const std::string &key) = 0;
    virtual std::int64_t numKeys() = 0;
};

// One rendezvous for the ranks of one cluster epoch: a c10d::HashStore (the
// threads of one process), or a c10d::Store over a RendezvousClient.
class GlooStore {
public:
    GlooStore();
    explicit GlooStore(std::shared_ptr<RendezvousClient> client);
    // The keys of `parent` under `prefix` (c10d::PrefixStore): a process
    // group's own rendezvous inside its world's.
    GlooStore(GlooStore &parent, const std::string &prefix);
    ~GlooStore();
    struct Impl;
    Impl &impl() { return *m_impl; }

private:
    std::unique_ptr<Impl> m_impl;
};

class GlooCommunicator : public net::Communicator {
public:
    // Blocks until all worldSize ranks have joined through `store` (or the
    // timeout passes: std::runtime_error). Each rank binds its own device on
    // `bindAddress` (an interface address, never all interfaces); the
    // timeout also bounds every collective.
    GlooCommunicator(GlooStore &store, int rank, int worldSize, const std::string &bindAddress = "127.0.0.1",
                     std::chrono::milliseconds timeout = std::chrono::seconds(30));
    ~GlooCommunicator() override;

    // One event per collective (not owned; called on the calling thread).
    void setTraceSink(net::TraceSink *sink) { m_sink = sink; }

    // A ProcessGroupGloo of the world ranks `members`, its rendezvous under
    // "group<id>.<first member>/" in this one's store; its events name world
    // ranks and carry the group in their seq, as our groups' frames do.
    std::unique_ptr<net::Communicator> makeGroup(std::vector<int> members, std::uint32_t id,
                                                 std::string axis) override;

    void send(int peer, net::TensorView buffer, const std::string &name = {},
              net::CollectiveKind kind = net::CollectiveKind::SendRecv) override;
    void recv(int peer, net::TensorView buffer, const std::string &name = {},
              net::CollectiveKind kind = net::CollectiveKind::SendRecv) override;
    void broadcast(net::TensorView buffer, int root, const std::string &name = {}) override;
    void barrier() override;
    void reduceScatter(net::TensorView buffer, net::ReduceOp op, const std::string &name = {}) override;
    void allGather(net::TensorView buffer, const std::string &name = {}) override;
    void allReduce(net::TensorView buffer, net::ReduceOp op, const std::string &name = {}) override;
    void gather(net::TensorView input, net::TensorView output, int root,
                const std::string &name = {}) override;
    void scatter(net::TensorView input, net::TensorView output, int root,
                 const std::string &name = {}) override;

private:
    struct Group;
    template <typename Body> void run(net::CollectiveKind kind, std::uint64_t seq, int peer,
                                      net::TensorView buffer, const std::string &name, Body &&body,
                                      bool receiving = false);

    std::unique_ptr<Group> m_group;
    net::TraceSink *m_sink = nullptr;
    GlooStore *m_store;
    std::string m_bindAddress;
    std::chrono::milliseconds m_timeout;
    // A group's: its store (under the world's), its members (world ranks).
    std::unique_ptr<GlooStore> m_ownStore;
    std::vector<int> m_members;
};

} // namespace smol::engine
