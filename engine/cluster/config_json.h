// A run's configuration as JSON: what the coordinator sends each node in its
// assignment, what a checkpoint records, and what a session file's header
// holds. Plain data only (no hooks, sinks or pointers; those stay with
// whoever runs the node).
#pragma once

#include "engine/session/session_events.h"
#include "engine/trainer.h"

#include <QJsonArray>
#include <QJsonObject>

#include <vector>

namespace smol::engine {

// Integers (counts, bytes, ranks) as a JSON array of numbers.
template <typename Int> QJsonArray jsonNumbers(const std::vector<Int> &values)
{
    QJsonArray a;
    for (Int v : values)
        a.append(double(v));
    return a;
}

QJsonObject configToJson(const TrainConfig &config);
// Throws std::invalid_argument naming the first bad field.
TrainConfig configFromJson(const QJsonObject &json);

// A node's memory by category as JSON numbers, as a node's `step` and `done`
// messages and `smolctl train --json` carry it; and back (missing fields: 0).
QJsonObject memoryToJson(const net::MemoryByCategory &memory);
net::MemoryByCategory memoryFromJson(const QJsonObject &json);

// A rank's role under a strategy: "server" (rank 0) and "worker" for syncps
// and edp, "stage R" for pipeline, "shard R" for tensor, else "worker".
std::string nodeRole(const std::string &strategy, int rank);
// What a session file says about a run before it starts: the config as
// JSON, and its nodes "node R" on `host` ("" when unknown) with their roles;
// started now.
SessionHeader sessionHeaderFor(const TrainConfig &config, const std::string &host);

} // namespace smol::engine
