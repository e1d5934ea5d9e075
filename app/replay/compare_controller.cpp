// B's clock on A's: both runs' step starts (the earliest span or metric of
// each step, as SessionReader::stepStart) are read once when B opens. An
// event of B at t, in step k (the last B step to start by t; before the
// first, the first), moves by shift(k) = A.start(k) - B.start(k), so B's
// step k starts where A's does and keeps its own length. A step only B has
// takes the shift of the nearest step before it both have (else after;
// else the recordings' beginnings are aligned).
//
// B follows A by step (toB()): A's moment in its step k maps to the moment
// as far through B's step k, from B's start to just before B's step k+1,
// so a seek to A's step 5 puts B just before its step 5 too.
#include "compare_controller.h"

#include "replay_controller.h"
#include "app/feed/timeline_feed.h"

#include "engine/session/session_compare.h"
#include "engine/session/session_reader.h"
#include "widgets/charts_panel.h"
#include "widgets/compare_table.h"
#include "widgets/memory_view.h"
#include "widgets/timeline/timeline_view.h"

#include <QDockWidget>
#include <QFileDialog>
#include <QFileInfo>
#include <QHeaderView>
#include <QLabel>
#include <QMainWindow>
#include <QMessageBox>
#include <QStatusBar>
#include <QTableView>
#include <QTimer>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <optional>

namespace smol::app {

namespace {

using Steps = std::map<std::int64_t, std::pair<std::int64_t, std::int64_t>>;

// A step runs from its first event to its last: as SessionReader::stepStart
// (the earliest span or metric of that step), so a seekToStep lands just
// before the start here too.
Steps stepsOf(const engine::SessionReader &reader)
{
    Steps steps;
    auto extend = [&steps](std::int64_t step, std::int64_t t0, std::int64_t t1) {
        if (step < 0)
            return;
        auto [it, fresh] = steps.emplace(step, std::make_pair(t0, t1));
        if (!fresh) {
            it->second.first = std::min(it->second.first, t0);
            it->second.second = std::max(it->second.second, t1);
        }
    };
    reader.forEachSpanByStart([&](const engine::SpanEvent &s) { extend(s.step, s.startNs, s.endNs); });
    reader.forEachMetric([&](const engine::MetricSample &m) { extend(m.step, m.tNs, m.tNs); });
    return steps;
}

int laneCountOf(const engine::SessionHeader &h)
{
    int lanes = h.nodes;
    for (const engine::SessionNode &n : h.nodeList)
        lanes = std::max(lanes, n.rank + 1);
    return lanes;
}

// The first step of `steps` to start after `t` (steps start in step order).
Steps::const_iterator firstAfter(const Steps &steps, std::int64_t t)
{
    return std::partition_point(steps.begin(), steps.end(),
                                [t](const auto &s) { return s.second.first <= t; });
}

QVector<widgets::CompareTableRow> tableRows(const engine::SessionComparison &c)
{
    QVector<widgets::CompareTableRow> rows;
    auto section = [&rows](const QString &title) { rows.append({title, {}, {}, {}, true}); };
    auto figure = [&rows](const engine::ComparedRow &r) {
        rows.append({QString::fromLatin1(r.label), engine::formatValue(r.unit, r.value.a),
                     engine::formatValue(r.unit, r.value.b), engine::formatRatio(r.value.ratio())});
    };
    auto config = [](const QJsonValue &v) {
        if (v.isUndefined())
            return QStringLiteral("\u2014");
        if (v.isString())
            return v.toString();
        if (v.isBool())
            return v.toBool() ? QStringLiteral("true") : QStringLiteral("false");
        return v.isDouble() ? QString::number(v.toDouble(), 'g', 6) : QStringLiteral("[...]");
    };
    section(QObject::tr("config differences (A \u2192 B)"));
    if (c.configDifferences.empty())
        rows.append({QObject::tr("none"), {}, {}, {}});
    for (const auto &d : c.configDifferences)
        rows.append({QString::fromStdString(d.key), config(d.a), config(d.b), {}});
    section(QObject::tr("run"));
    for (const engine::ComparedRow &r : c.run)
        figure(r);
    if (c.lossDifference)
        rows.append({QObject::tr("largest loss difference (step %1)").arg(c.lossDifference->step),
                     {},
                     {},
                     QString::number(c.lossDifference->largest, 'g', 4)});
    for (const auto &n : c.nodes) {
        section(QObject::tr("node %1").arg(n.rank));
        for (const engine::ComparedRow &r : n.rows)
            figure(r);
    }
    return rows;
}

} // namespace

CompareController::CompareController(QMainWindow *window, ReplayController *a,
                                     widgets::TimelineView *timeline, widgets::ChartsPanel *charts,
                                     widgets::MemoryView *memory)
    : QObject(window)
    , m_window(window)
    , m_a(a)
    , m_b(new ReplayController(this))
    , m_timeline(timeline)
    , m_charts(charts)
    , m_memory(memory)
    , m_table(new widgets::CompareTableModel(this))
{
    m_dock = new QDockWidget(tr("Compare"), window);
    m_dock->setObjectName(QStringLiteral("compare"));
    auto *panel = new QWidget(m_dock);
    auto *layout = new QVBoxLayout(panel);
    layout->setContentsMargins(4, 4, 4, 4);
    m_runs = new QLabel(panel);
    m_runs->setWordWrap(true);
    m_runs->setTextInteractionFlags(Qt::TextSelectableByMouse);
    auto *view = m_view = new QTableView(panel);
    view->setObjectName(QStringLiteral("compareTable"));
    view->setModel(m_table);
    view->verticalHeader()->hide();
    // The figures whole, the labels elided (their tooltips are whole).
    view->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    view->horizontalHeader()->setSectionResizeMode(widgets::CompareTableModel::Figure, QHeaderView::Stretch);
    view->verticalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    view->setTextElideMode(Qt::ElideMiddle);
    view->setSelectionBehavior(QAbstractItemView::SelectRows);
    view->setWordWrap(false);
    view->setToolTip(tr("The figures `smolctl compare A B` prints, measured from both files"));
    layout->addWidget(m_runs);
    layout->addWidget(view, 1);
    m_dock->setWidget(panel);
    window->addDockWidget(Qt::RightDockWidgetArea, m_dock);
    m_dock->hide();

    // A moves, B follows; A going away takes B with it.
    connect(m_a, &ReplayController::cleared, this, [this] { m_resync = true; });
    connect(m_a, &ReplayController::positionChanged, this, &CompareController::follow);
    // (Their timeline is the window's to reload or clear.)
    auto dropB = [this] {
        m_laneOffset = -1;
        close();
    };
    connect(m_a, &ReplayController::opened, this, dropB);
    connect(m_a, &ReplayController::closed, this, dropB);
    connect(m_b, &ReplayController::errorOccurred, this,
            [this](const QString &reason) { m_window->statusBar()->showMessage(tr("B: %1").arg(reason), 8000); });
    connect(m_b, &ReplayController::cleared, this, [this] {
        m_pendingSteps.clear();
        m_charts->clearComparison();
    });
    connect(m_b, &ReplayController::stepAvailable, this, [this](const widgets::StepPoint &p) {
        if (m_pendingSteps.isEmpty())
            QTimer::singleShot(0, this, &CompareController::flushSteps);
        m_pendingSteps.append(p);
    });
    connect(m_b, &ReplayController::stateChanged, this, [this](const widgets::ClusterStatePtr &s) {
        m_bState = s;
        m_memory->setComparisonState(s);
    });
}

void CompareController::setProjectorMode(bool on)
{
    if (on == m_projector)
        return;
    m_projector = on;
    placeDock();
}

void CompareController::placeDock()
{
    // Beside the cluster; on a projector the table needs the window's width,
    // so it becomes a tab beside the timeline and the charts.
    auto *timeline = m_window->findChild<QDockWidget *>(QStringLiteral("timeline"));
    if (m_projector && timeline)
        m_window->tabifyDockWidget(timeline, m_dock);
    else
        m_window->addDockWidget(Qt::RightDockWidgetArea, m_dock);
    if (m_dock->isVisible())
        m_dock->raise();
}

bool CompareController::isOpen() const
{
    return m_b->isOpen();
}

bool CompareController::refuse(const QString &reason, QString *error, bool quiet)
{
    if (error)
        *error = reason;
    if (!quiet)
        QMessageBox::warning(m_window, tr("Compare with"), reason);
    m_window->statusBar()->showMessage(reason, 8000);
    return false;
}

void CompareController::choose()
{
    if (!m_a->isOpen()) {
        refuse(tr("Open a session first (File > Open session), then compare it with another."), nullptr,
               false);
        return;
    }
    const QString path =
        QFileDialog::getOpenFileName(m_window, tr("Compare with"), QFileInfo(m_a->path()).path(),
                                     tr("Sessions (*.smolrec);;All files (*)"));
    if (!path.isEmpty())
        open(path);
}

bool CompareController::open(const QString &path, QString *error, bool quiet)
{
    if (!m_a->isOpen())
        return refuse(tr("Open a session first (File > Open session), then compare it with another."), error,
                      quiet);
    close();
    QString why;
    if (!m_b->open(path, &why))
        return refuse(why, error, quiet);
    try {
        const engine::RunFigures a = engine::measureRun(*m_a->reader());
        const engine::RunFigures b = engine::measureRun(*m_b->reader());
        m_table->setRows(tableRows(engine::compareRuns(a, b)));
        m_stepsA = stepsOf(*m_a->reader());
        m_stepsB = stepsOf(*m_b->reader());
        fillTable(m_a->path(), path);
        addLanesOfB();
    } catch (const std::exception &e) {
        close();
        return refuse(QString::fromUtf8(e.what()), error, quiet);
    }
    m_view->clearSpans();
    for (int r = 0; r < m_table->rows().size(); ++r)
        if (m_table->rows()[r].section)
            m_view->setSpan(r, 0, 1, widgets::CompareTableModel::NUM_COLUMNS);
    placeDock();
    m_dock->show();
    m_dock->raise();
    // A third of the window or more: three figures, B/A and some of each label.
    m_window->resizeDocks({m_dock},
                          {std::max(m_window->width() * 7 / 20, m_view->horizontalHeader()->length() / 2)},
                          Qt::Horizontal);
    m_resync = true;
    follow(m_a->positionNs());
    m_window->statusBar()->showMessage(
        tr("Comparing with %1: one scrubber moves both; Ctrl+W closes B.").arg(m_b->describe()), 8000);
    return true;
}

bool CompareController::close()
{
    if (!m_b->isOpen())
        return false;
    m_b->close();
    m_dock->hide();
    m_table->setRows({});
    m_charts->removeComparison();
    m_memory->setComparisonState(nullptr);
    m_bState.reset();
    m_pendingSteps.clear();
    if (m_laneOffset >= 0)
        restoreTimeline();
    m_laneOffset = -1;
    m_window->statusBar()->showMessage(tr("Comparison closed: Ctrl+W again closes the replay."), 5000);
    return true;
}

void CompareController::fillTable(const QString &pathA, const QString &pathB)
{
    auto run = [](const QString &path, const engine::SessionReader &r) {
        const engine::SessionHeader &h = r.header();
        return tr("%1 \u00b7 %2, %3, %4 nodes")
            .arg(QFileInfo(path).fileName().toHtmlEscaped(), QString::fromStdString(h.strategy),
                 QString::fromStdString(h.model))
            .arg(h.nodes);
    };
    m_runs->setText(
        tr("<b>A</b> %1<br><b>B</b> %2").arg(run(pathA, *m_a->reader()), run(pathB, *m_b->reader())));
    m_runs->setToolTip(tr("A: %1\nB: %2").arg(m_a->describe(), m_b->describe()));
}

std::int64_t CompareController::toA(std::int64_t bNs) const
{
    if (m_stepsB.empty())
        return bNs - m_b->beginNs() + m_a->beginNs();
    auto k = firstAfter(m_stepsB, bNs); // B's step at bNs: the last to start by then (else the first)
    if (k != m_stepsB.begin())
        --k;
    const auto shift = m_shift.find(k->first);
    return bNs + (shift != m_shift.end() ? shift->second : m_a->beginNs() - m_b->beginNs());
}

std::int64_t CompareController::toB(std::int64_t aNs) const
{
    const std::int64_t bBegin = m_b->beginNs(), bEnd = m_b->endNs();
    auto clamp = [bBegin, bEnd](std::int64_t t) { return std::clamp<std::int64_t>(t, bBegin, bEnd); };
    // A's step at aNs: the last to start at or before it (steps overlap
    // across nodes, so only their starts decide).
    auto k = firstAfter(m_stepsA, aNs);
    if (k == m_stepsA.begin()) { // before A's first step: as far before B's
        if (k == m_stepsA.end() || !m_stepsB.count(k->first))
            return clamp(bBegin + (aNs - m_a->beginNs()));
        return clamp(m_stepsB.at(k->first).first - (k->second.first - aNs));
    }
    --k;
    const auto b = m_stepsB.find(k->first);
    if (b == m_stepsB.end()) // a step B did not record: before its first, or after its last
        return m_stepsB.empty() || k->first > m_stepsB.rbegin()->first ? bEnd : bBegin;
    const std::int64_t a0 = k->second.first, b0 = b->second.first, e = aNs - a0;
    const auto aNext = m_stepsA.find(k->first + 1), bNext = m_stepsB.find(k->first + 1);
    if (aNext == m_stepsA.end() || bNext == m_stepsB.end())
        return clamp(b0 + e); // the last step both have: as much time into it
    // From B's step start to just before its next as A goes from its start to just before its next.
    const double lenA = double(aNext->second.first - 1 - a0), lenB = double(bNext->second.first - 1 - b0);
    return clamp(b0 + (lenA > 0 ? std::int64_t(std::llround(double(e) * lenB / lenA)) : 0));
}

void CompareController::follow(qint64 aNs)
{
    if (!m_b->isOpen())
        return;
    const qint64 target = toB(aNs);
    const qint64 at = m_b->positionNs();
    if (m_resync || target < at) {
        m_b->seek(target);
    } else if (target > at) {
        const double speed = std::max(1e-3, m_b->speed());
        m_b->advance(qint64(std::ceil(double(target - at) / speed)));
    }
    m_resync = false;
}

void CompareController::flushSteps()
{
    if (m_pendingSteps.isEmpty() || !m_b->isOpen())
        return;
    m_charts->addComparisonSteps(m_pendingSteps);
    m_pendingSteps.clear();
}

void CompareController::addLanesOfB()
{
    const engine::SessionReader &a = *m_a->reader();
    const engine::SessionReader &b = *m_b->reader();
    // Each B step's shift: its common step's, else the nearest common one's.
    m_shift.clear();
    std::optional<std::int64_t> last;
    for (const auto &[step, range] : m_stepsB) {
        const auto inA = m_stepsA.find(step);
        if (inA != m_stepsA.end())
            last = inA->second.first - range.first;
        if (last)
            m_shift[step] = *last;
    }
    std::optional<std::int64_t> first;
    for (const auto &[step, range] : m_stepsB) {
        if (m_shift.count(step)) {
            first = m_shift[step];
            break;
        }
    }
    for (const auto &[step, range] : m_stepsB)
        if (!m_shift.count(step))
            m_shift[step] = first ? *first : m_a->beginNs() - m_b->beginNs();

    widgets::TimelineData &data = m_timeline->data();
    const int offset = std::max(laneCountOf(a.header()), data.laneCount());
    QStringList names;
    for (int lane = 0; lane < offset; ++lane)
        names.append(tr("A \u00b7 %1").arg(data.laneName(lane)));
    for (int r = 0; r < laneCountOf(b.header()); ++r)
        names.append(tr("B \u00b7 node %1").arg(r));
    for (const engine::SessionNode &n : b.header().nodeList)
        if (n.rank >= 0)
            names[offset + n.rank] = tr("B \u00b7 %1").arg(QString::fromStdString(n.name));
    data.setNodes(names);
    m_laneOffset = offset;

    const bool glooB = recordedOnGloo(b.header());
    b.forEachFrame([&](const net::FrameEvent &e) {
        if (glooB && !glooFrameIsPacket(e))
            return;
        widgets::TimelineFrameSide f = toTimeline(e);
        const std::int64_t s = toA(f.sendStartNs) - f.sendStartNs;
        f.src += offset;
        f.dst += offset;
        f.sendStartNs += s;
        if (f.sendCompleteNs)
            f.sendCompleteNs += s;
        if (f.recvCompleteNs)
            f.recvCompleteNs += s;
        data.addFrame(f);
    });
    b.forEachSpanByStart([&](const engine::SpanEvent &e) {
        widgets::TimelineSpan t = toTimeline(e);
        if (glooB)
            markGlooSpan(t);
        // Step boundaries stay A's, except where only B has the step.
        if (t.kind == widgets::TimelineSpanKind::Step && m_stepsA.count(t.step))
            return;
        const std::int64_t s = toA(t.startNs) - t.startNs;
        t.node += offset;
        t.startNs += s;
        t.endNs += s;
        data.addSpan(t);
    });
    b.forEachMemory([&](const engine::MemorySample &m) {
        widgets::TimelineMemorySample t = toTimeline(m);
        t.node += offset;
        t.tNs = toA(t.tNs);
        data.addMemory(t);
    });
    m_timeline->dataChanged();
    m_timeline->fitAll();
}

void CompareController::restoreTimeline()
{
    if (!m_a->isOpen())
        return;
    loadTimeline(*m_a->reader(), m_timeline->data());
    m_timeline->data().setOriginNs(m_a->beginNs() + 1);
    m_timeline->dataChanged();
    m_timeline->setPlayhead(m_a->positionNs());
}

} // namespace smol::app
