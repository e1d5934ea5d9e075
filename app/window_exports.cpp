// MainWindow's exports (File menu and scripts): the visible timeline as a
// PNG, the open session or the last recorded run as Chrome trace JSON.
#include "mainwindow.h"

#include "engine/session/session_export.h"
#include "engine/session/session_reader.h"
#include "replay_controller.h"
#include "widgets/timeline_view.h"

#include <QImage>

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
        if (m_replaying && m_replayController->reader()) {
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

} // namespace smol::app
