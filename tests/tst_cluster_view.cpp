// ClusterView and MemoryView, offscreen: every topology and size keeps every
// node box inside the widget and apart, in the order the topology promises;
// clicks select and clear; states, selection and projector mode show in the
// pixels. With SMOL_SAVE_PNG set, saves projector screenshots of both views
// (4 nodes) to /tmp/cluster_view.png and /tmp/memory_view.png; with
// SMOL_SAVE_PNG=all, also a gallery /tmp/cluster_view_<case>.png.
#include "widgets/cluster/cluster_view.h"
#include "widgets/memory_view.h"
#include "widgets/paint/palette.h"

#include <QImage>
#include <QSignalSpy>
#include <QTest>

#include <algorithm>
#include <cmath>
#include <random>

using namespace smol::widgets;

Q_DECLARE_METATYPE(smol::widgets::Topology)

namespace {

constexpr std::int64_t kMiB = 1024 * 1024;

QString topologyName(Topology t)
{
    switch (t) {
    case Topology::Ring:
        return QStringLiteral("ring");
    case Topology::Star:
        return QStringLiteral("star");
    case Topology::Chain:
        return QStringLiteral("chain");
    }
    return {};
}

// `n` nodes in the run (ids 0..n-1, rank = id), `outOfRun` more with rank -1,
// figures that differ per node, and traffic on the topology's edges (one
// edge idle, to draw the 0 bytes/s case).
ClusterStatePtr makeState(Topology topology, int n, int outOfRun = 0, bool predicted = true)
{
    auto s = std::make_shared<ClusterState>();
    s->strategy = topology == Topology::Star    ? QStringLiteral("syncps")
                  : topology == Topology::Chain ? QStringLiteral("pipeline")
                                                : QStringLiteral("zero2");
    s->topology = topology;
    s->step = 41;
    s->steps = 200;
    for (int i = 0; i < n + outOfRun; ++i) {
        NodeState node;
        node.id = i;
        node.rank = i < n ? i : -1;
        node.name = QStringLiteral("node-%1").arg(i);
        node.host = i % 2 ? QStringLiteral("lab-pc-%1.local").arg(i) : QStringLiteral("127.0.0.1");
        node.role = topology == Topology::Chain ? QStringLiteral("stage %1").arg(i)
                    : topology == Topology::Star
                        ? (i == 0 ? QStringLiteral("server") : QStringLiteral("worker"))
                        : QStringLiteral("worker");
        node.state = i < n ? NodeRunState::Running : NodeRunState::Idle;
        const std::int64_t scale = 1 + i % 3;
        node.memory.params = 700 * 1024 * scale;
        node.memory.grads = 700 * 1024 * scale;
        node.memory.optimizer = 1400 * 1024 * scale / 2;
        node.memory.activations = 450 * 1024 + 37 * 1024 * i;
        node.memory.comm = 180 * 1024;
        node.memory.live = node.memory.params + node.memory.grads + node.memory.optimizer +
                           node.memory.activations + node.memory.comm;
        node.memory.peak = node.memory.live + 500 * 1024;
        if (predicted)
            node.predictedBytes = node.memory.params + node.memory.grads + node.memory.optimizer - 20 * 1024;
        s->nodes << node;
    }
    const auto link = [&](int a, int b, double rate) { s->links << LinkState{a, b, rate, 0, 0}; };
    for (int r = 0; r < n; ++r) {
        const double rate = 1.2e6 * std::pow(4.0, r % 4);
        if (topology == Topology::Ring && n > 1)
            link(r, (r + 1) % n, r == n - 1 ? 0.0 : rate);
        else if (topology == Topology::Chain && r + 1 < n) {
            link(r, r + 1, rate);
            link(r + 1, r, rate / 3);
        } else if (topology == Topology::Star && r > 0) {
            link(r, 0, rate);
            link(0, r, rate);
        }
    }
    return s;
}

ClusterStatePtr withStates(ClusterStatePtr base, QVector<std::pair<int, NodeRunState>> states)
{
    auto s = std::make_shared<ClusterState>(*base);
    for (auto [id, state] : states) {
        s->nodes[id].state = state;
        s->nodes[id].slowdown = state == NodeRunState::Slow ? 3 : 1;
    }
    return s;
}

QImage render(QWidget &w)
{
    QImage image(w.size(), QImage::Format_ARGB32);
    image.fill(Qt::transparent);
    w.render(&image);
    return image;
}

// How many pixels differ from the top-left one: a blank image has none.
int pixelsUnlikeBackground(const QImage &image)
{
    const QRgb background = image.pixel(0, 0);
    int count = 0;
    for (int y = 0; y < image.height(); ++y)
        for (int x = 0; x < image.width(); ++x)
            count += image.pixel(x, y) != background;
    return count;
}

int pixelsOfColor(const QImage &image, const QRect &area, const QColor &color)
{
    int count = 0;
    const QRect r = area.intersected(image.rect());
    for (int y = r.top(); y <= r.bottom(); ++y)
        for (int x = r.left(); x <= r.right(); ++x)
            count += (image.pixel(x, y) & 0xffffff) == (color.rgb() & 0xffffff);
    return count;
}

double angleAround(QPointF p, QPointF centre)
{
    return std::atan2(p.y() - centre.y(), p.x() - centre.x());
}

} // namespace

class TestClusterView : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void layoutFitsAndKeepsNodesApart_data()
    {
        QTest::addColumn<Topology>("topology");
        QTest::addColumn<int>("nodes");
        QTest::addColumn<int>("outOfRun");
        QTest::addColumn<QSize>("size");
        QTest::addColumn<bool>("projector");
        for (Topology t : {Topology::Ring, Topology::Star, Topology::Chain})
            for (int n : {1, 2, 4, 8, 16})
                for (QSize size : {QSize(1024, 768), QSize(800, 500)})
                    for (bool projector : {false, true})
                        QTest::addRow("%s %d nodes %dx%d%s", qPrintable(topologyName(t)), n, size.width(),
                                      size.height(), projector ? " projector" : "")
                            << t << n << 0 << size << projector;
        QTest::newRow("ring 6 + 3 not in run") << Topology::Ring << 6 << 3 << QSize(800, 500) << false;
        QTest::newRow("star 8 + 2 not in run, projector")
            << Topology::Star << 8 << 2 << QSize(1024, 768) << true;
        QTest::newRow("chain 12 + 4 not in run") << Topology::Chain << 12 << 4 << QSize(1024, 768) << false;
        QTest::newRow("none in run") << Topology::Ring << 0 << 5 << QSize(800, 500) << true;
        QTest::newRow("ring 16 at 1920x1080 projector")
            << Topology::Ring << 16 << 0 << QSize(1920, 1080) << true;
        QTest::newRow("chain 4 at 1920x1080") << Topology::Chain << 4 << 0 << QSize(1920, 1080) << false;
        // A class: 32 and 64 nodes, in the window's cluster view at 1600x1000
        // (about 940x560) and at 1024x768 with projector fonts (about 680x330),
        // and the whole widget at 1024x768.
        for (Topology t : {Topology::Ring, Topology::Star, Topology::Chain})
            for (int n : {32, 64})
                for (QSize size : {QSize(940, 560), QSize(680, 330), QSize(1024, 768)})
                    QTest::addRow("%s %d nodes %dx%d", qPrintable(topologyName(t)), n, size.width(), size.height())
                        << t << n << 0 << size << (size.width() != 940);
        QTest::newRow("64 not in run, projector") << Topology::Ring << 0 << 64 << QSize(680, 330) << true;
        QTest::newRow("48 + 16 not in run, projector") << Topology::Ring << 48 << 16 << QSize(1024, 768) << true;
        QTest::newRow("30 + 2 not in run") << Topology::Chain << 30 << 2 << QSize(940, 560) << false;
    }

    void layoutFitsAndKeepsNodesApart()
    {
        QFETCH(Topology, topology);
        QFETCH(int, nodes);
        QFETCH(int, outOfRun);
        QFETCH(QSize, size);
        QFETCH(bool, projector);

        ClusterView view;
        view.resize(size);
        view.setProjectorMode(projector);
        view.setState(makeState(topology, nodes, outOfRun));
        const QRectF bounds(QPointF(0, 0), QSizeF(size));

        QVector<QRectF> rects;
        for (int id = 0; id < nodes + outOfRun; ++id) {
            const QRectF r = view.nodeRect(id);
            QVERIFY2(!r.isEmpty(), qPrintable(QStringLiteral("node %1 has no box").arg(id)));
            QVERIFY2(bounds.contains(r), qPrintable(QStringLiteral("node %1 leaves the widget").arg(id)));
            QCOMPARE(view.nodeAt(r.center()), id);
            for (int other = 0; other < rects.size(); ++other)
                QVERIFY2(!r.intersects(rects[other]),
                         qPrintable(QStringLiteral("nodes %1 and %2 overlap").arg(id).arg(other)));
            rects << r;
        }
        QVERIFY(view.nodeRect(nodes + outOfRun).isEmpty());
        QCOMPARE(view.nodeAt(QPointF(1, 1)), -1);

        // Readable: full boxes keep a minimum size; compact ones (many
        // nodes) room for a two-digit rank beside its state strip, and its bar.
        const QSize least = view.isCompact() ? QSize(34, 22) : QSize(60, 34);
        for (const QRectF &r : rects)
            QVERIFY2(r.width() >= least.width() && r.height() >= least.height(),
                     qPrintable(QStringLiteral("box %1x%2 too small").arg(r.width()).arg(r.height())));
        QVERIFY2(nodes + outOfRun >= 12 || !view.isCompact(), "compact boxes for a handful of nodes");
        if (view.isCompact())
            for (int id = 0; id < nodes + outOfRun; ++id) { // the box shows who it is
                const QStringList text = view.nodeText(id);
                const QString label = id < nodes ? QString::number(id) : QStringLiteral("#%1").arg(id);
                QVERIFY2(!text.isEmpty() && text.first() == label, qPrintable(text.join('|')));
            }

        // Nodes not in the run sit below every node in it.
        for (int id = nodes; id < nodes + outOfRun; ++id)
            for (int rank = 0; rank < nodes; ++rank)
                QVERIFY(rects[id].top() > rects[rank].bottom());

        // Compact: a grid read like text, in rank order, then the nodes not
        // in the run in id order.
        if (view.isCompact()) {
            for (int id = 0; id + 1 < nodes + outOfRun; ++id) {
                const QRectF a = rects[id], b = rects[id + 1];
                QVERIFY2((b.left() > a.right() && std::abs(b.top() - a.top()) < 1e-6) || b.top() > a.bottom(),
                         qPrintable(QStringLiteral("%1 is not after %2 in reading order").arg(id + 1).arg(id)));
            }
            return;
        }
        // The topology's order.
        if (nodes < 3)
            return;
        QPointF centroid;
        for (int rank = 0; rank < nodes; ++rank)
            centroid += rects[rank].center() / nodes;
        switch (topology) {
        case Topology::Ring: {
            // Clockwise once around (y grows downwards, so angles increase).
            double turned = 0;
            for (int rank = 0; rank < nodes; ++rank) {
                double step = angleAround(rects[(rank + 1) % nodes].center(), centroid) -
                              angleAround(rects[rank].center(), centroid);
                while (step <= 0)
                    step += 2 * M_PI;
                turned += step;
            }
            QVERIFY2(std::abs(turned - 2 * M_PI) < 1e-6, "ring not drawn clockwise in rank order");
            QVERIFY(rects[0].center().y() < centroid.y()); // rank 0 in the top half
            break;
        }
        case Topology::Star:
            QVERIFY(rects[0].contains(centroid));
            for (int rank = 1; rank < nodes; ++rank)
                QVERIFY(!rects[rank].contains(centroid));
            break;
        case Topology::Chain:
            // Reading order: right along a row, or down to the next one.
            for (int rank = 0; rank + 1 < nodes; ++rank) {
                const QRectF a = rects[rank], b = rects[rank + 1];
                QVERIFY((b.left() > a.right() && std::abs(b.top() - a.top()) < 1e-6) || b.top() > a.bottom());
            }
            break;
        }
    }

    // Whatever order the snapshot lists nodes in and whatever ids they have,
    // the boxes follow the ranks (and ids for the nodes not in the run).
    void nodesAreDrawnInRankOrder_data()
    {
        QTest::addColumn<int>("nodes");
        QTest::addColumn<QSize>("size");
        QTest::newRow("ring of 6") << 6 << QSize(1024, 768);
        QTest::newRow("grid of 16") << 16 << QSize(680, 330);
        QTest::newRow("grid of 64") << 64 << QSize(1024, 768);
    }

    void nodesAreDrawnInRankOrder()
    {
        QFETCH(int, nodes);
        QFETCH(QSize, size);
        const int idle = 3;
        auto s = std::const_pointer_cast<ClusterState>(makeState(Topology::Ring, nodes + idle));
        // Ranks a shuffle of the ids (as when nodes joined in another order than
        // they are ranked), three nodes out of the run, the list in neither order.
        QVector<int> rankOfId(nodes + idle);
        for (int id = 0; id < nodes + idle; ++id)
            rankOfId[id] = id;
        std::mt19937 random(7);
        std::shuffle(rankOfId.begin(), rankOfId.end(), random);
        for (NodeState &n : s->nodes) {
            n.rank = rankOfId[n.id] < nodes ? rankOfId[n.id] : -1;
            n.state = n.rank >= 0 ? NodeRunState::Running : NodeRunState::Idle;
        }
        std::shuffle(s->nodes.begin(), s->nodes.end(), random);
        s->links.clear();
        ClusterView view;
        view.resize(size);
        view.setState(s);
        QVector<int> idByRank(nodes), idleIds;
        for (const NodeState &n : s->nodes) {
            if (n.rank >= 0)
                idByRank[n.rank] = n.id;
            else
                idleIds << n.id;
        }
        std::sort(idleIds.begin(), idleIds.end());
        QVector<int> order = idByRank + idleIds;
        if (!view.isCompact()) { // the ring: clockwise from the top in rank order
            const QRectF first = view.nodeRect(order[0]);
            QVERIFY(first.center().y() < size.height() / 2);
            QPointF centroid;
            for (int r = 0; r < nodes; ++r)
                centroid += view.nodeRect(idByRank[r]).center() / nodes;
            for (int r = 0; r + 1 < nodes; ++r) {
                double step = angleAround(view.nodeRect(idByRank[r + 1]).center(), centroid) -
                              angleAround(view.nodeRect(idByRank[r]).center(), centroid);
                while (step <= 0)
                    step += 2 * M_PI;
                QVERIFY2(step < M_PI, qPrintable(QStringLiteral("rank %1 after %2").arg(r + 1).arg(r)));
            }
            order = idleIds;
        }
        for (int i = 0; i + 1 < order.size(); ++i) {
            const QRectF a = view.nodeRect(order[i]), b = view.nodeRect(order[i + 1]);
            QVERIFY2((b.left() > a.right() && std::abs(b.top() - a.top()) < 1e-6) || b.top() > a.bottom(),
                     qPrintable(QStringLiteral("node %1 is not after node %2").arg(order[i + 1]).arg(order[i])));
        }
    }

    // A failed node's box says "failed" and why, at the window's sizes; in
    // compact mode the header names it with its reason, and its box keeps a mark.
    void failedNodeSaysWhy_data()
    {
        QTest::addColumn<int>("nodes");
        QTest::addColumn<QSize>("size");
        QTest::addColumn<bool>("projector");
        QTest::newRow("4 nodes") << 4 << QSize(940, 560) << false;
        QTest::newRow("4 nodes projector") << 4 << QSize(680, 330) << true;
        QTest::newRow("3 nodes 800x500") << 3 << QSize(800, 500) << false;
        QTest::newRow("64 nodes") << 64 << QSize(680, 330) << true;
    }

    void failedNodeSaysWhy()
    {
        QFETCH(int, nodes);
        QFETCH(QSize, size);
        QFETCH(bool, projector);
        const QString reason = QStringLiteral("connect to 10.0.0.7:41234: Connection refused");
        auto s = std::const_pointer_cast<ClusterState>(makeState(Topology::Ring, nodes));
        s->nodes[1].state = NodeRunState::Failed;
        s->nodes[1].reason = reason;
        ClusterView view;
        view.resize(size);
        view.setProjectorMode(projector);
        view.setState(s);
        const QStringList failed = view.nodeText(1), other = view.nodeText(0);
        const QStringList failedWords = failed.filter(runStateName(NodeRunState::Failed));
        if (!view.isCompact()) {
            QVERIFY2(!failedWords.isEmpty(), qPrintable(failed.join('|')));
            // The reason, elided to the box at worst, but more than a word of it.
            bool why = false;
            for (QString line : failed) {
                line.remove(QChar(0x2026));
                why = why || (line.size() >= 12 && reason.startsWith(line));
            }
            QVERIFY2(why, qPrintable(failed.join('|')));
        } else {
            QVERIFY2(!failedWords.isEmpty() || failed.contains(QStringLiteral("!")), qPrintable(failed.join('|')));
        }
        QVERIFY(other.filter(runStateName(NodeRunState::Failed)).isEmpty());
        for (const QString &line : other)
            QVERIFY(!reason.startsWith(line.left(12)) || line.size() < 4);
        // In the pixels: the failed colour in its box, not in a running one's.
        const QImage image = render(view);
        const QColor colour = Palette::forMode(projector).state(NodeRunState::Failed);
        QVERIFY(pixelsOfColor(image, view.nodeRect(1).toAlignedRect(), colour) > 10);
        QCOMPARE(pixelsOfColor(image, view.nodeRect(0).toAlignedRect(), colour), 0);
        if (view.isCompact()) { // the header's third line, above every box, is in that colour
            double top = size.height();
            for (int id = 0; id < nodes; ++id)
                top = std::min(top, view.nodeRect(id).top());
            QVERIFY(pixelsOfColor(image, QRect(0, 0, size.width(), int(top)), colour) > 20);
        }
        // The tooltip has the whole reason.
        QVERIFY(nodeSummary(s->nodes[1]).contains(reason));
    }

    // On a device mesh every box gives its coordinates whole ("dp1 · pp0 ·
    // tp1", never elided), full or compact, 8 and 16 nodes, on a projector
    // in the window's cluster area at 1024x768 and on a large screen.
    void meshBoxesShowCoordinates_data()
    {
        QTest::addColumn<QString>("mesh");
        QTest::addColumn<QSize>("size");
        QTest::addColumn<bool>("projector");
        for (const char *mesh : {"dp=2,tp=2,pp=2", "dp=2,tp=2,pp=2,cp=2"})
            for (QSize size : {QSize(620, 330), QSize(760, 420), QSize(1000, 600)})
                for (bool projector : {false, true})
                    QTest::addRow("%s at %dx%d%s", mesh, size.width(), size.height(),
                                  projector ? " projector" : "")
                        << QString::fromLatin1(mesh) << size << projector;
    }

    void meshBoxesShowCoordinates()
    {
        QFETCH(QString, mesh);
        QFETCH(QSize, size);
        QFETCH(bool, projector);
        const auto grid = smol::net::DeviceMesh::parse(mesh.toStdString());
        auto s = std::const_pointer_cast<ClusterState>(makeState(Topology::Ring, grid.nodes()));
        s->mesh = mesh;
        ClusterView view;
        view.resize(size);
        view.setProjectorMode(projector);
        view.setState(s);
        for (int rank = 0; rank < grid.nodes(); ++rank) {
            const QString coords = QString::fromStdString(grid.coordsLabel(rank));
            const QStringList text = view.nodeText(rank);
            QVERIFY2(text.contains(coords), qPrintable(QStringLiteral("%1: %2").arg(coords, text.join(" | "))));
        }
        // The same state without the mesh: no coordinates.
        s->mesh.clear();
        view.setState(s);
        QVERIFY(!view.nodeText(0).join(' ').contains(QStringLiteral("dp0")));
    }

    void clickSelectsAndEmptySpaceClears()
    {
        ClusterView view;
        view.resize(1024, 768);
        view.setState(makeState(Topology::Ring, 4));
        view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        QSignalSpy spy(&view, &ClusterView::selectedNodeChanged);

        for (int id : {2, 0, 3}) {
            QTest::mouseClick(&view, Qt::LeftButton, {}, view.nodeRect(id).center().toPoint());
            QCOMPARE(spy.count(), 1);
            QCOMPARE(spy.takeFirst().at(0).toInt(), id);
            QCOMPARE(view.selectedNode(), id);
        }
        // Clicking the selected node again changes nothing.
        QTest::mouseClick(&view, Qt::LeftButton, {}, view.nodeRect(3).center().toPoint());
        QCOMPARE(spy.count(), 0);

        const QPoint empty(view.width() / 2, view.height() / 2); // the middle of the ring
        QCOMPARE(view.nodeAt(empty), -1);
        QTest::mouseClick(&view, Qt::LeftButton, {}, empty);
        QCOMPARE(spy.count(), 1);
        QCOMPARE(spy.takeFirst().at(0).toInt(), -1);
        QCOMPARE(view.selectedNode(), -1);

        // A new snapshot without the selected node clears the selection.
        QTest::mouseClick(&view, Qt::LeftButton, {}, view.nodeRect(3).center().toPoint());
        QCOMPARE(spy.count(), 1);
        spy.clear();
        view.setState(makeState(Topology::Ring, 3));
        QCOMPARE(spy.count(), 1);
        QCOMPARE(spy.takeFirst().at(0).toInt(), -1);
        view.setState(makeState(Topology::Ring, 2)); // nothing selected: nothing to say
        QCOMPARE(spy.count(), 0);
    }

    void renderShowsStateSelectionAndMode()
    {
        ClusterView view;
        view.resize(1024, 768);
        view.setState(
            withStates(makeState(Topology::Ring, 4),
                       {{1, NodeRunState::Lost}, {2, NodeRunState::Slow}, {3, NodeRunState::Paused}}));
        const QImage normal = render(view);
        QVERIFY(pixelsUnlikeBackground(normal) > 1024 * 768 / 50);

        // The lost badge's colour is inside the lost node's box, not in the others.
        const QColor lost = Palette::normal().state(NodeRunState::Lost);
        QVERIFY(pixelsOfColor(normal, view.nodeRect(1).toAlignedRect(), lost) > 20);
        QCOMPARE(pixelsOfColor(normal, view.nodeRect(0).toAlignedRect(), lost), 0);
        QVERIFY(pixelsOfColor(normal, view.nodeRect(2).toAlignedRect(),
                              Palette::normal().state(NodeRunState::Slow)) > 20);

        // Selection: a thick outline around the box.
        const QColor selection = Palette::normal().selection;
        const QRect around = view.nodeRect(0).adjusted(-8, -8, 8, 8).toAlignedRect();
        QCOMPARE(pixelsOfColor(normal, around, selection), 0);
        view.setSelectedNode(0);
        QVERIFY(pixelsOfColor(render(view), around, selection) > 100);
        view.setSelectedNode(-1);

        view.setProjectorMode(true);
        const QImage projector = render(view);
        QVERIFY(pixelsUnlikeBackground(projector) > 1024 * 768 / 50);
        QVERIFY(projector != normal);
        QVERIFY(pixelsOfColor(projector, view.nodeRect(1).toAlignedRect(),
                              Palette::projector().state(NodeRunState::Lost)) > 20);

        // An empty view still draws (a hint), and differs from a cluster.
        ClusterView empty;
        empty.resize(1024, 768);
        QVERIFY(pixelsUnlikeBackground(render(empty)) > 0);
        QVERIFY(empty.nodeRect(0).isEmpty());
        QCOMPARE(empty.nodeAt(QPointF(512, 384)), -1);
    }

    void linksThickenWithTraffic()
    {
        // Pixels in the link colour (the shaft and head of the arrow) for a
        // two-node ring whose one link carries `rate` bytes/s.
        const auto linkPixels = [](double rate) {
            auto s = std::const_pointer_cast<ClusterState>(makeState(Topology::Ring, 2));
            s->links = {LinkState{0, 1, rate, 0, 0}};
            ClusterView view;
            view.resize(800, 500);
            view.setState(s);
            return pixelsOfColor(render(view), QRect(0, 0, 800, 500), Palette::normal().link);
        };
        const int idle = linkPixels(0), slow = linkPixels(2e3), medium = linkPixels(2e6), fast = linkPixels(2e9);
        QCOMPARE(idle, 0); // a thin grey line, no arrow
        QVERIFY2(slow > 0 && slow < medium && medium < fast,
                 qPrintable(QStringLiteral("%1 %2 %3").arg(slow).arg(medium).arg(fast)));
        QCOMPARE(fast, linkPixels(5e9)); // clamped from 1 GB/s up
    }

    void formatting_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addColumn<QString>("expected");
        QTest::newRow("bytes") << formatBytes(512) << QStringLiteral("512 B");
        QTest::newRow("KiB") << formatBytes(12 * 1024 + 512) << QStringLiteral("12.5 KiB");
        QTest::newRow("MiB") << formatBytes(std::int64_t(2.9 * kMiB)) << QStringLiteral("2.9 MiB");
        QTest::newRow("MiB over 100") << formatBytes(250 * kMiB) << QStringLiteral("250 MiB");
        QTest::newRow("GiB") << formatBytes(1280 * kMiB) << QStringLiteral("1.25 GiB");
        QTest::newRow("idle link") << formatRate(0) << QStringLiteral("0 B/s");
        QTest::newRow("B/s") << formatRate(830) << QStringLiteral("830 B/s");
        QTest::newRow("kB/s") << formatRate(4.8e3) << QStringLiteral("4.8 kB/s");
        QTest::newRow("MB/s") << formatRate(12.3e6) << QStringLiteral("12.3 MB/s");
        QTest::newRow("GB/s") << formatRate(1.5e9) << QStringLiteral("1.5 GB/s");
    }

    void formatting()
    {
        QFETCH(QString, text);
        QFETCH(QString, expected);
        QCOMPARE(text, expected);
    }

    void memoryViewAxisTicks_data()
    {
        QTest::addColumn<double>("maxMiB");
        QTest::addColumn<QVector<double>>("expected");
        QTest::newRow("3.4 MiB") << 3.4 << QVector<double>{0, 1, 2, 3, 4};
        QTest::newRow("12 MiB") << 12.0 << QVector<double>{0, 5, 10, 15};
        QTest::newRow("100 MiB") << 100.0 << QVector<double>{0, 20, 40, 60, 80, 100};
        QTest::newRow("0.35 MiB") << 0.35 << QVector<double>{0, 0.1, 0.2, 0.3, 0.4};
        QTest::newRow("nothing yet") << 0.0 << QVector<double>{0, 0.2, 0.4, 0.6, 0.8, 1.0};
    }

    void memoryViewAxisTicks()
    {
        QFETCH(double, maxMiB);
        QFETCH(QVector<double>, expected);
        const QVector<double> ticks = MemoryView::axisTicks(maxMiB, 5);
        QCOMPARE(ticks.size(), expected.size());
        for (int i = 0; i < ticks.size(); ++i)
            QVERIFY2(std::abs(ticks[i] - expected[i]) < 1e-9, qPrintable(QString::number(ticks[i])));
    }

    void memoryViewRendersWithAndWithoutPredictions()
    {
        MemoryView view;
        view.resize(1024, 768);
        view.setState(makeState(Topology::Ring, 4, 0, /*predicted=*/false));
        const QImage plain = render(view);
        QVERIFY(pixelsUnlikeBackground(plain) > 1024 * 768 / 50);
        for (MemoryCategory c : kMemoryCategories)
            QVERIFY(pixelsOfColor(plain, plain.rect(), Palette::normal().category(c)) > 50);

        view.setState(makeState(Topology::Ring, 4, 0, /*predicted=*/true));
        const QImage predicted = render(view);
        QVERIFY(pixelsUnlikeBackground(predicted) > 1024 * 768 / 50);
        QVERIFY(predicted != plain);

        view.setProjectorMode(true);
        const QImage projector = render(view);
        QVERIFY(pixelsUnlikeBackground(projector) > 1024 * 768 / 50);
        QVERIFY(projector != predicted);

        MemoryView empty;
        empty.resize(1024, 768);
        QVERIFY(pixelsUnlikeBackground(render(empty)) > 0);
    }

    void saveScreenshots()
    {
        const QByteArray mode = qgetenv("SMOL_SAVE_PNG");
        if (mode.isEmpty())
            QSKIP("set SMOL_SAVE_PNG to save /tmp/cluster_view.png and /tmp/memory_view.png");

        auto base = makeState(Topology::Ring, 4, 1);
        auto s = std::const_pointer_cast<ClusterState>(
            withStates(base, {{2, NodeRunState::Slow}, {3, NodeRunState::Lost}}));
        s->links[2].bytesPerSecond = 0; // the lost node has stopped talking
        s->links[3].bytesPerSecond = 0;
        ClusterView cluster;
        cluster.resize(1024, 768);
        cluster.setProjectorMode(true);
        cluster.setState(s);
        cluster.setSelectedNode(1);
        QVERIFY(render(cluster).save(QStringLiteral("/tmp/cluster_view.png")));

        MemoryView memory;
        memory.resize(1024, 768);
        memory.setProjectorMode(true);
        memory.setState(s);
        QVERIFY(render(memory).save(QStringLiteral("/tmp/memory_view.png")));

        // A failed epoch, as the window shows it: 4 nodes, and a class of 64.
        for (int n : {4, 64}) {
            auto failed = std::const_pointer_cast<ClusterState>(makeState(Topology::Ring, n));
            failed->nodes[1].state = NodeRunState::Failed;
            failed->nodes[1].reason = QStringLiteral("epoch 1 (rank 1) ended: connect to 10.0.0.7:41234: Connection refused");
            ClusterView view;
            view.resize(n == 4 ? QSize(940, 560) : QSize(680, 330));
            view.setProjectorMode(n != 4);
            view.setState(failed);
            QVERIFY(render(view).save(QStringLiteral("/tmp/cluster_view_failed_%1.png").arg(n)));
        }

        if (mode != "all")
            return;
        struct Case {
            Topology topology;
            int nodes, outOfRun;
            QSize size;
            bool projector;
        };
        const Case gallery[] = {
            {Topology::Ring, 16, 0, {800, 500}, false},  {Topology::Ring, 8, 2, {1024, 768}, true},
            {Topology::Star, 8, 0, {1024, 768}, true},   {Topology::Star, 4, 0, {800, 500}, false},
            {Topology::Chain, 4, 0, {1024, 768}, true},  {Topology::Chain, 8, 0, {800, 500}, false},
            {Topology::Chain, 16, 0, {1024, 768}, true}, {Topology::Ring, 2, 0, {1920, 1080}, false},
            {Topology::Ring, 16, 0, {1024, 768}, true},  {Topology::Star, 16, 0, {1920, 1080}, true},
            {Topology::Ring, 32, 0, {940, 560}, false},  {Topology::Ring, 64, 0, {680, 330}, true},
            {Topology::Chain, 64, 0, {940, 560}, false}, {Topology::Ring, 48, 16, {1024, 768}, true},
        };
        for (const Case &c : gallery) {
            ClusterView view;
            view.resize(c.size);
            view.setProjectorMode(c.projector);
            view.setState(makeState(c.topology, c.nodes, c.outOfRun));
            const QString name = QStringLiteral("/tmp/cluster_view_%1_%2_%3x%4%5.png")
                                     .arg(topologyName(c.topology))
                                     .arg(c.nodes)
                                     .arg(c.size.width())
                                     .arg(c.size.height())
                                     .arg(c.projector ? QStringLiteral("_projector") : QString());
            QVERIFY(render(view).save(name));
        }
        MemoryView many;
        many.resize(800, 500);
        many.setState(makeState(Topology::Ring, 16));
        QVERIFY(render(many).save(QStringLiteral("/tmp/memory_view_16_800x500.png")));
    }
};

QTEST_MAIN(TestClusterView)
#include "tst_cluster_view.moc"
