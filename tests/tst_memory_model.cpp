// MemoryModel: rows by node id, figures equal to the snapshot in both roles,
// and how setState() notifies views as clusters grow, shrink and change.
#include "widgets/memory_model.h"

#include <QAbstractItemModelTester>
#include <QLocale>
#include <QSignalSpy>
#include <QTest>

using smol::widgets::ClusterState;
using smol::widgets::ClusterStatePtr;
using smol::widgets::MemoryModel;
using smol::widgets::NodeState;

namespace {

constexpr std::int64_t kMiB = 1024 * 1024;

// A node whose figures differ per id and per `salt`, so stale values show.
NodeState node(int id, std::int64_t salt = 0, bool predicted = true)
{
    NodeState n;
    n.id = id;
    n.rank = id;
    n.name = QStringLiteral("node-%1").arg(id);
    n.host = QStringLiteral("127.0.0.1");
    n.memory.params = (id + 1) * kMiB + salt;
    n.memory.grads = (id + 1) * kMiB / 2 + salt;
    n.memory.optimizer = 2 * (id + 1) * kMiB + salt;
    n.memory.activations = 300000 + id + salt;
    n.memory.comm = 4096 * (id + 1);
    n.memory.live =
        n.memory.params + n.memory.grads + n.memory.optimizer + n.memory.activations + n.memory.comm;
    n.memory.peak = n.memory.live + 123456;
    if (predicted)
        n.predictedBytes = (id + 1) * kMiB * 7 / 2;
    if (id % 2 == 0) { // odd nodes have no step peaks (an older node): no cell
        n.stepPeak = n.memory;
        n.stepPeak.activations += 2 * kMiB + salt;
        n.stepPeak.peak = n.memory.peak + 2 * kMiB + salt;
    }
    return n;
}

ClusterStatePtr state(QVector<NodeState> nodes)
{
    auto s = std::make_shared<ClusterState>();
    s->strategy = QStringLiteral("zero1");
    s->nodes = std::move(nodes);
    return s;
}

QVariant expectedSortValue(const NodeState &n, int column)
{
    switch (column) {
    case MemoryModel::Node:
        return n.id;
    case MemoryModel::Params:
        return qlonglong(n.memory.params);
    case MemoryModel::Grads:
        return qlonglong(n.memory.grads);
    case MemoryModel::Optimizer:
        return qlonglong(n.memory.optimizer);
    case MemoryModel::Activations:
        return qlonglong(n.memory.activations);
    case MemoryModel::Comm:
        return qlonglong(n.memory.comm);
    case MemoryModel::Live:
        return qlonglong(n.memory.live);
    case MemoryModel::Peak:
        return qlonglong(n.memory.peak);
    case MemoryModel::Predicted:
        return n.predictedBytes ? QVariant(qlonglong(*n.predictedBytes)) : QVariant();
    case MemoryModel::StepPeak:
        return n.stepPeak.peak > 0 ? QVariant(qlonglong(n.stepPeak.peak)) : QVariant();
    }
    return {};
}

// Every cell of the model against the snapshot (rows in id order).
void verifyMatches(const MemoryModel &model, QVector<NodeState> nodes)
{
    std::sort(nodes.begin(), nodes.end(), [](const NodeState &a, const NodeState &b) { return a.id < b.id; });
    QCOMPARE(model.rowCount(), int(nodes.size()));
    for (int row = 0; row < nodes.size(); ++row) {
        const NodeState &n = nodes[row];
        QCOMPARE(model.nodeId(row), n.id);
        QCOMPARE(model.rowOfNode(n.id), row);
        QCOMPARE(model.data(model.index(row, MemoryModel::Node)).toString(), n.name);
        for (int column = 0; column < MemoryModel::NUM_COLUMNS; ++column) {
            const QVariant sort = model.data(model.index(row, column), MemoryModel::SortRole);
            const QVariant expected = expectedSortValue(n, column);
            QCOMPARE(sort.isValid(), expected.isValid());
            if (expected.isValid())
                QCOMPARE(sort.toLongLong(), expected.toLongLong());
            if (column != MemoryModel::Node) {
                const QString text = model.data(model.index(row, column)).toString();
                QCOMPARE(text,
                         expected.isValid() ? MemoryModel::bytesText(expected.toLongLong()) : QString());
            }
        }
    }
}

} // namespace

class TestMemoryModel : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() { QLocale::setDefault(QLocale(QLocale::English, QLocale::UnitedStates)); }

    void emptyModelHasColumnsButNoRows()
    {
        MemoryModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        QCOMPARE(model.rowCount(), 0);
        QCOMPARE(model.columnCount(), int(MemoryModel::NUM_COLUMNS));
        QCOMPARE(model.headerData(MemoryModel::Optimizer, Qt::Horizontal).toString(),
                 QStringLiteral("Optimizer"));
        QCOMPARE(model.headerData(MemoryModel::Predicted, Qt::Horizontal).toString(),
                 QStringLiteral("ZeRO formula"));
        QVERIFY(!model.headerData(0, Qt::Vertical).isValid());
        QCOMPARE(model.nodeId(0), -1);
        QCOMPARE(model.rowOfNode(0), -1);
    }

    void bytesText_data()
    {
        QTest::addColumn<qlonglong>("bytes");
        QTest::addColumn<QString>("expected");
        QTest::newRow("zero") << 0ll << QStringLiteral("0 B");
        QTest::newRow("small") << 1023ll << QStringLiteral("1,023 B");
        QTest::newRow("just under a MiB") << qlonglong(kMiB - 1) << QStringLiteral("1,048,575 B");
        QTest::newRow("one MiB") << qlonglong(kMiB) << QStringLiteral("1.00 MiB");
        QTest::newRow("rounds to two decimals")
            << qlonglong(3 * kMiB + kMiB / 3) << QStringLiteral("3.33 MiB");
        QTest::newRow("large") << qlonglong(2048 * kMiB) << QStringLiteral("2,048.00 MiB");
    }

    void bytesText()
    {
        QFETCH(qlonglong, bytes);
        QFETCH(QString, expected);
        QCOMPARE(MemoryModel::bytesText(bytes), expected);
    }

    void valuesAndSortRolesEqualTheSnapshot()
    {
        MemoryModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        const QVector<NodeState> nodes{node(0), node(1), node(2, 0, /*predicted=*/false)};
        model.setState(state(nodes));
        verifyMatches(model, nodes);
        QCOMPARE(model.data(model.index(0, MemoryModel::Params)).toString(), QStringLiteral("1.00 MiB"));
        QCOMPARE(model.data(model.index(1, MemoryModel::Activations)).toString(),
                 QStringLiteral("300,001 B"));
        QCOMPARE(model.data(model.index(2, MemoryModel::Predicted)).toString(), QString());
        QVERIFY(!model.data(model.index(2, MemoryModel::Predicted), MemoryModel::SortRole).isValid());
        QCOMPARE(model.data(model.index(0, MemoryModel::Live), Qt::ToolTipRole).toString(),
                 QStringLiteral("%1 bytes").arg(QLocale().toString(qlonglong(nodes[0].memory.live))));
    }

    void rowsAreInIdOrder()
    {
        MemoryModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        const QVector<NodeState> nodes{node(5), node(1), node(3)};
        model.setState(state(nodes));
        QCOMPARE(model.nodeId(0), 1);
        QCOMPARE(model.nodeId(1), 3);
        QCOMPARE(model.nodeId(2), 5);
        verifyMatches(model, nodes);
    }

    void numbersAreRightAligned()
    {
        MemoryModel model;
        model.setState(state({node(0)}));
        const auto alignment = [&](int column) {
            return Qt::Alignment(model.data(model.index(0, column), Qt::TextAlignmentRole).toInt());
        };
        QVERIFY(alignment(MemoryModel::Peak) & Qt::AlignRight);
        QVERIFY(!(alignment(MemoryModel::Node) & Qt::AlignRight));
    }

    void invalidIndexHasNoData()
    {
        MemoryModel model;
        model.setState(state({node(0)}));
        QVERIFY(!model.data(QModelIndex()).isValid());
        QVERIFY(!model.data(model.index(1, 0)).isValid());
        QCOMPARE(model.rowCount(model.index(0, 0)), 0);
        QCOMPARE(model.columnCount(model.index(0, 0)), 0);
    }

    // Same count, more nodes, fewer nodes, different ids, none: the tester
    // checks every notification; the spies check which kind it was.
    void setStateSequence()
    {
        MemoryModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        QSignalSpy resets(&model, &QAbstractItemModel::modelReset);
        QSignalSpy changes(&model, &QAbstractItemModel::dataChanged);

        QVector<NodeState> nodes{node(0), node(1), node(2)};
        model.setState(state(nodes));
        QCOMPARE(resets.count(), 1);
        verifyMatches(model, nodes);

        // The same nodes with new figures: dataChanged over the whole table.
        nodes = {node(0, 777), node(1, 777), node(2, 777, false)};
        model.setState(state(nodes));
        QCOMPARE(resets.count(), 1);
        QCOMPARE(changes.count(), 1);
        QCOMPARE(changes.first().at(0).value<QModelIndex>(), model.index(0, 0));
        QCOMPARE(changes.first().at(1).value<QModelIndex>(), model.index(2, MemoryModel::NUM_COLUMNS - 1));
        verifyMatches(model, nodes);

        // More nodes.
        nodes = {node(0, 1), node(1, 1), node(2, 1), node(3, 1), node(4, 1)};
        model.setState(state(nodes));
        QCOMPARE(resets.count(), 2);
        verifyMatches(model, nodes);

        // Fewer nodes.
        nodes = {node(1, 2), node(4, 2)};
        model.setState(state(nodes));
        QCOMPARE(resets.count(), 3);
        verifyMatches(model, nodes);

        // As many nodes, but other ones: rows mean different nodes, so reset.
        nodes = {node(1, 3), node(6, 3)};
        model.setState(state(nodes));
        QCOMPARE(resets.count(), 4);
        QCOMPARE(changes.count(), 1);
        verifyMatches(model, nodes);

        model.setState(nullptr);
        QCOMPARE(resets.count(), 5);
        QCOMPARE(model.rowCount(), 0);

        // Empty to empty: nothing to tell.
        model.setState(state({}));
        QCOMPARE(resets.count(), 5);
        QCOMPARE(changes.count(), 1);
    }
};

QTEST_GUILESS_MAIN(TestMemoryModel)
#include "tst_memory_model.moc"
