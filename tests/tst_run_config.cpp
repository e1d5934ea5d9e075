// A run's settings and the engine's configuration are one fact in two
// vocabularies (app/bridge/run_config.h): every field the window sets
// reaches the engine and comes back, the mesh among them. A mesh that
// cannot run is refused before Start in one line naming it
// (app/bridge/run_check.h), and `smolcluster --mesh` sets the nodes to its
// product (app/window/gui_options.h).
#include "app/bridge/run_check.h"
#include "app/bridge/run_config.h"
#include "app/window/gui_options.h"
#include "engine/trainer.h"

#include <QtTest>

using namespace smol::app;

class TestRunConfig : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void roundTrip()
    {
        RunSettings s;
        s.strategy = QStringLiteral("zero1");
        s.model = QStringLiteral("gpt");
        s.nodes = 8;
        s.steps = 17;
        s.globalBatch = 64;
        s.seed = 5;
        s.optimizer = QStringLiteral("adam");
        s.lr = 0.003;
        s.microBatches = 4;
        s.schedule = QStringLiteral("gpipe");
        s.backend = QStringLiteral("gloo");
        s.mesh = QStringLiteral("dp=2,tp=2,pp=2");
        const smol::engine::TrainConfig c = trainConfigOf(s);
        QCOMPARE(c.mesh, std::string("dp=2,tp=2,pp=2"));
        QCOMPARE(c.nodes, 8);
        const RunSettings back = runSettingsOf(c);
        QCOMPARE(back.mesh, s.mesh);
        QCOMPARE(back.strategy, s.strategy);
        QCOMPARE(back.model, s.model);
        QCOMPARE(back.nodes, s.nodes);
        QCOMPARE(back.steps, s.steps);
        QCOMPARE(back.globalBatch, s.globalBatch);
        QCOMPARE(back.seed, s.seed);
        QCOMPARE(back.optimizer, s.optimizer);
        QCOMPARE(back.lr, s.lr);
        QCOMPARE(back.microBatches, s.microBatches);
        QCOMPARE(back.schedule, s.schedule);
        QCOMPARE(back.backend, s.backend);
        // No mesh: none either way.
        QVERIFY(trainConfigOf(RunSettings{}).mesh.empty());
        QVERIFY(runSettingsOf(smol::engine::TrainConfig{}).mesh.isEmpty());
    }

    void meshProblems_data()
    {
        QTest::addColumn<QString>("mesh");
        QTest::addColumn<QString>("model");
        QTest::addColumn<QString>("strategy");
        QTest::addColumn<int>("nodes");
        QTest::addColumn<QString>("problem"); // "" = none
        QTest::addColumn<QString>("fix");     // the first fix's label, "" = none
        QTest::newRow("fits") << "dp=2,tp=2,pp=2"
                              << "gpt"
                              << "ddp" << 8 << ""
                              << "";
        QTest::newRow("dp x pp on the mlp") << "dp=2,pp=2"
                                            << "mlp"
                                            << "zero1" << 4 << ""
                                            << "";
        QTest::newRow("product") << "dp=2,tp=2,pp=2"
                                 << "gpt"
                                 << "ddp" << 4 << "Mesh dp=2,tp=2,pp=2 has 8 nodes, not 4."
                                 << "Use 8 nodes";
        QTest::newRow("unknown axis") << "dp=2,xp=2"
                                      << "gpt"
                                      << "ddp" << 4 << "Mesh dp=2,xp=2: unknown axis 'xp'"
                                      << "";
        QTest::newRow("tp on the mlp")
            << "dp=2,tp=2"
            << "mlp"
            << "ddp" << 4 << "Mesh dp=2,tp=2: tp and cp split the gpt's attention; the mlp has none."
            << "Use the gpt";
        QTest::newRow("zero3 on dp") << "dp=2,pp=2"
                                     << "gpt"
                                     << "zero3" << 4 << ""
                                     << "";
        QTest::newRow("pipeline on dp") << "dp=2,pp=2"
                                        << "gpt"
                                        << "pipeline" << 4 << "Mesh dp=2,pp=2: "
                                        << "";
    }

    void meshProblems()
    {
        QFETCH(QString, mesh);
        QFETCH(QString, model);
        QFETCH(QString, strategy);
        QFETCH(int, nodes);
        QFETCH(QString, problem);
        QFETCH(QString, fix);
        RunSettings s;
        s.mesh = mesh;
        s.model = model;
        s.strategy = strategy;
        s.nodes = nodes;
        const auto p = checkRun(s, [](const QString &) { return 4; });
        if (problem.isEmpty()) {
            QVERIFY2(!p, p ? qPrintable(p->text) : "");
            return;
        }
        QVERIFY(p);
        QVERIFY2(p->text.startsWith(problem), qPrintable(p->text));
        QVERIFY2(!p->text.contains('\n'), "one line");
        if (fix.isEmpty())
            return;
        QVERIFY(!p->fixes.isEmpty());
        QCOMPARE(p->fixes.first().label, fix);
        QVERIFY(!checkRun(p->fixes.first().settings, [](const QString &) { return 4; }));
    }

    void commandLineMesh()
    {
        const auto parse = [](const QStringList &args) {
            return parseGuiOptions(QStringList{QStringLiteral("smolcluster")} + args);
        };
        const GuiOptions o = parse({"--mesh", "dp=2,tp=2,pp=2,cp=2", "--model", "gpt"});
        QVERIFY2(o.error.isEmpty(), qPrintable(o.error));
        QCOMPARE(o.mesh, QStringLiteral("dp=2,tp=2,pp=2,cp=2"));
        QCOMPARE(o.nodes, 16);
        QCOMPARE(o.model, QStringLiteral("gpt"));
        QVERIFY(parse({"--mesh", "dp=2,pp=2", "--nodes", "4"}).error.isEmpty());
        QVERIFY(parse({"--mesh", "dp=2,pp=2", "--nodes", "3"}).error.contains("--nodes says 3"));
        QCOMPARE(parse({"--mesh", "dp=2,zz=2"}).error.count("--mesh"), 1);
        QVERIFY(parse({"--mesh", "dp=2,zz=2"}).error.startsWith("--mesh dp=2,zz=2: unknown axis 'zz'"));
        QVERIFY(parse({"--model", "bert"}).error.contains("--model takes mlp or gpt"));
    }
};

QTEST_GUILESS_MAIN(TestRunConfig)
#include "tst_run_config.moc"
