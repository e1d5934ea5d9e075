#include "lesson_check.h"

#include "app/bridge/engine_controller.h"
#include "lesson.h"
#include "lesson_runner.h"

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

A lesson (docs/lessons.md) is a file of steps that drive the real cluster.
  --list      the lessons that ship, one per line: name, steps, title
  NAME|FILE   a shipped lesson's name or a .lesson file: check the file and
              print its outline
  --check     also run every step without a window, on a local cluster of 4
              node threads (more if the lesson asks), and check each revealed
              value against its formula within the lesson's tolerance
  --timeout S give up after S seconds (default 600)
  -h, --help  show this help

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

int checkLesson(const Lesson &lesson, int timeoutS, QTextStream &out, QTextStream &err)
{
    const int nodes = std::max(4, lesson.maxNodes());
    std::unique_ptr<EngineController> engine;
    try {
        engine = std::make_unique<EngineController>(nodes);
    } catch (const std::exception &e) {
        err << "smolctl: lesson: " << e.what() << Qt::endl;
        return 1;
    }
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
    QObject::connect(&runner, &LessonRunner::stepReached, &loop, [&](int i) {
        out << "step " << (i + 1) << "/" << lesson.steps.size() << " " << lesson.steps[i].title << ": "
            << runner.view().status << QStringLiteral(" (%1 s)").arg(clock.elapsed() / 1000.0, 0, 'f', 1) << "\n";
        mismatches += printReveals(lesson.steps[i], i, runner.results(), out, err);
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
    int timeout = 600;
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
    printOutline(lesson, out);
    if (!check)
        return 0;
    return checkLesson(lesson, timeout, out, err);
}

} // namespace smol::app
