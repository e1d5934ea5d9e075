// The replay tool bar, shown while a session is open: previous / next
// collective ([ and ], or N), play or pause (Space), the speed, a scrubber
// over the whole recording, the position (seconds and step) and Close
// replay. The one set of controls a replay has: the window hides the live
// run's meanwhile. It drives the ReplayController; the window tells it where
// the replay is (showPosition).
#pragma once

#include <QToolBar>

class QAction;
class QComboBox;
class QLabel;
class QSlider;

namespace smol::app {

class ReplayController;

class ReplayBar : public QToolBar {
    Q_OBJECT

public:
    ReplayBar(ReplayController *replay, QWidget *parent = nullptr);

    // The replay at `ns`, in step `step` (widgets::stepInProgress of the
    // replay's state, as the header shows it; -1: none).
    void showPosition(qint64 ns, qint64 step);
    void setPlaying(bool playing);

Q_SIGNALS:
    void closeRequested();
    void message(const QString &text, int timeoutMs);

private:
    void seekToSlider();

    ReplayController *m_replay;
    QAction *m_play = nullptr;
    QComboBox *m_speed = nullptr;
    QSlider *m_scrubber = nullptr;
    QLabel *m_position = nullptr;
};

} // namespace smol::app
