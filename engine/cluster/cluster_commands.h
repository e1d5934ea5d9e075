// The command-line faces of the cluster runtime: `smolctl node` (a node
// process) and the coordinator behind `smolctl train --listen` (or any train
// with checkpoints or --local-nodes).
#pragma once

#include "engine/trainer.h"

#include <QString>
#include <QStringList>
#include <QTextStream>

#include <chrono>
#include <cstdint>

namespace smol::engine {

class BreakpointController;
class SessionEventSink;

struct ClusterCliOptions {
    bool enabled = false;      // run through a coordinator
    std::uint16_t listenPort = 0; // 0 with enabled: loopback, any port, local nodes only
    bool listen = false;       // --listen given: accept nodes from other machines
    std::string token;
    std::string advertise;     // --advertise: the data-plane address of this process's own nodes
    int waitNodes = 0;         // nodes that must join before training starts
    int localNodes = -1;       // node threads in this process (-1: --nodes when not listening, else 0)
    std::chrono::milliseconds waitTimeout{120000};
    std::chrono::milliseconds heartbeatTimeout{5000};
    std::chrono::milliseconds rejoinTimeout{120000}; // every node lost: wait this long for nodes
    std::int64_t checkpointEvery = 0;
    std::int64_t recoveryEvery = 1;
    std::int64_t keepEvery = 100;                          // ClusterRunOptions::keepEvery
    std::int64_t keepBudgetBytes = std::int64_t(256) << 20; // ClusterRunOptions::keepBudgetBytes
    QString checkpointDir;
    QString resumeDir;
    // Viewers (viewer_protocol.h): --viewers N streams the run to viewers
    // and waits for N of them before training; --watch-token W lets an
    // audience watch with a token that cannot join as a node.
    int viewers = -1; // -1: not asked (no stream without --record)
    std::string watchToken;
    std::int64_t viewerBudget = 256 * 1024;
    BreakpointController *breakpoints = nullptr; // --break: nodes pause through the coordinator
    SessionEventSink *events = nullptr;          // --record
};

// Parses one cluster option of `smolctl train` at args[i] (advancing i past
// its value). Returns false when args[i] is not a cluster option; sets
// `error` for a bad value.
bool parseClusterOption(const QStringList &args, int &i, ClusterCliOptions &options, QString &error);
extern const char kClusterTrainUsage[];

// Runs `config` on a coordinator: local node threads and/or nodes that join
// over the network. Log lines go to `err`.
TrainSummary runClusterTraining(const TrainConfig &config, ClusterCliOptions options, TrainObserver *observer,
                                QTextStream &err);

int runNodeCommand(const QStringList &args, QTextStream &out, QTextStream &err);

} // namespace smol::engine
