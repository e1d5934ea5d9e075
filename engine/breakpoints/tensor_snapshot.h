// A plain-data picture of one collective buffer (net::TensorView): shape,
// values (when small), stats over the finite elements, a histogram and a
// downsampled curve; and in-place edits (scale, zero, inject NaN) of such a
// buffer. No LibTorch, so breakpoints.h stays free of it.
#pragma once

#include "net/communicator.h"
#include "net/tensor_view.h"

#include <QByteArray>
#include <QJsonArray>
#include <QJsonObject>

#include <cstdint>
#include <string>
#include <vector>

namespace smol::engine {

struct TensorStats {
    double min = 0, max = 0, mean = 0, std = 0, l2 = 0; // over the finite elements
    std::int64_t nanCount = 0;
    std::int64_t infCount = 0;
};

// One node's buffer at a collective boundary.
struct TensorSnapshot {
    int node = -1;
    std::int64_t step = 0;
    net::CollectiveKind kind = net::CollectiveKind::None;
    std::uint64_t seq = 0;
    std::string name;
    int peer = -1;
    bool before = true; // the input entering the collective; false: its result
    bool edited = false; // result of a collective whose input the user edited on this node
    net::DType dtype = net::DType::Float32;
    std::vector<std::int64_t> shape;
    std::int64_t count = 0;
    // The part of the collective's buffer shown (net::contributedPart):
    // elements [offset, offset + count) of `total`; the whole buffer when
    // count == total.
    std::int64_t offset = 0;
    std::int64_t total = 0;
    std::vector<double> values; // every element when count <= fullLimit, else empty
    TensorStats stats;
    double histogramMin = 0, histogramMax = 0; // bins split [min, max] of the finite elements
    std::vector<std::int64_t> histogram;
    std::vector<double> downsampled; // mean of each of up to N equal runs of elements
    // A group's collective (net::CollectiveInfo::members): its axis ("tp"),
    // its members' world ranks in group order, and the caller's buffer name
    // (`name` is the label, "tp (ranks 0, 1) · g.attn.block0"). Empty for
    // the world's, and in recordings made before groups.
    std::string axis;
    std::vector<int> members;
    std::string bufferName;
    // Read-only tensors shown beside an input (net::CollectiveInfo::related:
    // PowerSGD's Q and error buffer per matrix beside P's all-reduce), each
    // with its name ("Q fc1.weight"), shape and figures, its values only
    // when small; at most kMaxRelatedTensors. Edits never touch them.
    std::vector<TensorSnapshot> related;
};

// What rides with one pause message, bounded: a bucket of many matrices
// names two tensors per matrix, and a cluster's node sends them all up.
constexpr std::size_t kMaxRelatedTensors = 16;
// A related tensor keeps its values (a heatmap's) up to this many.
constexpr std::int64_t kRelatedFullLimit = 1024;

struct SnapshotOptions {
    std::int64_t fullLimit = 1 << 20;
    int histogramBins = 64;
    int downsampledPoints = 256;
};

TensorSnapshot takeSnapshot(const net::TensorView &buffer, const SnapshotOptions &options);
// The snapshot of `info`'s part this node contributes (before) or holds
// (after), with the collective's fields filled in.
TensorSnapshot takePartSnapshot(const net::CollectiveInfo &info, bool before, int node, std::int64_t step,
                                const SnapshotOptions &options);
// The related tensors of `info` (the first kMaxRelatedTensors), with
// `options`' histogram and curve, values only up to kRelatedFullLimit.
std::vector<TensorSnapshot> takeRelatedSnapshots(const net::CollectiveInfo &info, const SnapshotOptions &options);
// Related snapshots as JSON and back: what a cluster's node sends its
// coordinator with a held buffer. Reading bounds what came over the network
// (at most kMaxRelatedTensors, short printable names, capped arrays).
QJsonArray relatedToJson(const std::vector<TensorSnapshot> &related);
std::vector<TensorSnapshot> relatedFromJson(const QJsonArray &array);

// "node 2's chunk, elements 100480..150719 of 200960", "the whole buffer",
// "nothing yet (it receives)": what a shown part is, for the inspector and
// --break's output.
std::string partLabel(const TensorSnapshot &snapshot);

// As JSON (what a session file stores for a pause): every field, with the
// values themselves only when there are at most `maxValues` of them (the
// stats, histogram and downsampled view always).
QByteArray snapshotToJson(const TensorSnapshot &snapshot, std::int64_t maxValues = 1 << 18);
// Back from that JSON (non-finite values were written as strings). Missing
// or mistyped fields read as zero or empty; never throws.
TensorSnapshot snapshotFromJson(const QByteArray &json);

// An in-place change to a held buffer, queued by BreakpointController::edit().
struct TensorEdit {
    enum class Op { Scale, Zero, InjectNaN };
    Op op = Op::Scale;
    double factor = 1;       // Scale
    std::int64_t index = -1; // InjectNaN: this element; -1: every element
};

// Apply `edit` to every element of `buffer` in place (or, for InjectNaN with
// index >= 0, to that element only; the caller checks the index).
void applyEdit(const net::TensorView &buffer, const TensorEdit &edit);

} // namespace smol::engine
