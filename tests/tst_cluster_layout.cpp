// The cluster view's pure layout (widgets/cluster/cluster_layout.h), data
// driven over topologies, node counts, widget sizes and modes: every box
// inside the widget, below the header and apart from every other; the
// compact grid for a class, full boxes for a handful; every link joins the
// boxes of its two ranks (stubs leave and enter the right ones), carries
// its direction's rate and crosses no third box; rate labels cover no box;
// a layout is reused while only figures and rates change. A device mesh's
// run is its grid: tp neighbours adjacent, stages as columns in pp order,
// replicas as rows, each link coloured by the axis joining its ranks.
#include "widgets/cluster/cluster_layout.h"

#include <QFont>
#include <QSet>
#include <QTest>

#include <cmath>

using namespace smol::widgets;

Q_DECLARE_METATYPE(smol::widgets::Topology)

namespace {

const char *topologyName(Topology t)
{
    return t == Topology::Ring ? "ring" : t == Topology::Star ? "star" : "chain";
}

// `n` nodes in the run (id = rank), `outOfRun` more after them; traffic on
// the topology's edges as a run sends it (a ring one way, with its last
// edge idle; a chain's activations forward and gradients back; a star's
// workers to and from the server), at rates that differ per rank.
ClusterState makeState(Topology topology, int n, int outOfRun = 0)
{
    ClusterState s;
    s.strategy = QStringLiteral("test");
    s.topology = topology;
    s.step = 3;
    s.steps = 10;
    for (int i = 0; i < n + outOfRun; ++i) {
        NodeState node;
        node.id = i;
        node.rank = i < n ? i : -1;
        node.name = QStringLiteral("node-%1").arg(i);
        node.host = QStringLiteral("127.0.0.1");
        node.state = i < n ? NodeRunState::Running : NodeRunState::Idle;
        s.nodes << node;
    }
    const auto link = [&](int a, int b, double rate) { s.links << LinkState{a, b, rate, 0, 0}; };
    for (int r = 0; r < n; ++r) {
        const double rate = 1.5e4 * std::pow(10.0, r % 5);
        if (topology == Topology::Ring && n > 1) {
            link(r, (r + 1) % n, r == n - 1 ? 0.0 : rate);
        } else if (topology == Topology::Chain && r + 1 < n) {
            link(r, r + 1, rate);
            link(r + 1, r, rate / 3);
        } else if (topology == Topology::Star && r > 0) {
            link(r, 0, rate);
            link(0, r, rate / 2);
        }
    }
    return s;
}

// The topology's edges between ranks, lower rank first.
QSet<std::pair<int, int>> topologyEdges(Topology t, int n)
{
    QSet<std::pair<int, int>> edges;
    for (int r = 0; r < n; ++r) {
        if (t == Topology::Ring && n > 1 && r != (r + 1) % n)
            edges.insert({std::min(r, (r + 1) % n), std::max(r, (r + 1) % n)});
        else if (t == Topology::Chain && r + 1 < n)
            edges.insert({r, r + 1});
        else if (t == Topology::Star && r > 0)
            edges.insert({0, r});
    }
    return edges;
}

double distanceToRect(QPointF p, const QRectF &r)
{
    const double dx = std::max({r.left() - p.x(), 0.0, p.x() - r.right()});
    const double dy = std::max({r.top() - p.y(), 0.0, p.y() - r.bottom()});
    return std::hypot(dx, dy);
}

// Whether segment a-b passes through the inside of r (sampled finely
// enough for boxes tens of pixels wide).
bool crosses(QPointF a, QPointF b, const QRectF &r)
{
    const QRectF inside = r.adjusted(1, 1, -1, -1);
    const int samples = std::max(2, int(QLineF(a, b).length()));
    for (int i = 0; i <= samples; ++i)
        if (inside.contains(a + (b - a) * (double(i) / samples)))
            return true;
    return false;
}

// A run on `spec`'s mesh, every node in it; traffic on each axis's groups
// one way round (pp forward and back), at rates that differ per axis.
ClusterState makeMeshState(const QString &spec)
{
    const smol::net::DeviceMesh mesh = smol::net::DeviceMesh::parse(spec.toStdString());
    ClusterState s = makeState(Topology::Ring, mesh.nodes());
    s.links.clear();
    s.mesh = spec;
    for (int r = 0; r < mesh.nodes(); ++r)
        for (smol::net::MeshAxis axis : smol::net::kMeshAxes) {
            const std::vector<int> g = mesh.group(r, axis);
            const int at = mesh.coordsOf(r).of(axis), size = int(g.size());
            const double rate = 2e4 * std::pow(10.0, int(axis));
            if (axis == smol::net::MeshAxis::Pp) {
                if (at + 1 < size) {
                    s.links << LinkState{r, g[std::size_t(at) + 1], rate, 0, 0};
                    s.links << LinkState{g[std::size_t(at) + 1], r, rate / 2, 0, 0};
                }
            } else if (size > 1) {
                s.links << LinkState{r, g[std::size_t((at + 1) % size)], rate, 0, 0};
            }
        }
    return s;
}

} // namespace

class TestClusterLayout : public QObject {
    Q_OBJECT

private:
    QFont m_font; // the application's default, as a widget's is

private Q_SLOTS:
    void boxesAndLinks_data()
    {
        QTest::addColumn<Topology>("topology");
        QTest::addColumn<int>("nodes");
        QTest::addColumn<int>("outOfRun");
        QTest::addColumn<QSize>("size");
        QTest::addColumn<bool>("projector");
        for (Topology t : {Topology::Ring, Topology::Star, Topology::Chain})
            for (int n : {4, 16, 64})
                for (QSize size : {QSize(1024, 768), QSize(1600, 1000)})
                    for (bool projector : {false, true})
                        QTest::addRow("%s %d at %dx%d%s", topologyName(t), n, size.width(), size.height(),
                                      projector ? " projector" : "")
                            << t << n << 0 << size << projector;
        QTest::newRow("ring 6 + 3 not in run at 800x500")
            << Topology::Ring << 6 << 3 << QSize(800, 500) << false;
        QTest::newRow("chain 30 + 2 not in run at 940x560")
            << Topology::Chain << 30 << 2 << QSize(940, 560) << false;
        QTest::newRow("star 48 + 16 not in run at 1024x768 projector")
            << Topology::Star << 48 << 16 << QSize(1024, 768) << true;
        QTest::newRow("ring 2 at 1920x1080") << Topology::Ring << 2 << 0 << QSize(1920, 1080) << false;
    }

    void boxesAndLinks()
    {
        QFETCH(Topology, topology);
        QFETCH(int, nodes);
        QFETCH(int, outOfRun);
        QFETCH(QSize, size);
        QFETCH(bool, projector);
        const ClusterState state = makeState(topology, nodes, outOfRun);
        const ClusterLayout l = ClusterLayout::compute(&state, size, projector, m_font);
        const QRectF widget(QPointF(0, 0), QSizeF(size));

        // Boxes: one per node, inside the widget, under the header, apart, hit by their centres.
        QCOMPARE(l.rects.size(), nodes + outOfRun);
        QVERIFY(widget.contains(l.header));
        for (int id = 0; id < nodes + outOfRun; ++id) {
            const QRectF r = l.nodeRect(id);
            QVERIFY2(!r.isEmpty() && widget.contains(r),
                     qPrintable(QStringLiteral("node %1 leaves the widget").arg(id)));
            QVERIFY2(r.top() >= l.header.bottom(),
                     qPrintable(QStringLiteral("node %1 under the header").arg(id)));
            QCOMPARE(l.nodeAt(r.center()), id);
            for (int other = 0; other < id; ++other)
                QVERIFY2(!r.intersects(l.nodeRect(other)),
                         qPrintable(QStringLiteral("nodes %1 and %2 overlap").arg(id).arg(other)));
            if (id >= nodes) // nodes not in the run below every node in it
                for (int rank = 0; rank < nodes; ++rank)
                    QVERIFY(r.top() > l.nodeRect(rank).bottom());
        }
        QCOMPARE(l.nodeAt(QPointF(1, 1)), -1);

        // Full boxes for a handful of nodes; the compact grid once full boxes
        // would be too small to read (a class of 64 in projector type on
        // 1024x768); full boxes are readable, compact ones keep room for a
        // rank and a bar.
        if (nodes + outOfRun <= 9)
            QVERIFY(!l.compact);
        if (nodes >= 64 && projector && size.width() <= 1024)
            QVERIFY(l.compact);
        QVERIFY(l.compact || l.readable());
        // Full boxes: three lines of text at no less than the mode's smallest box font.
        const ClusterMetrics m = l.metrics();
        QVERIFY(l.compact || l.fontPx >= m.minFont);
        const QSizeF least = l.compact ? QSizeF(34, 22) : QSizeF(5 * l.fontPx, 3 * l.fontPx);
        for (const QRectF &r : l.rects)
            QVERIFY2(r.width() >= least.width() && r.height() >= least.height(),
                     qPrintable(QStringLiteral("box %1x%2 too small").arg(r.width()).arg(r.height())));

        // Links: every topology edge drawn, each end at the box of its rank.
        const ClusterLinks links = l.links(state);
        QSet<std::pair<int, int>> drawn;
        for (const ClusterLink &line : links.lines) {
            QVERIFY(line.points.size() >= 2);
            drawn.insert({std::min(line.src, line.dst), std::max(line.src, line.dst)});
            const QRectF from = l.nodeRect(l.idOfRank.value(line.src, -1));
            const QRectF to = l.nodeRect(l.idOfRank.value(line.dst, -1));
            QVERIFY(!from.isEmpty() && !to.isEmpty());
            const auto endsAt = [&](QPointF p, const QRectF &box) {
                const double d = distanceToRect(p, box);
                bool nearest = true;
                for (const QRectF &r : l.rects)
                    nearest = nearest && (r == box || distanceToRect(p, r) > d);
                return d > 0 && d <= 0.6 * l.fontPx + 4 && nearest;
            };
            const QString where = QStringLiteral("link %1 -> %2").arg(line.src).arg(line.dst);
            if (line.part != ClusterLink::Part::Arriving)
                QVERIFY2(endsAt(line.points.first(), from),
                         qPrintable(where + QStringLiteral(" leaves elsewhere")));
            if (line.part != ClusterLink::Part::Leaving)
                QVERIFY2(endsAt(line.points.last(), to),
                         qPrintable(where + QStringLiteral(" arrives elsewhere")));
            if (line.part == ClusterLink::Part::Whole && !l.compact)
                for (int i = 0; i + 1 < line.points.size(); ++i)
                    for (auto it = l.rects.cbegin(); it != l.rects.cend(); ++it)
                        if (it.value() != from && it.value() != to)
                            QVERIFY2(!crosses(line.points[i], line.points[i + 1], it.value()),
                                     qPrintable(where + QStringLiteral(" crosses node %1").arg(it.key())));
        }
        QCOMPARE(drawn, topologyEdges(topology, nodes));

        // Each direction that carries traffic is a line of its own with its
        // rate (twice for a wrapped stub pair); a faster line is no thinner.
        for (const LinkState &traffic : state.links) {
            if (traffic.bytesPerSecond <= 0)
                continue;
            int found = 0;
            for (const ClusterLink &line : links.lines)
                if (line.src == traffic.src && line.dst == traffic.dst) {
                    QCOMPARE(line.bytesPerSecond, traffic.bytesPerSecond);
                    ++found;
                }
            QVERIFY2(
                found == 1 || (l.compact && found == 2),
                qPrintable(
                    QStringLiteral("%1 -> %2 drawn %3 times").arg(traffic.src).arg(traffic.dst).arg(found)));
        }
        for (const ClusterLink &a : links.lines)
            for (const ClusterLink &b : links.lines)
                if (a.bytesPerSecond > 0 && a.bytesPerSecond < b.bytesPerSecond)
                    QVERIFY(a.width <= b.width);

        // Rate labels inside the widget, on no box and no other label.
        for (int i = 0; i < links.labels.size(); ++i) {
            const QRectF r = links.labels[i].rect;
            QVERIFY(widget.contains(r));
            QVERIFY(links.labels[i].text.endsWith(QStringLiteral("B/s")));
            for (const QRectF &box : l.rects)
                QVERIFY(!r.intersects(box));
            for (int j = 0; j < i; ++j)
                QVERIFY(!r.intersects(links.labels[j].rect));
        }
    }

    // As the class grows in a fixed window (projector type): full boxes for
    // a handful, readable while they last, and the compact grid for 64.
    // (Not monotonic: a ring of 24 may fit full boxes where 20 did not.)
    void compactForAClass_data()
    {
        QTest::addColumn<Topology>("topology");
        QTest::addColumn<QSize>("size");
        for (Topology t : {Topology::Ring, Topology::Star, Topology::Chain})
            for (QSize size : {QSize(1024, 768), QSize(680, 330)})
                QTest::addRow("%s at %dx%d", topologyName(t), size.width(), size.height()) << t << size;
    }

    void compactForAClass()
    {
        QFETCH(Topology, topology);
        QFETCH(QSize, size);
        for (int n = 1; n <= 64; ++n) {
            const ClusterState state = makeState(topology, n);
            const ClusterLayout l = ClusterLayout::compute(&state, size, true, m_font);
            QVERIFY2(l.compact || l.readable(), qPrintable(QStringLiteral("unreadable at %1 nodes").arg(n)));
            QVERIFY2(n > 8 || !l.compact, qPrintable(QStringLiteral("compact at %1 nodes").arg(n)));
            QVERIFY2(n < 64 || l.compact, "full boxes for 64 nodes");
        }
    }

    // The mesh's grid: every box inside and apart; tp neighbours side by
    // side, closer than stages; stages left to right in pp order; replicas
    // top to bottom, cp ranks inside them closer than replicas; every
    // group's edge drawn, from box to box, crossing no third box, in its axis.
    void meshGrid_data()
    {
        QTest::addColumn<QString>("mesh");
        QTest::addColumn<QSize>("size");
        QTest::addColumn<bool>("projector");
        for (const char *mesh :
             {"dp=2,tp=2,pp=2", "dp=2,tp=2,pp=2,cp=2", "tp=4,pp=2", "dp=4,cp=2", "dp=2,tp=2"})
            for (QSize size : {QSize(1024, 768), QSize(1600, 1000), QSize(630, 330)})
                for (bool projector : {false, true})
                    QTest::addRow("%s at %dx%d%s", mesh, size.width(), size.height(),
                                  projector ? " projector" : "")
                        << QString::fromLatin1(mesh) << size << projector;
    }

    void meshGrid()
    {
        using smol::net::MeshAxis;
        QFETCH(QString, mesh);
        QFETCH(QSize, size);
        QFETCH(bool, projector);
        const ClusterState state = makeMeshState(mesh);
        const smol::net::DeviceMesh grid = smol::net::DeviceMesh::parse(mesh.toStdString());
        const ClusterLayout l = ClusterLayout::compute(&state, size, projector, m_font);
        QVERIFY(l.mesh == grid);
        const QRectF widget(QPointF(0, 0), QSizeF(size));
        const int n = grid.nodes();
        QCOMPARE(l.rects.size(), n);
        for (int id = 0; id < n; ++id) {
            const QRectF r = l.nodeRect(id);
            QVERIFY2(widget.contains(r) && r.top() >= l.header.bottom(),
                     qPrintable(QStringLiteral("node %1 outside").arg(id)));
            for (int other = 0; other < id; ++other)
                QVERIFY2(!r.adjusted(-2, -2, 2, 2).intersects(l.nodeRect(other)),
                         qPrintable(QStringLiteral("nodes %1 and %2 touch").arg(id).arg(other)));
        }
        // 8 nodes in a 4 x 2 grid on a 1024x768 screen: full boxes, readable.
        const int cols = grid.size(MeshAxis::Pp) * grid.size(MeshAxis::Tp);
        const int rows = grid.size(MeshAxis::Dp) * grid.size(MeshAxis::Cp);
        if (cols <= 4 && rows <= 2 && size.width() >= 1024)
            QVERIFY(!l.compact);
        QVERIFY(l.compact || l.readable());

        const auto rect = [&](const smol::net::MeshCoords &c) { return l.nodeRect(grid.rankOf(c)); };
        double tpGap = 1e9, stageGap = 0, cpGap = 1e9, replicaGap = 0;
        for (int r = 0; r < n; ++r) {
            const smol::net::MeshCoords c = grid.coordsOf(r);
            const QRectF box = rect(c);
            auto next = c;
            if (++next.tp < grid.size(MeshAxis::Tp)) { // the tp neighbour: right beside it
                QCOMPARE(rect(next).top(), box.top());
                QVERIFY(rect(next).left() > box.right());
                tpGap = std::min(tpGap, rect(next).left() - box.right());
            }
            next = c;
            if (++next.pp < grid.size(MeshAxis::Pp)) { // the next stage: to the right, same row
                QCOMPARE(rect(next).top(), box.top());
                QVERIFY(rect(next).left() > box.right());
                if (c.tp == grid.size(MeshAxis::Tp) - 1)
                    stageGap = std::max(stageGap, rect({c.dp, c.pp + 1, c.cp, 0}).left() - box.right());
            }
            next = c;
            if (++next.cp < grid.size(MeshAxis::Cp)) { // the next cp rank: below, same column
                QCOMPARE(rect(next).left(), box.left());
                QVERIFY(rect(next).top() > box.bottom());
                cpGap = std::min(cpGap, rect(next).top() - box.bottom());
            }
            next = c;
            if (++next.dp < grid.size(MeshAxis::Dp)) { // the next replica: below, same column
                QCOMPARE(rect(next).left(), box.left());
                QVERIFY(rect(next).top() > box.bottom());
                if (c.cp == grid.size(MeshAxis::Cp) - 1)
                    replicaGap = std::max(replicaGap, rect({c.dp + 1, c.pp, 0, c.tp}).top() - box.bottom());
            }
        }
        if (grid.size(MeshAxis::Tp) > 1 && grid.size(MeshAxis::Pp) > 1)
            QVERIFY2(tpGap < stageGap,
                     qPrintable(QStringLiteral("tp gap %1, stage gap %2").arg(tpGap).arg(stageGap)));
        if (grid.size(MeshAxis::Cp) > 1 && grid.size(MeshAxis::Dp) > 1)
            QVERIFY2(cpGap <= replicaGap,
                     qPrintable(QStringLiteral("cp gap %1, dp gap %2").arg(cpGap).arg(replicaGap)));

        // Links: each axis's group edges, from box to box, around every third box, in the axis's colour.
        QSet<std::pair<int, int>> expected, drawn;
        for (int r = 0; r < n; ++r)
            for (MeshAxis axis : smol::net::kMeshAxes) {
                const std::vector<int> g = grid.group(r, axis);
                for (std::size_t i = 0; i + 1 < g.size(); ++i)
                    expected.insert({std::min(g[i], g[i + 1]), std::max(g[i], g[i + 1])});
                if (g.size() > 2 && axis != MeshAxis::Pp)
                    expected.insert({std::min(g.front(), g.back()), std::max(g.front(), g.back())});
            }
        const ClusterLinks links = l.links(state);
        for (const ClusterLink &line : links.lines) {
            const QString where = QStringLiteral("link %1 -> %2").arg(line.src).arg(line.dst);
            QVERIFY2(line.points.size() >= 2, qPrintable(where));
            drawn.insert({std::min(line.src, line.dst), std::max(line.src, line.dst)});
            QVERIFY2(line.axis && line.axis == linkAxis(grid, line.src, line.dst), qPrintable(where));
            const QRectF from = l.nodeRect(line.src), to = l.nodeRect(line.dst);
            QVERIFY2(distanceToRect(line.points.first(), from) <= 0.6 * l.fontPx + 4, qPrintable(where));
            QVERIFY2(distanceToRect(line.points.last(), to) <= 0.6 * l.fontPx + 4, qPrintable(where));
            for (int i = 0; i + 1 < line.points.size(); ++i)
                for (auto it = l.rects.cbegin(); it != l.rects.cend(); ++it)
                    if (it.value() != from && it.value() != to)
                        QVERIFY2(!crosses(line.points[i], line.points[i + 1], it.value()),
                                 qPrintable(where + QStringLiteral(" crosses node %1").arg(it.key())));
            QVERIFY2(widget.contains(line.points[line.points.size() / 2]) &&
                         line.points[line.points.size() / 2].y() > l.header.bottom(),
                     qPrintable(where + QStringLiteral(" leaves the picture")));
        }
        QCOMPARE(drawn, expected);
        for (int i = 0; i < links.labels.size(); ++i)
            for (const QRectF &box : l.rects)
                QVERIFY(!links.labels[i].rect.intersects(box));
    }

    // The axis a link runs along: the one coordinate two ranks differ in;
    // dp for dp and cp together (the gradients' group); none otherwise.
    void meshLinkAxis()
    {
        using smol::net::MeshAxis;
        const auto mesh = smol::net::DeviceMesh::parse("dp=2,tp=2,pp=2,cp=2");
        // rank = ((dp * 2 + pp) * 2 + cp) * 2 + tp
        QCOMPARE(linkAxis(mesh, 0, 1), MeshAxis::Tp);
        QCOMPARE(linkAxis(mesh, 0, 2), MeshAxis::Cp);
        QCOMPARE(linkAxis(mesh, 0, 4), MeshAxis::Pp);
        QCOMPARE(linkAxis(mesh, 0, 8), MeshAxis::Dp);
        QCOMPARE(linkAxis(mesh, 0, 10), MeshAxis::Dp); // dp and cp
        QVERIFY(!linkAxis(mesh, 0, 3));                // tp and cp
        QVERIFY(!linkAxis(mesh, 0, 12));               // dp and pp
        QVERIFY(!linkAxis(smol::net::DeviceMesh(), 0, 1));
        QVERIFY(!linkAxis(mesh, 0, 16));
    }

    // Figures and rates move no box: the layout is reused; a new size, mode,
    // rank or alert makes a new one.
    void sameInputs()
    {
        const ClusterState state = makeState(Topology::Ring, 8);
        const ClusterLayout l = ClusterLayout::compute(&state, QSize(1024, 768), false, m_font);
        QVERIFY(l.sameInputs(&state, QSize(1024, 768), false, m_font));

        ClusterState busier = state;
        busier.step = 9;
        busier.links[0].bytesPerSecond *= 100;
        busier.nodes[3].memory.live = 1 << 20;
        QVERIFY(l.sameInputs(&busier, QSize(1024, 768), false, m_font));

        QVERIFY(!l.sameInputs(&state, QSize(1024, 767), false, m_font));
        QVERIFY(!l.sameInputs(&state, QSize(1024, 768), true, m_font));
        ClusterState reranked = state;
        std::swap(reranked.nodes[1].rank, reranked.nodes[2].rank);
        QVERIFY(!l.sameInputs(&reranked, QSize(1024, 768), false, m_font));
        ClusterState failed = state;
        failed.nodes[2].state = NodeRunState::Failed;
        failed.nodes[2].reason = QStringLiteral("connection refused");
        QVERIFY(!l.sameInputs(&failed, QSize(1024, 768), false, m_font));
        QVERIFY(!l.sameInputs(nullptr, QSize(1024, 768), false, m_font));
        ClusterState meshed = state;
        meshed.mesh = QStringLiteral("dp=2,tp=2,pp=2");
        QVERIFY(!l.sameInputs(&meshed, QSize(1024, 768), false, m_font));

        // Reranked: the boxes follow the ranks.
        const ClusterLayout r = ClusterLayout::compute(&reranked, QSize(1024, 768), false, m_font);
        QCOMPARE(r.nodeRect(1), l.nodeRect(2));
        QCOMPARE(r.nodeRect(2), l.nodeRect(1));
    }
};

QTEST_MAIN(TestClusterLayout)
#include "tst_cluster_layout.moc"
