// The Timeline dock's page: the timeline itself, a row to go to a step,
// fit, follow or save a PNG, and under it the line that says what the
// clicked item is, with "Replay from here" while a recording is shown. It
// asks the window for what goes beyond the timeline (a step in a replay
// moves the whole window; a PNG needs a file name); the window says what an
// item is (describe a hit, find its tensors). At a pause it hands the
// timeline the held collective (showPause: its kind, tensor and step from
// the pause's tensors), so the view frames it and its hatch names it.
#pragma once

#include <QWidget>

#include <functional>

class QLabel;
class QPushButton;
class QSpinBox;

namespace smol::engine {
class SessionReader;
}

namespace smol::widgets {
class TimelineView;
struct PauseView;
} // namespace smol::widgets

namespace smol::app {

class TimelinePanel : public QWidget {
    Q_OBJECT

public:
    explicit TimelinePanel(QWidget *parent = nullptr);

    widgets::TimelineView *view() const { return m_view; }
    // What the rows are, until an item is clicked (on Gloo: its packets are not visible).
    void showHint(bool gloo = false);
    // A student's window over its stream's budget: the packets it draws are
    // not all of them (the links' per-second totals stand in); the hint says so.
    void setAggregated(bool on, const QString &budget = QString());
    // A clicked item's details (one line); "Replay from here" with it in a replay.
    void showDetails(const QString &text, bool canSeek);
    void hideSeek();
    void focusStepField(); // Ctrl+G
    // A pause began (live: atNs is the feed's clock at the newest snapshot)
    // or a replay's position (atNs) lies in a recorded pause: the view stops
    // following and frames the held collective. endPause(): it is over.
    void showPause(const widgets::PauseView &pause, qint64 atNs);
    void endPause();
    // The whole recording, the playhead just after `beginNs`. A long file
    // shows a progress dialog. Throws engine::SessionError for a damaged file.
    void loadRecording(const engine::SessionReader &reader, qint64 beginNs);

Q_SIGNALS:
    void stepRequested(int step);
    void seekRequested(qint64 ns); // where the selected item starts, just before it
    void pngRequested();

private:
    widgets::TimelineView *m_view = nullptr;
    QSpinBox *m_jumpStep = nullptr;
    QLabel *m_details = nullptr;
    QPushButton *m_seekHere = nullptr;
    bool m_aggregated = false;
    QString m_budget; // "256 KiB/s"
};

} // namespace smol::app
