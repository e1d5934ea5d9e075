// A student's lesson panel (issue 27): the teacher's lesson step as the
// teacher's stream sends it (ViewerFeed::lessonChanged; the object
// LessonRunner::stepJson() makes), shown in the window's lesson panel in
// follower mode: no Back, Next or close, the teacher moves it on. A step
// with a reveal asks its question with a field; what the student types goes
// to the teacher as a prediction once typing pauses (or on Return), in the
// question's unit ("3 MiB", "37.5 %"); the last answer counts.
#pragma once

#include "app/lessons/lesson.h"
#include "widgets/lesson_panel.h"

#include <QJsonObject>
#include <QObject>
#include <QTimer>

namespace smol::app {

class LessonUi;
class MainWindow;
class ViewerFeed;

class LessonFollower : public QObject {
    Q_OBJECT

public:
    LessonFollower(MainWindow *window, LessonUi *lessons, ViewerFeed *feed);

    // The panel's view of a teacher's step; `answer` is what this student
    // sent ("" none), said in the status line.
    static widgets::LessonStepView viewOf(const QJsonObject &step, const QString &answer);
    // Sends what is typed now (tests; Return does the same).
    bool sendTyped();

private:
    void show(const QJsonObject &step);

    MainWindow *m_window;
    LessonUi *m_lessons;
    ViewerFeed *m_feed;
    QJsonObject m_step;
    QString m_typed;  // the field's text
    QString m_answer; // what was sent for the current step, as formatted
    QTimer m_typing;  // a pause in typing sends the answer
};

} // namespace smol::app
