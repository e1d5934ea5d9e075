// MainWindow as a student's window (smolcluster --watch / --join, issue
// 27): the views fed by a ViewerFeed, read-only. Nothing that would act on
// the teacher's cluster shows: no run controls, no Node tab buttons, no
// Cluster menu, no lessons of its own, no recording or replay over it; the
// teacher's pauses show (the inspector holds their tensors) and the
// teacher's lesson step shows in the lesson panel (LessonFollower).
#include "mainwindow.h"

#include "app/feed/viewer_feed.h"
#include "lesson_follower.h"
#include "lesson_ui.h"
#include "node_page.h"
#include "run_controls.h"
#include "timeline_panel.h"
#include "widgets/paint/palette.h"

#include <QAction>
#include <QMenu>
#include <QStatusBar>

namespace smol::app {

void MainWindow::watch(ViewerFeed *viewer)
{
    m_viewer = viewer;
    connectViews({viewer});
    setFeed(viewer);
    connect(viewer, &ViewerFeed::aggregatedChanged, this, [this](bool on) {
        m_timelinePanel->setAggregated(on, QStringLiteral("%1/s").arg(widgets::formatBytes(m_viewer->budgetBytesPerSecond())));
    });
    new LessonFollower(this, m_lessons, viewer);
    const QString you = viewer->ownNode() >= 0 ? tr(" as node %1").arg(viewer->ownNode()) : QString();
    setWindowTitle(tr("smolcluster: watching %1%2").arg(viewer->address(), you));
    statusBar()->showMessage(tr("Watching the teacher's cluster at %1%2: this window only shows.")
                                 .arg(viewer->address(), you));
    connect(viewer, &ViewerFeed::closed, this, [this](const QString &reason) {
        setWindowTitle(tr("smolcluster: %1 (stream ended)").arg(m_viewer->address()));
        statusBar()->showMessage(tr("The teacher's stream ended: %1").arg(reason));
    });
    if (const widgets::ClusterStatePtr state = viewer->state())
        showState(state);
    updateRunActions();
}

void MainWindow::hideLiveControls()
{
    m_runControls->setVisible(false);
    m_nodePage->setLiveControlsVisible(false);
    for (QAction *a : {m_start, m_pause, m_step, m_stop, m_record, m_openSession, m_compareWith})
        a->setEnabled(false);
    // No lesson of its own (its menu, Ctrl+L, File > Open lesson...): the
    // teacher's steps show in the panel.
    m_clusterMenu->menuAction()->setVisible(false);
    m_lessons->menu()->menuAction()->setVisible(false);
    for (QAction *a : m_lessons->menu()->actions())
        a->setEnabled(false);
    if (const auto *file = qobject_cast<QMenu *>(m_openSession->parent()))
        for (QAction *a : file->actions())
            if (a->text() == LessonUi::tr("Open &lesson..."))
                a->setEnabled(false);
}

} // namespace smol::app
