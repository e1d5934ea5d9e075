// SessionRecorder: the sink that writes a run to a session file, an SQLite
// database (docs/session-format.md) written through SQLite's own API from
// one writer thread; SessionReader reads it through the same API.
//
// The on* methods only append the event to an in-memory queue under a mutex
// (tens of nanoseconds; no SQL on the caller's thread). One writer thread
// owns the database connection and drains the queue in batched
// transactions: at least every 100 ms, sooner when ~20k events are waiting.
// It runs at idle priority while it keeps up, at normal priority while a
// full batch is waiting, and at normal priority whenever it holds the
// queue's mutex (for a swap only), so a descheduled idle thread never keeps
// the run's threads waiting on it. Frames, spans and memory samples are
// written packed, one row per time slice (schema version 4,
// event_slices.h): a few rows per commit instead of one B-tree insert per
// event (the version-3 writer spent most of its time there).
// WAL journal with synchronous=NORMAL: a committed batch survives a kill -9
// of this process, so a crash loses at most the events of the last commit
// interval plus the batch being written (well under 250 ms).
//
// finish() flushes the queue, writes the end marker (end time, duration,
// final loss) and joins the writer; a file without the marker reads as
// "interrupted". Events that arrive after finish() are dropped.
#pragma once

#include "session_events.h"

#include <QString>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace smol::engine {

class SessionWriter;

class SessionRecorder : public SessionEventSink {
public:
    static constexpr std::chrono::milliseconds kCommitInterval{100};
    static constexpr std::size_t kBatchRows = 20000;

    // Creates `path`, writes the schema and `header`, starts the writer.
    // Throws SessionError when the file exists (unless `overwrite`) or cannot
    // be created. `schemaVersion` 3 writes the unpacked rows of version 3
    // (what tests of the older read path need); only 3 and
    // kSessionSchemaVersion are accepted.
    SessionRecorder(const QString &path, const SessionHeader &header, bool overwrite = false,
                    int schemaVersion = kSessionSchemaVersion);
    ~SessionRecorder() override; // close(); a writer failure is dropped here
    SessionRecorder(const SessionRecorder &) = delete;
    SessionRecorder &operator=(const SessionRecorder &) = delete;

    void onFrame(const net::FrameEvent &event) override;
    void onSpan(const SpanEvent &event) override;
    void onMemory(const MemorySample &sample) override;
    void onMetric(const MetricSample &sample) override;
    void onLog(const LogLine &line) override;
    void onTensor(const TensorRecord &record) override;

    // Writes everything queued, then the end marker, and stops the writer.
    // `endNs` defaults to now (net::monotonicNs()). Idempotent. Throws
    // SessionError if the writer failed (disk full, file removed, ...).
    void finish(std::optional<double> finalLoss = std::nullopt,
                std::optional<std::int64_t> endNs = std::nullopt);
    void close() { finish(); }

    const QString &path() const { return m_path; }
    std::uint64_t eventsWritten() const { return m_written.load(std::memory_order_relaxed); }
    // The writer's failure, empty while all is well. After a failure events
    // are dropped instead of queued.
    std::string error() const;

private:
    friend class SessionWriter;
    using Batch = SessionEvents;
    struct End {
        std::optional<double> finalLoss;
        std::int64_t endNs = 0;
    };

    struct Swap {
        bool behind = false; // a full batch or finish() was waiting
        bool stopping = false;
    };

    template <class T> void enqueue(std::vector<T> Batch::*queue, const T &event);
    void boostWriter(); // to normal priority (m_priorityMutex)
    void wakeWriter();  // before its commit interval is up
    Swap swapQueue(Batch &batch);
    void writerMain(const SessionHeader &header, std::promise<void> *ready);

    const QString m_path;
    const int m_schemaVersion;
    // m_mutex guards the queue and the state below it up to m_error; held
    // by the writer only for a swap, at normal priority.
    mutable std::mutex m_mutex;
    Batch m_queue;
    std::size_t m_queued = 0; // rows in m_queue
    bool m_accepting = true;  // false after finish() or a writer failure
    bool m_stopping = false;
    End m_end;
    std::string m_error;
    std::atomic<std::uint64_t> m_written{0};
    // The writer sleeps on m_wake (with m_wakeMutex and m_kicked) until the
    // commit interval is up or a full batch or finish() kicks it.
    std::mutex m_wakeMutex;
    std::condition_variable m_wake;
    bool m_kicked = false;
    // The writer runs at idle priority; a producer that sees the last commit
    // more than kBoostAfter ago raises it back to normal so a saturated
    // machine cannot starve it past the 250 ms bound. Changes of priority
    // and of m_boosted happen under m_priorityMutex.
    std::atomic<std::int64_t> m_lastCommitNs{0};
    std::mutex m_priorityMutex;
    std::atomic<bool> m_boosted{false};
    std::thread m_writer;
    bool m_finished = false;
};

} // namespace smol::engine
