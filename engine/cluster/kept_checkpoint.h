// The newest checkpoint the coordinator keeps of a run, so that a run whose
// nodes are all lost at once (a classroom's Wi-Fi drop, every laptop's lid
// closed) resumes from it rather than from step 0. Rank 0 sends the full
// state (every shard: the strategies gather it) every K steps or every few
// seconds; only the newest is kept. Up to a memory budget it stays in
// memory; a state over the budget goes to a checkpoint file in a temporary
// directory of its own (said once, removed with the run).
#pragma once

#include "state_blob.h"

#include <QByteArray>
#include <QTemporaryDir>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace smol::engine {

struct Checkpoint;

// The state blob of a `checkpoint` message (state_blob.h's packing) as a
// checkpoint file's contents, and back.
Checkpoint checkpointOfBlob(std::int64_t stepsDone, const std::string &configJson, const QByteArray &blob,
                            std::int64_t paramCount, bool moments);
TrainingState stateFromCheckpoint(const Checkpoint &ck);

class KeptCheckpoint {
public:
    static constexpr std::int64_t kDefaultBudgetBytes = std::int64_t(256) << 20;

    KeptCheckpoint(std::int64_t budgetBytes, std::function<void(const std::string &)> log);
    ~KeptCheckpoint();

    // Keeps this state when it is newer than the one kept. The blob must
    // hold paramCount floats (x3 with moments); throws std::invalid_argument
    // otherwise, and CheckpointError when the disk refuses it.
    void keep(std::int64_t stepsDone, bool moments, const QByteArray &blob, std::int64_t paramCount,
              const std::string &configJson);

    std::int64_t steps() const { return m_steps; } // -1: none kept
    // The kept state (throws CheckpointError when its file went bad).
    TrainingState state() const;
    bool onDisk() const;
    QString directory() const; // the temporary directory, once a state went over the budget

private:
    std::int64_t m_budget;
    std::function<void(const std::string &)> m_log;
    std::int64_t m_steps = -1;
    bool m_moments = false;
    QByteArray m_blob;                   // in memory
    std::unique_ptr<QTemporaryDir> m_dir; // made when a state first went over the budget
};

} // namespace smol::engine
