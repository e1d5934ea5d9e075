// The window's lessons (issue 15): the Lessons menu (each shipped lesson,
// Open lesson file..., Close lesson), the lesson panel docked beside the
// cluster, the presenter keys (Page Down / Right: next, Page Up / Left:
// back, B: a blank screen), and each step's focus turned into the window's
// tab, selected node and timeline range. The lesson itself runs in a
// LessonRunner (app/lesson_runner.h); this class is wiring, so
// app/mainwindow.cpp stays wiring too.
#pragma once

#include <QObject>
#include <QString>

#include <functional>

class QAction;
class QDockWidget;
class QMenu;

namespace smol::widgets {
class BlankOverlay;
class LessonPanel;
} // namespace smol::widgets

namespace smol::app {

class EngineController;
class LessonRunner;
class MainWindow;
struct LessonFocus;

class LessonUi : public QObject {
    Q_OBJECT

public:
    LessonUi(MainWindow *window, EngineController *engine);
    ~LessonUi() override;

    // A shipped lesson's name or a .lesson file: opens it at its first step
    // (which starts that step's run). false with the one-line reason (and a
    // message box unless `quiet`).
    bool open(const QString &nameOrPath, QString *error = nullptr, bool quiet = false);
    void close();
    bool isOpen() const;
    // Goes on (revealing each step's numbers on the way) until step `step`
    // (1-based) is reached and its numbers revealed, then calls done(true, "");
    // done(false, reason) when a step fails on the way.
    void runTo(int step, std::function<void(bool ok, const QString &reason)> done);

    LessonRunner *runner() const { return m_runner; }
    widgets::LessonPanel *panel() const { return m_panel; }
    QDockWidget *dock() const { return m_dock; }
    QMenu *menu() const { return m_menu; }

private:
    void buildMenu();
    void chooseFile();
    void applyFocus(const LessonFocus &focus);
    void showView();
    void setProjectorMode(bool on);
    void placeTabs();
    void showBottomDocks(bool on); // the timeline and charts docks
    // A step's `compare: A B`: A's recording replayed with B compared.
    void showComparison(const QString &fileA, const QString &fileB);
    void closeComparison();

    MainWindow *m_window;
    EngineController *m_engine;
    LessonRunner *m_runner = nullptr;
    widgets::LessonPanel *m_panel = nullptr;
    widgets::BlankOverlay *m_blank = nullptr;
    QDockWidget *m_dock = nullptr;
    QMenu *m_menu = nullptr;
    QAction *m_close = nullptr;
    bool m_comparing = false; // the window shows a lesson's two recordings
    int m_runTo = -1; // runTo's target step (0-based), -1: none
    std::function<void(bool, const QString &)> m_runToDone;
};

} // namespace smol::app
