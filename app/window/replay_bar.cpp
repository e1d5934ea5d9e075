#include "replay_bar.h"

#include "app/replay/replay_controller.h"
#include "widgets/step_number.h"

#include <QAction>
#include <QComboBox>
#include <QLabel>
#include <QSignalBlocker>
#include <QSlider>
#include <QTimer>

#include <algorithm>

namespace smol::app {

namespace {

constexpr int kScrubberSteps = 10000; // the scrubber's resolution

} // namespace

ReplayBar::ReplayBar(ReplayController *replay, QWidget *parent)
    : QToolBar(tr("Replay"), parent)
    , m_replay(replay)
{
    setObjectName(QStringLiteral("replay"));
    QAction *previous = addAction(tr("◀ Collective"), this, [this] {
        if (!m_replay->previousCollective())
            Q_EMIT message(tr("No earlier collective."), 3000);
    });
    previous->setShortcut(Qt::Key_BracketLeft);
    previous->setToolTip(tr("Go to the previous collective ([)"));
    // Space and N are the replay's while it is open (the run controls, whose
    // keys they are in a live run, hide: MainWindow::updateRunActions).
    m_play = addAction(tr("Play"), m_replay, &ReplayController::togglePlay);
    m_play->setShortcut(Qt::Key_Space);
    m_play->setShortcutContext(Qt::ApplicationShortcut); // also over a floating timeline
    m_play->setToolTip(tr("Play or pause the replay (Space)"));
    QAction *next = addAction(tr("Collective ▶"), this, [this] {
        if (!m_replay->nextCollective())
            Q_EMIT message(tr("No later collective."), 3000);
    });
    next->setShortcuts({QKeySequence(Qt::Key_BracketRight), QKeySequence(Qt::Key_N)});
    next->setToolTip(tr("Go to the next collective (] or N)"));
    m_speed = new QComboBox(this);
    for (double speed : {0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 50.0})
        m_speed->addItem(tr("%1x").arg(speed), speed);
    m_speed->setCurrentIndex(3);
    m_speed->setToolTip(tr("Replay speed (1x: as recorded)"));
    connect(m_speed, &QComboBox::currentIndexChanged, this,
            [this](int i) { m_replay->setSpeed(m_speed->itemData(i).toDouble()); });
    addWidget(m_speed);
    m_scrubber = new QSlider(Qt::Horizontal, this);
    m_scrubber->setRange(0, kScrubberSteps);
    m_scrubber->setMinimumWidth(160);
    m_scrubber->setToolTip(tr("Drag to move through the recording"));
    connect(m_scrubber, &QSlider::sliderMoved, this, &ReplayBar::seekToSlider);
    connect(m_scrubber, &QSlider::actionTriggered, this, [this](int action) {
        if (action != QAbstractSlider::SliderMove)
            QTimer::singleShot(0, this, &ReplayBar::seekToSlider); // after the slider has moved
    });
    addWidget(m_scrubber);
    m_position = new QLabel(this);
    m_position->setMinimumWidth(200);
    addWidget(m_position);
    addAction(tr("Close replay"), this, &ReplayBar::closeRequested);
}

void ReplayBar::seekToSlider()
{
    const qint64 b = m_replay->beginNs(), e = m_replay->endNs();
    m_replay->seek(b + qint64(double(e - b) * m_scrubber->sliderPosition() / kScrubberSteps));
}

void ReplayBar::showPosition(qint64 ns, qint64 step)
{
    const qint64 b = m_replay->beginNs(), e = m_replay->endNs();
    if (!m_scrubber->isSliderDown()) {
        const QSignalBlocker block(m_scrubber);
        m_scrubber->setValue(e > b ? int(double(ns - b) / double(e - b) * kScrubberSteps) : 0);
    }
    m_position->setText(tr("%1 / %2 s%3")
                            .arg(double(std::max<qint64>(0, ns - b)) / 1e9, 0, 'f', 3)
                            .arg(double(e - b) / 1e9, 0, 'f', 3)
                            .arg(step >= 0 ? QStringLiteral(", ") + widgets::stepText(step) : QString()));
}

void ReplayBar::setPlaying(bool playing)
{
    m_play->setText(playing ? tr("Pause") : tr("Play"));
}

} // namespace smol::app
