// LessonPanel and BlankOverlay: the view shows the step it is given (title,
// text, status, reveals only once revealed, agrees/differs in words), keeps
// what the class typed for the same step and starts empty on a new one, the
// buttons and presenter keys emit their signals (and a key typed into a
// prediction field stays there), nothing is wider than a narrow projector
// panel, and the blank cover covers the window and goes on B, Escape, a
// click. SMOL_SAVE_PNG=1 saves the panel in both modes at 360x700 and
// 300x520 to /tmp/lesson-panel-*.png.
#include "widgets/lesson_panel.h"

#include <QApplication>
#include <QImage>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QScrollArea>
#include <QScrollBar>
#include <QSignalSpy>
#include <QTest>
#include <QVBoxLayout>

#include <algorithm>

using smol::widgets::BlankOverlay;
using smol::widgets::LessonPanel;
using smol::widgets::LessonReveal;
using smol::widgets::LessonStepView;

namespace {

LessonStepView ringStep()
{
    LessonStepView v;
    v.lesson = QStringLiteral("Ring all-reduce");
    v.index = 2;
    v.count = 6;
    v.title = QStringLiteral("What each node sends");
    v.text = QStringLiteral(
        "In a ring all-reduce every node talks only to its two neighbours. The gradient is cut into N "
        "chunks; each chunk travels once around the ring to be summed, then once more to be shared.\n"
        "So each node sends 2(N-1)/N times the model's size per step, however many nodes there are. "
        "Predict the bytes before we measure them.");
    v.status = QStringLiteral("Running: step 12 of 40");
    v.busy = true;
    LessonReveal bytes;
    bytes.label = QStringLiteral("Bytes each node sends per step");
    bytes.formula = QStringLiteral("2(N-1)/N x S");
    bytes.formulaValue = QStringLiteral("689 KiB");
    bytes.measured = QStringLiteral("689 KiB");
    bytes.revealed = true;
    LessonReveal speedup;
    speedup.label = QStringLiteral("Speed-up over one node");
    speedup.formula = QStringLiteral("N / (1 + comm/compute)");
    speedup.formulaValue = QStringLiteral("2.40x");
    speedup.measured = QStringLiteral("1.85x");
    speedup.agrees = false;
    v.reveals = {bytes, speedup};
    v.canBack = true;
    v.nextLabel = QStringLiteral("Reveal");
    return v;
}

// The texts of the panel's labels that are shown.
QStringList shownTexts(const QWidget &panel)
{
    QStringList out;
    const auto labels = panel.findChildren<QLabel *>();
    for (const QLabel *l : labels)
        if (l->isVisibleTo(&panel) && !l->text().isEmpty())
            out << l->text();
    return out;
}

bool shows(const QWidget &panel, const QString &part)
{
    const QStringList texts = shownTexts(panel);
    return std::any_of(texts.begin(), texts.end(), [&](const QString &t) { return t.contains(part); });
}

QLabel *labelWith(const QWidget &panel, const QString &part)
{
    const auto labels = panel.findChildren<QLabel *>();
    for (QLabel *l : labels)
        if (l->isVisibleTo(&panel) && l->text().contains(part))
            return l;
    return nullptr;
}

// A key pressed as the window system delivers it: to the focus widget (the
// window when nothing has focus). QTest::keyClick(widget) sends even the
// ShortcutOverride to `widget`, so the focus widget would not get its say.
void press(QWidget *window, Qt::Key key)
{
    QWidget *focus = QApplication::focusWidget();
    QTest::keyClick(focus && window->isAncestorOf(focus) ? focus : window, key);
}

void clearFocus()
{
    if (QWidget *focus = QApplication::focusWidget())
        focus->clearFocus();
}

// A shown top-level window holding the panel, active, so that window
// shortcuts and focus work as they do in the application.
struct Window {
    QWidget window;
    LessonPanel *panel = new LessonPanel;
    QLineEdit *other = new QLineEdit; // another field of the window, outside the panel

    Window()
    {
        auto *layout = new QVBoxLayout(&window);
        layout->addWidget(other);
        layout->addWidget(panel);
        panel->installPresenterKeys(&window);
        window.resize(400, 700);
    }
    bool show()
    {
        window.show();
        window.activateWindow();
        return QTest::qWaitForWindowActive(&window);
    }
};

} // namespace

class TestLessonPanel : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void showsTitleTextAndStatus()
    {
        LessonPanel panel;
        LessonStepView v = ringStep();
        panel.setView(v);
        QVERIFY(shows(panel, QStringLiteral("Ring all-reduce \u00B7 step 3 of 6")));
        QVERIFY(shows(panel, v.title));
        QVERIFY(shows(panel, v.text));
        QVERIFY(shows(panel, v.status));
        QCOMPARE(panel.view().title, v.title);

        // An error is drawn in another colour than a plain status.
        QLabel *status = labelWith(panel, v.status);
        QVERIFY(status);
        const QColor plain = status->palette().color(QPalette::WindowText);
        v.status = QStringLiteral("Node 2 lost: connection reset");
        v.failed = true;
        panel.setView(v);
        status = labelWith(panel, v.status);
        QVERIFY(status);
        QVERIFY(status->palette().color(QPalette::WindowText) != plain);
        QVERIFY(!shows(panel, QStringLiteral("Running: step 12")));

        // No status, no status line.
        v.status.clear();
        panel.setView(v);
        QVERIFY(!labelWith(panel, QStringLiteral("Node 2 lost")));
    }

    void revealsOnlyWhenRevealed()
    {
        LessonPanel panel;
        LessonStepView v = ringStep();
        panel.setView(v);
        // Revealed, and agreeing: formula, measured value and the word.
        QVERIFY(shows(panel, QStringLiteral("formula 2(N-1)/N x S = 689 KiB")));
        QVERIFY(shows(panel, QStringLiteral("measured 689 KiB")));
        QLabel *agrees = labelWith(panel, QStringLiteral("measured 689 KiB"));
        QVERIFY(agrees->text().contains(QStringLiteral("agrees")));
        // Not revealed: its label and field, none of its numbers.
        QVERIFY(shows(panel, QStringLiteral("Speed-up over one node")));
        QVERIFY(panel.predictionField(1) && panel.predictionField(1)->isVisibleTo(&panel));
        QVERIFY(!shows(panel, QStringLiteral("1.85x")));
        QVERIFY(!shows(panel, QStringLiteral("2.40x")));

        v.reveals[1].revealed = true;
        panel.setView(v);
        QLabel *differs = labelWith(panel, QStringLiteral("measured 1.85x"));
        QVERIFY(differs);
        QVERIFY(differs->text().contains(QStringLiteral("differs")));
        QVERIFY(!differs->text().contains(QStringLiteral("agrees")));
        QVERIFY(differs->palette().color(QPalette::WindowText) !=
                agrees->palette().color(QPalette::WindowText));
        QVERIFY(shows(panel, QStringLiteral("N / (1 + comm/compute) = 2.40x")));

        // Revealed before the run measured it.
        v.reveals[1].measured.clear();
        panel.setView(v);
        QVERIFY(!shows(panel, QStringLiteral("1.85x")));
        QVERIFY(shows(panel, QStringLiteral("measured: not yet")));
    }

    void predictionsKeptForTheSameStep()
    {
        Window w;
        LessonStepView v = ringStep();
        v.reveals[0].revealed = false;
        w.panel->setView(v);
        QVERIFY(w.show());
        QLineEdit *field = w.panel->predictionField(0);
        QVERIFY(field);
        QSignalSpy changed(w.panel, &LessonPanel::predictionChanged);
        field->setFocus();
        QTest::keyClicks(field, QStringLiteral("700 KiB"));
        QCOMPARE(w.panel->prediction(0), QStringLiteral("700 KiB"));
        QCOMPARE(w.panel->prediction(1), QString());
        QCOMPARE(w.panel->prediction(7), QString());
        QCOMPARE(changed.size(), 7);
        QCOMPARE(changed.last().at(0).toInt(), 0);
        QCOMPARE(changed.last().at(1).toString(), QStringLiteral("700 KiB"));
        field->setCursorPosition(3);

        // Status updates and the reveal itself: same field, text, focus, caret.
        v.status = QStringLiteral("Paused at all-reduce params.fc1");
        w.panel->setView(v);
        v.reveals[0].revealed = true;
        v.busy = false;
        v.canNext = true;
        w.panel->setView(v);
        QCOMPARE(w.panel->predictionField(0), field);
        QCOMPARE(w.panel->prediction(0), QStringLiteral("700 KiB"));
        QCOMPARE(QApplication::focusWidget(), field);
        QCOMPARE(field->cursorPosition(), 3);
        QVERIFY(shows(*w.panel, QStringLiteral("measured 689 KiB")));

        // The next step starts empty.
        v.index = 3;
        v.reveals = {v.reveals[0]};
        v.reveals[0].revealed = false;
        w.panel->setView(v);
        QVERIFY(w.panel->predictionField(0));
        QCOMPARE(w.panel->prediction(0), QString());
        QVERIFY(!w.panel->predictionField(1));
        QCOMPARE(changed.size(), 7);
        // Back to step 3: a step of its own again, empty too.
        v.index = 2;
        w.panel->setView(v);
        QCOMPARE(w.panel->prediction(0), QString());
    }

    void buttons()
    {
        LessonPanel panel;
        LessonStepView v = ringStep();
        v.busy = false;
        v.canNext = true;
        panel.setView(v);
        QSignalSpy next(&panel, &LessonPanel::nextRequested);
        QSignalSpy back(&panel, &LessonPanel::backRequested);
        QSignalSpy close(&panel, &LessonPanel::closeRequested);
        QCOMPARE(panel.nextButton()->text(), QStringLiteral("Reveal"));
        QVERIFY(panel.nextButton()->isEnabled());
        QTest::mouseClick(panel.nextButton(), Qt::LeftButton);
        QTest::mouseClick(panel.backButton(), Qt::LeftButton);
        QTest::mouseClick(panel.closeButton(), Qt::LeftButton);
        QCOMPARE(next.size(), 1);
        QCOMPARE(back.size(), 1);
        QCOMPARE(close.size(), 1);

        v.canNext = false;
        v.canBack = false;
        panel.setView(v);
        QVERIFY(!panel.nextButton()->isEnabled());
        QVERIFY(!panel.backButton()->isEnabled());
        QTest::mouseClick(panel.nextButton(), Qt::LeftButton);
        QTest::mouseClick(panel.backButton(), Qt::LeftButton);
        QCOMPARE(next.size(), 1);
        QCOMPARE(back.size(), 1);

        // Busy: Next waits and says why.
        v.canNext = true;
        v.busy = true;
        panel.setView(v);
        QVERIFY(!panel.nextButton()->isEnabled());
        QCOMPARE(panel.nextButton()->text(), QStringLiteral("Running..."));
        v.busy = false;
        v.nextLabel = QStringLiteral("Finish");
        panel.setView(v);
        QVERIFY(panel.nextButton()->isEnabled());
        QCOMPARE(panel.nextButton()->text(), QStringLiteral("Finish"));
    }

    void presenterKeys()
    {
        Window w;
        LessonStepView v = ringStep();
        v.busy = false;
        v.canNext = true;
        w.panel->setView(v);
        QVERIFY(w.show());
        QSignalSpy next(w.panel, &LessonPanel::nextRequested);
        QSignalSpy back(w.panel, &LessonPanel::backRequested);
        QSignalSpy blank(w.panel, &LessonPanel::blankRequested);

        // Focus on the window itself, then on a button of the panel.
        clearFocus();
        QTest::keyClick(&w.window, Qt::Key_PageDown);
        QCOMPARE(next.size(), 1);
        QTest::keyClick(&w.window, Qt::Key_Right);
        QCOMPARE(next.size(), 2);
        QTest::keyClick(&w.window, Qt::Key_PageUp);
        QCOMPARE(back.size(), 1);
        QTest::keyClick(&w.window, Qt::Key_Left);
        QCOMPARE(back.size(), 2);
        QTest::keyClick(&w.window, Qt::Key_B);
        QCOMPARE(blank.size(), 1);
        w.panel->backButton()->setFocus();
        QCOMPARE(QApplication::focusWidget(), w.panel->backButton());
        press(&w.window, Qt::Key_Right);
        press(&w.window, Qt::Key_Left);
        QCOMPARE(next.size(), 3);
        QCOMPARE(back.size(), 3);

        // Next not allowed: the key does nothing either.
        v.canNext = false;
        w.panel->setView(v);
        press(&w.window, Qt::Key_PageDown);
        QCOMPARE(next.size(), 3);
        v.canNext = true;
        w.panel->setView(v);

        // A Right typed into a prediction field moves its caret.
        QLineEdit *field = w.panel->predictionField(1);
        field->setFocus();
        QCOMPARE(QApplication::focusWidget(), field);
        QTest::keyClicks(field, QStringLiteral("2b"));
        QCOMPARE(blank.size(), 1); // "b" went into the field
        QTest::keyClick(field, Qt::Key_Home);
        QTest::keyClick(field, Qt::Key_Right);
        QCOMPARE(field->cursorPosition(), 1);
        QTest::keyClick(field, Qt::Key_Left);
        QCOMPARE(field->cursorPosition(), 0);
        QCOMPARE(next.size(), 3);
        QCOMPARE(back.size(), 3);
        QCOMPARE(w.panel->prediction(1), QStringLiteral("2b"));
        // ...but Page Down still moves the lesson on.
        QTest::keyClick(field, Qt::Key_PageDown);
        QCOMPARE(next.size(), 4);
        // The window's other field keeps its keys too.
        w.other->setFocus();
        QTest::keyClicks(w.other, QStringLiteral("b"));
        QCOMPARE(w.other->text(), QStringLiteral("b"));
        QCOMPARE(blank.size(), 1);

        // Return: to the next reveal's field, from the last one Next.
        QLineEdit *first = w.panel->predictionField(0);
        first->setFocus();
        QTest::keyClick(first, Qt::Key_Return);
        QCOMPARE(QApplication::focusWidget(), field);
        QCOMPARE(next.size(), 4);
        QTest::keyClick(field, Qt::Key_Return);
        QCOMPARE(next.size(), 5);

        // A hidden panel's keys are off.
        w.panel->hide();
        clearFocus();
        press(&w.window, Qt::Key_PageDown);
        press(&w.window, Qt::Key_B);
        QCOMPARE(next.size(), 5);
        QCOMPARE(blank.size(), 1);
        w.panel->show();
        press(&w.window, Qt::Key_PageDown);
        QCOMPARE(next.size(), 6);
    }

    void narrowProjectorPanel_data()
    {
        QTest::addColumn<QSize>("size");
        QTest::addColumn<bool>("projector");
        QTest::newRow("projector 300x500") << QSize(300, 500) << true;
        QTest::newRow("projector 320x600") << QSize(320, 600) << true;
        QTest::newRow("projector 420x768") << QSize(420, 768) << true;
        QTest::newRow("normal 300x500") << QSize(300, 500) << false;
    }

    void narrowProjectorPanel()
    {
        QFETCH(QSize, size);
        QFETCH(bool, projector);
        LessonPanel panel;
        panel.setProjectorMode(projector);
        LessonStepView v = ringStep();
        v.text += QStringLiteral(" ") + v.text; // long: the middle part must scroll
        v.reveals[1].revealed = true;
        v.reveals[1].label = QStringLiteral("seconds_per_training_step_on_the_slowest_node"); // one word
        v.status = QStringLiteral("Could not read /home/teacher/lessons/ring_allreduce_bandwidth.lesson");
        v.failed = true;
        panel.setView(v);
        panel.resize(size);
        panel.show();
        QVERIFY(QTest::qWaitForWindowExposed(&panel));
        QCOMPARE(panel.size(), size); // the layout asked for no more
        QVERIFY(panel.minimumSizeHint().width() <= 300);
        QVERIFY(panel.minimumSizeHint().height() <= 500);

        if (projector) {
            QVERIFY(labelWith(panel, v.title)->font().pointSizeF() >= 20);
            QVERIFY(labelWith(panel, QStringLiteral("In a ring"))->font().pointSizeF() >= 16);
            QVERIFY(labelWith(panel, QStringLiteral("measured 689"))->font().pointSizeF() >= 16);
        }

        QScrollArea *scroll = panel.scrollArea();
        QVERIFY(!scroll->horizontalScrollBar()->isVisible());
        QVERIFY(scroll->verticalScrollBar()->isVisible() || size.height() > 700);
        QVERIFY(scroll->widget()->width() <= scroll->viewport()->width());
        const auto labels = panel.findChildren<QLabel *>();
        int checked = 0;
        for (const QLabel *l : labels) {
            if (!l->isVisibleTo(&panel))
                continue;
            const QRect r(l->mapTo(&panel, QPoint(0, 0)), l->size());
            QVERIFY2(r.left() >= 0 && r.right() < panel.width(), qPrintable(l->text()));
            // Tall enough for its wrapped text: nothing cut off at the bottom.
            QVERIFY2(l->height() >= l->heightForWidth(l->width()), qPrintable(l->text()));
            // ...and wrapped, not run past the right edge: a line holds at
            // most the label's width of text.
            const QFontMetrics fm(l->font());
            const int longestLine = [&] {
                int w = 0;
                for (const QString &line : l->text().split(QLatin1Char('\n')))
                    w += fm.horizontalAdvance(line) / l->width() + 1;
                return w;
            }();
            QVERIFY2(l->height() >= longestLine * fm.height() - 1, qPrintable(l->text()));
            ++checked;
        }
        QVERIFY(checked >= 8);

        for (const QPushButton *b : {panel.backButton(), panel.nextButton(), panel.closeButton()}) {
            QVERIFY(b->isVisible());
            const QRect r(b->mapTo(&panel, QPoint(0, 0)), b->size());
            QVERIFY2(panel.rect().contains(r), qPrintable(b->text()));
            QVERIFY(b->height() >= (projector ? 36 : 28));
            QVERIFY(b->width() >= b->fontMetrics().horizontalAdvance(b->text()));
        }
        // The fields fit too.
        for (int i = 0; i < 2; ++i) {
            const QLineEdit *f = panel.predictionField(i);
            const QRect r(f->mapTo(&panel, QPoint(0, 0)), f->size());
            QVERIFY(r.left() >= 0 && r.right() < panel.width());
        }
    }

    // A number revealed below the fold scrolls into view.
    void scrollsToARevealedNumber()
    {
        LessonPanel panel;
        panel.setProjectorMode(true);
        LessonStepView v = ringStep();
        v.reveals[0].revealed = false;
        panel.setView(v);
        panel.resize(300, 520);
        panel.show();
        QVERIFY(QTest::qWaitForWindowExposed(&panel));
        QScrollBar *bar = panel.scrollArea()->verticalScrollBar();
        QCOMPARE(bar->value(), 0);
        QVERIFY(bar->maximum() > 0);

        v.reveals[1].revealed = true;
        panel.setView(v);
        QWidget *viewport = panel.scrollArea()->viewport();
        const auto inView = [&] {
            const QLabel *l = labelWith(panel, QStringLiteral("measured 1.85x"));
            if (!l)
                return false;
            const QRect r(l->mapTo(viewport, QPoint(0, 0)), l->size());
            return viewport->rect().contains(r);
        };
        QTRY_VERIFY(inView());
        QVERIFY(bar->value() > 0);
        // The step's heading stays in view above the scrolled text (issue 25).
        const QLabel *heading = labelWith(panel, v.title);
        QVERIFY(heading && heading->isVisible());
        QVERIFY2(!panel.scrollArea()->isAncestorOf(heading), "the heading scrolls with the text");
        QVERIFY(panel.rect().contains(QRect(heading->mapTo(&panel, QPoint(0, 0)), heading->size())));
        QVERIFY(heading->height() >= heading->heightForWidth(heading->width()));
        // A status update does not scroll again.
        bar->setValue(0);
        v.status = QStringLiteral("Done");
        panel.setView(v);
        QTest::qWait(20);
        QCOMPARE(bar->value(), 0);
        // A new step starts at the top.
        bar->setValue(bar->maximum());
        v.index = 3;
        panel.setView(v);
        QCOMPARE(bar->value(), 0);
    }

    void blankOverlay()
    {
        Window w;
        LessonStepView v = ringStep();
        v.canNext = true;
        v.busy = false;
        w.panel->setView(v);
        auto *overlay = new BlankOverlay(&w.window);
        connect(w.panel, &LessonPanel::blankRequested, overlay, &BlankOverlay::toggle);
        QVERIFY(w.show());
        QVERIFY(!overlay->isVisible());
        QSignalSpy dismissed(overlay, &BlankOverlay::dismissed);
        QSignalSpy next(w.panel, &LessonPanel::nextRequested);
        QLineEdit *field = w.panel->predictionField(0);
        field->setFocus();

        overlay->toggle();
        QVERIFY(overlay->isVisible());
        QCOMPARE(overlay->geometry(), w.window.rect());
        w.window.resize(520, 600);
        QTRY_COMPARE(overlay->geometry(), w.window.rect());
        // B: gone, focus back in the field, and the panel's B did not also fire.
        press(&w.window, Qt::Key_B);
        QVERIFY(!overlay->isVisible());
        QCOMPARE(dismissed.size(), 1);
        QCOMPARE(QApplication::focusWidget(), field);
        QCOMPARE(w.panel->prediction(0), QString());

        // The panel's B key blanks; Page Down only uncovers.
        clearFocus();
        press(&w.window, Qt::Key_B);
        QVERIFY(overlay->isVisible());
        press(&w.window, Qt::Key_PageDown);
        QVERIFY(!overlay->isVisible());
        QCOMPARE(dismissed.size(), 2);
        QCOMPARE(next.size(), 0);

        overlay->toggle();
        press(&w.window, Qt::Key_Escape);
        QVERIFY(!overlay->isVisible());
        overlay->toggle();
        QTest::mouseClick(overlay, Qt::LeftButton, {}, QPoint(50, 50));
        QVERIFY(!overlay->isVisible());
        QCOMPARE(dismissed.size(), 4);
        // Other keys while blank do nothing: neither uncover nor move on.
        overlay->toggle();
        press(&w.window, Qt::Key_Right);
        QVERIFY(overlay->isVisible());
        QCOMPARE(next.size(), 0);
        overlay->toggle();
        QVERIFY(!overlay->isVisible());
        QCOMPARE(dismissed.size(), 5);
    }

    void screenshots_data()
    {
        QTest::addColumn<QSize>("size");
        QTest::addColumn<bool>("projector");
        QTest::newRow("normal-360x700") << QSize(360, 700) << false;
        QTest::newRow("projector-360x700") << QSize(360, 700) << true;
        QTest::newRow("normal-300x520") << QSize(300, 520) << false;
        QTest::newRow("projector-300x520") << QSize(300, 520) << true;
    }

    // The panel paints something other than its background, in both modes.
    void screenshots()
    {
        QFETCH(QSize, size);
        QFETCH(bool, projector);
        LessonPanel panel;
        panel.setProjectorMode(projector);
        LessonStepView v = ringStep();
        v.text = QStringLiteral("Every node passes a chunk of its gradient to the next node around the ring. "
                                "After N-1 hops each chunk is summed; N-1 more share the sums. "
                                "So a node sends 2(N-1)/N of the model's size per step.\n"
                                "What does your class predict for 3 nodes?");
        v.reveals[1].revealed = false;
        panel.setView(v);
        panel.resize(size);
        panel.show();
        QVERIFY(QTest::qWaitForWindowExposed(&panel));
        const QImage image = panel.grab().toImage();
        QCOMPARE(image.size(), size * panel.devicePixelRatioF());
        int ink = 0;
        const QRgb background = image.pixel(2, 2);
        for (int y = 0; y < image.height(); y += 3)
            for (int x = 0; x < image.width(); x += 3)
                ink += image.pixel(x, y) != background;
        QVERIFY(ink > 500);
        if (qEnvironmentVariableIsSet("SMOL_SAVE_PNG"))
            QVERIFY(image.save(QStringLiteral("/tmp/lesson-panel-%1.png").arg(QTest::currentDataTag())));
    }
};

QTEST_MAIN(TestLessonPanel)
#include "tst_lesson_panel.moc"
