// ReplaySource: plays a session file into a SessionEventSink, the same
// interface a live cluster feeds, so every view works on recordings.
//
// The replay has a position p on the recording's clock: every event with
// time <= p has been emitted (event time: eventTimeNs(), a frame or span
// at its end). It starts just before the first event (begin() - 1).
//
// advance(wallNs) is the one way time moves: it emits, in time order, every
// event with time in (p, p + wallNs * speed] and moves p there (clamped at
// end()). Events with equal times go frames, spans, memory, metrics, logs,
// tensors, each in file order. Tests and a GUI timer can call it directly
// and deterministically; play() starts a thread that calls it every ~16 ms
// with the wall time that passed, until pause() or the end.
//
// seek(t) moves p to t and emits nothing for the skipped range. So that
// views can rebuild, it then emits (before returning, on the caller's
// thread) each node's newest memory sample at or before t, then every
// metric at or before t, in time order: clear the views, then seek.
// seekToStep(n) and next/previousCollective() seek to just before a step's
// or a collective's first event (its earliest start on any node).
//
// Sink calls happen on the thread that called advance()/seek() (or on the
// playback thread), one at a time. A sink may call position(), pause() and
// isPlaying() from inside; not advance() or the seeks (they hold the lock).
#pragma once

#include "session_events.h"
#include "session_reader.h"

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace smol::engine {

class ReplaySource {
public:
    static constexpr double kMinSpeed = 0.1;
    static constexpr double kMaxSpeed = 50;

    // Reads the time range and the collective boundaries; `reader` and
    // `sink` must outlive the replay. Throws SessionError for a damaged file.
    ReplaySource(const SessionReader &reader, SessionEventSink *sink);
    ~ReplaySource(); // stops the playback thread
    ReplaySource(const ReplaySource &) = delete;
    ReplaySource &operator=(const ReplaySource &) = delete;

    std::int64_t begin() const { return m_begin; }
    std::int64_t end() const { return m_end; }
    std::int64_t position() const { return m_position.load(); }
    bool atEnd() const { return position() >= m_end; }

    double speed() const { return m_speed.load(); }
    // 0.1 to 50 (1 = real time); anything else throws std::invalid_argument.
    void setSpeed(double speed);

    // Emits the events of the next wallNs * speed nanoseconds of recording;
    // returns how many. wallNs < 0 throws std::invalid_argument.
    std::size_t advance(std::int64_t wallNs);
    void seek(std::int64_t tNs);        // clamped to [begin() - 1, end()]
    bool seekToStep(std::int64_t step); // false: the file has no such step
    bool nextCollective();              // false: none after the position
    bool previousCollective();          // false: none at or before the position

    void play(); // does nothing at the end: seek first
    void pause();
    bool isPlaying() const;
    // Why the playback thread stopped on its own (a damaged file, a sink
    // that threw); empty otherwise.
    std::string error() const;

private:
    void seekLocked(std::int64_t tNs);
    bool seekToCollective(bool next); // nextCollective() / previousCollective()
    std::size_t emitInOrder(const SessionEvents &events);
    void playbackLoop();

    const SessionReader &m_reader;
    SessionEventSink *m_sink;
    std::int64_t m_begin = 0;
    std::int64_t m_end = 0;
    std::vector<std::int64_t> m_collectiveStarts; // sorted, distinct

    std::mutex m_mutex; // serialises advance(), the seeks and their emission
    std::atomic<std::int64_t> m_position{0};
    std::atomic<double> m_speed{1.0};
    double m_carryNs = 0; // the fraction of a nanosecond advance() could not move yet

    mutable std::mutex m_playMutex;
    std::condition_variable m_playWake;
    bool m_playing = false;
    bool m_quit = false;
    std::uint64_t m_playGeneration = 0; // bumped by play(): the thread restarts its wall clock
    std::string m_error;
    std::thread m_thread;
};

} // namespace smol::engine
