// Lesson files (app/lesson.h): the parser's line-and-field errors, the
// expression language, the rule that a revealed number is measured, value
// formatting, and the shipped lessons.
#include "app/lessons/lesson.h"

#include <QtTest>

#include <cmath>

using namespace smol::app;

namespace {

QString errorOf(const QString &text)
{
    try {
        parseLesson(text, QStringLiteral("t.lesson"));
    } catch (const LessonError &e) {
        return QString::fromUtf8(e.what());
    }
    return {};
}

const char kGood[] = R"(# a comment
lesson: Tiny
about: one line
about: two lines

step: Run it
text: first
text: second
run: name=a strategy=ddp nodes=3 batch=90 steps=5 slow=2:4 link=1:20:5 micro-batches=1
until: collective allgather params.fc1
focus: tab=memory node=2 steps=1-3 memory-lane
reveal: Bytes
measure: a.bytes_per_step / S
formula: 2*(N-1)/N
show: 2(N-1)/N
unit: ratio
tolerance: 2%

step: Edit
edit: scale 1 0.5
until: next
reveal: NaN ranks
measure: pause.nan_ranks
formula: 0
unit: count
tolerance: abs 0
)";

} // namespace

class TstLesson : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void parsesEveryField()
    {
        const Lesson l = parseLesson(QString::fromLatin1(kGood), QStringLiteral("t.lesson"));
        QCOMPARE(l.title, QStringLiteral("Tiny"));
        QCOMPARE(l.about, QStringLiteral("one line two lines"));
        QCOMPARE(l.steps.size(), 2);
        const LessonStep &s = l.steps[0];
        QCOMPARE(s.line, 6);
        QCOMPARE(s.text, QStringLiteral("first second"));
        const Lesson para = parseLesson("lesson: x\nstep: s\ntext: a\ntext:\ntext: b\n", "p.lesson");
        QCOMPARE(para.steps[0].text, QStringLiteral("a\nb"));
        QVERIFY(s.run);
        QCOMPARE(s.run->name, QStringLiteral("a"));
        QCOMPARE(s.run->settings.value("nodes"), QStringLiteral("3"));
        QCOMPARE(s.run->slowdown.value(2), 4.0);
        QCOMPARE(s.run->links.value(1).mbit, 20.0);
        QCOMPARE(s.run->links.value(1).latencyMs, 5.0);
        QCOMPARE(s.until.kind, LessonUntil::Kind::Collective);
        QCOMPARE(s.until.breakpoint(), QStringLiteral("allgather,name=params.fc1"));
        QCOMPARE(s.focus.tab, QStringLiteral("memory"));
        QCOMPARE(s.focus.rank, 2);
        QCOMPARE(s.focus.fromStep, 1);
        QCOMPARE(s.focus.toStep, 3);
        QVERIFY(s.focus.memoryLane);
        QCOMPARE(s.reveals.size(), 1);
        QCOMPARE(s.reveals[0].unit, LessonUnit::Ratio);
        QCOMPARE(s.reveals[0].tolerance, 0.02);
        QVERIFY(!s.reveals[0].absolute);
        QCOMPARE(s.reveals[0].line, 12);
        const LessonStep &e = l.steps[1];
        QVERIFY(!e.run);
        QVERIFY(e.edit);
        QCOMPARE(e.edit->op, QStringLiteral("scale"));
        QCOMPARE(e.edit->rank, 1);
        QCOMPARE(e.edit->factor, 0.5);
        QCOMPARE(e.until.kind, LessonUntil::Kind::Next);
        QVERIFY(e.reveals[0].absolute);
        QCOMPARE(e.reveals[0].tolerance, 0.0);
        QCOMPARE(l.maxNodes(), 3);
        const Lesson c = parseLesson("lesson: x\nstep: a\nrun: strategy=zero2 record=yes\nstep: b\n"
                                     "run: strategy=zero3 record=yes\ncompare: zero2 zero3\n",
                                     "c.lesson");
        QVERIFY(c.steps[0].run->record);
        QCOMPARE(c.steps[1].compareA, QStringLiteral("zero2"));
        QCOMPARE(c.steps[1].compareB, QStringLiteral("zero3"));
        // A run without a name is named after its strategy.
        const Lesson u = parseLesson("lesson: x\nstep: s\nrun: strategy=zero3\n", "u.lesson");
        QCOMPARE(u.steps[0].run->name, QStringLiteral("zero3"));
        LessonUntil atStep;
        atStep.kind = LessonUntil::Kind::Step;
        atStep.step = 4;
        QCOMPARE(atStep.breakpoint(), QStringLiteral("any@step=4"));
    }

    // mesh=: its value holds '=' and ','; the nodes follow its product.
    void parsesAMesh()
    {
        const Lesson l = parseLesson("lesson: x\nstep: a\nrun: strategy=zero1 model=gpt mesh=dp=2,tp=2,pp=2 steps=4\n",
                                     "m.lesson");
        const LessonRun &run = *l.steps[0].run;
        QCOMPARE(run.settings.value(QStringLiteral("mesh")), QStringLiteral("dp=2,tp=2,pp=2"));
        QCOMPARE(run.settings.value(QStringLiteral("nodes")), QStringLiteral("8"));
        QCOMPARE(run.settings.value(QStringLiteral("strategy")), QStringLiteral("zero1"));
        QCOMPARE(l.maxNodes(), 8);
        const Lesson n = parseLesson("lesson: x\nstep: a\nrun: strategy=ddp mesh=dp=2,pp=2 nodes=4\n", "n.lesson");
        QCOMPARE(n.steps[0].run->settings.value(QStringLiteral("mesh")), QStringLiteral("dp=2,pp=2"));
    }

    // compress=, compress-start=, allreduce= as smolctl train's options;
    // link=all:MBIT:MS sets every rank's links (a rank's own link= wins).
    void parsesCompressionAndAllLinks()
    {
        const Lesson l = parseLesson("lesson: x\nstep: a\nrun: strategy=ddp nodes=3 compress=powersgd:2 "
                                     "compress-start=0 allreduce=doubling link=all:100:1 link=2:20\n",
                                     "c.lesson");
        const LessonRun &run = *l.steps[0].run;
        QCOMPARE(run.settings.value(QStringLiteral("compress")), QStringLiteral("powersgd:2"));
        QCOMPARE(run.settings.value(QStringLiteral("compress-start")), QStringLiteral("0"));
        QCOMPARE(run.settings.value(QStringLiteral("allreduce")), QStringLiteral("doubling"));
        QCOMPARE(run.links.size(), 3);
        for (int rank : {0, 1}) {
            QCOMPARE(run.links.value(rank).mbit, 100.0);
            QCOMPARE(run.links.value(rank).latencyMs, 1.0);
        }
        QCOMPARE(run.links.value(2).mbit, 20.0);
        QCOMPARE(run.links.value(2).latencyMs, 0.0);
        const Lesson f = parseLesson("lesson: x\nstep: a\nrun: strategy=ddp compress=fp16 link=all:50\n", "f.lesson");
        QCOMPARE(f.steps[0].run->links.size(), 4); // the default 4 nodes
        QCOMPARE(f.steps[0].run->settings.value(QStringLiteral("compress")), QStringLiteral("fp16"));
    }

    void errorsNameTheLineAndField_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addColumn<QString>("error");
        const QString head = QStringLiteral("lesson: x\nstep: s\n");
        QTest::newRow("no title") << "step: s\n" << "t.lesson:1: lesson: missing";
        QTest::newRow("no steps") << "lesson: x\n" << "t.lesson:1: step: the lesson has no steps";
        QTest::newRow("before step") << "lesson: x\ntext: hi\n" << "t.lesson:2: text: comes before the first 'step:'";
        QTest::newRow("no colon") << head + "just words\n" << "t.lesson:3: expected 'key: value'";
        QTest::newRow("unknown field") << head + "colour: red\n" << "t.lesson:3: colour: unknown field";
        QTest::newRow("bad strategy") << head + "run: strategy=fsdp\n" << "t.lesson:3: run strategy: 'fsdp' is not one of";
        QTest::newRow("bad nodes") << head + "run: strategy=ddp nodes=0\n" << "t.lesson:3: run nodes: '0' is not a whole number from 1 to 64";
        QTest::newRow("huge nodes") << head + "run: strategy=ddp nodes=99999999999\n" << "t.lesson:3: run nodes:";
        QTest::newRow("unknown setting") << head + "run: strategy=ddp colour=red\n" << "t.lesson:3: run colour: unknown setting";
        QTest::newRow("no strategy") << head + "run: nodes=2\n" << "t.lesson:3: run: needs strategy=";
        QTest::newRow("twice") << head + "run: strategy=ddp nodes=2 nodes=3\n" << "t.lesson:3: run nodes: given twice";
        QTest::newRow("slow rank") << head + "run: strategy=ddp nodes=2 slow=5:4\n" << "t.lesson:3: run slow: rank 5 is not in the run";
        QTest::newRow("slow form") << head + "run: strategy=ddp slow=4\n" << "t.lesson:3: run slow: '4' is not RANK:FACTOR";
        QTest::newRow("bad until") << head + "run: strategy=ddp\nuntil: foo\n" << "t.lesson:4: until: unknown condition 'foo'";
        QTest::newRow("bad collective") << head + "run: strategy=ddp\nuntil: collective teleport\n" << "t.lesson:4: until: 'teleport' is not a collective";
        QTest::newRow("next needs a pause") << head + "run: strategy=ddp\nuntil: next\n" << "t.lesson:2: until: 'next' steps a paused run";
        QTest::newRow("edit without a run") << head + "edit: nan 1\n" << "t.lesson:2: edit: no run before this step";
        QTest::newRow("bad edit") << head + "run: strategy=ddp\nedit: explode 1\n" << "t.lesson:4: edit: 'explode' is not nan, zero or scale";
        QTest::newRow("bad focus") << head + "focus: tab=kitchen\n" << "t.lesson:3: focus: 'tab=kitchen' is not";
        QTest::newRow("measure alone") << head + "measure: 1\n" << "t.lesson:3: measure: belongs to a 'reveal:'";
        QTest::newRow("typed number") << head + "reveal: r\nmeasure: 689 * 1024\n" << "t.lesson:4: measure: '689 * 1024' measures nothing";
        QTest::newRow("config only") << head + "reveal: r\nmeasure: 2*(N-1)/N*S\n" << "t.lesson:4: measure: '2*(N-1)/N*S' measures nothing";
        QTest::newRow("unknown name") << head + "reveal: r\nmeasure: happiness\n" << "t.lesson:4: measure: 'happiness' is not a measured figure";
        QTest::newRow("formula measures") << head + "reveal: r\nmeasure: params\nformula: params\n" << "t.lesson:5: formula: 'params' is not a run's N";
        QTest::newRow("syntax") << head + "reveal: r\nmeasure: (params\n" << "t.lesson:4: measure: missing ')'";
        QTest::newRow("trailing") << head + "reveal: r\nmeasure: params )\n" << "t.lesson:4: measure: unexpected ')'";
        QTest::newRow("no measure") << head + "reveal: r\nunit: bytes\n" << "t.lesson:3: reveal: 'r' has no 'measure:'";
        QTest::newRow("bad unit") << head + "reveal: r\nmeasure: params\nunit: furlongs\n" << "t.lesson:5: unit: 'furlongs' is not one of";
        QTest::newRow("bad tolerance") << head + "reveal: r\nmeasure: params\ntolerance: lots\n" << "t.lesson:5: tolerance: 'lots' is not a number";
        QTest::newRow("bad run name") << head + "run: strategy=ddp name=pause\n" << "t.lesson:3: run name: 'pause' is not a name";
        QTest::newRow("compare unrecorded") << head + "run: strategy=ddp name=a\ncompare: a a\n"
                                            << "t.lesson:2: compare: 'a' is no run with record=yes";
        QTest::newRow("compare one") << head + "compare: a\n" << "t.lesson:3: compare: needs two";
        QTest::newRow("bad mesh axis") << head + "run: strategy=ddp mesh=dp=2,xp=2\n"
                                       << "t.lesson:3: run mesh: 'dp=2,xp=2': unknown axis 'xp'";
        QTest::newRow("mesh and nodes") << head + "run: strategy=ddp mesh=dp=2,pp=2 nodes=3\n"
                                        << "t.lesson:3: run mesh: 'dp=2,pp=2' has 4 nodes, nodes=3";
        QTest::newRow("mesh needs gpt") << head + "run: strategy=ddp mesh=dp=2,tp=2\n"
                                        << "t.lesson:3: run mesh: 'dp=2,tp=2' splits attention (tp, cp): it needs model=gpt";
        QTest::newRow("bad compress") << head + "run: strategy=ddp compress=zip\n" << "t.lesson:3: run compress: ";
        QTest::newRow("bad powersgd rank") << head + "run: strategy=ddp compress=powersgd:0\n"
                                           << "t.lesson:3: run compress: ";
        QTest::newRow("compress not ddp") << head + "run: strategy=zero2 compress=fp16\n"
                                          << "t.lesson:3: run compress: compresses ddp's all-reduce";
        QTest::newRow("bad compress start") << head + "run: strategy=ddp compress-start=-1\n"
                                            << "t.lesson:3: run compress-start: '-1' is not a whole number";
        QTest::newRow("bad allreduce") << head + "run: strategy=ddp allreduce=tree\n"
                                       << "t.lesson:3: run allreduce: 'tree' is not one of ring, doubling, auto";
        QTest::newRow("bad all link") << head + "run: strategy=ddp link=all\n"
                                      << "t.lesson:3: run link: 'all' is not RANK:MBIT[:MS] or all:MBIT[:MS]";
        QTest::newRow("bad record") << head + "run: strategy=ddp record=maybe\n" << "t.lesson:3: run record: 'maybe' is not yes or no";
        QTest::newRow("deep") << head + "reveal: r\nmeasure: " + QString(100, '(') + "params" + QString(100, ')') + "\n"
                              << "t.lesson:4: measure: too deeply nested";
    }

    void errorsNameTheLineAndField()
    {
        QFETCH(QString, text);
        QFETCH(QString, error);
        const QString got = errorOf(text);
        QVERIFY2(got.startsWith(error), qPrintable(QStringLiteral("got: ") + got));
        QVERIFY2(!got.contains('\n'), "one line");
    }

    void expressions()
    {
        const auto look = [](const QString &n) -> std::optional<double> {
            if (n == QLatin1String("N"))
                return 4;
            if (n == QLatin1String("S"))
                return 1000;
            if (n == QLatin1String("ddp.bytes_per_step"))
                return 1500;
            if (n == QLatin1String("idle_share@2"))
                return 0.25;
            return std::nullopt;
        };
        QCOMPARE(Expression::parse("2*(N-1)/N*S").evaluate(look), 1500.0);
        QCOMPARE(Expression::parse("ddp.bytes_per_step / S").evaluate(look), 1.5);
        QCOMPARE(Expression::parse("-N + 2^3^2").evaluate(look), 508.0); // ^ is right-associative
        QCOMPARE(Expression::parse("min(N, 2) + max(N, 2) + abs(-3)").evaluate(look), 9.0);
        QCOMPARE(Expression::parse("1 - idle_share@2").evaluate(look), 0.75);
        QCOMPARE(Expression::parse("1.5e3 / S").evaluate(look), 1.5);
        QCOMPARE(Expression::parse("(N-1)*S").names(), QStringList({"N", "S"}));
        QVERIFY_THROWS_EXCEPTION(LessonError, Expression::parse("nobody").evaluate(look));
        QVERIFY_THROWS_EXCEPTION(LessonError, Expression::parse("2 +"));
        QVERIFY_THROWS_EXCEPTION(LessonError, Expression::parse(""));
        QVERIFY_THROWS_EXCEPTION(LessonError, Expression::parse("min(1)"));
        QVERIFY(std::isinf(Expression::parse("1/0").evaluate(look)));
    }

    void measuredNames()
    {
        QVERIFY(isMeasuredName("bytes_per_step"));
        QVERIFY(isMeasuredName("zero3.model_states"));
        QVERIFY(isMeasuredName("idle_share@3"));
        QVERIFY(isMeasuredName("pause.nan_ranks"));
        QVERIFY(isMeasuredName("pause.params@1"));
        QVERIFY(!isMeasuredName("pause.bytes_per_step"));
        QVERIFY(!isMeasuredName("N"));
        QVERIFY(!isMeasuredName("a.b.params"));
        QVERIFY(isConfigName("N"));
        QVERIFY(isConfigName("ddp.S"));
        QVERIFY(!isConfigName("N@1"));
        QVERIFY(!isConfigName("pause.N"));
    }

    void agreesWithinTolerance()
    {
        LessonReveal r;
        r.formula = Expression::parse("1");
        r.tolerance = 0.02;
        QVERIFY(r.agrees(1.019, 1.0));
        QVERIFY(!r.agrees(1.03, 1.0));
        QVERIFY(!r.agrees(NAN, 1.0));
        QVERIFY(r.agrees(NAN, NAN));
        r.absolute = true;
        r.tolerance = 0;
        QVERIFY(r.agrees(4, 4));
        QVERIFY(!r.agrees(3, 4));
        LessonReveal none; // no formula: nothing to disagree with
        QVERIFY(none.agrees(123, 0));
    }

    void formatsValues()
    {
        QCOMPARE(formatLessonValue(705438, LessonUnit::Bytes), QStringLiteral("689 KiB"));
        QCOMPARE(formatLessonValue(512, LessonUnit::Bytes), QStringLiteral("512 B"));
        QCOMPARE(formatLessonValue(3762336, LessonUnit::Bytes), QStringLiteral("3.6 MiB"));
        QCOMPARE(formatLessonValue(1.5, LessonUnit::Ratio), QStringLiteral("1.50x"));
        QCOMPARE(formatLessonValue(0.375, LessonUnit::Percent), QStringLiteral("37.5 %"));
        QCOMPARE(formatLessonValue(23683.4, LessonUnit::Rate), QStringLiteral("23,683 samples/s"));
        QCOMPARE(formatLessonValue(4, LessonUnit::Count), QStringLiteral("4"));
        QCOMPARE(formatLessonValue(0.0123, LessonUnit::Seconds), QStringLiteral("12.3 ms"));
        QCOMPARE(formatLessonValue(NAN, LessonUnit::Count), QStringLiteral("NaN"));
    }

    void shippedLessonsParse()
    {
        const auto shipped = shippedLessons();
        QCOMPARE(shipped.keys(), QStringList({"3d-parallelism", "bad-gradient", "compression", "memory-levers", "pipeline-bubbles",
                                              "ring-allreduce", "stragglers", "zero"}));
        for (auto it = shipped.cbegin(); it != shipped.cend(); ++it) {
            const Lesson l = loadLesson(it.value());
            QVERIFY2(!l.title.isEmpty(), qPrintable(it.key()));
            QVERIFY2(l.steps.size() >= 3, qPrintable(it.key()));
            if (it.key() == QLatin1String("3d-parallelism")) // its mesh, dp=2,tp=2,pp=2
                QCOMPARE(l.maxNodes(), 8);
            else
                QVERIFY2(l.maxNodes() <= 4, qPrintable(it.key())); // the default local cluster
            int reveals = 0;
            for (const LessonStep &s : l.steps)
                reveals += int(s.reveals.size());
            QVERIFY2(reveals >= 3, qPrintable(it.key()));
        }
        QCOMPARE(findLesson("zero").title, QStringLiteral("ZeRO 1, 2, 3"));
        QVERIFY_THROWS_EXCEPTION(LessonError, findLesson("no-such-lesson"));
    }

    void filesThatCannotBeRead()
    {
        QTemporaryDir dir;
        const QString big = dir.filePath("big.lesson");
        QFile f(big);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(QByteArray(2 << 20, 'x'));
        f.close();
        try {
            loadLesson(big);
            QFAIL("a 2 MiB lesson was read");
        } catch (const LessonError &e) {
            QVERIFY(QString::fromUtf8(e.what()).contains("larger than 1 MiB"));
        }
        QVERIFY_THROWS_EXCEPTION(LessonError, loadLesson(dir.filePath("missing.lesson")));
        // Truncated mid-step: still a line-and-field error, never a crash.
        const QString cut = QString::fromLatin1(kGood).left(int(std::strlen(kGood)) - 40);
        const QString err = errorOf(cut);
        QVERIFY2(err.isEmpty() || err.startsWith("t.lesson:"), qPrintable(err));
        // Binary noise.
        QByteArray noise(4096, '\0');
        for (int i = 0; i < noise.size(); ++i)
            noise[i] = char((i * 131) ^ (i >> 3));
        QVERIFY(errorOf(QString::fromLatin1(noise)).startsWith("t.lesson:"));
    }
};

QTEST_GUILESS_MAIN(TstLesson)
#include "tst_lesson.moc"
