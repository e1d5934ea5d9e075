// The class's answers to a lesson step's question (issue 27): each viewer's
// prediction, the last per viewer and step counting, summed up at the reveal
// beside the measured value: how many answered, their median, a small
// histogram, how many were within the step's tolerance. Plain arithmetic,
// no network and no widgets: the teacher's lesson panel and `smolctl lesson
// --check --listen` print what summarize() says.
#pragma once

#include "lesson.h"

#include <QString>
#include <QVector>

#include <map>
#include <optional>
#include <utility>

namespace smol::app {

struct ClassSummary {
    int answered = 0;
    double median = 0;   // of the answers (0 when none)
    int within = 0;      // answers within the tolerance of the measured value
    // Answers per bin of equal width from the least to the greatest answer
    // (one bin when they are all equal; empty when none).
    QVector<int> histogram;
    double low = 0, high = 0; // the histogram's range
    QVector<std::pair<QString, double>> answers; // (name, value), by value then name
};

class ClassAnswers {
public:
    static constexpr int kBins = 5;

    // A viewer's answer for lesson step `step` (non-finite values are ignored).
    void add(int viewer, const QString &name, int step, double value);
    void clear();
    int count(int step) const;
    // Within the tolerance as the lesson's formulas are held to it
    // (LessonReveal::agrees): relative to the measured value, or absolute.
    ClassSummary summarize(int step, double measured, double tolerance, bool absolute) const;

private:
    struct Answer {
        QString name;
        double value = 0;
    };
    std::map<std::pair<int, int>, Answer> m_answers; // (step, viewer) -> the newest
};

// The histogram as a row of block characters, "▁▃█▂▁" (empty: "").
QString histogramText(const QVector<int> &histogram);
// "3 answers, median 3.0 MiB, 1 within tolerance (alice 3.0 MiB, bob 5.0 MiB)";
// the names listed up to `maxNames`, the rest as "+N more".
QString classAnswersText(const ClassSummary &summary, LessonUnit unit, int maxNames = 8);
// What a student typed, in the question's unit: "3 MiB", "3.5M", "37.5 %",
// "1.5x", "120 ms"; a bare number is in the unit as shown (percent: 37.5
// means 0.375). nullopt when it is not a number.
std::optional<double> parseLessonValue(const QString &text, LessonUnit unit);
// "bytes", "ratio", ... (the lesson file's words) and back (Plain when unknown).
QString lessonUnitName(LessonUnit unit);
LessonUnit lessonUnitFromName(const QString &name);

} // namespace smol::app
