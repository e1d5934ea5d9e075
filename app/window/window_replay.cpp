// MainWindow's replay (File > Open session, Ctrl+W): a recorded session
// becomes the feed of every view, the live cluster's updates wait, and
// closing it brings the live cluster back.
#include "mainwindow.h"

#include "app/replay/compare_controller.h"
#include "app/replay/replay_controller.h"
#include "replay_bar.h"
#include "run_controls.h"
#include "timeline_panel.h"
#include "widgets/timeline/timeline_view.h"

#include <QApplication>
#include <QFileDialog>
#include <QFileInfo>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QStatusBar>

#include <optional>

namespace smol::app {

bool MainWindow::openSession(const QString &path, QString *error, bool quiet)
{
    struct BusyCursor {
        BusyCursor() { QApplication::setOverrideCursor(Qt::WaitCursor); }
        ~BusyCursor() { QApplication::restoreOverrideCursor(); }
    };
    std::optional<BusyCursor> busy;
    auto refuse = [&](const QString &reason) {
        busy.reset();
        if (error)
            *error = reason;
        if (!quiet)
            QMessageBox::warning(this, tr("Open session"), reason);
        statusBar()->showMessage(reason, 8000);
        return false;
    };
    if (m_engine->isRunning())
        return refuse(tr("A run is in progress: stop it (Ctrl+.) before opening a session."));
    m_compare->close();
    if (isReplaying())
        closeReplay();
    QString why;
    statusBar()->showMessage(tr("Opening %1...").arg(path));
    // Reading a long recording takes seconds (its traffic index, then the
    // timeline, which has a progress dialog).
    busy.emplace();
    setFeed(m_replayController); // the controller's first signals belong to the replay
    if (!m_replayController->open(path, &why)) {
        setFeed(m_engine);
        if (const widgets::ClusterStatePtr live = m_engine->state())
            showState(live);
        return refuse(why);
    }
    // The whole recording on the timeline, with the playhead at the start.
    try {
        m_timelinePanel->loadRecording(*m_replayController->reader(), m_replayController->beginNs());
    } catch (const std::exception &e) {
        m_replayController->close();
        setFeed(m_engine);
        m_timeline->clear();
        m_timeline->setLive(true);
        return refuse(QString::fromUtf8(e.what()));
    }
    showReplayPosition(m_replayController->positionNs());
    m_replayBar->show();
    // settings() says what was recorded, not the next live run (the controls hide).
    const std::optional<RunSettings> recorded = m_replayController->recordedSettings();
    m_runControls->showRecording(recorded);
    m_timelinePanel->showHint(recorded && recorded->backend == QLatin1String("gloo"));
    m_exportTrace->setEnabled(true);
    setWindowTitle(tr("smolcluster: replay of %1").arg(QFileInfo(path).fileName()));
    statusBar()->showMessage(tr("Replaying %1. Space plays, Ctrl+W closes.") // [ and ]: the bar's tooltips
                                 .arg(m_replayController->describe()));
    updateRunActions();
    return true;
}

void MainWindow::closeReplay()
{
    if (!isReplaying() || m_compare->close()) // a compared run B goes first
        return;
    m_replayController->close();
    setFeed(m_engine);
    m_replayBar->hide();
    m_runControls->showRecording(std::nullopt);
    clearRunViews();
    m_log->clear();
    m_timeline->setLive(true);
    m_exportTrace->setEnabled(!m_lastRecording.isEmpty());
    setWindowTitle(tr("smolcluster"));
    if (const widgets::ClusterStatePtr live = m_engine->state())
        showState(live); // the newest snapshot it published while the replay was shown
    statusBar()->showMessage(tr("Replay closed: the live cluster again."), 5000);
    updateRunActions();
}

void MainWindow::chooseSession()
{
    const QString path =
        QFileDialog::getOpenFileName(this, tr("Open session"), QString(), tr("Sessions (*.smolrec);;All files (*)"));
    if (!path.isEmpty())
        openSession(path);
}

} // namespace smol::app
