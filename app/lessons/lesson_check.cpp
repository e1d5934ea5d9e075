#include "lesson_check.h"

#include "app/bridge/engine_controller.h"
#include "lesson.h"
#include "lesson_runner.h"

#include "engine/cluster/admission.h"

#include "engine/session/session_compare.h"
#include "engine/session/session_reader.h"

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QTimer>

#include <memory>

namespace smol::app {

const char kLessonUsage[] = R"(Usage: smolctl lesson --list
       smolctl lesson NAME|FILE [--check] [--timeout SECONDS]
                     [--listen PORT --token T [--watch-token W] [--class-wait SECONDS]
                      [--class-size N]]

A lesson (docs/lessons.md) is a file of steps that drive the real cluster.
  --list      the lessons that ship, one per line: name, steps, title
  NAME|FILE   a shipped lesson's name or a .lesson file: check the file and
              print its outline
  --check     also run every step without a window, on a local cluster of 4
              node threads (more if the lesson asks), and check each revealed
              value against its formula within the lesson's tolerance
  --timeout S give up after S seconds (default 600)
  --listen P  with --check: the coordinator listens on port P for other
              machines' nodes and for viewers (students' windows,
              `smolctl watch`), who see each lesson step and may answer its
              question; needs --token
  --token T   the token nodes and viewers connect with
  --watch-token W
              a token viewers may watch with but not join as nodes
  --class-wait S
              at each step with a reveal, wait up to S seconds (default 0)
              for every connected viewer's answer before revealing
  --class-size N
              with --class-wait: the class is N viewers; a step also waits
              (within --class-wait) until N are connected and have answered
  -h, --help  show this help

With --listen, each step whose question the class was asked prints, after
its revealed values, one line (the step is 1-based, as in "step 2/5"; a
viewer answers it by the lesson object's "index", 0-based):
  class: step 2 'LABEL': N answers, median V, K within tolerance (NAME V, ...)
the answers by value, the last per viewer counting, within the reveal's
tolerance of the measured value; "class: step 2 'LABEL': 0 answers" when
none came.

Exit code 0 when every step was reached and every value agreed, 1 when a
step failed or a value disagreed (the step and the reason on stderr), 2 on
bad arguments or a lesson file with an error (its line and field).
)";

namespace {

QString untilText(const LessonUntil &u)
{
    switch (u.kind) {
    case LessonUntil::Kind::End:
        return QStringLiteral("until the end");
    case LessonUntil::Kind::Step:
        return QStringLiteral("until step %1").arg(u.step);
    case LessonUntil::Kind::Collective:
        return QStringLiteral("until %1").arg(u.breakpoint());
    case LessonUntil::Kind::Next:
        return QStringLiteral("one collective");
    case LessonUntil::Kind::None:
        break;
    }
    return {};
}

void printOutline(const Lesson &l, QTextStream &out)
{
    out << l.title << " (" << l.steps.size() << " steps)\n";
    for (int i = 0; i < l.steps.size(); ++i) {
        const LessonStep &s = l.steps[i];
        QStringList what;
        if (s.run) {
            QStringList kv;
            for (auto it = s.run->settings.cbegin(); it != s.run->settings.cend(); ++it)
                kv << it.key() + '=' + it.value();
            what << QStringLiteral("run %1 [%2]").arg(s.run->name, kv.join(' '));
        }
        if (s.edit)
            what << QStringLiteral("edit %1 rank %2").arg(s.edit->op).arg(s.edit->rank);
        if (s.until.kind != LessonUntil::Kind::None)
            what << untilText(s.until);
        if (!s.compareA.isEmpty())
            what << QStringLiteral("compare %1 with %2").arg(s.compareA, s.compareB);
        for (const LessonReveal &r : s.reveals)
            what << QStringLiteral("reveal \"%1\"").arg(r.label);
        out << "  " << (i + 1) << ". " << s.title << (what.isEmpty() ? QString() : ": " + what.join(", ")) << "\n";
    }
    out.flush();
}

// Each revealed value of a reached step beside its formula; returns how many
// disagree (or could not be measured), each also one line on `err`.
int printReveals(const LessonStep &s, int i, const QVector<LessonRunner::Result> &results, QTextStream &out,
                 QTextStream &err)
{
    int mismatches = 0;
    for (int k = 0; k < s.reveals.size() && k < results.size(); ++k) {
        const LessonReveal &r = s.reveals[k];
        const LessonRunner::Result &res = results[k];
        if (!res.error.isEmpty()) {
            out << "  " << r.label << ": cannot be measured: " << res.error << "\n";
            err << "smolctl: lesson: step " << (i + 1) << " (" << s.title << "), " << r.label << ": " << res.error
                << Qt::endl;
            ++mismatches;
            continue;
        }
        out << "  " << r.label << ": ";
        if (res.formula)
            out << "formula " << (r.show.isEmpty() ? r.formula.text() : r.show) << " = "
                << formatLessonValue(*res.formula, r.unit) << ", ";
        out << "measured " << formatLessonValue(res.measured, r.unit);
        if (res.formula)
            out << (res.agrees ? " (agrees)" : " (DIFFERS)");
        out << "\n";
        if (!res.agrees) {
            ++mismatches;
            err << "smolctl: lesson: step " << (i + 1) << " (" << s.title << "), " << r.label << ": measured "
                << formatLessonValue(res.measured, r.unit) << ", formula " << formatLessonValue(*res.formula, r.unit)
                << ", beyond the tolerance" << Qt::endl;
        }
    }
    return mismatches;
}

// A step's `compare: A B`, as `smolctl compare` measures it from the two
// recordings: what differs, and B/A of the run's and rank 0's figures.
bool printComparison(const QString &fileA, const QString &fileB, const LessonStep &s, int i, QTextStream &out,
                     QTextStream &err)
{
    try {
        const engine::SessionReader a(fileA), b(fileB);
        const engine::SessionComparison c = engine::compareRuns(engine::measureRun(a), engine::measureRun(b));
        QStringList differs;
        for (const auto &d : c.configDifferences)
            differs << QString::fromStdString(d.key);
        out << "  compare " << s.compareA << " with " << s.compareB << " (" << differs.join(", ") << " differ):";
        const auto row = [&](const engine::ComparedRow &r) {
            out << " " << r.label << " " << engine::formatRatio(r.value.ratio()) << "x;";
        };
        for (const auto &r : c.run)
            if (QLatin1String(r.key) == QLatin1String("samples_per_s"))
                row(r);
        if (!c.nodes.empty())
            for (const auto &r : c.nodes.front().rows)
                if (QLatin1String(r.key) == QLatin1String("memory_held_at_step_end") ||
                    QLatin1String(r.key) == QLatin1String("bytes_sent_per_step"))
                    row(r);
        out << "\n";
        return true;
    } catch (const std::exception &e) {
        err << "smolctl: lesson: step " << (i + 1) << " (" << s.title << "), compare: " << e.what() << Qt::endl;
        return false;
    }
}

struct CheckOptions {
    int timeoutS = 600;
    quint16 port = 0; // --listen; 0: a local cluster only
    QString token, watchToken;
    int classWaitS = 0;
    int classSize = 0; // --class-size: viewers a question waits for (0: whoever is connected, at least 1)
};

// "class: step 2 'bytes per step': 2 answers, median 3.0 MiB, 1 within
// tolerance (alice 3.0 MiB, bob 5.0 MiB)": the names as printable text.
void printClassAnswers(const LessonRunner &runner, int i, QTextStream &out)
{
    const std::optional<ClassSummary> summary = runner.classSummary(i);
    if (!summary)
        return;
    ClassSummary shown = *summary;
    for (auto &[name, value] : shown.answers)
        name = engine::printableText(name, 40).replace(QLatin1Char(','), QLatin1Char(' '));
    const LessonReveal &r = runner.lesson().steps[i].reveals.front();
    out << "class: step " << (i + 1) << " '" << r.label << "': " << classAnswersText(shown, r.unit, 1000) << "\n";
}

// A local cluster of `nodes` node threads; with --listen, also on the port
// other machines' nodes and viewers reach.
std::unique_ptr<EngineController> startCluster(const CheckOptions &o, int nodes, QTextStream &err)
{
    try {
        return o.port ? std::make_unique<EngineController>(
                            ClusterOptions{nodes, o.port, o.token, QString(), QStringLiteral("0.0.0.0"), o.watchToken})
                      : std::make_unique<EngineController>(nodes);
    } catch (const std::exception &e) {
        err << "smolctl: lesson: " << e.what() << Qt::endl;
        return nullptr;
    }
}

int checkLesson(const Lesson &lesson, const CheckOptions &o, QTextStream &out, QTextStream &err)
{
    const int timeoutS = o.timeoutS;
    const int nodes = std::max(4, lesson.maxNodes());
    const std::unique_ptr<EngineController> engine = startCluster(o, nodes, err);
    if (!engine)
        return 1;
    if (o.port) // the students' machines may connect from here on
        err << "smolctl: lesson: coordinator listening on port " << o.port << Qt::endl;
    QEventLoop loop;
    int code = -1;
    QString reason;
    QElapsedTimer clock;
    clock.start();
    const auto end = [&](int c, const QString &why) {
        if (code >= 0)
            return;
        code = c;
        reason = why;
        loop.quit();
    };
    QTimer::singleShot(timeoutS * 1000, &loop, [&] { end(1, QStringLiteral("timed out after %1 s").arg(timeoutS)); });

    // The local nodes join first (a window has them long before a lesson).
    QTimer joined;
    joined.setInterval(50);
    QObject::connect(&joined, &QTimer::timeout, &loop, [&] {
        if (engine->readyNodes() >= nodes)
            loop.quit();
    });
    joined.start();
    loop.exec();
    joined.stop();
    if (code >= 0) {
        err << "smolctl: lesson: the local nodes did not join: " << reason << Qt::endl;
        return 1;
    }

    LessonRunner runner(engine.get());
    int mismatches = 0;
    // With viewers: a step with a question waits (up to --class-wait) for
    // every connected viewer's answer before its values are printed and revealed.
    QTimer classWait;
    classWait.setInterval(100);
    QElapsedTimer waited;
    int waitingStep = -1;
    const auto reached = [&](int i) {
        out << "step " << (i + 1) << "/" << lesson.steps.size() << " " << lesson.steps[i].title << ": "
            << runner.view().status << QStringLiteral(" (%1 s)").arg(clock.elapsed() / 1000.0, 0, 'f', 1) << "\n";
        mismatches += printReveals(lesson.steps[i], i, runner.results(), out, err);
        if (o.port)
            printClassAnswers(runner, i, out);
        const LessonStep &s = lesson.steps[i];
        if (!s.compareA.isEmpty() &&
            !printComparison(runner.recording(s.compareA), runner.recording(s.compareB), s, i, out, err))
            ++mismatches;
        out.flush();
        // Reveal (if there is anything to), then on to the next step.
        QTimer::singleShot(0, &runner, [&runner, reveals = !s.reveals.isEmpty()] {
            if (reveals)
                runner.next();
            runner.next();
        });
    };
    QObject::connect(&classWait, &QTimer::timeout, &loop, [&] {
        const int viewers = engine->viewerCount();
        if (waited.elapsed() < o.classWaitS * 1000 &&
            (viewers < std::max(1, o.classSize) || runner.classAnswers().count(waitingStep) < viewers))
            return;
        classWait.stop();
        reached(waitingStep);
    });
    QObject::connect(&runner, &LessonRunner::stepReached, &loop, [&](int i) {
        if (!o.port || o.classWaitS <= 0 || lesson.steps[i].reveals.isEmpty()) {
            reached(i);
            return;
        }
        waitingStep = i;
        waited.start();
        classWait.start();
    });
    QObject::connect(&runner, &LessonRunner::stepFailed, &loop, [&](int i, const QString &why) {
        end(1, QStringLiteral("step %1 (%2): %3").arg(i + 1).arg(lesson.steps[i].title, why));
    });
    QObject::connect(&runner, &LessonRunner::finished, &loop, [&] {
        end(mismatches ? 1 : 0, QStringLiteral("%1 value(s) beyond their tolerance").arg(mismatches));
    });
    runner.open(lesson);
    if (code < 0)
        loop.exec();
    runner.close();
    if (code != 0) {
        err << "smolctl: lesson: " << reason << Qt::endl;
        return 1;
    }
    out << "lesson \"" << lesson.title << "\": " << lesson.steps.size() << " steps, every value agrees ("
        << QString::number(clock.elapsed() / 1000.0, 'f', 1) << " s)" << Qt::endl;
    return 0;
}

} // namespace

int runLessonCommand(const QStringList &args, QTextStream &out, QTextStream &err)
{
    const auto bad = [&](const QString &why) {
        err << "smolctl: lesson: " << why << Qt::endl;
        return 2;
    };
    bool list = false, check = false;
    CheckOptions o;
    int &timeout = o.timeoutS;
    QString which;
    for (int i = 0; i < args.size(); ++i) {
        const QString &a = args[i];
        if (a == QLatin1String("-h") || a == QLatin1String("--help")) {
            out << kLessonUsage;
            return 0;
        }
        if (a == QLatin1String("--list")) {
            list = true;
        } else if (a == QLatin1String("--check")) {
            check = true;
        } else if (a == QLatin1String("--timeout")) {
            bool ok = false;
            timeout = i + 1 < args.size() ? args[++i].toInt(&ok) : 0;
            if (!ok || timeout < 1 || timeout > 86400)
                return bad(QStringLiteral("--timeout needs seconds from 1 to 86400"));
        } else if (a == QLatin1String("--class-size")) {
            bool ok = false;
            o.classSize = i + 1 < args.size() ? args[++i].toInt(&ok) : 0;
            if (!ok || o.classSize < 1 || o.classSize > 1024)
                return bad(QStringLiteral("--class-size needs a number of viewers from 1 to 1024"));
        } else if (a == QLatin1String("--listen") || a == QLatin1String("--class-wait")) {
            bool ok = false;
            const int v = i + 1 < args.size() ? args[++i].toInt(&ok) : 0;
            const bool listen = a == QLatin1String("--listen");
            if (!ok || v < (listen ? 1 : 0) || v > (listen ? 65535 : 3600))
                return bad(listen ? QStringLiteral("--listen needs a port from 1 to 65535")
                                  : QStringLiteral("--class-wait needs seconds from 0 to 3600"));
            if (listen)
                o.port = quint16(v);
            else
                o.classWaitS = v;
        } else if (a == QLatin1String("--token") || a == QLatin1String("--watch-token")) {
            const QString v = i + 1 < args.size() ? args[++i] : QString();
            if (v.trimmed().isEmpty() || v.contains(QLatin1Char(' ')))
                return bad(QStringLiteral("%1 needs a token without spaces").arg(a));
            (a == QLatin1String("--token") ? o.token : o.watchToken) = v;
        } else if (a.startsWith('-')) {
            return bad(QStringLiteral("unknown option '%1' (try `smolctl lesson --help`)").arg(a));
        } else if (which.isEmpty()) {
            which = a;
        } else {
            return bad(QStringLiteral("one lesson at a time ('%1' and '%2')").arg(which, a));
        }
    }
    if (list) {
        if (!which.isEmpty() || check)
            return bad(QStringLiteral("--list takes no lesson"));
        const auto shipped = shippedLessons();
        for (auto it = shipped.cbegin(); it != shipped.cend(); ++it) {
            try {
                const Lesson l = loadLesson(it.value());
                out << it.key() << "\t" << l.steps.size() << " steps\t" << l.title << "\n";
            } catch (const LessonError &e) {
                out << it.key() << "\t(broken: " << e.what() << ")\n";
            }
        }
        out.flush();
        return 0;
    }
    if (which.isEmpty())
        return bad(QStringLiteral("missing lesson name or file (try `smolctl lesson --list`)"));
    Lesson lesson;
    try {
        lesson = findLesson(which);
    } catch (const LessonError &e) {
        return bad(QString::fromUtf8(e.what()));
    }
    if (o.port && o.token.isEmpty())
        return bad(QStringLiteral("--listen needs --token T"));
    if ((o.port || !o.token.isEmpty() || !o.watchToken.isEmpty() || o.classWaitS || o.classSize) && (!check || !o.port))
        return bad(QStringLiteral("--listen, --token, --watch-token, --class-wait and --class-size go with --check --listen PORT"));
    if (!o.watchToken.isEmpty() && o.watchToken == o.token)
        return bad(QStringLiteral("--watch-token must differ from --token"));
    printOutline(lesson, out);
    if (!check)
        return 0;
    return checkLesson(lesson, o, out, err);
}

} // namespace smol::app
