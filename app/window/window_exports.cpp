// MainWindow's exports (File menu and scripts): the visible timeline as a
// PNG, the open session or the last recorded run as Chrome trace JSON, and
// the File menu's dialogs that ask where.
#include "mainwindow.h"

#include "engine/session/session_export.h"
#include "engine/session/session_reader.h"
#include "app/replay/replay_controller.h"
#include "widgets/timeline/timeline_view.h"

#include <QApplication>
#include <QFileDialog>
#include <QImage>
#include <QMessageBox>
#include <QStatusBar>

namespace smol::app {

bool MainWindow::exportTimelinePng(const QString &path, QString *error)
{
    const QImage image = m_timeline->renderImage();
    if (image.isNull() || !image.save(path, "PNG")) {
        if (error)
            *error = tr("could not write %1").arg(path);
        return false;
    }
    return true;
}

bool MainWindow::exportChromeTrace(const QString &path, QString *error)
{
    try {
        if (isReplaying() && m_replayController->reader()) {
            engine::exportChromeTrace(*m_replayController->reader(), path);
        } else if (!m_lastRecording.isEmpty()) {
            const engine::SessionReader reader(m_lastRecording);
            engine::exportChromeTrace(reader, path);
        } else {
            if (error)
                *error = tr("nothing to export: open a session, or record a run (Ctrl+R) first");
            return false;
        }
    } catch (const std::exception &e) {
        if (error)
            *error = QString::fromUtf8(e.what());
        return false;
    }
    return true;
}

void MainWindow::chooseTimelinePng()
{
    const QString path =
        QFileDialog::getSaveFileName(this, tr("Export timeline"), QStringLiteral("timeline.png"), tr("PNG images (*.png)"));
    if (path.isEmpty())
        return;
    QString error;
    if (exportTimelinePng(path, &error))
        statusBar()->showMessage(tr("Timeline saved to %1").arg(path), 5000);
    else
        QMessageBox::warning(this, tr("Export timeline"), error);
}

void MainWindow::chooseChromeTrace()
{
    const QString path = QFileDialog::getSaveFileName(this, tr("Export Chrome trace"), QStringLiteral("session.trace.json"),
                                                      tr("Chrome trace JSON (*.json)"));
    if (path.isEmpty())
        return;
    QString error;
    QApplication::setOverrideCursor(Qt::WaitCursor);
    const bool ok = exportChromeTrace(path, &error);
    QApplication::restoreOverrideCursor();
    if (ok)
        statusBar()->showMessage(tr("Chrome trace saved to %1 (open it in Perfetto)").arg(path), 8000);
    else
        QMessageBox::warning(this, tr("Export Chrome trace"), error);
}

} // namespace smol::app
