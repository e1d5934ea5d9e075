// The lesson panel: what a class sees of one lesson step, on a projector,
// beside the cluster. Top to bottom: "lesson · step 3 of 7" with a bar of the
// lesson's steps, the step's title (pinned: it never scrolls away), its text,
// one block per number the step reveals (its label, a "Your class predicts:"
// field and, once revealed, "formula ... = ..." and "measured ..." in large
// bold type, the measured value in the good or bad colour and marked "agrees"
// or "differs" in words), the status line, and a button row that never
// scrolls away: Back, Next (its label and whether it is enabled come from the
// lesson runner) and close. Everything wraps, anywhere if a word is longer
// than the panel is wide, so nothing is clipped or scrolls sideways at 300
// px; the middle part (text and reveals) scrolls vertically when the panel is
// short.
//
// The panel shows the LessonStepView it is given and nothing else: the
// lesson runner (the logic) decides the steps, labels and numbers, and
// hears back through the signals. The one state the panel keeps is what
// the class typed: a setView() for the same step (a status update, a
// reveal) leaves the fields, their focus and caret alone; a new step index
// starts with empty fields.
//
// BlankOverlay is the presenter's "B" key: a black cover over the window
// so the class looks at the teacher, gone on the next B, Escape, Page key
// or click.
#pragma once

#include <QPointer>
#include <QString>
#include <QVector>
#include "widgets/projector_widget.h"

#include <QWidget>

QT_BEGIN_NAMESPACE
class QLineEdit;
class QPushButton;
class QScrollArea;
class QShortcut;
class QVBoxLayout;
QT_END_NAMESPACE

namespace smol::widgets {

// One number a lesson step reveals: the class predicts it, then the measured
// value is shown beside what the formula gives. Strings come pre-formatted
// from the lesson runner ("689 KiB", "1.50x", "37.5 %").
struct LessonReveal {
    QString label;         // "Bytes each node sends per step"
    QString formula;       // the formula as text: "2(N-1)/N x S" ("" = none)
    QString formulaValue;  // what it gives for this run: "689 KiB" ("" = none)
    QString measured;      // the run's measured value ("" = not measured yet)
    bool revealed = false; // false: show the label and the prediction field only
    bool agrees = true;    // measured within the lesson's tolerance of formulaValue
    // The teacher's panel at the reveal, when students' windows answered
    // (issue 27): "Class: 12 answers, median 3.0 MiB, 9 within tolerance"
    // and a small histogram ("" = no viewers' answers to show).
    QString classAnswers;
    QString classHistogram;
};

struct LessonStepView {
    QString lesson;      // lesson title
    int index = 0;       // this step, 0-based
    int count = 0;       // steps in the lesson
    QString title;       // step title
    QString text;        // the step's short text (plain text, may contain \n)
    QString status;      // "Running: step 12 of 40", "Paused at all-reduce params.fc1", "Done", or an error
    bool busy = false;   // the step's run is going: Next waits for it (button shows e.g. "Running...")
    bool failed = false; // status is an error (draw it in the failure colour)
    QVector<LessonReveal> reveals;
    bool canBack = false;
    bool canNext = false;
    QString nextLabel; // "Reveal", "Next", "Run", "Finish" (the runner decides)
    // A student's window follows the teacher's lesson: no Back, Next or
    // close, and the field is this student's own prediction.
    bool follower = false;
};

class StepProgress;
class WrappingLabel;

class LessonPanel : public ProjectorWidget {
    Q_OBJECT
public:
    explicit LessonPanel(QWidget *parent = nullptr);
    ~LessonPanel() override;

    void setView(const LessonStepView &view);
    const LessonStepView &view() const;
    // What the class predicted for reveal i of the current step ("" = nothing typed).
    QString prediction(int reveal) const;
    // The panel's keys work wherever focus is in the window while it is shown:
    // Page Down / Right: next; Page Up / Left: back; B: blank. Call with the
    // window the shortcuts belong to (QShortcut with Qt::WindowShortcut context
    // parented to it). Keys typed into a prediction field stay in the field
    // (except Page Up/Down and Return, which goes to the next reveal/Next).
    void installPresenterKeys(QWidget *window);

    // For tests and screenshots.
    QPushButton *backButton() const { return m_back; }
    QPushButton *nextButton() const { return m_next; }
    QPushButton *closeButton() const { return m_close; }
    QLineEdit *predictionField(int reveal) const; // nullptr when out of range
    QScrollArea *scrollArea() const { return m_scroll; }

    QSize sizeHint() const override { return {380, 640}; }

Q_SIGNALS:
    void nextRequested();
    void backRequested();
    void blankRequested(); // B: the window toggles a blank screen
    void closeRequested(); // the panel's close button
    void predictionChanged(int reveal, const QString &text);

protected:
    void showEvent(QShowEvent *event) override;
    void hideEvent(QHideEvent *event) override;
    void projectorModeChanged() override;

private:
    // The widgets of one reveal block; rebuilt only for a new step.
    struct Block {
        QWidget *frame = nullptr;
        WrappingLabel *label = nullptr;
        WrappingLabel *caption = nullptr; // "Your class predicts:"
        QLineEdit *field = nullptr;
        WrappingLabel *formula = nullptr;  // "formula 2(N-1)/N x S = 689 KiB"
        WrappingLabel *measured = nullptr; // "measured 689 KiB ✓ agrees"
        WrappingLabel *classAnswers = nullptr; // the class's answers at the reveal
    };

    void rebuildBlocks();
    void updateBlock(const Block &block, const LessonReveal &reveal);
    void updateTexts();
    void applyStyle();
    void requestNext();
    void requestBack();
    void fieldReturnPressed(int reveal);
    void snapToTextLine();

    LessonStepView m_view;
    bool m_hasView = false; // setView() was called: the index means something

    WrappingLabel *m_header = nullptr;
    StepProgress *m_progress = nullptr;
    QScrollArea *m_scroll = nullptr;
    WrappingLabel *m_title = nullptr;
    WrappingLabel *m_text = nullptr;
    QVBoxLayout *m_blockLayout = nullptr;
    QVector<Block> m_blocks;
    WrappingLabel *m_status = nullptr;
    QPushButton *m_back = nullptr;
    QPushButton *m_next = nullptr;
    QPushButton *m_close = nullptr;
    QVector<QPointer<QShortcut>> m_keys;
};

// A black cover over a whole window (presenter "B" key): shows itself over
// `window`'s full rect, follows its resizes, and hides on B, Escape, a click or
// Page keys (emitting dismissed()). While it is up it takes the keyboard, so
// a Page key only uncovers the screen (it does not also move the lesson on);
// focus goes back where it was when it hides.
class BlankOverlay : public QWidget {
    Q_OBJECT
public:
    explicit BlankOverlay(QWidget *window);
    void toggle();

Q_SIGNALS:
    void dismissed(); // also when toggle() hides it

protected:
    bool eventFilter(QObject *watched, QEvent *event) override;
    bool event(QEvent *event) override;
    void paintEvent(QPaintEvent *event) override;
    void keyPressEvent(QKeyEvent *event) override;
    void mousePressEvent(QMouseEvent *event) override;

private:
    void dismiss();

    QWidget *m_window = nullptr;
    QPointer<QWidget> m_previousFocus;
};

} // namespace smol::widgets
