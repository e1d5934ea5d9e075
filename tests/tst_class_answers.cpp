// The class's answers at a reveal (app/lessons/class_answers.h): the last
// answer per viewer counts, the median, the histogram, who is within the
// tolerance, and what a student types parsed in the question's unit.
#include "app/lessons/class_answers.h"

#include <QtTest>

#include <cmath>

using namespace smol::app;

class TestClassAnswers : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void lastAnswerPerViewerCounts()
    {
        ClassAnswers a;
        a.add(1, QStringLiteral("alice"), 2, 5.0);
        a.add(1, QStringLiteral("alice"), 2, 3.0); // changed her mind
        a.add(2, QStringLiteral("bob"), 2, 5.0);
        a.add(2, QStringLiteral("bob"), 3, 9.0);   // another step's
        a.add(3, QStringLiteral("carol"), 2, std::nan("")); // ignored
        QCOMPARE(a.count(2), 2);
        QCOMPARE(a.count(3), 1);
        const ClassSummary s = a.summarize(2, /*measured=*/3.0, /*tolerance=*/0.05, /*absolute=*/false);
        QCOMPARE(s.answered, 2);
        QCOMPARE(s.median, 4.0);
        QCOMPARE(s.within, 1);
        QCOMPARE(s.answers.front().first, QStringLiteral("alice"));
        QCOMPARE(s.answers.front().second, 3.0);
    }

    void medianHistogramAndTolerance_data()
    {
        QTest::addColumn<QVector<double>>("values");
        QTest::addColumn<double>("measured");
        QTest::addColumn<double>("tolerance");
        QTest::addColumn<bool>("absolute");
        QTest::addColumn<double>("median");
        QTest::addColumn<int>("within");
        QTest::addColumn<QVector<int>>("histogram");
        QTest::newRow("odd, relative") << QVector<double>{1, 2, 10} << 2.0 << 0.5 << false << 2.0 << 2
                                       << QVector<int>{2, 0, 0, 0, 1};
        QTest::newRow("even, absolute") << QVector<double>{0, 4, 6, 10} << 5.0 << 1.0 << true << 5.0 << 2
                                        << QVector<int>{1, 0, 1, 1, 1};
        QTest::newRow("all equal: one bin") << QVector<double>{7, 7, 7} << 7.0 << 0.0 << false << 7.0 << 3
                                            << QVector<int>{3};
        QTest::newRow("none within") << QVector<double>{100, 200} << 1.0 << 0.05 << false << 150.0 << 0
                                     << QVector<int>{1, 0, 0, 0, 1};
    }
    void medianHistogramAndTolerance()
    {
        QFETCH(QVector<double>, values);
        QFETCH(double, measured);
        QFETCH(double, tolerance);
        QFETCH(bool, absolute);
        ClassAnswers a;
        for (int i = 0; i < values.size(); ++i)
            a.add(i, QStringLiteral("v%1").arg(i), 0, values[i]);
        const ClassSummary s = a.summarize(0, measured, tolerance, absolute);
        QCOMPARE(s.answered, int(values.size()));
        QTEST(s.median, "median");
        QTEST(s.within, "within");
        QTEST(s.histogram, "histogram");
    }

    void noAnswers()
    {
        const ClassSummary s = ClassAnswers().summarize(0, 1, 0.05, false);
        QCOMPARE(s.answered, 0);
        QVERIFY(s.histogram.isEmpty());
        QCOMPARE(classAnswersText(s, LessonUnit::Bytes), QStringLiteral("0 answers"));
    }

    void lineNamesEveryAnswer()
    {
        ClassAnswers a;
        a.add(1, QStringLiteral("alice"), 1, 3.0 * 1024 * 1024);
        a.add(2, QStringLiteral("bob"), 1, 5.0 * 1024 * 1024);
        const ClassSummary s = a.summarize(1, 3.0 * 1024 * 1024, 0.05, false);
        QCOMPARE(classAnswersText(s, LessonUnit::Bytes),
                 QStringLiteral("2 answers, median 4.0 MiB, 1 within tolerance (alice 3.0 MiB, bob 5.0 MiB)"));
        QCOMPARE(classAnswersText(s, LessonUnit::Bytes, 1),
                 QStringLiteral("2 answers, median 4.0 MiB, 1 within tolerance (alice 3.0 MiB, +1 more)"));
        QCOMPARE(histogramText({1, 0, 4}), QStringLiteral("▂·█")); // a quarter of the tallest: two eighths
    }

    void parsesWhatStudentsType_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addColumn<int>("unit");
        QTest::addColumn<bool>("ok");
        QTest::addColumn<double>("value");
        QTest::newRow("bytes, MiB") << "3 MiB" << int(LessonUnit::Bytes) << true << 3.0 * 1024 * 1024;
        QTest::newRow("bytes, bare M") << "1.5M" << int(LessonUnit::Bytes) << true << 1.5 * 1024 * 1024;
        QTest::newRow("bytes, plain") << "2,048" << int(LessonUnit::Bytes) << true << 2048.0;
        QTest::newRow("bytes, junk unit") << "3 apples" << int(LessonUnit::Bytes) << false << 0.0;
        QTest::newRow("percent") << "37.5 %" << int(LessonUnit::Percent) << true << 0.375;
        QTest::newRow("percent, bare") << "50" << int(LessonUnit::Percent) << true << 0.5;
        QTest::newRow("ratio") << "2x" << int(LessonUnit::Ratio) << true << 2.0;
        QTest::newRow("seconds, ms") << "120 ms" << int(LessonUnit::Seconds) << true << 0.12;
        QTest::newRow("not a number") << "lots" << int(LessonUnit::Plain) << false << 0.0;
        QTest::newRow("empty") << "" << int(LessonUnit::Count) << false << 0.0;
    }
    void parsesWhatStudentsType()
    {
        QFETCH(QString, text);
        QFETCH(int, unit);
        QFETCH(bool, ok);
        QFETCH(double, value);
        const std::optional<double> v = parseLessonValue(text, LessonUnit(unit));
        QCOMPARE(v.has_value(), ok);
        if (ok)
            QVERIFY2(std::abs(*v - value) <= 1e-9 * std::max(1.0, value), qPrintable(QString::number(*v)));
    }

    void unitNamesRoundTrip()
    {
        for (LessonUnit u : {LessonUnit::Plain, LessonUnit::Bytes, LessonUnit::Ratio, LessonUnit::Percent,
                             LessonUnit::Rate, LessonUnit::Seconds, LessonUnit::Count})
            QCOMPARE(lessonUnitFromName(lessonUnitName(u)), u);
    }
};

QTEST_GUILESS_MAIN(TestClassAnswers)
#include "tst_class_answers.moc"
