// smolcluster --watch / --join (issue 27): a student's window. With --join,
// one node of this machine joins the teacher's cluster first (as `smolctl
// node --join` does, on a thread of this process) and the window marks it
// "you"; then the window opens as a read-only viewer of the teacher's live
// run (MainWindow::watch, fed by a ViewerFeed). An address that cannot be
// reached or a token the teacher refuses: one line on stderr, exit 1.
#pragma once

class QApplication;

namespace smol::app {

struct GuiOptions;

int runViewerWindow(QApplication &app, const GuiOptions &options);

} // namespace smol::app
