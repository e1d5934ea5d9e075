#include "widgets/lesson_panel.h"
#include "widgets/paint/palette.h"

#include <QApplication>
#include <QHBoxLayout>
#include <QKeyEvent>
#include <QLabel>
#include <QLineEdit>
#include <QPainter>
#include <QPushButton>
#include <QScrollArea>
#include <QScrollBar>
#include <QShortcut>
#include <QTextLayout>
#include <QTimer>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

namespace smol::widgets {

namespace {

// Point sizes and pixel heights per mode. Fixed sizes: the window may already
// have enlarged the inherited font (projector mode makes it 14 pt).
struct Sizes {
    double header, title, text, label, caption, field, value, status, button;
    int buttonHeight, fieldHeight, margin, spacing, progressHeight;
};

Sizes sizes(bool projector)
{
    if (projector)
        return {16,
                22,
                16,
                16,
                16,
                18,
                18,
                16,
                16,
                /*buttonHeight=*/44,
                /*fieldHeight=*/40,
                /*margin=*/10,
                /*spacing=*/10,
                /*progressHeight=*/10};
    return {11,
            17,
            13,
            13,
            12,
            13,
            15,
            12,
            12,
            /*buttonHeight=*/32,
            /*fieldHeight=*/30,
            /*margin=*/10,
            /*spacing=*/8,
            /*progressHeight=*/7};
}

QFont sized(const QFont &base, double points, bool bold = false)
{
    QFont f(base);
    f.setPointSizeF(points);
    f.setBold(bold);
    return f;
}

void setTextColour(QWidget *w, const QColor &colour)
{
    QPalette p = w->palette();
    p.setColor(QPalette::WindowText, colour);
    w->setPalette(p);
}

} // namespace

// A word-wrapped plain-text label that also breaks a word longer than its
// width (a file path in an error, a long formula) instead of growing past
// it: QLabel only breaks between words, so one long word would push the
// panel wider than the screen gives it. keepTogether() names parts of the
// text not to break at their spaces unless one of them is wider than the
// label ("689 KiB", "step 3 of 6"): a part wider than the label breaks
// as any text does. text() stays as set. Still a QLabel,
// for text() and findChildren<QLabel *>().
class WrappingLabel : public QLabel {
public:
    explicit WrappingLabel(QWidget *parent = nullptr)
        : QLabel(parent)
    {
        setTextFormat(Qt::PlainText);
        setWordWrap(true); // the height-for-width size policy
    }

    void keepTogether(const QStringList &parts)
    {
        if (parts == m_together)
            return;
        m_together = parts;
        updateGeometry();
        update();
    }

    bool hasHeightForWidth() const override { return true; }
    int heightForWidth(int width) const override
    {
        const QMargins m = contentsMargins();
        return layoutText(width - m.left() - m.right()) + m.top() + m.bottom();
    }
    // One line of a few characters: the layout gives the height for the
    // width (heightForWidth), a scroll area its share of that.
    QSize minimumSizeHint() const override
    {
        const QFontMetrics fm(font());
        const QMargins m = contentsMargins();
        return {4 * fm.averageCharWidth() + m.left() + m.right(), fm.height() + m.top() + m.bottom()};
    }
    QSize sizeHint() const override
    {
        const QFontMetrics fm(font());
        const QMargins m = contentsMargins();
        const int natural =
            fm.horizontalAdvance(QString(text()).replace(QLatin1Char('\n'), QLatin1Char(' ')));
        const int w =
            std::clamp(natural, 4 * fm.averageCharWidth(), 30 * fm.averageCharWidth()) + m.left() + m.right();
        return {w, heightForWidth(w)};
    }

    // Where each line starts, in the label's coordinates.
    QVector<int> lineTops() const
    {
        QVector<int> tops;
        const QRect r = contentsRect();
        layoutText(r.width(), nullptr, {}, &tops);
        for (int &t : tops)
            t += r.top();
        return tops;
    }

protected:
    void paintEvent(QPaintEvent *) override
    {
        QPainter p(this);
        p.setPen(palette().color(foregroundRole()));
        const QRect r = contentsRect();
        layoutText(r.width(), &p, r.topLeft());
    }

private:
    // Lays the text out at `width` px, draws it at `origin` when given a
    // painter, and returns its height (and each line's top into `tops`).
    int layoutText(int width, QPainter *p = nullptr, QPoint origin = {}, QVector<int> *tops = nullptr) const
    {
        QString s = text();
        const QFontMetricsF fm(font());
        for (const QString &part : m_together) {
            if (part.isEmpty() || !part.contains(QLatin1Char(' ')) || fm.horizontalAdvance(part) > width)
                continue;
            QString glued = part;
            glued.replace(QLatin1Char(' '), QChar::Nbsp);
            s.replace(part, glued);
        }
        s.replace(QLatin1Char('\n'), QChar::LineSeparator);
        QTextLayout layout(s, font());
        QTextOption option(alignment());
        option.setWrapMode(QTextOption::WrapAtWordBoundaryOrAnywhere);
        layout.setTextOption(option);
        const double leading = fm.leading();
        double y = 0;
        layout.beginLayout();
        for (QTextLine line = layout.createLine(); line.isValid(); line = layout.createLine()) {
            line.setLineWidth(std::max(1, width));
            line.setPosition({0, y});
            if (tops)
                tops->append(int(std::floor(y)));
            y += line.height() + std::max(0.0, leading);
        }
        layout.endLayout();
        if (p)
            layout.draw(p, origin);
        return int(std::ceil(y));
    }

    QStringList m_together;
};

namespace {

// The close button: square at the row's height, wider only if its text
// needs it (a push button's usual minimum width would squeeze Next).
class SquareButton : public QPushButton {
public:
    using QPushButton::QPushButton;
    QSize sizeHint() const override
    {
        const QSize natural = QPushButton::sizeHint();
        const int textWidth = fontMetrics().horizontalAdvance(text()) + 2 * fontMetrics().averageCharWidth();
        return {std::max(minimumHeight(), textWidth), natural.height()};
    }
    QSize minimumSizeHint() const override { return sizeHint(); }
};

// A reveal's box: a light fill with a border, drawn in the palette's colours.
class RevealFrame : public QWidget {
public:
    using QWidget::QWidget;
    QColor fill, border;
    qreal borderWidth = 1;

protected:
    void paintEvent(QPaintEvent *) override
    {
        QPainter p(this);
        p.setRenderHint(QPainter::Antialiasing);
        p.setPen(QPen(border, borderWidth));
        p.setBrush(fill);
        const qreal inset = borderWidth / 2;
        p.drawRoundedRect(QRectF(rect()).adjusted(inset, inset, -inset, -inset), 6, 6);
    }
};

} // namespace

// The lesson's steps as a row of segments, those done and the current one
// filled; a continuous bar when the segments would be too thin to tell apart.
class StepProgress : public QWidget {
public:
    explicit StepProgress(QWidget *parent)
        : QWidget(parent)
    {
        setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
    }
    void setSteps(int index, int count)
    {
        m_index = index;
        m_count = count;
        setAccessibleName(count > 0 ? LessonPanel::tr("step %1 of %2").arg(index + 1).arg(count) : QString());
        update();
    }
    void setStyle(const QColor &done, const QColor &todo, int height)
    {
        m_done = done;
        m_todo = todo;
        setFixedHeight(height);
        update();
    }
    QSize sizeHint() const override { return {100, height()}; }
    QSize minimumSizeHint() const override { return {10, height()}; }

protected:
    void paintEvent(QPaintEvent *) override
    {
        if (m_count <= 0)
            return;
        QPainter p(this);
        const int filled = std::clamp(m_index + 1, 0, m_count);
        const double gap = 3;
        const double segment = (width() - gap * (m_count - 1)) / m_count;
        if (segment < 6) {
            p.fillRect(rect(), m_todo);
            p.fillRect(QRectF(0, 0, width() * double(filled) / m_count, height()), m_done);
            return;
        }
        for (int i = 0; i < m_count; ++i)
            p.fillRect(QRectF(i * (segment + gap), 0, segment, height()), i < filled ? m_done : m_todo);
    }

private:
    int m_index = 0;
    int m_count = 0;
    QColor m_done, m_todo;
};

LessonPanel::LessonPanel(QWidget *parent)
    : ProjectorWidget(parent)
{
    auto *outer = new QVBoxLayout(this);
    m_header = new WrappingLabel(this);
    outer->addWidget(m_header);
    m_progress = new StepProgress(this);
    outer->addWidget(m_progress);
    // The step's title stays above the part that scrolls: a reveal that
    // scrolls the text up must not leave the class half a heading.
    m_title = new WrappingLabel(this);
    m_title->setObjectName(QStringLiteral("lessonStepTitle"));
    outer->addWidget(m_title);

    // The part that scrolls: the text and the reveals.
    m_scroll = new QScrollArea(this);
    m_scroll->setWidgetResizable(true);
    m_scroll->setFrameShape(QFrame::NoFrame);
    m_scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    m_scroll->setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Expanding);
    auto *content = new QWidget;
    auto *column = new QVBoxLayout(content);
    column->setContentsMargins(0, 0, 8, 0); // text clear of the scroll bar
    m_text = new WrappingLabel(content);
    m_text->setObjectName(QStringLiteral("lessonStepText"));
    column->addWidget(m_text);
    m_blockLayout = new QVBoxLayout;
    m_blockLayout->setContentsMargins(0, 0, 0, 0);
    column->addLayout(m_blockLayout);
    column->addStretch(1);
    m_scroll->setWidget(content);
    content->setAutoFillBackground(false);
    m_scroll->viewport()->setAutoFillBackground(false);
    outer->addWidget(m_scroll, 1);

    m_status = new WrappingLabel(this);
    m_status->setObjectName(QStringLiteral("lessonStatus"));
    outer->addWidget(m_status);

    // Tab focus only: a click must not take the caret out of a prediction
    // field, nor leave focus on a button that the next view disables.
    auto *buttons = new QHBoxLayout;
    m_back = new QPushButton(tr("\u25C0 Back"), this);
    m_next = new QPushButton(tr("Next"), this);
    m_close = new SquareButton(QStringLiteral("\u00D7"), this);
    m_close->setToolTip(tr("Close the lesson"));
    m_close->setAccessibleName(tr("Close the lesson"));
    for (QPushButton *b : {m_back, m_next, m_close})
        b->setFocusPolicy(Qt::TabFocus);
    m_next->setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
    buttons->addWidget(m_back);
    buttons->addWidget(m_next, 1);
    buttons->addWidget(m_close);
    outer->addLayout(buttons);

    connect(m_back, &QPushButton::clicked, this, &LessonPanel::requestBack);
    connect(m_next, &QPushButton::clicked, this, &LessonPanel::requestNext);
    connect(m_close, &QPushButton::clicked, this, &LessonPanel::closeRequested);

    setAutoFillBackground(true);
    applyStyle();
    updateTexts();
}

LessonPanel::~LessonPanel()
{
    // The shortcuts belong to the window, which may outlive the panel.
    for (const QPointer<QShortcut> &key : std::as_const(m_keys))
        delete key.data();
}

void LessonPanel::setView(const LessonStepView &view)
{
    const bool sameStep = m_hasView && view.index == m_view.index && view.lesson == m_view.lesson;
    const bool rebuild = !sameStep || view.reveals.size() != m_blocks.size();
    QStringList kept; // a step that gained or lost a reveal keeps what was typed
    if (sameStep && rebuild)
        for (int i = 0; i < m_blocks.size(); ++i)
            kept << prediction(i);
    // The first number revealed by this view, to scroll to (the class
    // should see it without anyone reaching for the mouse).
    int newlyRevealed = -1, lastRevealed = -1;
    for (int i = 0; sameStep && i < view.reveals.size(); ++i)
        if (view.reveals[i].revealed && (i >= m_view.reveals.size() || !m_view.reveals[i].revealed)) {
            if (newlyRevealed < 0)
                newlyRevealed = i;
            lastRevealed = i;
        }
    m_view = view;
    m_hasView = true;
    if (rebuild) {
        rebuildBlocks();
        for (int i = 0; i < std::min(kept.size(), m_blocks.size()); ++i)
            m_blocks[i].field->setText(kept[i]);
        if (!sameStep)
            m_scroll->verticalScrollBar()->setValue(0);
    }
    updateTexts();
    if (newlyRevealed >= 0) {
        // Once the block has its new height (layouts settle on the next pass).
        // The first block's top if it fits, the last one's measured line in
        // any case (several numbers revealed at once may not all fit).
        QPointer<QWidget> frame = m_blocks[newlyRevealed].frame;
        QPointer<QWidget> measured = m_blocks[lastRevealed].measured;
        QTimer::singleShot(0, this, [this, frame, measured] {
            if (frame && measured) {
                m_scroll->ensureWidgetVisible(frame, 0, 0);
                m_scroll->ensureWidgetVisible(measured, 0, 10);
                snapToTextLine();
            }
        });
    }
}

const LessonStepView &LessonPanel::view() const
{
    return m_view;
}

void LessonPanel::projectorModeChanged()
{
    applyStyle();
    updateTexts();
}

QString LessonPanel::prediction(int reveal) const
{
    const QLineEdit *field = predictionField(reveal);
    return field ? field->text() : QString();
}

QLineEdit *LessonPanel::predictionField(int reveal) const
{
    return reveal >= 0 && reveal < m_blocks.size() ? m_blocks[reveal].field : nullptr;
}

void LessonPanel::installPresenterKeys(QWidget *window)
{
    for (const QPointer<QShortcut> &key : std::as_const(m_keys))
        delete key.data();
    m_keys.clear();
    if (!window)
        return;
    // A QLineEdit claims (ShortcutOverride) the arrows and printable keys,
    // so Left, Right and B typed into a prediction field stay in it; Page
    // Up/Down it does not claim, so those work from the field too.
    const auto add = [&](Qt::Key key, void (LessonPanel::*slot)()) {
        auto *shortcut = new QShortcut(QKeySequence(key), window);
        shortcut->setContext(Qt::WindowShortcut);
        shortcut->setAutoRepeat(false); // a held clicker key must not skip steps
        shortcut->setEnabled(isVisible());
        connect(shortcut, &QShortcut::activated, this, slot);
        m_keys << shortcut;
    };
    add(Qt::Key_PageDown, &LessonPanel::requestNext);
    add(Qt::Key_Right, &LessonPanel::requestNext);
    add(Qt::Key_PageUp, &LessonPanel::requestBack);
    add(Qt::Key_Left, &LessonPanel::requestBack);
    add(Qt::Key_B, &LessonPanel::blankRequested);
}

void LessonPanel::showEvent(QShowEvent *event)
{
    QWidget::showEvent(event);
    for (const QPointer<QShortcut> &key : std::as_const(m_keys))
        if (key)
            key->setEnabled(true);
}

void LessonPanel::hideEvent(QHideEvent *event)
{
    QWidget::hideEvent(event);
    if (event->spontaneous()) // a minimised window: its shortcuts are off anyway
        return;
    for (const QPointer<QShortcut> &key : std::as_const(m_keys))
        if (key)
            key->setEnabled(false);
}

void LessonPanel::rebuildBlocks()
{
    const QWidget *focus = QApplication::focusWidget();
    bool focusInBlocks = false;
    for (const Block &b : std::as_const(m_blocks)) {
        focusInBlocks = focusInBlocks || (focus && b.frame->isAncestorOf(focus));
        // Out of the tree now, deleted later: this may run inside a signal
        // of the block's own field (Return on the last field -> Next).
        b.frame->hide();
        m_blockLayout->removeWidget(b.frame);
        b.frame->setParent(nullptr);
        b.frame->deleteLater();
    }
    m_blocks.clear();

    QWidget *content = m_scroll->widget();
    for (int i = 0; i < m_view.reveals.size(); ++i) {
        Block b;
        auto *frame = new RevealFrame(content);
        b.frame = frame;
        auto *column = new QVBoxLayout(frame);
        b.label = new WrappingLabel(frame);
        column->addWidget(b.label);
        b.caption = new WrappingLabel(frame);
        b.caption->setText(tr("Your class predicts:"));
        column->addWidget(b.caption);
        b.field = new QLineEdit(frame);
        b.field->setPlaceholderText(tr("your guess"));
        b.field->setAccessibleName(tr("Prediction: %1").arg(m_view.reveals[i].label));
        b.caption->setBuddy(b.field);
        column->addWidget(b.field);
        b.formula = new WrappingLabel(frame);
        column->addWidget(b.formula);
        b.measured = new WrappingLabel(frame);
        column->addWidget(b.measured);
        b.classAnswers = new WrappingLabel(frame);
        b.classAnswers->hide();
        column->addWidget(b.classAnswers);
        connect(b.field, &QLineEdit::textEdited, this,
                [this, i](const QString &text) { Q_EMIT predictionChanged(i, text); });
        connect(b.field, &QLineEdit::returnPressed, this, [this, i] { fieldReturnPressed(i); });
        if (i > 0)
            setTabOrder(m_blocks.back().field, b.field);
        m_blockLayout->addWidget(frame);
        m_blocks << b;
    }
    applyStyle();
    // Typing went on in the old step's fields: carry on in the new one's.
    if (focusInBlocks && !m_blocks.isEmpty())
        m_blocks.front().field->setFocus(Qt::OtherFocusReason);
}

void LessonPanel::updateBlock(const Block &block, const LessonReveal &reveal)
{
    const Palette &pal = Palette::forMode(m_projector);
    block.label->setText(reveal.label);
    block.label->setVisible(!reveal.label.isEmpty());

    // Kept whole on a line where they fit: the formula, "= 689 KiB", the
    // measured value with its verdict.
    QString formula;
    const QString equals = QStringLiteral("= ") + reveal.formulaValue;
    if (!reveal.formula.isEmpty() && !reveal.formulaValue.isEmpty())
        formula = tr("formula %1 %2").arg(reveal.formula, equals);
    else if (!reveal.formula.isEmpty())
        formula = tr("formula %1").arg(reveal.formula);
    else if (!reveal.formulaValue.isEmpty())
        formula = tr("formula gives %1").arg(reveal.formulaValue);
    block.formula->setText(formula);
    block.formula->keepTogether({reveal.formula, equals});
    block.formula->setVisible(reveal.revealed && !formula.isEmpty());

    // The verdict in words as well as colour, and only where there is a
    // formula value to agree with.
    QString measured, verdict;
    QColor colour = pal.text;
    if (reveal.measured.isEmpty()) {
        measured = tr("measured: not yet");
        colour = pal.mutedText;
    } else if (reveal.formulaValue.isEmpty()) {
        measured = tr("measured %1").arg(reveal.measured);
    } else {
        verdict = reveal.agrees ? tr("\u2713 agrees") : tr("\u2717 differs");
        measured = tr("measured %1 %2").arg(reveal.measured, verdict);
        colour = pal.state(reveal.agrees ? NodeRunState::Running : NodeRunState::Lost);
    }
    block.measured->keepTogether({reveal.measured, verdict});
    block.measured->setText(measured);
    setTextColour(block.measured, colour);
    block.measured->setVisible(reveal.revealed);

    // The class's answers beside the measured value: the figures, then the
    // histogram from the least answer to the greatest.
    const QString answers = reveal.classHistogram.isEmpty()
                                ? reveal.classAnswers
                                : reveal.classAnswers + QLatin1Char('\n') + reveal.classHistogram;
    block.classAnswers->setText(answers);
    block.classAnswers->setVisible(reveal.revealed && !answers.isEmpty());
    block.caption->setText(m_view.follower ? tr("Your prediction (Return sends it):") : tr("Your class predicts:"));
}

void LessonPanel::updateTexts()
{
    const Palette &pal = Palette::forMode(m_projector);
    QString header = m_view.lesson;
    const QString step =
        m_view.count > 0 ? tr("step %1 of %2").arg(m_view.index + 1).arg(m_view.count) : QString();
    if (!step.isEmpty())
        header = header.isEmpty() ? step : header + QStringLiteral(" \u00B7 ") + step;
    m_header->setText(header);
    m_header->keepTogether({step});
    m_header->setVisible(!header.isEmpty());
    m_progress->setSteps(m_view.index, m_view.count);
    m_progress->setVisible(m_view.count > 0);

    m_title->setText(m_view.title);
    m_title->setVisible(!m_view.title.isEmpty());
    m_text->setText(m_view.text);
    m_text->setVisible(!m_view.text.isEmpty());
    for (int i = 0; i < m_blocks.size(); ++i)
        updateBlock(m_blocks[i], m_view.reveals[i]);

    m_status->setText(m_view.status);
    m_status->setVisible(!m_view.status.isEmpty());
    m_status->setFont(sized(font(), sizes(m_projector).status, /*bold=*/m_view.failed));
    setTextColour(m_status, m_view.failed ? pal.state(NodeRunState::Failed) : pal.text);

    for (QPushButton *b : {m_back, m_next, m_close})
        b->setVisible(!m_view.follower); // a student follows the teacher's steps
    m_back->setEnabled(m_view.canBack);
    m_next->setText(m_view.busy                  ? tr("Running...")
                    : m_view.nextLabel.isEmpty() ? tr("Next")
                                                 : m_view.nextLabel);
    m_next->setEnabled(m_view.canNext && !m_view.busy);
}

void LessonPanel::applyStyle()
{
    const Palette &pal = Palette::forMode(m_projector);
    const Sizes s = sizes(m_projector);

    QPalette qp = palette();
    qp.setColor(QPalette::Window, pal.background);
    qp.setColor(QPalette::WindowText, pal.text);
    qp.setColor(QPalette::Base, Qt::white);
    qp.setColor(QPalette::Text, pal.text);
    qp.setColor(QPalette::PlaceholderText, pal.mutedText);
    qp.setColor(QPalette::ButtonText, pal.text);
    qp.setColor(QPalette::Highlight, pal.selection);
    qp.setColor(QPalette::HighlightedText, Qt::white);
    setPalette(qp);

    layout()->setContentsMargins(s.margin, s.margin, s.margin, s.margin);
    layout()->setSpacing(s.spacing);
    m_scroll->widget()->layout()->setSpacing(s.spacing + 2);
    // A line of room below the last reveal, so that snapToTextLine() can
    // scroll a cut line of text out of the top.
    m_scroll->widget()->layout()->setContentsMargins(0, 0, 8, QFontMetrics(sized(font(), s.text)).lineSpacing());
    m_blockLayout->setSpacing(s.spacing + 2);

    m_header->setFont(sized(font(), s.header));
    setTextColour(m_header, pal.mutedText);
    m_progress->setStyle(pal.selection, pal.grid, s.progressHeight);
    m_title->setFont(sized(font(), s.title, /*bold=*/true));
    m_text->setFont(sized(font(), s.text));
    m_status->setFont(sized(font(), s.status, /*bold=*/m_view.failed));

    for (const Block &b : std::as_const(m_blocks)) {
        auto *frame = static_cast<RevealFrame *>(b.frame);
        frame->fill = pal.nodeFill;
        frame->border = m_projector ? pal.nodeBorder : pal.grid;
        frame->borderWidth = m_projector ? 2 : 1;
        frame->layout()->setContentsMargins(s.spacing, s.spacing, s.spacing, s.spacing);
        frame->layout()->setSpacing(s.spacing / 2);
        frame->update();
        b.label->setFont(sized(font(), s.label, /*bold=*/true));
        b.caption->setFont(sized(font(), s.caption));
        setTextColour(b.caption, pal.mutedText);
        b.field->setFont(sized(font(), s.field));
        b.field->setMinimumHeight(s.fieldHeight);
        b.formula->setFont(sized(font(), s.value, /*bold=*/true));
        b.measured->setFont(sized(font(), s.value, /*bold=*/true));
        b.classAnswers->setFont(sized(font(), s.label, /*bold=*/true));
    }

    for (QPushButton *b : {m_back, m_next, m_close}) {
        b->setFont(sized(font(), s.button, /*bold=*/b == m_next));
        b->setMinimumHeight(s.buttonHeight);
    }
    m_close->setFixedWidth(m_close->sizeHint().width());
}

// A text line cut in half at the top of the scrolled part reads as a stray
// fragment: scroll on to the start of the next line instead.
// (The content has a line's room below its end for this: see applyStyle.)
void LessonPanel::snapToTextLine()
{
    QScrollBar *bar = m_scroll->verticalScrollBar();
    const int offset = bar->value() - m_text->y();
    if (!m_text->isVisible() || offset <= 0 || offset >= m_text->height())
        return;
    for (int top : m_text->lineTops())
        if (top >= offset) {
            bar->setValue(std::min(bar->maximum(), m_text->y() + top));
            return;
        }
}

void LessonPanel::requestNext()
{
    if (m_view.canNext && !m_view.busy)
        Q_EMIT nextRequested();
}

void LessonPanel::requestBack()
{
    if (m_view.canBack)
        Q_EMIT backRequested();
}

void LessonPanel::fieldReturnPressed(int reveal)
{
    if (reveal + 1 < m_blocks.size()) {
        QLineEdit *next = m_blocks[reveal + 1].field;
        next->setFocus(Qt::TabFocusReason);
        m_scroll->ensureWidgetVisible(next);
        return;
    }
    requestNext();
}

BlankOverlay::BlankOverlay(QWidget *window)
    : QWidget(window)
    , m_window(window)
{
    setFocusPolicy(Qt::StrongFocus);
    setAttribute(Qt::WA_OpaquePaintEvent);
    hide();
    window->installEventFilter(this);
}

void BlankOverlay::toggle()
{
    if (!isHidden()) {
        dismiss();
        return;
    }
    QWidget *focus = QApplication::focusWidget();
    m_previousFocus = focus && m_window->isAncestorOf(focus) ? focus : nullptr;
    setGeometry(m_window->rect());
    show();
    raise();
    setFocus(Qt::OtherFocusReason);
}

void BlankOverlay::dismiss()
{
    if (isHidden())
        return;
    hide();
    if (m_previousFocus && m_previousFocus->isVisible())
        m_previousFocus->setFocus(Qt::OtherFocusReason);
    m_previousFocus = nullptr;
    Q_EMIT dismissed();
}

bool BlankOverlay::eventFilter(QObject *watched, QEvent *event)
{
    if (watched == m_window && event->type() == QEvent::Resize)
        setGeometry(m_window->rect());
    return QWidget::eventFilter(watched, event);
}

bool BlankOverlay::event(QEvent *event)
{
    // Claim the plain keys before the window's shortcuts see them: while
    // the screen is blank, Page Down uncovers it and does nothing else.
    if (event->type() == QEvent::ShortcutOverride) {
        auto *key = static_cast<QKeyEvent *>(event);
        if (!(key->modifiers() & (Qt::ControlModifier | Qt::AltModifier | Qt::MetaModifier))) {
            event->accept();
            return true;
        }
    }
    return QWidget::event(event);
}

void BlankOverlay::paintEvent(QPaintEvent *)
{
    QPainter(this).fillRect(rect(), Qt::black);
}

void BlankOverlay::keyPressEvent(QKeyEvent *event)
{
    switch (event->key()) {
    case Qt::Key_B:
    case Qt::Key_Escape:
    case Qt::Key_PageUp:
    case Qt::Key_PageDown:
        dismiss();
        break;
    default:
        break;
    }
    event->accept(); // nothing reaches the window behind the cover
}

void BlankOverlay::mousePressEvent(QMouseEvent *event)
{
    dismiss();
    event->accept();
}

} // namespace smol::widgets
