// PlacementEditor driven the way a student drives it: click a node's header,
// then click layer chips. Checks the spec it produces, the signals, that a
// placement the validator refuses is not applied (and why is shown), and
// that setSpec() parses the engine's text form. SMOL_SAVE_PNG=1 saves the
// projector-mode editor to /tmp/placement.png.
#include "widgets/placement_editor.h"

#include <QLabel>
#include <QSignalSpy>
#include <QTest>

using smol::widgets::PlacementEditor;

namespace {

const QStringList kLayers{"embed", "block0", "block1", "block2", "block3", "head"};

// Refuses a node holding layers that are not one contiguous range, with the
// engine's wording; accepts incomplete placements (built click by click).
QString contiguous(const QString &spec)
{
    QMap<int, int> nodeOfLayer; // placed layers only, in layer order
    for (const QString &item : spec.split(QLatin1Char(','), Qt::SkipEmptyParts)) {
        const QString range = item.section(QLatin1Char(':'), 0, 0);
        const int node = item.section(QLatin1Char(':'), 1, 1).toInt();
        const int first = range.section(QLatin1Char('-'), 0, 0).toInt();
        const int last =
            range.contains(QLatin1Char('-')) ? range.section(QLatin1Char('-'), 1, 1).toInt() : first;
        for (int layer = first; layer <= last; ++layer)
            nodeOfLayer[layer] = node;
    }
    QMap<int, int> lastLayerOf; // node -> last layer seen on it
    for (auto it = nodeOfLayer.cbegin(); it != nodeOfLayer.cend(); ++it) {
        const int layer = it.key();
        const int node = it.value();
        if (lastLayerOf.contains(node) && lastLayerOf[node] != layer - 1)
            return QStringLiteral("node %1 holds layers %2 and %3 but not the ones between: a stage must be "
                                  "one contiguous range")
                .arg(node)
                .arg(lastLayerOf[node])
                .arg(layer);
        lastLayerOf[node] = layer;
    }
    return {};
}

void setUp(PlacementEditor &editor, bool validate)
{
    editor.setLayers(kLayers);
    editor.setNodes(3);
    if (validate)
        editor.setValidator(contiguous);
    editor.resize(900, 600);
    editor.show();
    QVERIFY(QTest::qWaitForWindowExposed(&editor));
}

void click(PlacementEditor &editor, const QRectF &rect, Qt::MouseButton button = Qt::LeftButton)
{
    QVERIFY(rect.isValid());
    QTest::mouseClick(&editor, button, {}, rect.center().toPoint());
}

// Runs "node N" / "chip L" / "unplace L" / "cell L N" actions.
void perform(PlacementEditor &editor, const QStringList &actions)
{
    for (const QString &action : actions) {
        const QStringList words = action.split(QLatin1Char(' '));
        const int a = words.value(1).toInt();
        if (words[0] == QStringLiteral("node")) {
            click(editor, editor.nodeHeaderRect(a));
        } else if (words[0] == QStringLiteral("chip")) {
            click(editor, editor.chipRect(a));
        } else if (words[0] == QStringLiteral("unplace")) {
            click(editor, editor.chipRect(a), Qt::RightButton);
        } else if (words[0] == QStringLiteral("cell")) {
            // Layer a's row in node b's column, right of its chip's place.
            const QRectF header = editor.nodeHeaderRect(words.value(2).toInt());
            const QRectF chip = editor.chipRect(a);
            click(editor, QRectF(header.left(), chip.top(), header.width(), chip.height()));
        } else {
            QFAIL(qPrintable(QStringLiteral("unknown action ") + action));
        }
    }
}

} // namespace

class TestPlacementEditor : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void clicks_data()
    {
        QTest::addColumn<bool>("validate");
        QTest::addColumn<QString>("start");
        QTest::addColumn<QStringList>("actions");
        QTest::addColumn<QString>("expected");
        QTest::addColumn<int>("changes");

        QTest::newRow("move the last layer to node 2")
            << true << "0-1:0,2-5:1" << QStringList{"node 2", "chip 5"} << "0-1:0,2-4:1,5:2" << 1;
        QTest::newRow("node 1 takes layers 2..4 from node 0")
            << false << "0-4:0,5:2" << QStringList{"node 1", "chip 2", "chip 3", "chip 4"}
            << "0-1:0,2-4:1,5:2" << 3;
        QTest::newRow("same, from the far end so each step stays contiguous")
            << true << "0-4:0,5:2" << QStringList{"node 1", "chip 4", "chip 3", "chip 2"} << "0-1:0,2-4:1,5:2"
            << 3;
        QTest::newRow("grow node 0 by one")
            << true << "0-1:0,2-4:1,5:2" << QStringList{"node 0", "chip 2"} << "0-2:0,3-4:1,5:2" << 1;
        QTest::newRow("build from nothing")
            << true << "" << QStringList{"node 0", "chip 0", "chip 1", "node 1", "chip 2",
                                         "chip 3", "chip 4", "node 2", "chip 5"}
            << "0-1:0,2-4:1,5:2" << 6;
        QTest::newRow("stages need not follow rank order")
            << true << "" << QStringList{"node 2", "chip 0", "chip 1", "node 0", "chip 2",
                                         "chip 3", "node 1", "chip 4", "chip 5"}
            << "0-1:2,2-3:0,4-5:1" << 6;
        QTest::newRow("a chip already on the node changes nothing")
            << true << "0-1:0,2-5:1" << QStringList{"node 1", "chip 3"} << "0-1:0,2-5:1" << 0;
        QTest::newRow("clicking a header only selects")
            << true << "0-1:0,2-5:1" << QStringList{"node 2", "node 0"} << "0-1:0,2-5:1" << 0;
        QTest::newRow("clicking a node's column places the layer there")
            << true << "0-1:0,2-4:1" << QStringList{"cell 5 2"} << "0-1:0,2-4:1,5:2" << 1;
        QTest::newRow("right click takes a layer off")
            << true << "0-1:0,2-4:1,5:2" << QStringList{"unplace 5"} << "0-1:0,2-4:1" << 1;
    }

    void clicks()
    {
        QFETCH(bool, validate);
        QFETCH(QString, start);
        QFETCH(QStringList, actions);
        QFETCH(QString, expected);
        QFETCH(int, changes);

        PlacementEditor editor;
        setUp(editor, validate);
        QVERIFY(editor.setSpec(start));
        QCOMPARE(editor.spec(), start);
        QSignalSpy changed(&editor, &PlacementEditor::placementChanged);
        QSignalSpy rejected(&editor, &PlacementEditor::placementRejected);
        perform(editor, actions);
        QCOMPARE(editor.spec(), expected);
        QCOMPARE(changed.count(), changes);
        QCOMPARE(rejected.count(), 0);
        if (changes > 0)
            QCOMPARE(changed.last().at(0).toString(), expected);
    }

    void headerClickSelectsTheNode()
    {
        PlacementEditor editor;
        setUp(editor, false);
        QCOMPARE(editor.selectedNode(), 0); // a click always has somewhere to go
        click(editor, editor.nodeHeaderRect(2));
        QCOMPARE(editor.selectedNode(), 2);
        click(editor, editor.nodeHeaderRect(1));
        QCOMPARE(editor.selectedNode(), 1);
        editor.setNodes(1);
        QCOMPARE(editor.selectedNode(), 0);
        QVERIFY(!editor.nodeHeaderRect(1).isValid());
    }

    void refusedClickKeepsThePlacement()
    {
        PlacementEditor editor;
        setUp(editor, true);
        QVERIFY(editor.setSpec(QStringLiteral("0-1:0,2-5:1")));
        QSignalSpy changed(&editor, &PlacementEditor::placementChanged);
        QSignalSpy rejected(&editor, &PlacementEditor::placementRejected);

        // Layer 4 onto node 0 would leave node 1 holding 2, 3 and 5.
        perform(editor, {"node 0", "chip 4"});
        QCOMPARE(editor.spec(), QStringLiteral("0-1:0,2-5:1"));
        QCOMPARE(changed.count(), 0);
        QCOMPARE(rejected.count(), 1);
        const QString reason = rejected.first().at(0).toString();
        QCOMPARE(reason, contiguous(QStringLiteral("0-1:0,2-3:1,4:0,5:1")));
        auto *message = editor.findChild<QLabel *>(QStringLiteral("message"));
        QVERIFY(message);
        QVERIFY2(message->text().contains(reason), qPrintable(message->text()));

        // The next accepted click clears the reason.
        perform(editor, {"chip 2"});
        QCOMPARE(editor.spec(), QStringLiteral("0-2:0,3-5:1"));
        QCOMPARE(changed.count(), 1);
        QVERIFY(!message->text().contains(reason));
    }

    void setSpecRoundTrips_data()
    {
        QTest::addColumn<QString>("spec");
        QTest::addColumn<QString>("canonical");
        QTest::newRow("three stages") << "0-1:0,2-4:1,5:2"
                                      << "0-1:0,2-4:1,5:2";
        QTest::newRow("single layers") << "0:0,1:1,2:2,3-5:0"
                                       << "0:0,1:1,2:2,3-5:0";
        QTest::newRow("spaces") << " 0 - 1 : 0 , 2-5 :1 "
                                << "0-1:0,2-5:1";
        QTest::newRow("items out of order") << "2-5:1,0-1:0"
                                            << "0-1:0,2-5:1";
        QTest::newRow("split range merges") << "0:2,1:2,2-5:1"
                                            << "0-1:2,2-5:1";
        QTest::newRow("partly placed") << "1-2:1"
                                       << "1-2:1";
        QTest::newRow("nothing placed") << ""
                                        << "";
    }

    void setSpecRoundTrips()
    {
        QFETCH(QString, spec);
        QFETCH(QString, canonical);
        PlacementEditor editor;
        editor.setLayers(kLayers);
        editor.setNodes(3);
        QVERIFY(editor.setSpec(QStringLiteral("0-5:0"))); // start from something else
        QSignalSpy changed(&editor, &PlacementEditor::placementChanged);
        QVERIFY(editor.setSpec(spec));
        QCOMPARE(editor.spec(), canonical);
        QCOMPARE(changed.count(), 1);
        QVERIFY(editor.setSpec(editor.spec())); // the output parses back to itself
        QCOMPARE(editor.spec(), canonical);
        QCOMPARE(changed.count(), 1); // no change, no signal
    }

    void setSpecRejects_data()
    {
        QTest::addColumn<QString>("spec");
        QTest::newRow("no node") << "0-1,2-5:1";
        QTest::newRow("not a number") << "0-x:0";
        QTest::newRow("bad node") << "0-1:a";
        QTest::newRow("negative") << "-1:0";
        QTest::newRow("empty item") << "0-1:0,,2-5:1";
        QTest::newRow("trailing comma") << "0-1:0,2-5:1,";
        QTest::newRow("backwards") << "1-0:0";
        QTest::newRow("no such layer") << "0-6:0";
        QTest::newRow("no such node") << "0-5:3";
        QTest::newRow("placed twice") << "0-2:0,2-5:1";
        QTest::newRow("validator refuses") << "0:0,1:1,2-5:0";
    }

    void setSpecRejects()
    {
        QFETCH(QString, spec);
        PlacementEditor editor;
        editor.setLayers(kLayers);
        editor.setNodes(3);
        editor.setValidator(contiguous);
        QVERIFY(editor.setSpec(QStringLiteral("0-2:0,3-5:1")));
        QSignalSpy changed(&editor, &PlacementEditor::placementChanged);
        QSignalSpy rejected(&editor, &PlacementEditor::placementRejected);
        QVERIFY(!editor.setSpec(spec));
        QCOMPARE(editor.spec(), QStringLiteral("0-2:0,3-5:1"));
        QCOMPARE(changed.count(), 0);
        QCOMPARE(rejected.count(), 0); // the return value says it; signals are for clicks
        auto *message = editor.findChild<QLabel *>(QStringLiteral("message"));
        QVERIFY(message && message->text().startsWith(QStringLiteral("Not applied")));
    }

    void layersAndNodesChange()
    {
        PlacementEditor editor;
        editor.setLayers(kLayers);
        editor.setNodes(3);
        QVERIFY(editor.setSpec(QStringLiteral("0-1:0,2-4:1,5:2")));
        editor.setNodes(2); // node 2 left: its layer is no longer placed
        QCOMPARE(editor.spec(), QStringLiteral("0-1:0,2-4:1"));
        QStringList renamed = kLayers;
        renamed[0] = QStringLiteral("embedding");
        editor.setLayers(renamed); // same count: the placement stays
        QCOMPARE(editor.spec(), QStringLiteral("0-1:0,2-4:1"));
        editor.setLayers(kLayers.mid(0, 4)); // another model
        QCOMPARE(editor.spec(), QString());
        QVERIFY(!editor.chipRect(4).isValid());
    }

    void screenshot()
    {
        PlacementEditor editor;
        editor.setProjectorMode(true);
        editor.setLayers({"embed", "block0", "block1", "block2", "block3", "block4", "norm", "head"});
        editor.setNodes(4);
        editor.setValidator(contiguous);
        QVERIFY(editor.setSpec(QStringLiteral("0-1:0,2-3:1,4-5:2")));
        editor.resize(editor.sizeHint().expandedTo(QSize(1100, 700)));
        editor.show();
        QVERIFY(QTest::qWaitForWindowExposed(&editor));
        perform(editor, {"node 3", "chip 6", "node 1", "chip 6"}); // the last one is refused
        QCOMPARE(editor.spec(), QStringLiteral("0-1:0,2-3:1,4-5:2,6:3"));
        const QImage image = editor.grab().toImage();
        QVERIFY(!image.isNull());
        if (qEnvironmentVariableIsSet("SMOL_SAVE_PNG"))
            QVERIFY(image.save(QStringLiteral("/tmp/placement.png")));
    }
};

QTEST_MAIN(TestPlacementEditor)
#include "tst_placement_editor.moc"
