// Plays a recorded session file into the views the live run drives: a
// RunFeed (app/feed/run_feed.h) as EngineController is, its signals with the
// same meaning, so one window serves live and recorded runs. A replay starts
// no run and emits no timelineEvents: the window loads the whole recording's
// timeline when it opens it.
//
// Everything happens on the GUI thread, synchronously: a 16 ms QTimer calls
// advance() with the wall time that passed (tests call it directly), which
// moves an engine::ReplaySource and turns the events it emits into signals
// once it returns (so a slot may seek or pause from inside). A seek emits
// cleared() first and then rebuilds: every step up to the position, test
// figures, the pause the position lies in, and the state.
//
// Positions are on the recording's clock (ns). beginNs() is where a replay
// starts, just before the first event (ReplaySource::begin() - 1); no event
// has been shown there.
//
// No LibTorch in this header (pimpl).
#pragma once

#include "app/bridge/engine_controller.h" // RunSettings
#include "app/feed/run_feed.h"

#include <QString>

#include <cstddef>
#include <memory>
#include <optional>

namespace smol::engine {
class SessionReader;
class ReplaySource;
} // namespace smol::engine

namespace smol::app {

class ReplayController : public RunFeed {
    Q_OBJECT

public:
    explicit ReplayController(QObject *parent = nullptr);
    ~ReplayController() override;

    // Opens a session file and shows its start: emits cleared(), then
    // opened(description), then the state at the beginning. On failure
    // returns false, sets *error to one line (the SessionError text) and
    // emits errorOccurred; a previously open session stays closed.
    bool open(const QString &path, QString *error = nullptr);
    void close(); // stops playback, emits closed()
    bool isOpen() const;
    QString path() const;
    const engine::SessionReader *reader() const; // nullptr when closed
    qint64 beginNs() const;
    qint64 endNs() const;
    qint64 positionNs() const;
    double speed() const;
    bool isPlaying() const;
    // One line: strategy, model, nodes, steps recorded, duration, complete or interrupted.
    QString describe() const;
    // The recording's configuration as run settings (strategy, nodes, model,
    // batch, steps, optimizer, lr, seed, pipeline's micro-batches and
    // schedule), for the window's disabled run settings; nullopt when closed
    // or the file's config cannot be read by this build.
    std::optional<RunSettings> recordedSettings() const;

    // RunFeed: the snapshot at the position, playing, the position inside a
    // recorded pause, and the tensors a recorded pause took at collective
    // (step, kind, seq) (an empty PauseView, id 0, when none did).
    widgets::ClusterStatePtr state() const override;
    bool isRunning() const override { return isPlaying(); }
    bool isPaused() const override;
    PauseView pauseAt(qint64 step, int collectiveKind, quint64 seq) const override;

public Q_SLOTS:
    void play(); // at the end: from the beginning
    void pause();
    void togglePlay();
    void setSpeed(double speed); // clamped to ReplaySource's range
    void seek(qint64 ns);
    bool seekToStep(qint64 step);
    bool nextCollective();
    bool previousCollective();
    // Moves the replay by wallNs of wall time at the current speed and
    // publishes; returns the number of events emitted.
    std::size_t advance(qint64 wallNs);

Q_SIGNALS:
    // Replay only (the rest: RunFeed's):
    void positionChanged(qint64 ns);
    void playingChanged(bool playing);
    void opened(const QString &description);
    void closed();

private:
    struct Private;
    std::unique_ptr<Private> d;
};

} // namespace smol::app
