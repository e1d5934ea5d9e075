// Two recorded runs side by side in the window (File > Compare with...):
// the real smolctl records ddp and zero3 on 4 nodes with Adam (10 steps)
// and ddp on 2 nodes; the window opens the ddp run, compares it with the
// zero3 run and is checked as a user would see it: the compare table holds
// `smolctl compare`'s figures (zero3 holds a quarter of ddp's
// params+grads+optimizer at step end), the timeline holds both runs' lanes
// with B's steps starting where A's do, a move to step 5 puts both replays
// just before their step 5, the one scrubber moves B with A, the charts
// carry B's loss and the memory view B's nodes, and Ctrl+W closes B and
// then A. A 2-node B keeps A's nodes 2 and 3 as rows with "—" on B's side;
// a truncated file and a file that is no session are refused in one line.
#include "app/replay/compare_controller.h"
#include "app/window/mainwindow.h"
#include "app/replay/replay_controller.h"
#include "engine/session/session_reader.h"
#include "widgets/charts_panel.h"
#include "widgets/compare_table.h"
#include "widgets/memory_view.h"
#include "widgets/timeline/timeline_view.h"

#include <QtTest>

#include <QAbstractItemModelTester>
#include <QAction>
#include <QDockWidget>
#include <QLineSeries>
#include <QProcess>
#include <QSlider>
#include <QTemporaryDir>
#include <QToolBar>

using namespace smol;
using namespace smol::app;

class TestCompareWindow : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase();
    void comparesTwoRuns();
    void differentNodeCounts();
    void refusesBadFiles_data();
    void refusesBadFiles();

private:
    void record(const QString &file, const QStringList &extra);
    QString path(const QString &file) const { return m_dir.filePath(file); }
    static QAction *closeAction(MainWindow &window);
    static QString cell(const widgets::CompareTableModel &t, int row, int column)
    {
        return t.data(t.index(row, column)).toString();
    }
    QTemporaryDir m_dir;
};

void TestCompareWindow::record(const QString &file, const QStringList &extra)
{
    QProcess p;
    p.setProgram(QStringLiteral(SMOLCTL_PATH));
    p.setArguments(
        QStringList{"train", "--optimizer", "adam", "--steps", "10", "--seed", "3", "--record", path(file)} +
        extra);
    p.start();
    p.closeWriteChannel();
    QVERIFY2(p.waitForFinished(60000), qPrintable(p.errorString()));
    QVERIFY2(p.exitCode() == 0, p.readAllStandardError().constData());
}

QAction *TestCompareWindow::closeAction(MainWindow &window)
{
    for (QAction *a : window.findChildren<QAction *>())
        if (a->shortcut() == QKeySequence(QKeySequence::Close))
            return a;
    return nullptr;
}

void TestCompareWindow::initTestCase()
{
    QVERIFY(m_dir.isValid());
    record("ddp.smolrec", {"--strategy", "ddp", "--nodes", "4"});
    record("zero3.smolrec", {"--strategy", "zero3", "--nodes", "4"});
    record("ddp2.smolrec", {"--strategy", "ddp", "--nodes", "2"});
    QFile whole(path("zero3.smolrec"));
    QVERIFY(whole.open(QIODevice::ReadOnly));
    const QByteArray bytes = whole.readAll();
    QFile half(path("half.smolrec"));
    QVERIFY(half.open(QIODevice::WriteOnly));
    half.write(bytes.left(bytes.size() / 2));
    half.close();
    QFile notes(path("notes.txt"));
    QVERIFY(notes.open(QIODevice::WriteOnly));
    notes.write("not a session at all\n");
}

void TestCompareWindow::comparesTwoRuns()
{
    EngineController engine(0);
    MainWindow window(&engine);
    window.show();
    CompareController *compare = window.compare();
    QAbstractItemModelTester tester(compare->table(), QAbstractItemModelTester::FailureReportingMode::QtTest);
    QString error;
    // Without A there is nothing to compare with.
    QVERIFY(!compare->open(path("zero3.smolrec"), &error, /*quiet=*/true));
    QVERIFY(!error.isEmpty() && !error.contains('\n'));

    QVERIFY2(window.openSession(path("ddp.smolrec"), &error, true), qPrintable(error));
    QSignalSpy statesA(window.replay(), &ReplayController::stateChanged);
    QVERIFY2(compare->open(path("zero3.smolrec"), &error, true), qPrintable(error));
    QVERIFY(compare->isOpen());
    QVERIFY(compare->dock()->isVisible());

    // The summary: smolctl compare's rows.
    const widgets::CompareTableModel &t = *compare->table();
    const int strategy = t.find("strategy");
    QVERIFY(strategy >= 0);
    QCOMPARE(cell(t, strategy, widgets::CompareTableModel::A), QString("ddp"));
    QCOMPARE(cell(t, strategy, widgets::CompareTableModel::B), QString("zero3"));
    const int steps = t.find("steps", "run");
    QVERIFY(steps >= 0);
    QCOMPARE(cell(t, steps, widgets::CompareTableModel::A), QString("10"));
    QCOMPARE(cell(t, steps, widgets::CompareTableModel::Ratio), QString("1.000"));
    for (int rank = 0; rank < 4; ++rank) {
        const int held = t.find("params+grads+optimizer at step end", QString("node %1").arg(rank));
        QVERIFY2(held >= 0, qPrintable(QString("node %1").arg(rank)));
        const double ratio = cell(t, held, widgets::CompareTableModel::Ratio).toDouble();
        QVERIFY2(std::abs(ratio - 0.25) < 0.01, qPrintable(cell(t, held, widgets::CompareTableModel::Ratio)));
    }

    // The timeline: A's four lanes, then B's four, B's steps starting where A's do.
    const widgets::TimelineData &data = window.timeline()->data();
    QCOMPARE(data.laneCount(), 8);
    QCOMPARE(compare->firstLaneOfB(), 4);
    QVERIFY2(data.laneName(0).startsWith(QString::fromUtf8("A \u00b7 ")), qPrintable(data.laneName(0)));
    QVERIFY2(data.laneName(4).startsWith(QString::fromUtf8("B \u00b7 ")), qPrintable(data.laneName(4)));
    for (int lane = 4; lane < 8; ++lane) {
        QVERIFY(!data.spans(lane, widgets::TimelineData::Row::Collective).empty());
        QVERIFY(!data.packets(lane).empty());
        for (const widgets::StoredSpan &s : data.spans(lane, widgets::TimelineData::Row::Compute)) {
            const auto range = data.stepRange(s.step);
            QVERIFY(range);
            QVERIFY2(s.startNs >= range->first, qPrintable(QString("lane %1 step %2").arg(lane).arg(s.step)));
        }
    }
    // B's step 3 starts where A's does: its earliest compute span there.
    std::int64_t first3 = std::numeric_limits<std::int64_t>::max();
    for (int lane = 4; lane < 8; ++lane)
        for (const widgets::StoredSpan &s : data.spans(lane, widgets::TimelineData::Row::Compute))
            if (s.step == 3)
                first3 = std::min(first3, s.startNs);
    const std::int64_t a3 = *window.replay()->reader()->stepStart(3);
    // Within 20 ms of A's step 3: B's own gap between its step's start and
    // its first compute span (a few ms on a loaded 2-core machine), where B
    // unaligned would be a whole run of A (seconds) away.
    QVERIFY2(first3 >= a3 && first3 - a3 < 20'000'000, qPrintable(QString::number(first3 - a3)));

    // Step 5: both just before their step 5.
    ReplayController *a = window.replay();
    ReplayController *b = compare->replay();
    QVERIFY(a->seekToStep(5));
    QCOMPARE(a->positionNs(), *a->reader()->stepStart(5) - 1);
    QCOMPARE(b->positionNs(), *b->reader()->stepStart(5) - 1);
    QVERIFY(!statesA.isEmpty() && compare->stateOfB());
    const auto stateA = statesA.last().at(0).value<widgets::ClusterStatePtr>();
    QCOMPARE(compare->stateOfB()->step, stateA->step);
    QCOMPARE(compare->stateOfB()->strategy, QString("zero3"));
    // The memory view has B's nodes beside A's.
    auto *memory = window.findChild<widgets::MemoryView *>();
    QVERIFY(memory && memory->comparisonState());
    QCOMPARE(memory->comparisonState()->nodes.size(), 4);

    // The one scrubber: A moves, B follows to the same moment of the same step.
    auto *replayBar = window.findChild<QToolBar *>(QStringLiteral("replay"));
    QVERIFY(replayBar);
    auto *scrubber = replayBar->findChild<QSlider *>();
    QVERIFY(scrubber);
    const qint64 before = a->positionNs();
    scrubber->triggerAction(QAbstractSlider::SliderPageStepAdd);
    QTRY_VERIFY(a->positionNs() != before);
    QCOMPARE(b->positionNs(), compare->toB(a->positionNs()));
    // Playing: B advances with A.
    a->advance(3'000'000);
    QCOMPARE(b->positionNs(), compare->toB(a->positionNs()));

    // The charts: B's loss beside A's, every step at the end.
    a->seek(a->endNs());
    auto *charts = window.findChild<widgets::ChartsPanel *>();
    QVERIFY(charts && charts->comparisonLossSeries());
    QTRY_COMPARE(charts->comparisonLossSeries()->count(), 10);
    QTRY_COMPARE(charts->trainLossSeries()->count(), 10);
    QCOMPARE(charts->comparisonSamplesSeries()->count(), 10);
    QCOMPARE(charts->comparisonBytesSeries()->count(), 10); // B's bytes/s, the mean per node
    if (const QByteArray grab = qgetenv("SMOL_COMPARE_CHARTS_PNG"); !grab.isEmpty()) {
        window.showView(QStringLiteral("charts"));
        window.resize(1400, 900);
        QTest::qWait(200);
        charts->grab().save(QString::fromLocal8Bit(grab));
    }

    // Ctrl+W: B first, then A.
    QAction *close = closeAction(window);
    QVERIFY(close && close->isEnabled());
    close->trigger();
    QVERIFY(!compare->isOpen());
    QVERIFY(window.isReplaying());
    QCOMPARE(data.laneCount(), 4);
    QVERIFY(!compare->dock()->isVisible());
    QVERIFY(!charts->comparisonLossSeries());
    QVERIFY(!memory->comparisonState());
    close->trigger();
    QVERIFY(!window.isReplaying());
}

void TestCompareWindow::differentNodeCounts()
{
    EngineController engine(0);
    MainWindow window(&engine);
    QString error;
    QVERIFY2(window.openSession(path("ddp.smolrec"), &error, true), qPrintable(error));
    QVERIFY2(window.compare()->open(path("ddp2.smolrec"), &error, true), qPrintable(error));
    const widgets::CompareTableModel &t = *window.compare()->table();
    // Nodes 2 and 3 are A's only: their rows stay, "—" on B's side.
    const int held = t.find("bytes sent per step", "node 3");
    QVERIFY(held >= 0);
    QVERIFY(cell(t, held, widgets::CompareTableModel::A) != QString::fromUtf8("\u2014"));
    QCOMPARE(cell(t, held, widgets::CompareTableModel::B), QString::fromUtf8("\u2014"));
    QCOMPARE(cell(t, held, widgets::CompareTableModel::Ratio), QString::fromUtf8("\u2014"));
    QCOMPARE(window.timeline()->data().laneCount(), 6);
    QVERIFY(window.replay()->seekToStep(5));
    QCOMPARE(window.compare()->replay()->positionNs(),
             *window.compare()->replay()->reader()->stepStart(5) - 1);
    // Opening another session closes B with the old A.
    QVERIFY2(window.openSession(path("zero3.smolrec"), &error, true), qPrintable(error));
    QVERIFY(!window.compare()->isOpen());
    QCOMPARE(window.timeline()->data().laneCount(), 4);
}

void TestCompareWindow::refusesBadFiles_data()
{
    QTest::addColumn<QString>("file");
    QTest::addColumn<QString>("reason");
    QTest::newRow("truncated") << "half.smolrec"
                               << "damaged";
    QTest::newRow("not a session") << "notes.txt"
                                   << "not a session file";
}

void TestCompareWindow::refusesBadFiles()
{
    QFETCH(QString, file);
    QFETCH(QString, reason);
    EngineController engine(0);
    MainWindow window(&engine);
    QString error;
    QVERIFY2(window.openSession(path("ddp.smolrec"), &error, true), qPrintable(error));
    QVERIFY(!window.compare()->open(path(file), &error, /*quiet=*/true));
    QVERIFY2(error.contains(reason), qPrintable(error));
    QVERIFY2(!error.contains('\n'), qPrintable(error));
    QVERIFY(!window.compare()->isOpen());
    QVERIFY(window.isReplaying());
    QCOMPARE(window.timeline()->data().laneCount(), 4);
}

QTEST_MAIN(TestCompareWindow)
#include "tst_compare_window.moc"
