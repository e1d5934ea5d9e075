// The tensor inspector's model under QAbstractItemModelTester, its rows
// (inputs, then results) and figures, the edit buttons (only for inputs),
// and the CSV export of the selected tensor; at a group's pause, the held
// group's members only, with their coordinates and tensors, and the other
// nodes named apart; a world pause (or a recording without groups) as before.
#include "widgets/step_number.h"
#include "widgets/tensor_inspector.h"

#include <QtTest>

#include <QAbstractItemModelTester>
#include <QLabel>
#include <QPushButton>
#include <QStandardItemModel>
#include <QTableView>
#include <QTemporaryDir>

using namespace smol::widgets;

namespace {

PausedTensor tensor(int rank, bool before, double mean)
{
    PausedTensor t;
    t.rank = rank;
    t.name = QStringLiteral("grads.bucket0");
    t.collective = QStringLiteral("all-reduce");
    t.step = 3;
    t.count = 6;
    t.before = before;
    t.mean = mean;
    t.min = mean - 1;
    t.max = mean + 1;
    t.values = {mean - 1, mean, mean + 1, mean, mean, mean};
    t.downsampled = t.values;
    t.histogram = {1, 4, 1};
    t.histogramMin = t.min;
    t.histogramMax = t.max;
    t.shape = {2, 3};
    t.bytes = 24;
    return t;
}

// Rank `rank`'s input to the all-reduce of the tp group `members` (a mesh
// dp=2,tp=2,pp=2: tp groups {0, 1}, {2, 3}, ...).
PausedTensor tpInput(int rank, QVector<int> members, double mean)
{
    PausedTensor t = tensor(rank, true, mean);
    t.axis = QStringLiteral("tp");
    t.members = members;
    t.tensorName = QStringLiteral("g.attn.block0");
    t.name = QStringLiteral("tp (ranks %1, %2) · g.attn.block0").arg(members[0]).arg(members[1]);
    return t;
}

// A dp=2,tp=2,pp=2 pause on tp group {0, 1}'s all-reduce: ranks 2 and 3 held
// at their own group's all-reduce, rank 4 at a pp send (no group).
PauseView tpPause(int hitRank)
{
    PauseView p;
    p.id = 1;
    p.reason = QStringLiteral("allreduce@tp");
    p.complete = true;
    p.hitRank = hitRank;
    p.inputs = {tpInput(0, {0, 1}, 1), tpInput(1, {0, 1}, 2), tpInput(2, {2, 3}, 3), tpInput(3, {2, 3}, 4),
                tensor(4, true, 5)};
    p.inputs[4].collective = QStringLiteral("send");
    p.inputs[4].name = QStringLiteral("stage0.act");
    return p;
}

QStringList column(const InspectorModel &model, int column, int role = Qt::DisplayRole)
{
    QStringList out;
    for (int r = 0; r < model.rowCount(); ++r)
        out.append(model.data(model.index(r, column), role).toString());
    return out;
}

} // namespace

class TestTensorInspector : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void modelRows();
    void editsOnlyInputs();
    void exportsCsv();
    void heldGroupMembers_data();
    void heldGroupMembers();
    void worldPauseUnchanged();
    void relatedTensorsReadOnly();
};

void TestTensorInspector::modelRows()
{
    InspectorModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    PauseView p;
    p.inputs = {tensor(0, true, 1), tensor(1, true, 2)};
    model.setPause(p);
    QCOMPARE(model.rowCount(), 2);
    p.results = {tensor(0, false, 1.5), tensor(1, false, 1.5)};
    model.setPause(p);
    QCOMPARE(model.rowCount(), 4);
    QCOMPARE(model.data(model.index(1, InspectorModel::Mean), InspectorModel::SortRole).toDouble(), 2.0);
    QCOMPARE(model.data(model.index(2, InspectorModel::Side)).toString(), QStringLiteral("result"));
    QCOMPARE(model.data(model.index(3, InspectorModel::Rank)).toInt(), 1);
    model.setPause({});
    QCOMPARE(model.rowCount(), 0);
}

void TestTensorInspector::editsOnlyInputs()
{
    TensorInspector inspector;
    PauseView p;
    p.inputs = {tensor(0, true, 1), tensor(2, true, 2)};
    p.results = {tensor(0, false, 1.5)};
    inspector.setPause(p);
    QSignalSpy edits(&inspector, &TensorInspector::editRequested);
    QPushButton *zero = nullptr;
    for (QPushButton *b : inspector.findChildren<QPushButton *>())
        if (b->text() == QLatin1String("Zero"))
            zero = b;
    QVERIFY(zero);
    QVERIFY(zero->isEnabled()); // row 0: rank 0's input
    QTest::mouseClick(zero, Qt::LeftButton);
    QCOMPARE(edits.count(), 1);
    QCOMPARE(edits.first().at(0).toInt(), 0);
    QCOMPARE(edits.first().at(1).toString(), QStringLiteral("zero"));
    QImage image(800, 600, QImage::Format_ARGB32);
    image.fill(Qt::white);
    inspector.resize(800, 600);
    inspector.render(&image);
    QVERIFY(image.pixel(400, 450) != qRgb(255, 255, 255) || image.pixel(200, 450) != qRgb(255, 255, 255));
}

void TestTensorInspector::exportsCsv()
{
    TensorInspector inspector;
    PauseView p;
    p.inputs = {tensor(1, true, 5)};
    inspector.setPause(p);
    QTemporaryDir dir;
    const QString path = dir.filePath("t.csv");
    QVERIFY(inspector.exportCsv(path));
    QFile f(path);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QStringList lines = QString::fromUtf8(f.readAll()).split('\n', Qt::SkipEmptyParts);
    QCOMPARE(lines.size(), 7); // header + 6 values
    QVERIFY(lines[2].endsWith(QLatin1String(",1,5")));
    QVERIFY(inspector.exportPng(dir.filePath("t.png")));
}

void TestTensorInspector::heldGroupMembers_data()
{
    QTest::addColumn<int>("hitRank");
    QTest::addColumn<QVector<int>>("members");
    QTest::addColumn<QString>("elsewhere");
    QTest::newRow("hit on rank 0") << 0 << QVector<int>{0, 1}
                                   << QStringLiteral("ranks 2, 3 at tp all-reduce");
    QTest::newRow("hit on rank 3") << 3 << QVector<int>{2, 3}
                                   << QStringLiteral("ranks 0, 1 at tp all-reduce");
    // A recording does not know the hit node: the first group input's group.
    QTest::newRow("recorded") << -1 << QVector<int>{0, 1} << QStringLiteral("ranks 2, 3 at tp all-reduce");
}

void TestTensorInspector::heldGroupMembers()
{
    QFETCH(int, hitRank);
    QFETCH(QVector<int>, members);
    QFETCH(QString, elsewhere);
    TensorInspector inspector;
    QAbstractItemModelTester tester(inspector.model(),
                                    QAbstractItemModelTester::FailureReportingMode::QtTest);
    inspector.setMesh(QStringLiteral("dp=2,tp=2,pp=2"));
    inspector.setRankNames({"local-0", "local-1", "local-2", "local-3", "local-4"});
    inspector.resize(1200, 700);
    const PauseView pause = tpPause(hitRank);
    inspector.setPause(pause);
    const InspectorModel &model = *inspector.model();
    QVERIFY(model.groupPause());
    // One row per member, in group order; no other node among them.
    QCOMPARE(model.rowCount(), 2);
    QStringList ranks;
    for (int m : members)
        ranks.append(QString::number(m));
    QCOMPARE(column(model, InspectorModel::Rank, InspectorModel::SortRole), ranks);
    QCOMPARE(column(model, InspectorModel::Rank), (QStringList{"local-" + ranks[0], "local-" + ranks[1]}));
    // What each contributes: its tensor, shape, elements, bytes and figures.
    QCOMPARE(column(model, InspectorModel::Name), (QStringList{"g.attn.block0", "g.attn.block0"}));
    QCOMPARE(column(model, InspectorModel::Shape), (QStringList{"[2, 3]", "[2, 3]"}));
    QCOMPARE(column(model, InspectorModel::Count), (QStringList{"6", "6"}));
    QCOMPARE(model.data(model.index(1, InspectorModel::Bytes), InspectorModel::SortRole).toLongLong(), 24);
    QCOMPARE(model.data(model.index(1, InspectorModel::Mean), InspectorModel::SortRole).toDouble(),
             pause.inputs[members[1]].mean);
    // Coordinates from the mesh (tp fastest: rank 1 is dp0 · pp0 · tp1, rank 3 dp0 · pp1 · tp1).
    const QString second =
        members[1] == 1 ? QStringLiteral("dp0 · pp0 · tp1") : QStringLiteral("dp0 · pp1 · tp1");
    QCOMPARE(model.data(model.index(1, InspectorModel::Coords)).toString(), second);
    for (int c : {InspectorModel::Rank, InspectorModel::Coords, InspectorModel::L2})
        QVERIFY2(!inspector.findChild<QTableView *>()->isColumnHidden(c), qPrintable(QString::number(c)));
    QCOMPARE(model.headerData(InspectorModel::Name, Qt::Horizontal).toString(), QStringLiteral("tensor"));
    // The title names the held group; the others are apart, not as members.
    QVERIFY2(inspector.findChild<QLabel *>()->text().contains(
                 QStringLiteral("tp group (ranks %1, %2) held at all-reduce 'g.attn.block0'")
                     .arg(members[0])
                     .arg(members[1])),
             qPrintable(inspector.findChild<QLabel *>()->text()));
    QVERIFY(!inspector.elsewhere()->isHidden());
    const QString apart = inspector.elsewhere()->text();
    QVERIFY2(apart.contains(elsewhere) && apart.contains(QStringLiteral("rank 4 at send 'stage0.act'")),
             qPrintable(apart));
    QCOMPARE(model.elsewhere().size(), 3);
    QVERIFY(inspector.caption()->text().contains(QStringLiteral("g.attn.block0 [2, 3], 6 elements, 24 B")));
    // A member that has not reached the collective is named, not shown as contributing.
    const int gone = members[0] == hitRank ? members[1] : members[0];
    PauseView partial = pause;
    partial.inputs.removeAt(gone);
    inspector.setPause(partial);
    QCOMPARE(model.rowCount(), 1);
    QCOMPARE(model.absentMembers(), QVector<int>{gone});
    QVERIFY(inspector.elsewhere()->text().contains(QStringLiteral("Not at it yet: rank %1").arg(gone)));
}

void TestTensorInspector::worldPauseUnchanged()
{
    // A world collective, and a recording whose snapshots predate groups
    // (the label alone, no members): every node's row, today's title.
    for (bool labelled : {false, true}) {
        TensorInspector inspector;
        inspector.setMesh(labelled ? QStringLiteral("dp=2,tp=2,pp=2") : QString());
        inspector.resize(1200, 700);
        PauseView p;
        p.reason = QStringLiteral("allreduce");
        p.complete = true;
        p.hitRank = 0;
        for (int r = 0; r < 3; ++r) {
            p.inputs.append(tensor(r, true, r));
            if (labelled)
                p.inputs.back().name = QStringLiteral("tp (ranks 0, 1) · g.attn.block0");
        }
        inspector.setPause(p);
        const InspectorModel &model = *inspector.model();
        QVERIFY(!model.groupPause());
        QVERIFY(!p.heldGroup());
        QCOMPARE(model.rowCount(), 3);
        QCOMPARE(model.data(model.index(0, InspectorModel::Name)).toString(),
                 QStringLiteral("all-reduce '%1' step 3").arg(p.inputs[0].name));
        QCOMPARE(model.headerData(InspectorModel::Name, Qt::Horizontal).toString(),
                 QStringLiteral("collective"));
        QCOMPARE(inspector.findChild<QLabel *>()->text(),
                 QStringLiteral("Paused (allreduce) at all-reduce '%1', %2: 3 node(s)")
                     .arg(p.inputs[0].name, stepText(3)));
        const auto *table = inspector.findChild<QTableView *>();
        for (int c : {InspectorModel::Coords, InspectorModel::Shape, InspectorModel::Bytes})
            QVERIFY(table->isColumnHidden(c));
        QVERIFY(inspector.elsewhere()->isHidden());
        QCOMPARE(inspector.caption()->text(), TensorPlot::caption(p.inputs[0], QStringLiteral("rank 0")));
    }
}

// PowerSGD's P: the selected input's Q and error buffer in their own table,
// with their figures; choosing one plots it and leaves nothing to edit.
void TestTensorInspector::relatedTensorsReadOnly()
{
    TensorInspector inspector;
    inspector.resize(900, 900);
    inspector.show();
    PauseView p;
    p.inputs = {tensor(0, true, 1), tensor(1, true, 2)};
    for (PausedTensor &in : p.inputs) {
        in.name = QStringLiteral("grads.bucket0.P");
        PausedTensor q = tensor(in.rank, true, 0.5), e = tensor(in.rank, true, in.mean);
        q.name = QStringLiteral("Q fc3.weight");
        q.shape = {3, 2};
        q.l2 = 1.25;
        e.name = QStringLiteral("error fc3.weight");
        e.count = 1280;
        e.shape = {10, 128};
        in.related = {q, e};
    }
    inspector.setPause(p);
    QTableView *related = inspector.relatedTable();
    QVERIFY(!related->isHidden());
    QCOMPARE(inspector.relatedModel()->rowCount(), 2);
    const auto cell = [&](int row, int col) { return inspector.relatedModel()->index(row, col).data().toString(); };
    QCOMPARE(cell(0, 0), QStringLiteral("Q fc3.weight"));
    QCOMPARE(cell(0, 1), QStringLiteral("[3, 2]"));
    QCOMPARE(cell(0, 3), QStringLiteral("1.25"));
    QCOMPARE(cell(1, 0), QStringLiteral("error fc3.weight"));
    QCOMPARE(cell(1, 2), QStringLiteral("1280"));
    QCOMPARE(related->editTriggers(), QAbstractItemView::NoEditTriggers);
    related->setCurrentIndex(inspector.relatedModel()->index(1, 0));
    QVERIFY(inspector.caption()->text().contains(QLatin1String("error fc3.weight [10, 128] (read-only)")));
    QPushButton *zero = nullptr;
    for (QPushButton *b : inspector.findChildren<QPushButton *>())
        if (b->text() == QLatin1String("Zero"))
            zero = b;
    QVERIFY(zero && zero->isEnabled()); // an edit still acts on the input, P
    QSignalSpy edits(&inspector, &TensorInspector::editRequested);
    QTest::mouseClick(zero, Qt::LeftButton);
    QCOMPARE(edits.count(), 1);
    QCOMPARE(edits.first().at(0).toInt(), 0);
    // A pause without them: no table.
    p.inputs = {tensor(0, true, 1)};
    inspector.setPause(p);
    QVERIFY(related->isHidden());
}

QTEST_MAIN(TestTensorInspector)
#include "tst_tensor_inspector.moc"
