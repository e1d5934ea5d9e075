// Checkpoint file writer and reader; the format is described in
// checkpoint_file.h. Writes go through QSaveFile; reads validate the layout
// against the file size before allocating, then verify the CRC-32.
#include "checkpoint_file.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QSaveFile>
#include <QtEndian>

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#ifdef Q_OS_UNIX
#include <unistd.h>
#endif

namespace smol::engine {

namespace {

constexpr char kMagic[8] = {'S', 'M', 'O', 'L', 'C', 'K', 'P', 'T'};
constexpr char kFileName[] = "checkpoint.smolckpt";
// magic + version + stepsDone + config length
constexpr qint64 kHeaderBytes = 8 + 4 + 8 + 4;
// header + param count + optimizer state count + CRC, i.e. an empty checkpoint
constexpr qint64 kMinFileBytes = kHeaderBytes + 8 + 8 + 4;
// Unit of I/O, CRC updates and byte-order conversion.
constexpr std::size_t kChunkBytes = std::size_t(4) << 20;
constexpr std::size_t kChunkFloats = kChunkBytes / sizeof(float);

static_assert(sizeof(float) == 4 && std::numeric_limits<float>::is_iec559, "float must be IEEE-754 binary32");

[[noreturn]] void fail(QString message)
{
    message.replace(QLatin1Char('\r'), QLatin1Char(' '));
    message.replace(QLatin1Char('\n'), QLatin1Char(' '));
    throw CheckpointError(message.toStdString());
}

uLong crcUpdate(uLong crc, const char *data, std::size_t n)
{
    while (n > 0) {
        const std::size_t chunk = std::min(n, kChunkBytes);
        crc = crc32(crc, reinterpret_cast<const Bytef *>(data), uInt(chunk));
        data += chunk;
        n -= chunk;
    }
    return crc;
}

// Why a write failed: errno when the failing call set it (QFileDevice reports
// a failed buffer flush as "Unknown error"), else the device's message.
QString writeFailure(const QFileDevice &file, int err)
{
    return err != 0 ? QString::fromLocal8Bit(std::strerror(err)) : file.errorString();
}

QString hex32(std::uint32_t v)
{
    return QStringLiteral("0x%1").arg(v, 8, 16, QLatin1Char('0'));
}

// Why `dir` cannot be created: the nearest existing ancestor is a file, or not writable.
QString mkpathFailure(const QString &dir)
{
    QFileInfo probe(QFileInfo(dir).absoluteFilePath());
    while (!probe.exists() && !probe.isRoot()) {
        const QString parent = probe.absolutePath();
        if (parent == probe.absoluteFilePath())
            break;
        probe = QFileInfo(parent);
    }
    if (probe.exists() && !probe.isDir())
        return QStringLiteral("%1 is not a directory").arg(probe.absoluteFilePath());
    return QStringLiteral("cannot create directory %1 (check permissions of %2)")
        .arg(dir, probe.absoluteFilePath());
}

// Writes little-endian fields to a QSaveFile, keeping the running CRC-32.
class CrcWriter {
public:
    CrcWriter(QSaveFile &file, const QString &path)
        : m_file(file)
        , m_path(path)
    {
    }

    void bytes(const char *data, std::size_t n)
    {
        m_crc = crcUpdate(m_crc, data, n);
        raw(data, n);
    }
    void u32(std::uint32_t v)
    {
        char b[4];
        qToLittleEndian(v, b);
        bytes(b, sizeof b);
    }
    void u64(std::uint64_t v)
    {
        char b[8];
        qToLittleEndian(v, b);
        bytes(b, sizeof b);
    }
    void i64(std::int64_t v)
    {
        char b[8];
        qToLittleEndian(v, b);
        bytes(b, sizeof b);
    }
    // Count, then the floats as little-endian binary32.
    void floats(const std::vector<float> &v)
    {
        u64(v.size());
        std::vector<char> buf(std::min(v.size(), kChunkFloats) * sizeof(float));
        for (std::size_t at = 0; at < v.size(); at += kChunkFloats) {
            const std::size_t n = std::min(kChunkFloats, v.size() - at);
            qToLittleEndian<quint32>(v.data() + at, qsizetype(n), buf.data());
            bytes(buf.data(), n * sizeof(float));
        }
    }
    // The trailing CRC itself is not part of the checksum.
    void finish()
    {
        char b[4];
        qToLittleEndian(std::uint32_t(m_crc), b);
        raw(b, sizeof b);
    }

private:
    void raw(const char *data, std::size_t n)
    {
        while (n > 0) {
            const qint64 chunk = qint64(std::min(n, kChunkBytes));
            errno = 0;
            const qint64 written = m_file.write(data, chunk);
            if (written != chunk)
                fail(QStringLiteral("cannot write checkpoint %1: %2")
                         .arg(m_path, writeFailure(m_file, errno)));
            data += chunk;
            n -= std::size_t(chunk);
        }
    }

    QSaveFile &m_file;
    const QString &m_path;
    uLong m_crc = crc32(0L, Z_NULL, 0);
};

// Reads from a QFile, keeping the running CRC-32 of everything read through bytes().
class CrcReader {
public:
    CrcReader(QFile &file, const QString &path)
        : m_file(file)
        , m_path(path)
    {
    }

    void bytes(char *dst, std::size_t n)
    {
        raw(dst, n);
        m_crc = crcUpdate(m_crc, dst, n);
    }
    void floats(std::vector<float> &v, std::uint64_t count)
    {
        v.resize(std::size_t(count));
        bytes(reinterpret_cast<char *>(v.data()), v.size() * sizeof(float));
        qFromLittleEndian<quint32>(v.data(), qsizetype(v.size()), v.data());
    }
    void raw(char *dst, std::size_t n)
    {
        while (n > 0) {
            const qint64 chunk = qint64(std::min(n, kChunkBytes));
            const qint64 got = m_file.read(dst, chunk);
            if (got != chunk)
                fail(QStringLiteral("%1 is truncated or unreadable (read failed at offset %2: %3)")
                         .arg(m_path)
                         .arg(m_file.pos())
                         .arg(got < 0 ? m_file.errorString() : QStringLiteral("end of file")));
            dst += chunk;
            n -= std::size_t(chunk);
        }
    }
    std::uint32_t crc() const { return std::uint32_t(m_crc); }

private:
    QFile &m_file;
    const QString &m_path;
    uLong m_crc = crc32(0L, Z_NULL, 0);
};

// Small positioned read for the layout walk; the caller has checked the range against the file size.
template <typename T> T fieldAt(QFile &file, const QString &path, qint64 offset)
{
    char b[sizeof(T)];
    if (!file.seek(offset) || file.read(b, qint64(sizeof b)) != qint64(sizeof b))
        fail(QStringLiteral("cannot read %1 at offset %2: %3").arg(path).arg(offset).arg(file.errorString()));
    return qFromLittleEndian<T>(b);
}

} // namespace

QString checkpointPath(const QString &dir)
{
    const QString name = QString::fromLatin1(kFileName);
    if (dir.isEmpty())
        return name;
    return dir.endsWith(QLatin1Char('/')) ? dir + name : dir + QLatin1Char('/') + name;
}

void writeCheckpoint(const QString &dir, const Checkpoint &ckpt)
{
    if (dir.isEmpty())
        fail(QStringLiteral("cannot write checkpoint: empty directory path"));
    const QString path = checkpointPath(dir);
    if (ckpt.configJson.size() > std::numeric_limits<std::uint32_t>::max())
        fail(QStringLiteral(
                 "cannot write checkpoint %1: config JSON is %2 bytes, the format allows at most 4 GiB")
                 .arg(path)
                 .arg(qulonglong(ckpt.configJson.size())));
    if (!QDir().mkpath(dir))
        fail(QStringLiteral("cannot write checkpoint %1: %2").arg(path, mkpathFailure(dir)));

    QSaveFile file(path);
    file.setDirectWriteFallback(false); // never write in place: the old checkpoint must survive a crash
    if (!file.open(QIODevice::WriteOnly))
        fail(QStringLiteral("cannot write checkpoint %1: %2").arg(path, file.errorString()));

    // On any throw below, ~QSaveFile discards the temporary file.
    CrcWriter out(file, path);
    out.bytes(kMagic, sizeof kMagic);
    out.u32(kCheckpointFormatVersion);
    out.i64(ckpt.stepsDone);
    out.u32(std::uint32_t(ckpt.configJson.size()));
    out.bytes(ckpt.configJson.data(), ckpt.configJson.size());
    out.floats(ckpt.params);
    out.floats(ckpt.optimizerState);
    out.finish();
    // QSaveFile::commit() (Qt 6.4) ignores a failure of its final buffered
    // flush and of fsync, and would then replace the previous checkpoint with
    // a short file: flush and sync here, where failures are seen.
    errno = 0;
    if (!file.flush() || file.error() != QFileDevice::NoError)
        fail(QStringLiteral("cannot write checkpoint %1: %2").arg(path, writeFailure(file, errno)));
#ifdef Q_OS_UNIX
    if (::fsync(file.handle()) != 0 && errno != EINVAL && errno != EROFS)
        fail(QStringLiteral("cannot write checkpoint %1: fsync failed: %2")
                 .arg(path, QString::fromLocal8Bit(std::strerror(errno))));
#endif
    if (!file.commit())
        fail(QStringLiteral("cannot write checkpoint %1: %2").arg(path, file.errorString()));
}

namespace {

// Reading a checkpoint, as a decoder of named steps; each either hands over
// to the next or ends in the error state (fail(): CheckpointError, one line
// naming the file). Nothing is allocated before the layout walk has checked
// every count against the bytes the file holds.
//
//   1. open      the path (a directory's checkpointPath()), an existing file
//   2. magic     the first 8 bytes say SMOLCKPT (an empty file says so)
//   3. version   not newer than this build reads; the fixed fields fit
//   4. layout    config length, parameter and optimizer state counts fit
//                exactly in the file's size (small positioned reads)
//   5. body      everything again in order, checksummed, with the counts the
//                walk saw (a file changed meanwhile is an error)
//   6. checksum  the stored CRC-32 matches the computed one
class CheckpointDecoder {
public:
    explicit CheckpointDecoder(const QString &dirOrFile) : m_given(dirOrFile) {}

    Checkpoint decode()
    {
        open();
        checkMagic();
        checkVersion();
        walkLayout();
        readBody();
        checkChecksum();
        return std::move(m_ckpt);
    }

private:
    // 1. Resolve the path and open the file.
    void open()
    {
        if (m_given.isEmpty())
            fail(QStringLiteral("cannot read checkpoint: empty path"));
        const QFileInfo given(m_given);
        m_path = given.isDir() ? checkpointPath(m_given) : m_given;
        const QFileInfo info(m_path);
        if (!info.exists()) {
            if (given.isDir())
                fail(QStringLiteral("no checkpoint in directory %1 (%2 does not exist)").arg(m_given, m_path));
            fail(QStringLiteral("no checkpoint at %1 (no such file or directory)").arg(m_path));
        }
        if (info.isDir())
            fail(QStringLiteral("%1 is a directory, not a checkpoint file").arg(m_path));
        m_file.setFileName(m_path);
        if (!m_file.open(QIODevice::ReadOnly))
            fail(QStringLiteral("cannot open checkpoint %1: %2").arg(m_path, m_file.errorString()));
        m_size = m_file.size();
    }

    // 2. The magic (what there is of it: a short file's bytes must match too).
    void checkMagic()
    {
        char magic[sizeof kMagic] = {};
        const qint64 head = std::min<qint64>(m_size, qint64(sizeof magic));
        if (m_file.read(magic, head) != head)
            fail(QStringLiteral("cannot read %1: %2").arg(m_path, m_file.errorString()));
        if (m_size == 0)
            fail(QStringLiteral("%1 is empty, not a smolcluster checkpoint").arg(m_path));
        if (std::memcmp(magic, kMagic, std::size_t(head)) != 0)
            fail(QStringLiteral("%1 is not a smolcluster checkpoint (bad magic)").arg(m_path));
    }

    // 3. The format version, then room for every fixed field.
    void checkVersion()
    {
        if (m_size < 12)
            failTruncated();
        const std::uint32_t version = fieldAt<std::uint32_t>(m_file, m_path, 8);
        if (version > kCheckpointFormatVersion)
            fail(QStringLiteral(
                     "%1 was written by a newer smolcluster (format %2); this build reads format %3 and older")
                     .arg(m_path)
                     .arg(version)
                     .arg(kCheckpointFormatVersion));
        if (m_size < kMinFileBytes)
            failTruncated();
    }

    // 4. Every count against the bytes actually present.
    void walkLayout()
    {
        const std::uint64_t fileBytes = std::uint64_t(m_size);
        m_configBytes = fieldAt<std::uint32_t>(m_file, m_path, 20);
        if (m_configBytes > fileBytes - std::uint64_t(kMinFileBytes))
            fail(QStringLiteral("%1 is truncated or corrupt (config length %2 does not fit in a %3-byte file)")
                     .arg(m_path)
                     .arg(m_configBytes)
                     .arg(m_size));
        // Bytes the file has beyond the fixed fields and the config.
        std::uint64_t spare = fileBytes - std::uint64_t(kMinFileBytes) - m_configBytes;
        const qint64 paramCountAt = kHeaderBytes + qint64(m_configBytes);
        m_paramCount = sectionCount(paramCountAt, "parameter", spare);
        const qint64 optCountAt = paramCountAt + 8 + qint64(m_paramCount * sizeof(float));
        m_optCount = sectionCount(optCountAt, "optimizer state", spare);
        if (spare != 0)
            fail(QStringLiteral("%1 is corrupt (%2 unexpected bytes after the optimizer state)")
                     .arg(m_path)
                     .arg(spare));
    }

    // A section's float count at `offset`, taken out of `spare`.
    std::uint64_t sectionCount(qint64 offset, const char *what, std::uint64_t &spare)
    {
        const std::uint64_t count = fieldAt<std::uint64_t>(m_file, m_path, offset);
        if (count > spare / sizeof(float))
            fail(QStringLiteral("%1 is truncated or corrupt (%2 count %3 needs more than the %4 bytes left)")
                     .arg(m_path, QLatin1String(what))
                     .arg(count)
                     .arg(spare));
        spare -= count * sizeof(float);
        return count;
    }

    // 5. Read everything in order, checksumming as it goes.
    void readBody()
    {
        if (!m_file.seek(0))
            fail(QStringLiteral("cannot read %1: %2").arg(m_path, m_file.errorString()));
        char header[kHeaderBytes];
        m_in.bytes(header, sizeof header);
        m_ckpt.stepsDone = qFromLittleEndian<std::int64_t>(header + 12);
        if (qFromLittleEndian<std::uint32_t>(header + 20) != m_configBytes)
            failChanged();
        m_ckpt.configJson.resize(std::size_t(m_configBytes));
        m_in.bytes(m_ckpt.configJson.data(), m_ckpt.configJson.size());
        expectCount(m_paramCount);
        m_in.floats(m_ckpt.params, m_paramCount);
        expectCount(m_optCount);
        m_in.floats(m_ckpt.optimizerState, m_optCount);
    }

    // A section's count again, as the layout walk saw it.
    void expectCount(std::uint64_t walked)
    {
        char count[8];
        m_in.bytes(count, sizeof count);
        if (qFromLittleEndian<std::uint64_t>(count) != walked)
            failChanged();
    }

    // 6. The stored CRC-32 (not itself checksummed) against the computed one.
    void checkChecksum()
    {
        char crcBytes[4];
        m_in.raw(crcBytes, sizeof crcBytes);
        const std::uint32_t stored = qFromLittleEndian<std::uint32_t>(crcBytes);
        if (stored != m_in.crc())
            fail(QStringLiteral("%1 is corrupt (CRC-32 mismatch: stored %2, computed %3)")
                     .arg(m_path, hex32(stored), hex32(m_in.crc())));
    }

    [[noreturn]] void failTruncated() const
    {
        fail(QStringLiteral("%1 is truncated (%2 bytes; a checkpoint has at least %3)")
                 .arg(m_path)
                 .arg(m_size)
                 .arg(kMinFileBytes));
    }
    [[noreturn]] void failChanged() const { fail(QStringLiteral("%1 changed while it was being read").arg(m_path)); }

    const QString m_given;
    QString m_path;
    QFile m_file;
    qint64 m_size = 0;
    CrcReader m_in{m_file, m_path};
    std::uint64_t m_configBytes = 0;
    std::uint64_t m_paramCount = 0;
    std::uint64_t m_optCount = 0;
    Checkpoint m_ckpt;
};

} // namespace

Checkpoint readCheckpoint(const QString &dirOrFile)
{
    return CheckpointDecoder(dirOrFile).decode();
}

} // namespace smol::engine
