// Exports of a session file for other tools.
//
// exportChromeTrace: Chrome Trace Event JSON ({"traceEvents": [...]}) that
// Perfetto and chrome://tracing open. One process per node (pid = rank,
// named after the node) with threads for steps, compute, collectives,
// pauses, packets and log; cluster-wide metrics and coordinator logs go to
// a "coordinator" process (pid 99999). Spans are complete ("X") events;
// each frame side is a 1 ns "send"/"recv" slice on its node's packets
// thread, and every send matched with its receive (by src, dst, kind, seq,
// tag) is a flow: "s" at the send start on the sender, "f" (bp "e") at the
// receive completion on the receiver, one id per frame. Memory is a stacked
// "memory" counter per node (params, grads, optimizer, activations, comm:
// they add up to live) plus a "live bytes" counter; metrics are counters,
// logs instant events. Times are microseconds since the session's first
// instant, written exactly (ns as three decimals). Streamed: memory holds
// only unmatched frames and per-thread lane ends, never the document.
//
// exportMetricsCsv: "t_s,step,node,name,value", one row per metric sample,
// t_s in seconds since the run's start, node -1 for cluster-wide.
//
// Both write to a temporary file renamed into place at the end (a failed
// export leaves no half file) and throw SessionError for a damaged session
// or an output that cannot be written.
#pragma once

#include "session_reader.h"

#include <QString>

namespace smol::engine {

constexpr int kChromeCoordinatorPid = 99999;

void exportChromeTrace(const SessionReader &reader, const QString &out);
void exportMetricsCsv(const SessionReader &reader, const QString &out);

} // namespace smol::engine
