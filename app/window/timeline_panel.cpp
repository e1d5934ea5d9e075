#include "timeline_panel.h"

#include "app/feed/timeline_feed.h"
#include "engine/session/session_reader.h"
#include "number_field.h"
#include "widgets/tensor_inspector.h"
#include "widgets/timeline/timeline_view.h"

#include <QCoreApplication>
#include <QHBoxLayout>
#include <QLabel>
#include <QProgressDialog>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>

#include <memory>

namespace smol::app {

TimelinePanel::TimelinePanel(QWidget *parent)
    : QWidget(parent)
{
    m_view = new widgets::TimelineView(this);
    m_view->setLive(true);
    m_view->data().setCollectiveNames(collectiveNames());
    m_view->setToolTip(QString());
    m_view->setWhatsThis(tr(
        "Wheel: zoom at the pointer. Drag: pan. Shift+drag: zoom to the range. Click: details and tensors. "
        "Double click: zoom to it. Keys: + - zoom, Left Right pan, Home or 0 fit the whole run, End follow "
        "the newest steps, Z zoom to the selection. At a pause the view frames the held collective; "
        "resuming follows again."));
    m_jumpStep = numberField<QSpinBox>(this, 0, 100000000, 0, tr("step "));
    m_jumpStep->setToolTip(tr("Show this step on the timeline; in a replay, move the replay there (Ctrl+G)"));
    auto *jump = new QPushButton(tr("Go"), this);
    auto *fit = new QPushButton(tr("Fit"), this);
    fit->setToolTip(tr("Show the whole run (Home or 0; End follows again)"));
    auto *follow = new QPushButton(tr("Follow"), this);
    follow->setToolTip(tr("Keep the newest step and a half (or the replay position) in view, packets apart "
                          "(End; Home or 0: the whole run)"));
    auto *png = new QPushButton(tr("PNG..."), this);
    png->setToolTip(tr("Save the visible timeline as an image (Ctrl+Shift+P)"));
    m_details = new QLabel(this);
    m_details->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_details->setWordWrap(true);
    showHint();
    auto *row = new QHBoxLayout;
    for (QWidget *w : std::initializer_list<QWidget *>{m_jumpStep, jump, fit, follow, png})
        row->addWidget(w);
    row->addStretch(1);
    // In a replay, the selected item's moment can become the replay's.
    m_seekHere = new QPushButton(tr("Replay from here"), this);
    m_seekHere->setToolTip(tr("Move the replay to where the selected item starts"));
    m_seekHere->hide();
    auto *details = new QHBoxLayout;
    details->addWidget(m_details, 1);
    details->addWidget(m_seekHere);
    auto *layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 2, 4, 2);
    layout->addLayout(row);
    layout->addWidget(m_view, 1);
    layout->addLayout(details);

    connect(m_seekHere, &QPushButton::clicked, this, [this] {
        const widgets::TimelineHit hit = m_view->selected();
        if (hit.kind != widgets::TimelineHit::Kind::None)
            Q_EMIT seekRequested(hit.startNs - 1);
    });
    connect(jump, &QPushButton::clicked, this, [this] { Q_EMIT stepRequested(m_jumpStep->value()); });
    connect(m_jumpStep, &QSpinBox::editingFinished, this, [this] {
        if (m_jumpStep->hasFocus())
            Q_EMIT stepRequested(m_jumpStep->value());
    });
    connect(fit, &QPushButton::clicked, m_view, &widgets::TimelineView::fitAll);
    connect(follow, &QPushButton::clicked, this, [this] { m_view->setFollowing(true); });
    connect(png, &QPushButton::clicked, this, &TimelinePanel::pngRequested);
}

void TimelinePanel::showHint(bool gloo)
{
    // Wraps: never clipped on a projector.
    m_details->setText(
        gloo ? tr("Rows: compute, collectives (on Gloo: one span per collective with the bytes handed "
                  "to Gloo; its packets are not visible). Click one for its details.")
             : tr("Rows: compute, collectives, packets sent (arrows to the receiver; numbered blocks "
                  "hold what is too close to tell apart). Click one for its details."));
    if (m_aggregated)
        m_details->setText(tr("Over the %1 budget of this window's stream: per-link totals, not single "
                              "packets (the links show the bytes; the timeline misses packets). ")
                               .arg(m_budget) +
                           m_details->text());
}

void TimelinePanel::setAggregated(bool on, const QString &budget)
{
    if (on == m_aggregated && budget == m_budget)
        return;
    m_aggregated = on;
    m_budget = budget.isEmpty() ? tr("the stream's") : budget;
    showHint();
}

void TimelinePanel::showDetails(const QString &text, bool canSeek)
{
    m_details->setText(text);
    m_seekHere->setVisible(canSeek);
}

void TimelinePanel::hideSeek()
{
    m_seekHere->hide();
}

void TimelinePanel::focusStepField()
{
    m_jumpStep->setFocus();
    m_jumpStep->selectAll();
}

void TimelinePanel::showPause(const widgets::PauseView &pause, qint64 atNs)
{
    widgets::TimelineHold hold;
    hold.atNs = atNs;
    hold.reason = pause.reason;
    // Every node's input enters the same collective; after a step the
    // results are the one stepped, so the held one is named by the inputs.
    const QVector<widgets::PausedTensor> &tensors = pause.inputs.isEmpty() ? pause.results : pause.inputs;
    if (!tensors.isEmpty()) {
        // A group's pause: the group whose collective matched (the inspector's), not rank 0's.
        const widgets::PausedTensor &held = pause.heldGroup() ? *pause.heldGroup() : tensors.front();
        hold.collective = held.collective;
        hold.name = held.name;
        hold.step = held.step;
    }
    m_view->holdAt(hold);
}

void TimelinePanel::endPause()
{
    m_view->releaseHold();
}

void TimelinePanel::loadRecording(const engine::SessionReader &reader, qint64 beginNs)
{
    m_view->clear();
    m_view->setLive(false);
    std::unique_ptr<QProgressDialog> progress;
    loadTimeline(reader, m_view->data(), [&](std::uint64_t done, std::uint64_t total) {
        if (!progress && window()->isVisible()) { // called only after 64k frames: a file worth a progress bar
            progress = std::make_unique<QProgressDialog>(tr("Loading the timeline..."), QString(), 0, 1000,
                                                         window());
            progress->setWindowModality(Qt::WindowModal);
            progress->setMinimumDuration(300);
        }
        if (progress) {
            progress->setValue(total ? int(1000.0 * double(done) / double(total)) : 1000);
            QCoreApplication::processEvents(QEventLoop::ExcludeUserInputEvents);
        }
    });
    m_view->data().setOriginNs(beginNs + 1);
    m_view->dataChanged();
    m_view->fitAll();
    m_view->setFollowing(true);
}

} // namespace smol::app
