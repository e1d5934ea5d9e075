// Placement (engine/placement.h): the text form, every reason a placement
// cannot run, balancing by parameter count, and the click-by-click assign()
// the GUI uses. Plain data: no LibTorch here.
#include "engine/placement.h"

#include <QtTest>

using namespace smol::engine;

class TestPlacement : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void parses_data();
    void parses();
    void rejects_data();
    void rejects();
    void stagesFollowPlacementNotRank();
    void balances_data();
    void balances();
    void balanceNeedsALayerPerNode();
    void assignBuildsAPlacementClickByClick();
    void assignRefuses_data();
    void assignRefuses();
};

namespace {
QVector<int> toQ(const std::vector<int> &v)
{
    return QVector<int>(v.begin(), v.end());
}
} // namespace

void TestPlacement::parses_data()
{
    QTest::addColumn<QString>("spec");
    QTest::addColumn<int>("layers");
    QTest::addColumn<int>("nodes");
    QTest::addColumn<QVector<int>>("nodeOfLayer");
    QTest::addColumn<QString>("canonical");
    QTest::newRow("brief's example") << "0-1:0,2-4:1,5:2" << 6 << 3 << QVector<int>{0, 0, 1, 1, 1, 2}
                                     << "0-1:0,2-4:1,5:2";
    QTest::newRow("single layers") << "0:0,1:1,2:2" << 3 << 3 << QVector<int>{0, 1, 2} << "0:0,1:1,2:2";
    QTest::newRow("spaces, split range")
        << " 0 - 1 : 1 , 2:1, 3-4:0 " << 5 << 2 << QVector<int>{1, 1, 1, 0, 0} << "0-2:1,3-4:0";
    QTest::newRow("items out of order") << "3:1,0-2:0" << 4 << 2 << QVector<int>{0, 0, 0, 1} << "0-2:0,3:1";
    QTest::newRow("one node") << "0-4:0" << 5 << 1 << QVector<int>{0, 0, 0, 0, 0} << "0-4:0";
}

void TestPlacement::parses()
{
    QFETCH(QString, spec);
    QFETCH(int, layers);
    QFETCH(int, nodes);
    QFETCH(QVector<int>, nodeOfLayer);
    QFETCH(QString, canonical);
    const Placement p = Placement::parse(spec.toStdString(), layers, nodes);
    QCOMPARE(toQ(p.nodeOfLayer()), nodeOfLayer);
    QVERIFY(p.isValid());
    QCOMPARE(QString::fromStdString(p.toString()), canonical);
    QCOMPARE(Placement::parse(p.toString(), layers, nodes), p); // the text form round-trips
}

void TestPlacement::rejects_data()
{
    QTest::addColumn<QString>("spec");
    QTest::addColumn<int>("layers");
    QTest::addColumn<int>("nodes");
    QTest::addColumn<QString>("reason");
    // syntax
    QTest::newRow("empty") << "" << 4 << 2 << "placement is empty";
    QTest::newRow("no node") << "0-1,2-3:1" << 4 << 2 << "\"0-1\" has no ':NODE'";
    QTest::newRow("not a number") << "0-x:0,2-3:1" << 4 << 2 << "is not a layer";
    QTest::newRow("negative layer") << "-1:0" << 4 << 2 << "is not a layer";
    QTest::newRow("open range") << "0-:0,2-3:1" << 4 << 2 << "is not a layer";
    QTest::newRow("bad node") << "0-1:a,2-3:1" << 4 << 2 << "\"a\" is not a node number";
    QTest::newRow("empty item") << "0-1:0,,2-3:1" << 4 << 2 << "has an empty item";
    QTest::newRow("trailing comma") << "0-1:0,2-3:1," << 4 << 2 << "has an empty item";
    QTest::newRow("backwards range") << "1-0:0,2-3:1" << 4 << 2 << "range 1-0 runs backwards";
    // ranges
    QTest::newRow("layer out of range")
        << "0-1:0,2-4:1" << 4 << 2 << "layer 4 does not exist (the model has 4 layers";
    QTest::newRow("node out of range") << "0-1:0,2-3:2" << 4 << 2 << "node 2 does not exist (2 nodes";
    // coverage and shape
    QTest::newRow("placed twice") << "0-2:0,2-3:1" << 4 << 2
                                  << "layer 2 is placed twice (on node 0 and node 1)";
    QTest::newRow("unplaced") << "0-1:0,3:1" << 4 << 2 << "layer 2 is not placed on any node";
    QTest::newRow("non-contiguous") << "0:0,1-2:1,3:0" << 4 << 2
                                    << "node 0 holds layers 0 and 3 but not the ones between";
    QTest::newRow("empty node") << "0-1:0,2-3:1" << 4 << 3 << "node 2 holds no layers";
}

void TestPlacement::rejects()
{
    QFETCH(QString, spec);
    QFETCH(int, layers);
    QFETCH(int, nodes);
    QFETCH(QString, reason);
    try {
        Placement::parse(spec.toStdString(), layers, nodes);
        QFAIL("accepted a bad placement");
    } catch (const PlacementError &e) {
        QVERIFY2(QString(e.what()).contains(reason), e.what());
        QVERIFY2(!QString(e.what()).contains('\n'), e.what());
    }
}

void TestPlacement::stagesFollowPlacementNotRank()
{
    const Placement p = Placement::parse("0-1:2,2-3:0,4:1", 5, 3);
    const auto s = p.stages();
    QCOMPARE(s.size(), std::size_t(3));
    QCOMPARE(s[0].node, 2);
    QCOMPARE(s[0].firstLayer, 0);
    QCOMPARE(s[0].lastLayer, 1);
    QCOMPARE(s[1].node, 0);
    QCOMPARE(s[1].firstLayer, 2);
    QCOMPARE(s[2].node, 1);
    QCOMPARE(s[2].lastLayer, 4);
    QCOMPARE(p.stageOf(2), 0);
    QCOMPARE(p.stageOf(1), 2);
    QVERIFY_EXCEPTION_THROWN(Placement(5, 3).stages(), PlacementError);
}

void TestPlacement::balances_data()
{
    QTest::addColumn<QVector<qlonglong>>("sizes");
    QTest::addColumn<int>("nodes");
    QTest::addColumn<QString>("placement");
    QTest::newRow("equal layers") << QVector<qlonglong>{10, 10, 10, 10} << 2 << "0-1:0,2-3:1";
    QTest::newRow("a heavy first layer") << QVector<qlonglong>{100, 10, 10, 10} << 2 << "0:0,1-3:1";
    QTest::newRow("a heavy last layer") << QVector<qlonglong>{10, 10, 10, 100} << 2 << "0-2:0,3:1";
    // gpt-like: small embedding, four equal blocks, large head
    QTest::newRow("gpt-like on 3") << QVector<qlonglong>{20, 50, 50, 50, 50, 120} << 3 << "0-2:0,3-4:1,5:2";
    QTest::newRow("one layer each") << QVector<qlonglong>{1, 2, 3} << 3 << "0:0,1:1,2:2";
    QTest::newRow("one node") << QVector<qlonglong>{1, 2, 3} << 1 << "0-2:0";
    QTest::newRow("mlp-like on 2") << QVector<qlonglong>{200960, 32896, 1290} << 2 << "0:0,1-2:1";
}

void TestPlacement::balances()
{
    QFETCH(QVector<qlonglong>, sizes);
    QFETCH(int, nodes);
    QFETCH(QString, placement);
    const Placement p = Placement::balanced(std::vector<std::int64_t>(sizes.begin(), sizes.end()), nodes);
    QVERIFY2(p.isValid(), p.error().c_str());
    QCOMPARE(QString::fromStdString(p.toString()), placement);
    for (std::size_t i = 0; i < p.stages().size(); ++i) // auto placement: stage i on node i
        QCOMPARE(p.stages()[i].node, int(i));
}

void TestPlacement::balanceNeedsALayerPerNode()
{
    try {
        Placement::balanced({1, 2, 3}, 4);
        QFAIL("balanced 3 layers over 4 nodes");
    } catch (const PlacementError &e) {
        QVERIFY2(QString(e.what()).contains("3 layers, too few for 4"), e.what());
    }
}

void TestPlacement::assignBuildsAPlacementClickByClick()
{
    Placement p(4, 2);
    QCOMPARE(QString::fromStdString(p.error()), QString("layer 0 is not placed on any node"));
    for (auto [layer, node] : std::vector<std::pair<int, int>>{{0, 0}, {1, 0}, {3, 1}}) {
        const PlacementEdit e = p.assign(layer, node);
        QVERIFY2(e.ok(), e.reason.c_str());
        p = e.placement();
        QVERIFY(!p.isValid()); // layer 2 still unplaced
    }
    QCOMPARE(QString::fromStdString(p.error()), QString("layer 2 is not placed on any node"));
    p = p.assign(2, 1).placement();
    QVERIFY2(p.isValid(), p.error().c_str());
    QCOMPARE(QString::fromStdString(p.toString()), QString("0-1:0,2-3:1"));
    // Moving a boundary layer keeps both stages contiguous.
    p = p.assign(1, 1).placement();
    QCOMPARE(QString::fromStdString(p.toString()), QString("0:0,1-3:1"));
    // Emptying a node is allowed as an intermediate state, not for running.
    p = p.assign(0, 1).placement();
    QCOMPARE(QString::fromStdString(p.error()),
             QString("node 0 holds no layers (every node must hold a stage)"));
    // Unplacing the last layer keeps the rest contiguous.
    const PlacementEdit e = p.assign(3, Placement::kUnplaced);
    QVERIFY(e.ok());
    QCOMPARE(QString::fromStdString(e.placement().toString()), QString("0-2:1"));
}

void TestPlacement::assignRefuses_data()
{
    QTest::addColumn<int>("layer");
    QTest::addColumn<int>("node");
    QTest::addColumn<QString>("reason");
    // from 0-1:0,2-4:1,5:2
    QTest::newRow("no such layer") << 6 << 0 << "layer 6 does not exist";
    QTest::newRow("negative layer") << -1 << 0 << "layer -1 does not exist";
    QTest::newRow("no such node") << 0 << 3 << "node 3 does not exist";
    QTest::newRow("island") << 0 << 1 << "node 1 holds layers 0 and 2 but not the ones between";
    QTest::newRow("hole") << 3 << Placement::kUnplaced << "node 1 holds layers 2 and 4";
    QTest::newRow("far away") << 5 << 0 << "node 0 holds layers 1 and 5";
}

void TestPlacement::assignRefuses()
{
    QFETCH(int, layer);
    QFETCH(int, node);
    QFETCH(QString, reason);
    const Placement before = Placement::parse("0-1:0,2-4:1,5:2", 6, 3);
    const PlacementEdit e = before.assign(layer, node);
    QVERIFY(!e.ok());
    QVERIFY2(QString::fromStdString(e.reason).contains(reason), e.reason.c_str());
    QCOMPARE(e.placement(), before); // a refused edit changes nothing
}

QTEST_GUILESS_MAIN(TestPlacement)
#include "tst_placement.moc"
