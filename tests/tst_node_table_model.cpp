// NodeTableModel: shape, texts per state, and how setNodes() notifies views.
#include "widgets/node_table_model.h"

#include <QAbstractItemModelTester>
#include <QLocale>
#include <QSignalSpy>
#include <QTest>

using smol::widgets::NodeRow;
using smol::widgets::NodeState;
using smol::widgets::NodeTableModel;

Q_DECLARE_METATYPE(NodeRow)

namespace {

NodeRow row(int rank, NodeState state, const QString &error = {})
{
    NodeRow r;
    r.rank = rank;
    r.name = QStringLiteral("node-%1").arg(rank);
    r.transport = QStringLiteral("tcp 127.0.0.1");
    r.state = state;
    r.error = error;
    if (state != NodeState::Connecting) {
        r.bytesSent = 12000 + std::uint64_t(rank);
        r.bytesReceived = 12000 - std::uint64_t(rank);
    }
    return r;
}

} // namespace

class TestNodeTableModel : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() { QLocale::setDefault(QLocale(QLocale::English, QLocale::UnitedStates)); }

    void emptyModelHasColumnsButNoRows()
    {
        NodeTableModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        QCOMPARE(model.rowCount(), 0);
        QCOMPARE(model.columnCount(), int(NodeTableModel::NUM_COLUMNS));
        QCOMPARE(model.headerData(NodeTableModel::State, Qt::Horizontal).toString(), QStringLiteral("State"));
        QCOMPARE(model.headerData(NodeTableModel::BytesSent, Qt::Horizontal).toString(),
                 QStringLiteral("Bytes sent"));
    }

    void displayText_data()
    {
        QTest::addColumn<NodeRow>("node");
        QTest::addColumn<int>("column");
        QTest::addColumn<QString>("expected");

        QTest::newRow("rank") << row(3, NodeState::Ready) << int(NodeTableModel::Rank) << QStringLiteral("3");
        QTest::newRow("name") << row(3, NodeState::Ready) << int(NodeTableModel::Name)
                              << QStringLiteral("node-3");
        QTest::newRow("transport") << row(0, NodeState::Connecting) << int(NodeTableModel::Transport)
                                   << QStringLiteral("tcp 127.0.0.1");
        QTest::newRow("connecting") << row(0, NodeState::Connecting) << int(NodeTableModel::State)
                                    << QStringLiteral("connecting");
        QTest::newRow("ready") << row(1, NodeState::Ready) << int(NodeTableModel::State)
                               << QStringLiteral("ready");
        QTest::newRow("failed with reason")
            << row(2, NodeState::Failed, QStringLiteral("peer 1 lost")) << int(NodeTableModel::State)
            << QStringLiteral("failed: peer 1 lost");
        QTest::newRow("failed without reason")
            << row(2, NodeState::Failed) << int(NodeTableModel::State) << QStringLiteral("failed");
        QTest::newRow("bytes not measured yet")
            << row(0, NodeState::Connecting) << int(NodeTableModel::BytesSent) << QString();
        QTest::newRow("bytes sent") << row(1, NodeState::Ready) << int(NodeTableModel::BytesSent)
                                    << QStringLiteral("12,001");
        QTest::newRow("bytes received")
            << row(1, NodeState::Ready) << int(NodeTableModel::BytesReceived) << QStringLiteral("11,999");
    }

    void displayText()
    {
        QFETCH(NodeRow, node);
        QFETCH(int, column);
        QFETCH(QString, expected);

        NodeTableModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setNodes({node});
        QCOMPARE(model.data(model.index(0, column)).toString(), expected);
    }

    void sortRoleHoldsRawBytes()
    {
        NodeTableModel model;
        model.setNodes({row(0, NodeState::Connecting), row(1, NodeState::Ready)});
        QVERIFY(!model.data(model.index(0, NodeTableModel::BytesSent), NodeTableModel::SortRole).isValid());
        QCOMPARE(
            model.data(model.index(1, NodeTableModel::BytesSent), NodeTableModel::SortRole).toULongLong(),
            12001ull);
    }

    void numbersAreRightAligned()
    {
        NodeTableModel model;
        model.setNodes({row(0, NodeState::Ready)});
        const auto alignment = [&](int column) {
            return Qt::Alignment(model.data(model.index(0, column), Qt::TextAlignmentRole).toInt());
        };
        QVERIFY(alignment(NodeTableModel::BytesReceived) & Qt::AlignRight);
        QVERIFY(!(alignment(NodeTableModel::Name) & Qt::AlignRight));
    }

    void invalidIndexHasNoData()
    {
        NodeTableModel model;
        model.setNodes({row(0, NodeState::Ready)});
        QVERIFY(!model.data(QModelIndex()).isValid());
        QVERIFY(!model.data(model.index(1, 0)).isValid());
        QCOMPARE(model.rowCount(model.index(0, 0)), 0);
    }

    void sameSizeUpdateIsDataChangedNotReset()
    {
        NodeTableModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setNodes({row(0, NodeState::Connecting), row(1, NodeState::Connecting)});

        QSignalSpy resets(&model, &QAbstractItemModel::modelReset);
        QSignalSpy changes(&model, &QAbstractItemModel::dataChanged);
        model.setNodes({row(0, NodeState::Ready), row(1, NodeState::Failed, QStringLiteral("timeout"))});

        QCOMPARE(resets.count(), 0);
        QCOMPARE(changes.count(), 1);
        const auto topLeft = changes.first().at(0).value<QModelIndex>();
        const auto bottomRight = changes.first().at(1).value<QModelIndex>();
        QCOMPARE(topLeft, model.index(0, 0));
        QCOMPARE(bottomRight, model.index(1, NodeTableModel::NUM_COLUMNS - 1));
        QCOMPARE(model.data(model.index(1, NodeTableModel::State)).toString(),
                 QStringLiteral("failed: timeout"));
    }

    void resizeResetsTheModel()
    {
        NodeTableModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setNodes({row(0, NodeState::Connecting)});

        QSignalSpy resets(&model, &QAbstractItemModel::modelReset);
        model.setNodes({row(0, NodeState::Ready), row(1, NodeState::Ready), row(2, NodeState::Ready)});
        QCOMPARE(resets.count(), 1);
        QCOMPARE(model.rowCount(), 3);

        model.setNodes({});
        QCOMPARE(resets.count(), 2);
        QCOMPARE(model.rowCount(), 0);
    }
};

QTEST_GUILESS_MAIN(TestNodeTableModel)
#include "tst_node_table_model.moc"
