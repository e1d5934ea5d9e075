// A batch of a run's events as bytes, for the viewers' stream
// (engine/cluster/viewer_protocol.h): each event in the session file's row
// (event_rows.h: the same columns, in the same order, so a column added to
// the file travels too), each column as a little-endian value.
//
//   u32 magic "SMEV", u32 count per kind (frames, spans, memory, metrics,
//   logs, tensors), then the rows, kind by kind
//   i64/u64/rank/kinds: 8 bytes; f64: 8 bytes (NaN as is); flag: 1 byte;
//   text and blob: u32 length, then the bytes
//
// decodeEvents checks every length and value range against the bytes it
// has and throws SessionError (one line) on anything out of place: the
// bytes come from the network.
//
// No LibTorch.
#pragma once

#include "session_events.h"

#include <QByteArray>

#include <cstddef>

namespace smol::engine {

// Bounds a decoder holds a batch to.
constexpr std::size_t kMaxStreamEvents = 1u << 20;
constexpr std::size_t kMaxStreamText = 64u << 10;    // a log line, a span's name
constexpr std::size_t kMaxStreamBlob = 16u << 20;    // a tensor snapshot's JSON

QByteArray encodeEvents(const SessionEvents &events);
SessionEvents decodeEvents(const QByteArray &bytes);

} // namespace smol::engine
