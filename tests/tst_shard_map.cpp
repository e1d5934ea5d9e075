// ShardMapModel: parameters merged from ShardCells and grouped by layer,
// ranks as columns, owned fractions of a chunked parameter, replicated and
// materialised cells, and how setState() notifies views; ShardMapView paints
// something; a mesh's holdings and column notes. SMOL_SAVE_PNG=1 saves the projector-mode view to /tmp/shard_map.png.
#include "widgets/paint/palette.h"
#include "widgets/shard_map.h"

#include <QAbstractItemModelTester>
#include <QImage>
#include <QSignalSpy>
#include <QTest>

using smol::widgets::ClusterState;
using smol::widgets::ClusterStatePtr;
using smol::widgets::NodeState;
using smol::widgets::ShardCell;
using smol::widgets::ShardMapModel;
using smol::widgets::ShardMapView;
using smol::widgets::formatBytes;

namespace {

ShardCell cell(const QString &param, std::int64_t begin, std::int64_t end, int owner,
               QVector<int> materialisedOn = {})
{
    ShardCell c;
    c.param = param;
    c.layer = param.section(QLatin1Char('.'), 0, -2);
    c.begin = begin;
    c.end = end;
    c.owner = owner;
    c.materialisedOn = std::move(materialisedOn);
    return c;
}

// `ranks` nodes in the run plus one that is not (rank -1).
ClusterStatePtr state(int ranks, QVector<ShardCell> shards)
{
    auto s = std::make_shared<ClusterState>();
    for (int r = 0; r < ranks; ++r) {
        NodeState node;
        node.id = r;
        node.rank = r;
        s->nodes << node;
    }
    NodeState spectator;
    spectator.id = ranks;
    s->nodes << spectator;
    s->shards = std::move(shards);
    return s;
}

// zero3-like: fc1.weight cut 4/3/3 over 3 ranks, listed out of order and
// interleaved with other layers; fc1.bias replicated; fc2.weight on rank 1.
ClusterStatePtr chunked(QVector<int> materialisedOn = {})
{
    return state(3, {
                        cell(QStringLiteral("fc1.weight"), 0, 4, 0, materialisedOn),
                        cell(QStringLiteral("fc2.weight"), 0, 6, 1),
                        cell(QStringLiteral("fc1.bias"), 0, 5, -1),
                        cell(QStringLiteral("fc1.weight"), 7, 10, 2, materialisedOn),
                        cell(QStringLiteral("fc1.weight"), 4, 7, 1, materialisedOn),
                    });
}

} // namespace

class TestShardMap : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void rowsAreParamsByLayerColumnsAreRanks()
    {
        ShardMapModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setState(chunked());
        QCOMPARE(model.columnCount(), 3); // the node with rank -1 is not a column
        QCOMPARE(model.rowCount(), 3);
        QStringList rows;
        for (int r = 0; r < model.rowCount(); ++r)
            rows << model.headerData(r, Qt::Vertical).toString();
        QCOMPARE(rows, (QStringList{"fc1.weight", "fc1.bias", "fc2.weight"}));
        QCOMPARE(model.headerData(2, Qt::Horizontal).toString(), QStringLiteral("rank 2"));
        QCOMPARE(model.data(model.index(2, 0), ShardMapModel::LayerRole).toString(), QStringLiteral("fc2"));
    }

    void cells_data()
    {
        QTest::addColumn<int>("row");
        QTest::addColumn<int>("rank");
        QTest::addColumn<QString>("text");
        QTest::addColumn<double>("fraction");

        QTest::newRow("chunk 0-4 of 10") << 0 << 0 << "owner" << 0.4;
        QTest::newRow("chunk 4-7 of 10") << 0 << 1 << "owner" << 0.3;
        QTest::newRow("chunk 7-10 of 10") << 0 << 2 << "owner" << 0.3;
        QTest::newRow("replicated on rank 0") << 1 << 0 << "all" << 1.0;
        QTest::newRow("replicated on rank 2") << 1 << 2 << "all" << 1.0;
        QTest::newRow("whole param on rank 1") << 2 << 1 << "owner" << 1.0;
        QTest::newRow("nothing of it on rank 0") << 2 << 0 << "" << 0.0;
    }

    void cells()
    {
        QFETCH(int, row);
        QFETCH(int, rank);
        QFETCH(QString, text);
        QFETCH(double, fraction);
        ShardMapModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setState(chunked());
        const QModelIndex index = model.index(row, rank);
        QCOMPARE(index.data().toString(), text);
        QCOMPARE(index.data(ShardMapModel::OwnedFractionRole).toDouble(), fraction);
        QCOMPARE(index.data(ShardMapModel::ReplicatedRole).toBool(), text == QStringLiteral("all"));
        QVERIFY(!index.data(ShardMapModel::MaterialisedRole).toBool());
    }

    void materialisedFollowsTheSnapshot()
    {
        ShardMapModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setState(chunked({0, 2}));
        const auto materialised = [&](int row, int rank) {
            return model.index(row, rank).data(ShardMapModel::MaterialisedRole).toBool();
        };
        QVERIFY(materialised(0, 0));
        QVERIFY(!materialised(0, 1));
        QVERIFY(materialised(0, 2));
        QVERIFY(!materialised(2, 0));
        const QString tip = model.index(0, 2).data(Qt::ToolTipRole).toString();
        QVERIFY2(tip.contains(QStringLiteral("materialised")), qPrintable(tip));
        // 10 float32 elements held in full, 3 of them rank 2's own.
        QVERIFY2(tip.contains(formatBytes(40)) && tip.contains(formatBytes(28)) && tip.contains(formatBytes(12)),
                 qPrintable(tip));

        // Gathered, then freed again: same shape, so dataChanged and no reset.
        QSignalSpy resets(&model, &QAbstractItemModel::modelReset);
        QSignalSpy changes(&model, &QAbstractItemModel::dataChanged);
        model.setState(chunked());
        QCOMPARE(resets.count(), 0);
        QCOMPARE(changes.count(), 1);
        QCOMPARE(changes.first().at(1).value<QModelIndex>(), model.index(2, 2));
        QVERIFY(!materialised(0, 0));

        model.setState(chunked()); // an identical snapshot: nothing to repaint
        QCOMPARE(changes.count(), 1);
    }

    void newShapeResets()
    {
        ShardMapModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        QSignalSpy resets(&model, &QAbstractItemModel::modelReset);
        model.setState(chunked());
        QCOMPARE(resets.count(), 1);

        // ddp on 4 ranks: everything replicated.
        model.setState(state(
            4, {cell(QStringLiteral("fc1.weight"), 0, 10, -1), cell(QStringLiteral("fc1.bias"), 0, 5, -1)}));
        QCOMPARE(resets.count(), 2);
        QCOMPARE(model.columnCount(), 4);
        QCOMPARE(model.rowCount(), 2);
        for (int rank = 0; rank < 4; ++rank) {
            QCOMPARE(model.index(0, rank).data().toString(), QStringLiteral("all"));
            QCOMPARE(model.index(1, rank).data(ShardMapModel::OwnedFractionRole).toDouble(), 1.0);
        }

        model.setState(nullptr);
        QCOMPARE(resets.count(), 3);
        QCOMPARE(model.rowCount(), 0);
        QCOMPARE(model.columnCount(), 0);
        QVERIFY(!model.index(0, 0).data().isValid());
    }

    void ownersBeyondTheRanksAreIgnored()
    {
        ShardMapModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setState(state(2, {cell(QStringLiteral("w.weight"), 0, 5, 0, {0, 5}),
                                 cell(QStringLiteral("w.weight"), 5, 10, 3)}));
        QCOMPARE(model.columnCount(), 2);
        QCOMPARE(model.index(0, 0).data(ShardMapModel::OwnedFractionRole).toDouble(), 0.5);
        QCOMPARE(model.index(0, 1).data().toString(), QString());
    }

    // A device mesh: the same range held by two ranks (dp replicas) fills
    // both columns without being "all"; a tp half fills half of each of its
    // two columns; a rank of another stage holds nothing. Column notes come
    // from shardColumns.
    void meshHoldingsAreNotReplicated()
    {
        ShardMapModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        QVector<ShardCell> shards{
            cell(QStringLiteral("embed.weight"), 0, 8, 0), cell(QStringLiteral("embed.weight"), 0, 8, 2),
            cell(QStringLiteral("fc.weight"), 0, 4, 0), cell(QStringLiteral("fc.weight"), 4, 8, 1)};
        auto s = std::make_shared<ClusterState>(*state(4, shards));
        smol::widgets::ShardColumn column;
        column.coords = QStringLiteral("dp0 \u00b7 cp1");
        column.blockSize = 16;
        column.sequenceBegin = 8;
        column.sequenceEnd = 16;
        column.sharedBy = 4;
        s->shardColumns = {column, column, column, column};
        model.setState(s);
        QCOMPARE(model.rowCount(), 2);
        QCOMPARE(model.index(0, 0).data(ShardMapModel::ReplicatedRole).toBool(), false);
        QCOMPARE(model.index(0, 0).data(ShardMapModel::OwnedFractionRole).toDouble(), 1.0);
        QCOMPARE(model.index(0, 2).data(ShardMapModel::OwnedFractionRole).toDouble(), 1.0);
        QCOMPARE(model.index(0, 1).data(ShardMapModel::OwnedFractionRole).toDouble(), 0.0);
        QCOMPARE(model.index(0, 2).data().toString(), QStringLiteral("owner"));
        QCOMPARE(model.index(1, 1).data(ShardMapModel::OwnedFractionRole).toDouble(), 0.5);
        QCOMPARE(model.index(1, 2).data(ShardMapModel::OwnedFractionRole).toDouble(), 0.0);
        QCOMPARE(
            model.headerData(1, Qt::Horizontal, ShardMapModel::ColumnNotesRole).toStringList(),
            (QStringList{QStringLiteral("dp0 cp1"), QStringLiteral("seq 8-15"), QStringLiteral("opt 1/4")}));
        // zero3: the params and grads are shared as well.
        for (smol::widgets::ShardColumn &c : s->shardColumns)
            c.paramsShared = true;
        model.setState(s);
        QCOMPARE(model.headerData(1, Qt::Horizontal, ShardMapModel::ColumnNotesRole).toStringList().last(),
                 QStringLiteral("p+g+opt 1/4"));
        // Without a mesh: no notes.
        model.setState(state(4, shards));
        QCOMPARE(model.headerData(1, Qt::Horizontal, ShardMapModel::ColumnNotesRole).toStringList(),
                 QStringList());
    }

    void viewPaints()
    {
        ShardMapView view;
        view.setProjectorMode(true);
        QVERIFY(view.projectorMode());
        // A zero3 MLP on 4 ranks, fc2 gathered mid-step, plus a replicated norm.
        QVector<ShardCell> shards;
        const struct {
            const char *param;
            std::int64_t elements;
        } params[] = {{"fc1.weight", 784 * 128}, {"fc1.bias", 128},   {"fc2.weight", 128 * 64},
                      {"fc2.bias", 64},          {"norm.weight", 64}, {"head.weight", 64 * 10},
                      {"head.bias", 10}};
        for (const auto &p : params) {
            const QString name = QString::fromLatin1(p.param);
            if (name.startsWith(QStringLiteral("norm"))) {
                shards << cell(name, 0, p.elements, -1);
                continue;
            }
            const QVector<int> materialised =
                name.startsWith(QStringLiteral("fc2")) ? QVector<int>{0, 1, 2, 3} : QVector<int>{};
            const std::int64_t chunk = (p.elements + 3) / 4;
            for (int r = 0; r < 4; ++r)
                shards << cell(name, std::min(p.elements, r * chunk), std::min(p.elements, (r + 1) * chunk),
                               r, materialised);
        }
        view.setState(state(4, shards));
        QCOMPARE(view.model()->rowCount(), 7);
        view.resize(view.sizeHint().expandedTo(QSize(1100, 600)));
        view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        const QImage image = view.grab().toImage();
        QSet<QRgb> colours;
        int rank1 = 0;
        const QRgb rank1Colour = smol::widgets::rankColor(1).rgb();
        for (int y = 0; y < image.height(); y += 2)
            for (int x = 0; x < image.width(); x += 2) {
                colours.insert(image.pixel(x, y));
                rank1 += image.pixel(x, y) == rank1Colour;
            }
        QVERIFY(colours.size() > 20);
        QVERIFY(rank1 > 100);
        if (qEnvironmentVariableIsSet("SMOL_SAVE_PNG"))
            QVERIFY(image.save(QStringLiteral("/tmp/shard_map.png")));
    }
};

QTEST_MAIN(TestShardMap)
#include "tst_shard_map.moc"
