// The replay tool bar, shown while a session is open: previous / next
// collective ([ and ]), play or pause, the speed, a scrubber over the whole
// recording, the position (seconds and step) and Close replay. It drives the
// ReplayController; the window tells it where the replay is (showPosition).
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

    // The replay at `ns`, inside step `step` (-1: before the first).
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
