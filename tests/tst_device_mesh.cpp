// The device mesh's rank grid (net/device_mesh.h) and its process groups
// (net/group_transport.h): parsing and refusing --mesh specs, picotron's rank
// order, the members of every axis group, and collectives running on every
// axis's groups at once over one set of links (inproc and TCP), each
// group's frames carrying its id.
#include "net/communicator.h"
#include "net/device_mesh.h"
#include "net/errors.h"
#include "net/group_transport.h"
#include "net/trace.h"

#include "rank_threads.h"

#include <QtTest>

#include <mutex>
#include <set>

using namespace smol::net;

class TestDeviceMesh : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void parsesAnySubsetOfAxes();
    void refusesBadSpecs_data();
    void refusesBadSpecs();
    void ranksInPicotronOrder();
    void groupsPartitionTheRanks();
    void collectivesOnEveryAxisAtOnce_data();
    void collectivesOnEveryAxisAtOnce();
    void groupRefusesBadMembers();
};

void TestDeviceMesh::parsesAnySubsetOfAxes()
{
    const DeviceMesh m = DeviceMesh::parse("tp=2,dp=3,pp=2", 12);
    QCOMPARE(m.size(MeshAxis::Dp), 3);
    QCOMPARE(m.size(MeshAxis::Tp), 2);
    QCOMPARE(m.size(MeshAxis::Pp), 2);
    QCOMPARE(m.size(MeshAxis::Cp), 1);
    QCOMPARE(m.nodes(), 12);
    QCOMPARE(QString::fromStdString(m.spec()), QString("dp=3,pp=2,tp=2"));
    QVERIFY(DeviceMesh::parse(m.spec()) == m);
    QCOMPARE(DeviceMesh::parse("cp=4").nodes(), 4);
    QCOMPARE(DeviceMesh::parse("dp=1,tp=1").nodes(), 1);
}

void TestDeviceMesh::refusesBadSpecs_data()
{
    QTest::addColumn<QString>("spec");
    QTest::addColumn<int>("nodes");
    QTest::addColumn<QString>("reason");
    QTest::newRow("product") << "dp=2,tp=2" << 8 << "multiply to 4";
    QTest::newRow("twice") << "dp=2,dp=2" << 4 << "named twice";
    QTest::newRow("unknown") << "ep=2" << 2 << "unknown axis 'ep'";
    QTest::newRow("zero") << "tp=0" << 0 << "from 1 to 64";
    QTest::newRow("huge") << "tp=65" << 0 << "from 1 to 64";
    QTest::newRow("not a number") << "tp=two" << 0 << "not 'two'";
    QTest::newRow("no size") << "tp" << 0 << "not AXIS=SIZE";
    QTest::newRow("empty item") << "tp=2,,dp=2" << 0 << "not AXIS=SIZE";
    QTest::newRow("empty") << "" << 0 << "empty";
}

void TestDeviceMesh::refusesBadSpecs()
{
    QFETCH(QString, spec);
    QFETCH(int, nodes);
    QFETCH(QString, reason);
    try {
        DeviceMesh::parse(spec.toStdString(), nodes);
        QFAIL("accepted");
    } catch (const std::invalid_argument &e) {
        const QString what = e.what();
        QVERIFY2(what.contains(reason), qPrintable(what));
        QVERIFY2(!what.contains('\n'), qPrintable(what));
    }
}

// tp fastest, then cp, pp, dp: rank = ((dp PP + pp) CP + cp) TP + tp.
void TestDeviceMesh::ranksInPicotronOrder()
{
    const DeviceMesh m(2, 2, 2, 2); // dp, pp, cp, tp
    int rank = 0;
    for (int dp = 0; dp < 2; ++dp)
        for (int pp = 0; pp < 2; ++pp)
            for (int cp = 0; cp < 2; ++cp)
                for (int tp = 0; tp < 2; ++tp, ++rank) {
                    QCOMPARE(m.rankOf({dp, pp, cp, tp}), rank);
                    const MeshCoords c = m.coordsOf(rank);
                    QCOMPARE(c.dp, dp);
                    QCOMPARE(c.pp, pp);
                    QCOMPARE(c.cp, cp);
                    QCOMPARE(c.tp, tp);
                }
    QCOMPARE(QString::fromStdString(DeviceMesh(2, 2, 1, 2).coordsLabel(5)), QString("dp1 \u00b7 pp0 \u00b7 tp1"));
}

void TestDeviceMesh::groupsPartitionTheRanks()
{
    const DeviceMesh m(2, 2, 2, 2);
    QCOMPARE(m.group(5, MeshAxis::Tp), (std::vector<int>{4, 5}));
    QCOMPARE(m.group(5, MeshAxis::Cp), (std::vector<int>{5, 7}));
    QCOMPARE(m.group(5, MeshAxis::Pp), (std::vector<int>{1, 5}));
    QCOMPARE(m.group(5, MeshAxis::Dp), (std::vector<int>{5, 13}));
    QCOMPARE(m.dataGroup(5), (std::vector<int>{5, 7, 13, 15}));
    for (MeshAxis axis : kMeshAxes) {
        std::set<std::vector<int>> groups;
        for (int r = 0; r < m.nodes(); ++r) {
            const std::vector<int> g = m.group(r, axis);
            QVERIFY(std::find(g.begin(), g.end(), r) != g.end());
            for (int other : g) // every member names the same group
                QCOMPARE(m.group(other, axis), g);
            groups.insert(g);
        }
        QCOMPARE(int(groups.size()), m.nodes() / m.size(axis)); // disjoint, covering
    }
}

namespace {

// Counts each group's frames by the id in their seq.
class GroupCounter : public TraceSink {
public:
    void onFrame(const FrameEvent &e) override
    {
        std::lock_guard lock(mutex);
        ++frames[groupOfSeq(e.seq)];
    }
    std::mutex mutex;
    std::map<std::uint32_t, int> frames;
};

} // namespace

void TestDeviceMesh::collectivesOnEveryAxisAtOnce_data()
{
    QTest::addColumn<bool>("tcp");
    QTest::newRow("inproc") << false;
    QTest::newRow("tcp") << true;
}

// On a 2 x 2 x 2 mesh (dp, pp, tp) every node all-reduces along tp, then
// dp, then pp, then sends along pp, interleaved on one world: each result
// is its own group's, never another group's frames.
void TestDeviceMesh::collectivesOnEveryAxisAtOnce()
{
    QFETCH(bool, tcp);
    const DeviceMesh mesh(2, 2, 1, 2);
    auto world = makeLocalMesh(tcp ? TransportKind::Tcp : TransportKind::Inproc, mesh.nodes(), "mesh-token");
    GroupCounter counter;
    for (auto &t : world)
        t->setTraceSink(&counter);
    const std::string error = smol::test::runRanks(world, [&](int rank, Communicator &comm) {
        auto groupComm = [&](MeshAxis axis) {
            auto t = std::make_shared<GroupTransport>(comm.transport(), mesh.group(rank, axis), DeviceMesh::groupId(axis));
            auto c = std::make_shared<Communicator>(*t);
            return std::make_pair(t, c);
        };
        auto [tpT, tp] = groupComm(MeshAxis::Tp);
        auto [dpT, dp] = groupComm(MeshAxis::Dp);
        auto [ppT, pp] = groupComm(MeshAxis::Pp);
        for (int round = 0; round < 3; ++round) {
            for (auto *c : {tp.get(), dp.get(), pp.get()}) {
                std::vector<float> v(1000, float(rank + 1));
                c->allReduce(viewOf(v.data(), v.size()), ReduceOp::Sum, "sum");
                const auto members = static_cast<GroupTransport &>(c->transport()).members();
                float want = 0;
                for (int m : members)
                    want += float(m + 1);
                for (float x : v)
                    if (x != want)
                        throw std::runtime_error("group sum " + std::to_string(x) + ", want " + std::to_string(want));
            }
            std::vector<float> msg(10, float(rank));
            if (pp->rank() == 0)
                pp->send(1, viewOf(msg.data(), msg.size()), "act");
            else {
                pp->recv(0, viewOf(msg.data(), msg.size()), "act");
                if (msg[0] != float(mesh.group(rank, MeshAxis::Pp)[0]))
                    throw std::runtime_error("pp message from the wrong rank");
            }
        }
        comm.barrier();
    });
    QVERIFY2(error.empty(), error.c_str());
    for (auto &t : world)
        t->setTraceSink(nullptr);
    std::lock_guard lock(counter.mutex);
    for (MeshAxis axis : {MeshAxis::Tp, MeshAxis::Dp, MeshAxis::Pp})
        QVERIFY2(counter.frames[DeviceMesh::groupId(axis)] > 0, meshAxisName(axis));
    QVERIFY(counter.frames[0] > 0); // the world's barrier
}

void TestDeviceMesh::groupRefusesBadMembers()
{
    auto world = makeLocalMesh(TransportKind::Inproc, 4, "t");
    QVERIFY_THROWS_EXCEPTION(NetError, GroupTransport(*world[0], {1, 2}, 1));    // not a member
    QVERIFY_THROWS_EXCEPTION(NetError, GroupTransport(*world[0], {0, 0}, 1));    // twice
    QVERIFY_THROWS_EXCEPTION(NetError, GroupTransport(*world[0], {0, 7}, 1));    // no such rank
    QVERIFY_THROWS_EXCEPTION(NetError, GroupTransport(*world[0], {0, 1}, 0));    // the world's id
    QVERIFY_THROWS_EXCEPTION(NetError, GroupTransport(*world[0], {0, 1}, 32));   // above the seq's room
    GroupTransport g(*world[2], {3, 2}, 4);
    QCOMPARE(g.rank(), 1);
    QCOMPARE(g.worldSize(), 2);
    QCOMPARE(g.worldRankOf(0), 3);
}

QTEST_GUILESS_MAIN(TestDeviceMesh)
#include "tst_device_mesh.moc"
