// The coordinator's side of `--backend gloo` on node processes: one
// key-value store per epoch, with c10d::Store's semantics, that the epoch's
// members reach over their authenticated control connections (the node
// side is a RendezvousClient, engine/gloo_communicator.h). Gloo's ranks
// publish their device addresses here and read each other's.
//
// Why not c10d::TCPStore: LibTorch 1.13's TCPStore server listens on every
// interface of its port (it has no bind address), and anyone who can reach
// that port reads and writes the keys without a token. Over the control
// connection the store has no port of its own, and only the nodes the
// coordinator admitted, and assigned to this epoch, learn anything.
//
// Messages (docs/runtime.md, "Gloo rendezvous"):
//   node -> coordinator  {"type":"store", "epoch", "call", "op", "keys", "delta"}
//                        op: set (value in the blob), get, add, check, wait,
//                        delete, num
//   coordinator -> node  {"type":"store_reply", "epoch", "call", "ok",
//                        "value", "error"}; get: the value in the blob
// get and wait on keys not yet set are answered when the last one is; a new
// epoch drops every key (a re-form never meets a stale one) and fails the
// waiters left over.
#pragma once

#include "net/control_channel.h"

#include <QByteArray>
#include <QJsonObject>

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace smol::engine {

class RendezvousBoard {
public:
    using Reply = std::function<void(int node, const QJsonObject &json, const QByteArray &blob)>;
    explicit RendezvousBoard(Reply reply)
        : m_reply(std::move(reply))
    {
    }

    // A new epoch with these members (node ids): every key dropped.
    void beginEpoch(int epoch, const std::vector<int> &members);
    // A "store" message from `node` (any thread).
    void handle(int node, const net::ControlMessage &m);

    static constexpr int kMaxKeys = 4096;
    static constexpr int kMaxKeyBytes = 1024;
    static constexpr int kMaxValueBytes = 1 << 20;

private:
    struct Waiter {
        int node = 0;
        QString call;
        std::vector<std::string> keys;
        bool wantsValue = false; // get: reply with keys[0]'s value
    };
    struct Out {
        int node;
        QJsonObject json;
        QByteArray blob;
    };
    bool ready(const Waiter &w) const;
    Out answer(const Waiter &w) const;

    Reply m_reply;
    std::mutex m_mutex;
    int m_epoch = -1;
    std::vector<int> m_members;
    std::map<std::string, QByteArray> m_keys;
    std::vector<Waiter> m_waiters;
};

} // namespace smol::engine
