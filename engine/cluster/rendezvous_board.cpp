#include "rendezvous_board.h"

#include <QJsonArray>

#include <algorithm>

namespace smol::engine {

namespace {

QJsonObject reply(int epoch, const QString &call)
{
    return QJsonObject{{"type", "store_reply"}, {"epoch", epoch}, {"call", call}, {"ok", true}};
}

QJsonObject refusal(int epoch, const QString &call, const std::string &why)
{
    QJsonObject o = reply(epoch, call);
    o.insert("ok", false);
    o.insert("error", QString::fromStdString(why));
    return o;
}

} // namespace

void RendezvousBoard::beginEpoch(int epoch, const std::vector<int> &members)
{
    std::vector<Out> out;
    {
        std::lock_guard lock(m_mutex);
        for (const Waiter &w : m_waiters)
            out.push_back({w.node, refusal(m_epoch, w.call, "the epoch is over"), {}});
        m_waiters.clear();
        m_keys.clear();
        m_epoch = epoch;
        m_members = members;
    }
    for (const Out &o : out)
        m_reply(o.node, o.json, o.blob);
}

bool RendezvousBoard::ready(const Waiter &w) const
{
    return std::all_of(w.keys.begin(), w.keys.end(),
                       [&](const std::string &k) { return m_keys.count(k) > 0; });
}

RendezvousBoard::Out RendezvousBoard::answer(const Waiter &w) const
{
    Out o{w.node, reply(m_epoch, w.call), {}};
    if (w.wantsValue)
        o.blob = m_keys.at(w.keys.front());
    return o;
}

void RendezvousBoard::handle(int node, const net::ControlMessage &m)
{
    const int epoch = m.json.value(QStringLiteral("epoch")).toInt(-1);
    const QString call = m.json.value(QStringLiteral("call")).toString();
    const std::string op = m.json.value(QStringLiteral("op")).toString().toStdString();
    std::vector<std::string> keys;
    for (const QJsonValue &k : m.json.value(QStringLiteral("keys")).toArray())
        keys.push_back(k.toString().toStdString());
    std::vector<Out> out;
    {
        std::lock_guard lock(m_mutex);
        auto refuse = [&](const std::string &why) { out.push_back({node, refusal(epoch, call, why), {}}); };
        const bool member = std::find(m_members.begin(), m_members.end(), node) != m_members.end();
        if (epoch != m_epoch || !member) {
            refuse("not a member of epoch " + std::to_string(epoch));
        } else if (keys.size() > std::size_t(kMaxKeys) ||
                   std::any_of(keys.begin(), keys.end(), [](const std::string &k) {
                       return k.empty() || k.size() > std::size_t(kMaxKeyBytes);
                   })) {
            refuse("bad keys");
        } else if (op == "set" || op == "add") {
            if (keys.size() != 1 || m.blob.size() > kMaxValueBytes ||
                (m_keys.count(keys[0]) == 0 && m_keys.size() >= std::size_t(kMaxKeys))) {
                refuse("bad " + op);
            } else {
                QJsonObject r = reply(epoch, call);
                if (op == "set") {
                    m_keys[keys[0]] = m.blob;
                } else { // c10d keeps counters as decimal text
                    const auto it = m_keys.find(keys[0]);
                    const qint64 now = (it == m_keys.end() ? 0 : it->second.toLongLong()) +
                                       qint64(m.json.value(QStringLiteral("delta")).toDouble());
                    m_keys[keys[0]] = QByteArray::number(now);
                    r.insert("value", double(now));
                }
                out.push_back({node, r, {}});
                // Whoever waited for this key and has all of theirs now.
                for (auto it = m_waiters.begin(); it != m_waiters.end();) {
                    if (ready(*it)) {
                        out.push_back(answer(*it));
                        it = m_waiters.erase(it);
                    } else {
                        ++it;
                    }
                }
            }
        } else if (op == "get" || op == "wait") {
            Waiter w{node, call, keys, op == "get"};
            if (keys.empty() || (op == "get" && keys.size() != 1))
                refuse("bad " + op);
            else if (ready(w))
                out.push_back(answer(w));
            else if (m_waiters.size() >= std::size_t(kMaxKeys))
                refuse("too many waiting");
            else
                m_waiters.push_back(std::move(w));
        } else if (op == "check") {
            QJsonObject r = reply(epoch, call);
            r.insert("value", ready(Waiter{node, call, keys, false}));
            out.push_back({node, r, {}});
        } else if (op == "delete") {
            QJsonObject r = reply(epoch, call);
            r.insert("value", keys.size() == 1 && m_keys.erase(keys[0]) > 0);
            out.push_back({node, r, {}});
        } else if (op == "num") {
            QJsonObject r = reply(epoch, call);
            r.insert("value", double(m_keys.size()));
            out.push_back({node, r, {}});
        } else {
            refuse("unknown op '" + op.substr(0, 32) + "'");
        }
    }
    for (const Out &o : out)
        m_reply(o.node, o.json, o.blob);
}

} // namespace smol::engine
