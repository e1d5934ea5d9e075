// Plays a recorded session file into the views the live run drives: the
// same signals as EngineController (stateChanged, stepAvailable, pausedAt,
// ...) with the same meaning, so one window serves live and recorded runs.
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

#include "app/engine_controller.h" // PauseView and the metatypes the signals carry
#include "widgets/cluster_state.h"
#include "widgets/tensor_inspector.h"

#include <QObject>
#include <QString>

#include <cstddef>
#include <memory>
#include <optional>

namespace smol::engine {
class SessionReader;
class ReplaySource;
} // namespace smol::engine

namespace smol::app {

class ReplayController : public QObject {
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
    // The tensors a recorded pause took at collective (step, kind, seq); an
    // empty PauseView (id 0) when no pause recorded that collective.
    PauseView pauseAt(qint64 step, int collectiveKind, quint64 seq) const;

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
    // EngineController's signals, same meaning and types:
    void stateChanged(smol::widgets::ClusterStatePtr state);
    void stepAvailable(const smol::widgets::StepPoint &point);
    void testAccuracyAvailable(qint64 step, double accuracy);
    void testLossAvailable(qint64 step, double loss);
    void pausedAt(const smol::app::PauseView &pause);
    void logLine(const QString &line);
    void errorOccurred(const QString &reason);
    // Replay only:
    void cleared();    // views must drop what they show (before a seek rebuilds them)
    void pauseEnded(); // the position left a recorded pause
    void positionChanged(qint64 ns);
    void playingChanged(bool playing);
    void opened(const QString &description);
    void closed();

private:
    struct Private;
    std::unique_ptr<Private> d;
};

} // namespace smol::app
