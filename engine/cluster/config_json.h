// A run's configuration as JSON: what the coordinator sends each node in its
// assignment, and what a checkpoint records. Plain data only (no hooks,
// sinks or pointers; those stay with whoever runs the node).
#pragma once

#include "engine/trainer.h"

#include <QJsonObject>

namespace smol::engine {

QJsonObject configToJson(const TrainConfig &config);
// Throws std::invalid_argument naming the first bad field.
TrainConfig configFromJson(const QJsonObject &json);

} // namespace smol::engine
