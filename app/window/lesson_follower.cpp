#include "lesson_follower.h"

#include "app/feed/viewer_feed.h"
#include "app/lessons/class_answers.h"
#include "lesson_ui.h"
#include "mainwindow.h"

#include <QDockWidget>
#include <QLineEdit>

namespace smol::app {

namespace {
constexpr int kTypingPauseMs = 800; // the coordinator reads at most 4 answers a second per viewer
}

LessonFollower::LessonFollower(MainWindow *window, LessonUi *lessons, ViewerFeed *feed)
    : QObject(window), m_window(window), m_lessons(lessons), m_feed(feed)
{
    m_typing.setSingleShot(true);
    m_typing.setInterval(kTypingPauseMs);
    connect(&m_typing, &QTimer::timeout, this, &LessonFollower::sendTyped);
    connect(feed, &ViewerFeed::lessonChanged, this, &LessonFollower::show);
    widgets::LessonPanel *panel = lessons->panel();
    connect(panel, &widgets::LessonPanel::predictionChanged, this, [this](int reveal, const QString &text) {
        if (reveal != 0)
            return;
        m_typed = text;
        m_typing.start();
    });
    connect(panel, &widgets::LessonPanel::nextRequested, this, [this] { // Return in the field
        m_typing.stop();
        sendTyped();
    });
    if (!feed->lesson().isEmpty())
        show(feed->lesson());
}

widgets::LessonStepView LessonFollower::viewOf(const QJsonObject &step, const QString &answer)
{
    widgets::LessonStepView v;
    v.follower = true;
    v.lesson = step.value(QStringLiteral("lesson")).toString();
    v.index = step.value(QStringLiteral("index")).toInt();
    v.count = std::max(v.index + 1, step.value(QStringLiteral("count")).toInt());
    v.title = step.value(QStringLiteral("title")).toString();
    v.text = step.value(QStringLiteral("text")).toString();
    const QString question = step.value(QStringLiteral("question")).toString();
    if (!question.isEmpty()) {
        widgets::LessonReveal r;
        r.label = question;
        r.revealed = step.value(QStringLiteral("revealed")).toBool();
        r.measured = step.value(QStringLiteral("measured")).toString();
        v.reveals.append(r);
        v.status = !answer.isEmpty() ? tr("Sent to the teacher: %1").arg(answer)
                   : r.revealed     ? tr("The teacher revealed the answer.")
                                    : tr("Type your prediction: it goes to the teacher.");
    } else {
        v.status = tr("Following the teacher's lesson.");
    }
    return v;
}

void LessonFollower::show(const QJsonObject &step)
{
    QDockWidget *dock = m_lessons->dock();
    if (step.isEmpty()) { // the teacher closed the lesson
        m_step = {};
        dock->hide();
        return;
    }
    const bool newStep = step.value(QStringLiteral("index")) != m_step.value(QStringLiteral("index")) ||
                         step.value(QStringLiteral("lesson")) != m_step.value(QStringLiteral("lesson"));
    if (newStep) {
        m_answer.clear();
        m_typed.clear();
        m_typing.stop();
    }
    m_step = step;
    m_lessons->panel()->setView(viewOf(step, m_answer));
    if (!dock->isVisible()) {
        dock->setWindowTitle(tr("Lesson: %1").arg(step.value(QStringLiteral("lesson")).toString()));
        m_window->setCorner(Qt::BottomRightCorner, Qt::RightDockWidgetArea);
        dock->show();
        dock->raise();
        m_window->resizeDocks({dock}, {dock->minimumWidth()}, Qt::Horizontal);
    }
    if (newStep && !step.value(QStringLiteral("revealed")).toBool())
        if (QLineEdit *field = m_lessons->panel()->predictionField(0))
            field->setFocus(Qt::OtherFocusReason); // the student types at once
}

bool LessonFollower::sendTyped()
{
    if (m_step.isEmpty() || m_step.value(QStringLiteral("question")).toString().isEmpty() ||
        m_step.value(QStringLiteral("revealed")).toBool())
        return false;
    if (const QLineEdit *field = m_lessons->panel()->predictionField(0))
        m_typed = field->text();
    const LessonUnit unit = lessonUnitFromName(m_step.value(QStringLiteral("unit")).toString());
    const std::optional<double> value = parseLessonValue(m_typed, unit);
    if (!value)
        return false;
    if (!m_feed->sendPrediction(m_step.value(QStringLiteral("index")).toInt(), *value))
        return false;
    m_answer = formatLessonValue(*value, unit);
    m_lessons->panel()->setView(viewOf(m_step, m_answer));
    return true;
}

} // namespace smol::app
