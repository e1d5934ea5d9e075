#include "kept_checkpoint.h"

#include "engine/checkpoint_file.h"

#include <QDir>

#include <stdexcept>

namespace smol::engine {

namespace {

void checkBlobSize(const QByteArray &blob, std::int64_t paramCount, bool moments)
{
    if (paramCount < 1 || blob.size() != paramCount * 4 * (moments ? 3 : 1))
        throw std::invalid_argument("a checkpoint of " + std::to_string(blob.size()) + " bytes does not hold " +
                                    std::to_string(paramCount) + " parameters" + (moments ? " and two moments" : ""));
}

} // namespace

Checkpoint checkpointOfBlob(std::int64_t stepsDone, const std::string &configJson, const QByteArray &blob,
                            std::int64_t paramCount, bool moments)
{
    checkBlobSize(blob, paramCount, moments);
    Checkpoint ck;
    ck.stepsDone = stepsDone;
    ck.configJson = configJson;
    const float *floats = reinterpret_cast<const float *>(blob.constData());
    ck.params.assign(floats, floats + paramCount);
    if (moments)
        ck.optimizerState.assign(floats + paramCount, floats + 3 * paramCount);
    return ck;
}

// A checkpoint's parameters, and Adam's moments when it holds both.
TrainingState stateFromCheckpoint(const Checkpoint &ck)
{
    const std::int64_t n = std::int64_t(ck.params.size());
    TrainingState s;
    s.params = floatsFrom(reinterpret_cast<const char *>(ck.params.data()), n);
    if (ck.optimizerState.size() == 2 * ck.params.size()) {
        const char *moments = reinterpret_cast<const char *>(ck.optimizerState.data());
        s.moments.exp = floatsFrom(moments, n);
        s.moments.expSq = floatsFrom(moments + 4 * n, n);
    }
    return s;
}

KeptCheckpoint::KeptCheckpoint(std::int64_t budgetBytes, std::function<void(const std::string &)> log)
    : m_budget(budgetBytes), m_log(std::move(log))
{
}

KeptCheckpoint::~KeptCheckpoint() = default;

void KeptCheckpoint::keep(std::int64_t stepsDone, bool moments, const QByteArray &blob, std::int64_t paramCount,
                          const std::string &configJson)
{
    if (stepsDone <= m_steps)
        return;
    checkBlobSize(blob, paramCount, moments);
    if (blob.size() <= m_budget) {
        m_blob = blob; // implicitly shared: the message's bytes, no copy
    } else {
        if (!m_dir) {
            m_dir = std::make_unique<QTemporaryDir>(QDir::tempPath() + QStringLiteral("/smolcluster-kept-XXXXXX"));
            if (!m_dir->isValid())
                throw CheckpointError("no temporary directory for the kept checkpoint: " +
                                      m_dir->errorString().toStdString());
            m_log("the newest checkpoint (" + std::to_string(blob.size() >> 20) + " MiB) is over the " +
                  std::to_string(m_budget >> 20) + " MiB memory budget: kept on disk in " +
                  m_dir->path().toStdString() + " instead");
        }
        writeCheckpoint(m_dir->path(), checkpointOfBlob(stepsDone, configJson, blob, paramCount, moments));
        m_blob.clear();
    }
    m_steps = stepsDone;
    m_moments = moments;
}

TrainingState KeptCheckpoint::state() const
{
    if (m_steps < 0)
        return {};
    if (m_blob.isEmpty())
        return stateFromCheckpoint(readCheckpoint(m_dir->path()));
    return unpackState(m_blob, m_moments);
}

bool KeptCheckpoint::onDisk() const { return m_steps >= 0 && m_blob.isEmpty(); }

QString KeptCheckpoint::directory() const { return m_dir ? m_dir->path() : QString(); }

} // namespace smol::engine
