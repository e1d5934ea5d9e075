// The tensor inspector's model under QAbstractItemModelTester, its rows
// (inputs, then results) and figures, the edit buttons (only for inputs),
// and the CSV export of the selected tensor.
#include "widgets/tensor_inspector.h"

#include <QtTest>

#include <QAbstractItemModelTester>
#include <QPushButton>
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
    return t;
}

} // namespace

class TestTensorInspector : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void modelRows();
    void editsOnlyInputs();
    void exportsCsv();
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

QTEST_MAIN(TestTensorInspector)
#include "tst_tensor_inspector.moc"
