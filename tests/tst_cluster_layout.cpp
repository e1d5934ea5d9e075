// The cluster view's pure layout (widgets/cluster/cluster_layout.h), data
// driven over topologies, node counts, widget sizes and modes: every box
// inside the widget, below the header and apart from every other; the
// compact grid for a class, full boxes for a handful; every link joins the
// boxes of its two ranks (stubs leave and enter the right ones), carries
// its direction's rate and crosses no third box; rate labels cover no box;
// a layout is reused while only figures and rates change.
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

        // Reranked: the boxes follow the ranks.
        const ClusterLayout r = ClusterLayout::compute(&reranked, QSize(1024, 768), false, m_font);
        QCOMPARE(r.nodeRect(1), l.nodeRect(2));
        QCOMPARE(r.nodeRect(2), l.nodeRect(1));
    }
};

QTEST_MAIN(TestClusterLayout)
#include "tst_cluster_layout.moc"
