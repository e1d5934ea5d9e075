// A lesson: a data file of steps a teacher walks a class through, each
// driving the real cluster (docs/lessons.md has the format). This header is
// the file's model and its parser; the arithmetic its formulas and measures
// are written in is expression.h, the figures a measure may name are
// engine/session/figure_table.h, and lesson_runner.h runs a lesson. Qt Core
// only.
//
// A lesson file is lines of `key: value`. `lesson:` names it; each `step:`
// begins a step; `reveal:` begins a number the step reveals, and the
// `measure:`, `formula:`, `show:`, `unit:` and `tolerance:` lines after it
// belong to that reveal. `#` begins a comment line. Every error names the
// file's line and the field: "ring.lesson:12: until: unknown condition 'foo'".
#pragma once

#include "expression.h"

#include <QMap>
#include <QString>
#include <QStringList>
#include <QVector>

#include <functional>
#include <optional>
#include <stdexcept>

namespace smol::app {

// How a revealed number is written: bytes ("689 KiB"), a ratio ("1.50x"),
// a share ("37.5 %"), a rate ("2,140 samples/s"), seconds, a count, or plain.
enum class LessonUnit { Plain, Bytes, Ratio, Percent, Rate, Seconds, Count };
QString formatLessonValue(double value, LessonUnit unit);

struct LessonReveal {
    QString label;       // what the class predicts: "Bytes each node sends per step"
    Expression measure;  // from the run's measurements (never a typed number)
    Expression formula;  // what theory says, from the run's configuration ("" = none)
    QString show;        // the formula as the class reads it: "2(N-1)/N x S"
    LessonUnit unit = LessonUnit::Plain;
    double tolerance = 0.05; // relative, or absolute when `absolute`
    bool absolute = false;
    int line = 0;
    // Within tolerance? (true when there is no formula)
    bool agrees(double measured, double formula) const;
};

// A run a step starts: the settings as the window's run settings name them,
// plus what belongs to nodes (slowdowns and links by rank) and breakpoints.
struct LessonRun {
    QString name; // how later reveals refer to its figures ("ddp.bytes_per_step"); default: the strategy
    QMap<QString, QString> settings; // strategy, model, nodes, batch, steps, optimizer, lr, seed,
                                     // placement, micro-batches, schedule, slow-motion,
                                     // mesh ("dp=2,tp=2,pp=2"; nodes is then its product)
    QMap<int, double> slowdown;      // rank -> factor
    struct Link {
        double mbit = 0;
        double latencyMs = 0;
    };
    QMap<int, Link> links; // rank -> its links to every other node
    bool record = false;   // record=yes: a session file, for a later `compare:`
};

// Where a run goes until the step is shown as reached.
struct LessonUntil {
    enum class Kind { None, End, Step, Collective, Next } kind = Kind::None;
    qint64 step = -1;   // Step: pause at its first collective
    QString collective; // Collective: allreduce, allgather, ... (a breakpoint kind)
    QString name;       // Collective: a substring of the collective's tensor name
    QString breakpoint() const; // the engine's --break spec ("" for End / None / Next)
};

// What the window shows for a step.
struct LessonFocus {
    QString tab;     // node, memory, shards, placement, inspector, log, charts, timeline ("" = leave)
    int rank = -1;   // select the node of this rank
    qint64 fromStep = -1, toStep = -1; // timeline range by steps
    bool memoryLane = false; // scroll the timeline to its memory lanes (zoom on them)
};

struct LessonEdit {
    QString op; // scale, zero, nan
    int rank = 0;
    double factor = 1;
};

struct LessonStep {
    QString title;
    QString text;
    std::optional<LessonRun> run;
    LessonUntil until;
    std::optional<LessonEdit> edit;
    LessonFocus focus;
    // Two recorded runs (record=yes) side by side, as File > Compare with...
    // shows them (issue 19); empty: none.
    QString compareA, compareB;
    QVector<LessonReveal> reveals;
    int line = 0;
};

struct Lesson {
    QString title;
    QString about;
    QString source; // file path, or ":/lessons/x.lesson"
    QVector<LessonStep> steps;
    int maxNodes() const; // the most nodes any run asks for
};

// Throws LessonError "FILE:LINE: FIELD: reason".
Lesson parseLesson(const QString &text, const QString &fileName);
Lesson loadLesson(const QString &path);

// The lessons that ship (resources/lessons, compiled in): name -> resource path.
QMap<QString, QString> shippedLessons();
// A shipped lesson's name or a file's path; throws LessonError.
Lesson findLesson(const QString &nameOrPath);

// The names a measure may use (the figure table's: per run
// "bytes_per_step", ...; at a pause "pause.nan_ranks", ...) and the
// configuration names a formula may use ("N", "S", ...,
// "planned_model_states": the strategy's closed forms). A measure must use
// at least one measured name.
bool isMeasuredName(const QString &name);
bool isConfigName(const QString &name);
QStringList measuredNames();

} // namespace smol::app
