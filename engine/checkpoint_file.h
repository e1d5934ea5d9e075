// A training checkpoint on disk: step count, run configuration, flat float32
// parameters and optimizer state in one file, written atomically (temp file +
// rename) and checked on read (magic, format version, sizes, CRC-32).
// Deliberately free of LibTorch: Qt Core, zlib and the standard library only.
//
// File format, version 1. All integers little-endian, floats IEEE-754
// binary32 little-endian. L = config length, P = param count, O = optimizer
// state count.
//
//   offset            size   field
//   ----------------  -----  -----------------------------------------------
//   0                 8      magic "SMOLCKPT" (ASCII, no terminator)
//   8                 4      u32 format version (1)
//   12                8      i64 stepsDone
//   20                4      u32 L, config JSON length in bytes
//   24                L      config JSON, UTF-8, no terminator
//   24+L              8      u64 P
//   32+L              4*P    parameters, float32
//   32+L+4P           8      u64 O
//   40+L+4P           4*O    optimizer state, float32
//   40+L+4P+4O        4      u32 CRC-32 (zlib crc32) of bytes [0, 40+L+4P+4O)
//
// The file is exactly 44+L+4P+4O bytes long. Readers accept versions <= 1.
#pragma once

#include <QString>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace smol::engine {

// The format version this build writes (and the newest it reads).
inline constexpr std::uint32_t kCheckpointFormatVersion = 1;

struct Checkpoint {
    std::int64_t stepsDone = 0;        // optimisation steps completed (training resumes at this step index)
    std::string configJson;            // the run's configuration, compact JSON text, opaque to this module
    std::vector<float> params;         // every parameter, flat, float32 (--precision bf16: the master weights)
    std::vector<float> optimizerState; // may be empty
};

// Every failure to write or read a checkpoint; what() is one line naming the path.
class CheckpointError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// The file inside a checkpoint directory: dir + "/checkpoint.smolckpt".
QString checkpointPath(const QString &dir);

// Creates dir if needed; writes through QSaveFile (temp file + rename) so a
// crash never leaves a half file and the previous checkpoint stays intact
// until the new one is complete. Throws CheckpointError with a one-line
// reason naming the path (unwritable dir, disk full...).
void writeCheckpoint(const QString &dir, const Checkpoint &ckpt);

// Accepts a directory (reads checkpointPath(dir)) or a file path. Throws
// CheckpointError, one line naming the file, for: missing file, foreign file
// (bad magic), newer format version, truncated file, CRC mismatch, absurd
// sizes (counts are checked against the file size before anything is
// allocated).
Checkpoint readCheckpoint(const QString &dirOrFile);

} // namespace smol::engine
