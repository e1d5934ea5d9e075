// ReplaySource: advance() reads the window (p, p + dt] from the file in
// slices of at most kSliceNs of recording (so a long jump at 50x never holds
// more than a slice in memory; an empty slice jumps straight to the next
// event, so a long quiet stretch costs one lookup, not one per slice), merges the six time-ordered lists the
// reader returns, and hands each event to the sink; the position moves after each slice so position() shows
// progress. The playback thread is advance() on a ~60 Hz wall clock.
#include "replay_source.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace smol::engine {

namespace {

constexpr std::int64_t kSliceNs = 250'000'000;
constexpr std::chrono::milliseconds kTick{16};

} // namespace

ReplaySource::ReplaySource(const SessionReader &reader, SessionEventSink *sink)
    : m_reader(reader)
    , m_sink(sink)
{
    if (!sink)
        throw std::invalid_argument("ReplaySource needs a sink");
    const auto range = reader.timeRange();
    // (begin() - 1 must exist, even for a damaged file's extreme times)
    m_begin = std::max(range.first, std::numeric_limits<std::int64_t>::min() + 1);
    m_end = std::max(range.second, m_begin);
    m_position = m_begin - 1;
    for (const CollectiveBoundary &c : reader.collectives())
        m_collectiveStarts.push_back(c.startNs);
    std::sort(m_collectiveStarts.begin(), m_collectiveStarts.end());
    m_collectiveStarts.erase(std::unique(m_collectiveStarts.begin(), m_collectiveStarts.end()),
                             m_collectiveStarts.end());
}

ReplaySource::~ReplaySource()
{
    {
        std::lock_guard<std::mutex> lock(m_playMutex);
        m_quit = true;
    }
    m_playWake.notify_all();
    if (m_thread.joinable())
        m_thread.join();
}

void ReplaySource::setSpeed(double speed)
{
    if (!(speed >= kMinSpeed && speed <= kMaxSpeed))
        throw std::invalid_argument("replay speed must be between 0.1 and 50");
    m_speed = speed;
}

std::size_t ReplaySource::advance(std::int64_t wallNs)
{
    if (wallNs < 0)
        throw std::invalid_argument("advance() needs a non-negative wall time");
    std::lock_guard<std::mutex> lock(m_mutex);
    const std::int64_t from = m_position;
    if (from >= m_end)
        return 0;
    // Recording time to cover, with the fraction carried to the next call so
    // slow speeds do not drift.
    const double want = double(wallNs) * m_speed.load() + m_carryNs;
    std::int64_t to = m_end;
    if (want < double(m_end) - double(from)) {
        const double whole = std::floor(want);
        m_carryNs = want - whole;
        to = from + std::int64_t(whole);
    } else {
        m_carryNs = 0;
    }
    std::size_t emitted = 0;
    for (std::int64_t a = from; a < to;) {
        // (unsigned: the distance fits even when a - to would overflow)
        const std::int64_t b =
            std::uint64_t(to) - std::uint64_t(a) > std::uint64_t(kSliceNs) ? a + kSliceNs : to;
        const SessionEvents events = m_reader.eventsIn(a, b);
        emitted += emitInOrder(events);
        m_position = b;
        a = b;
        if (events.size() == 0 && a < to) { // a quiet stretch: jump to the next event
            const std::optional<std::int64_t> next = m_reader.nextEventTime(a);
            a = next && *next <= to ? std::max(a, *next - 1) : to;
            m_position = a;
        }
    }
    return emitted;
}

std::size_t ReplaySource::emitInOrder(const SessionEvents &e)
{
    // Six sorted lists merged by time; ties go to the earlier list.
    std::size_t i[6] = {};
    const std::size_t n[6] = {e.frames.size(),  e.spans.size(), e.memory.size(),
                              e.metrics.size(), e.logs.size(),  e.tensors.size()};
    auto timeOf = [&](int k) -> std::int64_t {
        switch (k) {
        case 0:
            return eventTimeNs(e.frames[i[0]]);
        case 1:
            return eventTimeNs(e.spans[i[1]]);
        case 2:
            return eventTimeNs(e.memory[i[2]]);
        case 3:
            return eventTimeNs(e.metrics[i[3]]);
        case 4:
            return eventTimeNs(e.logs[i[4]]);
        default:
            return eventTimeNs(e.tensors[i[5]]);
        }
    };
    std::size_t emitted = 0;
    for (;;) {
        int next = -1;
        std::int64_t nextTime = 0;
        for (int k = 0; k < 6; ++k) {
            if (i[k] < n[k] && (next < 0 || timeOf(k) < nextTime)) {
                next = k;
                nextTime = timeOf(k);
            }
        }
        if (next < 0)
            return emitted;
        switch (next) {
        case 0:
            m_sink->onFrame(e.frames[i[0]]);
            break;
        case 1:
            m_sink->onSpan(e.spans[i[1]]);
            break;
        case 2:
            m_sink->onMemory(e.memory[i[2]]);
            break;
        case 3:
            m_sink->onMetric(e.metrics[i[3]]);
            break;
        case 4:
            m_sink->onLog(e.logs[i[4]]);
            break;
        default:
            m_sink->onTensor(e.tensors[i[5]]);
            break;
        }
        ++i[next];
        ++emitted;
    }
}

void ReplaySource::seek(std::int64_t tNs)
{
    std::lock_guard<std::mutex> lock(m_mutex);
    seekLocked(tNs);
}

void ReplaySource::seekLocked(std::int64_t tNs)
{
    const std::int64_t t = std::clamp(tNs, m_begin - 1, m_end);
    m_position = t;
    m_carryNs = 0;
    for (const MemorySample &m : m_reader.latestStepPeaks(t))
        m_sink->onMemory(m);
    for (const MemorySample &m : m_reader.latestMemory(t))
        m_sink->onMemory(m);
    for (const MetricSample &m : m_reader.metrics(std::numeric_limits<std::int64_t>::min(), t))
        m_sink->onMetric(m);
}

bool ReplaySource::seekToStep(std::int64_t step)
{
    const std::optional<std::int64_t> start = m_reader.stepStart(step);
    if (!start)
        return false;
    seek(*start - 1);
    return true;
}

bool ReplaySource::nextCollective()
{
    return seekToCollective(true);
}

bool ReplaySource::previousCollective()
{
    return seekToCollective(false);
}

bool ReplaySource::seekToCollective(bool next)
{
    std::lock_guard<std::mutex> lock(m_mutex);
    // A seek lands at s - 1 for a collective starting at s: the next one
    // starts after p + 1, the previous one at or before p.
    const std::int64_t p = m_position;
    const std::int64_t after = next && p < std::numeric_limits<std::int64_t>::max() ? p + 1 : p;
    const auto it = std::upper_bound(m_collectiveStarts.begin(), m_collectiveStarts.end(), after);
    if (next ? it == m_collectiveStarts.end() : it == m_collectiveStarts.begin())
        return false;
    seekLocked((next ? *it : *std::prev(it)) - 1);
    return true;
}

void ReplaySource::play()
{
    if (atEnd())
        return;
    {
        std::lock_guard<std::mutex> lock(m_playMutex);
        m_playing = true;
        m_error.clear();
        ++m_playGeneration;
        if (!m_thread.joinable())
            m_thread = std::thread([this] { playbackLoop(); });
    }
    m_playWake.notify_all();
}

void ReplaySource::pause()
{
    std::lock_guard<std::mutex> lock(m_playMutex);
    m_playing = false;
}

bool ReplaySource::isPlaying() const
{
    std::lock_guard<std::mutex> lock(m_playMutex);
    return m_playing;
}

std::string ReplaySource::error() const
{
    std::lock_guard<std::mutex> lock(m_playMutex);
    return m_error;
}

void ReplaySource::playbackLoop()
{
    using Clock = std::chrono::steady_clock;
    std::unique_lock<std::mutex> lock(m_playMutex);
    std::uint64_t generation = m_playGeneration;
    Clock::time_point last = Clock::now();
    while (!m_quit) {
        if (!m_playing) {
            m_playWake.wait(lock, [this] { return m_quit || m_playing; });
            continue;
        }
        if (generation != m_playGeneration) { // (re)started: the paused time does not count
            generation = m_playGeneration;
            last = Clock::now();
        }
        m_playWake.wait_for(lock, kTick);
        if (m_quit || !m_playing || generation != m_playGeneration)
            continue;
        const Clock::time_point now = Clock::now();
        const std::int64_t wallNs = std::chrono::duration_cast<std::chrono::nanoseconds>(now - last).count();
        last = now;
        lock.unlock();
        std::string failure;
        try {
            advance(wallNs);
        } catch (const std::exception &e) {
            failure = e.what();
        }
        lock.lock();
        if (!failure.empty()) {
            m_error = failure;
            m_playing = false;
        } else if (atEnd()) {
            m_playing = false;
        }
    }
}

} // namespace smol::engine
