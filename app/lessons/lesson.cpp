#include "lesson.h"

#include "engine/compression_config.h"
#include "engine/models/model_config.h"
#include "engine/session/figure_table.h"
#include "engine/strategies/strategy_registry.h"
#include "net/communicator.h"
#include "net/device_mesh.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QLocale>
#include <QRegularExpression>
#include <QSet>

#include <cmath>
#include <stdexcept>

namespace smol::app {

// ---- names -----------------------------------------------------------------

namespace {

// From a run's configuration: nodes, parameters, parameter bytes (fp32),
// global batch, micro-batches, steps, the model's layers, a mesh's axes (1
// without one).
// And what the run's strategy says of it in closed form (its
// StrategyDescription): model states per node, bytes per node per step (the
// mean over nodes and the busiest node's).
const QStringList kConfigNames = {QStringLiteral("N"),
                                  QStringLiteral("P"),
                                  QStringLiteral("S"),
                                  QStringLiteral("B"),
                                  QStringLiteral("M"),
                                  QStringLiteral("steps"),
                                  QStringLiteral("layers"),
                                  QStringLiteral("dp"),
                                  QStringLiteral("tp"),
                                  QStringLiteral("pp"),
                                  QStringLiteral("cp"),
                                  QStringLiteral("planned_model_states"),
                                  QStringLiteral("planned_bytes_per_step"),
                                  QStringLiteral("planned_bytes_per_step_max")};

QString baseOf(QString name)
{
    const int at = int(name.indexOf('@'));
    if (at >= 0)
        name = name.left(at);
    return name;
}

} // namespace

bool isMeasuredName(const QString &name)
{
    const QString base = baseOf(name);
    const QStringList parts = base.split('.');
    if (parts.size() == 2 && parts[0] == QLatin1String("pause"))
        return engine::lessonFigure(parts[1].toStdString(), /*pause=*/true) != nullptr;
    if (parts.size() > 2 || parts.isEmpty())
        return false;
    return engine::lessonFigure(parts.last().toStdString(), /*pause=*/false) != nullptr;
}

bool isConfigName(const QString &name)
{
    if (name.contains('@'))
        return false;
    const QStringList parts = name.split('.');
    return parts.size() <= 2 && kConfigNames.contains(parts.last()) && parts.first() != QLatin1String("pause");
}

QStringList measuredNames()
{
    QStringList out;
    for (const engine::Figure &f : engine::figureTable())
        if (f.name)
            out.push_back(f.scope == engine::FigureScope::Pause ? QStringLiteral("pause.") + QLatin1String(f.name)
                                                                : QString::fromLatin1(f.name));
    return out;
}

// ---- values ----------------------------------------------------------------

QString formatLessonValue(double v, LessonUnit unit)
{
    if (std::isnan(v))
        return QStringLiteral("NaN");
    if (std::isinf(v))
        return v > 0 ? QStringLiteral("∞") : QStringLiteral("-∞");
    switch (unit) {
    case LessonUnit::Bytes: {
        const double a = std::abs(v);
        if (a < 1024)
            return QStringLiteral("%1 B").arg(std::llround(v));
        const char *units[] = {"KiB", "MiB", "GiB", "TiB"};
        double x = v / 1024;
        int u = 0;
        while (std::abs(x) >= 1024 && u < 3) {
            x /= 1024;
            ++u;
        }
        return QStringLiteral("%1 %2").arg(x, 0, 'f', std::abs(x) < 100 ? 1 : 0).arg(QLatin1String(units[u]));
    }
    case LessonUnit::Ratio:
        return QStringLiteral("%1x").arg(v, 0, 'f', std::abs(v) < 10 ? 2 : 1);
    case LessonUnit::Percent:
        return QStringLiteral("%1 %").arg(100 * v, 0, 'f', 1);
    case LessonUnit::Rate:
        return QStringLiteral("%1 samples/s").arg(QLocale(QLocale::English).toString(qlonglong(std::llround(v))));
    case LessonUnit::Seconds:
        return v < 1 ? QStringLiteral("%1 ms").arg(1000 * v, 0, 'f', 1) : QStringLiteral("%1 s").arg(v, 0, 'f', 2);
    case LessonUnit::Count:
        return QString::number(std::llround(v));
    case LessonUnit::Plain:
        break;
    }
    return QString::number(v, 'g', 4);
}

bool LessonReveal::agrees(double measured, double expected) const
{
    if (formula.isEmpty())
        return true;
    if (std::isnan(measured) || std::isnan(expected))
        return std::isnan(measured) && std::isnan(expected);
    if (absolute)
        return std::abs(measured - expected) <= tolerance;
    return std::abs(measured - expected) <= tolerance * std::max(std::abs(expected), 1e-12);
}

QString LessonUntil::breakpoint() const
{
    switch (kind) {
    case Kind::Step:
        return QStringLiteral("any@step=%1").arg(step);
    case Kind::Collective:
        return name.isEmpty() ? collective : QStringLiteral("%1,name=%2").arg(collective, name);
    case Kind::None:
    case Kind::End:
    case Kind::Next:
        break;
    }
    return {};
}

int Lesson::maxNodes() const
{
    int n = 0;
    for (const LessonStep &s : steps)
        if (s.run)
            n = std::max(n, s.run->settings.value(QStringLiteral("nodes"), QStringLiteral("4")).toInt());
    return n;
}

// ---- the parser ------------------------------------------------------------

namespace {

constexpr int kMaxLessonBytes = 1 << 20;
constexpr int kMaxSteps = 200;
constexpr int kMaxReveals = 8;

const QStringList kRunKeys = {
    QStringLiteral("name"),     QStringLiteral("strategy"),      QStringLiteral("model"),
    QStringLiteral("nodes"),    QStringLiteral("batch"),         QStringLiteral("steps"),
    QStringLiteral("optimizer"), QStringLiteral("lr"),           QStringLiteral("seed"),
    QStringLiteral("placement"), QStringLiteral("micro-batches"), QStringLiteral("schedule"),
    QStringLiteral("slow-motion"), QStringLiteral("slow"),       QStringLiteral("link"),
    QStringLiteral("test-every"), QStringLiteral("record"),      QStringLiteral("mesh"),
    QStringLiteral("compress"),   QStringLiteral("compress-start"), QStringLiteral("allreduce"),
    QStringLiteral("recompute"),  QStringLiteral("accumulate"),    QStringLiteral("precision"),
};
QStringList strategyList()
{
    QStringList out;
    for (const std::string &name : engine::strategyNames())
        out.push_back(QString::fromStdString(name));
    return out;
}
const QStringList kStrategies = strategyList();
const QStringList kTabs = {QStringLiteral("node"),      QStringLiteral("memory"),  QStringLiteral("shards"),
                           QStringLiteral("placement"), QStringLiteral("inspector"), QStringLiteral("log"),
                           QStringLiteral("charts"),    QStringLiteral("timeline")};
const QStringList kCollectives = {QStringLiteral("allreduce"), QStringLiteral("reducescatter"),
                                  QStringLiteral("allgather"), QStringLiteral("broadcast"),
                                  QStringLiteral("barrier"),   QStringLiteral("gather"),
                                  QStringLiteral("scatter"),   QStringLiteral("sendrecv"),
                                  QStringLiteral("send"),      QStringLiteral("recv"),
                                  QStringLiteral("push"),      QStringLiteral("pull"),
                                  QStringLiteral("any")};

class LessonParser {
public:
    LessonParser(const QString &fileName) : m_file(QFileInfo(fileName).fileName()) {}

    Lesson parse(const QString &text)
    {
        Lesson lesson;
        lesson.source = m_file;
        if (text.size() > kMaxLessonBytes)
            throw LessonError(QStringLiteral("%1: larger than 1 MiB").arg(m_file).toStdString());
        const QStringList lines = text.split('\n');
        LessonStep *step = nullptr;
        LessonReveal *reveal = nullptr;
        for (int i = 0; i < lines.size(); ++i) {
            m_line = i + 1;
            const QString line = lines[i].trimmed();
            if (line.isEmpty() || line.startsWith('#'))
                continue;
            const int colon = int(line.indexOf(':'));
            if (colon <= 0)
                fail(QString(), QStringLiteral("expected 'key: value', got '%1'").arg(line.left(40)));
            m_key = line.left(colon).trimmed().toLower();
            const QString value = line.mid(colon + 1).trimmed();
            if (m_key == QLatin1String("lesson")) {
                need(value);
                lesson.title = value;
            } else if (m_key == QLatin1String("about")) {
                lesson.about = join(lesson.about, value);
            } else if (m_key == QLatin1String("step")) {
                if (lesson.steps.size() >= kMaxSteps)
                    fail(m_key, QStringLiteral("more than %1 steps").arg(kMaxSteps));
                need(value);
                lesson.steps.push_back({});
                step = &lesson.steps.back();
                step->title = value;
                step->line = m_line;
                reveal = nullptr;
            } else if (!step) {
                fail(m_key, QStringLiteral("comes before the first 'step:'"));
            } else {
                stepField(*step, reveal, value);
            }
        }
        m_key.clear();
        if (lesson.title.isEmpty()) {
            m_line = 1;
            fail(QStringLiteral("lesson"), QStringLiteral("missing: the file needs 'lesson: TITLE'"));
        }
        if (lesson.steps.isEmpty()) {
            m_line = int(lines.size());
            while (m_line > 1 && lines[m_line - 1].trimmed().isEmpty())
                --m_line;
            fail(QStringLiteral("step"), QStringLiteral("the lesson has no steps"));
        }
        checkSteps(lesson);
        return lesson;
    }

private:
    // A field inside a step: its text, run, what it waits for, shows and reveals.
    void stepField(LessonStep &step, LessonReveal *&reveal, const QString &value)
    {
        if (m_key == QLatin1String("text")) {
            step.text = join(step.text, value);
        } else if (m_key == QLatin1String("run")) {
            if (step.run)
                fail(m_key, QStringLiteral("a step runs once; begin another step"));
            step.run = parseRun(value);
        } else if (m_key == QLatin1String("until")) {
            step.until = parseUntil(value);
        } else if (m_key == QLatin1String("compare")) {
            const QStringList w = value.split(QRegularExpression(QStringLiteral("\\s+")), Qt::SkipEmptyParts);
            if (w.size() != 2)
                fail(m_key, QStringLiteral("needs two recorded runs' names: compare: A B"));
            step.compareA = w[0];
            step.compareB = w[1];
        } else if (m_key == QLatin1String("edit")) {
            step.edit = parseEdit(value);
        } else if (m_key == QLatin1String("focus")) {
            step.focus = parseFocus(value);
        } else if (m_key == QLatin1String("reveal")) {
            if (step.reveals.size() >= kMaxReveals)
                fail(m_key, QStringLiteral("more than %1 in one step").arg(kMaxReveals));
            need(value);
            step.reveals.push_back({});
            reveal = &step.reveals.back();
            reveal->label = value;
            reveal->line = m_line;
        } else if (m_key == QLatin1String("measure") || m_key == QLatin1String("formula") ||
                   m_key == QLatin1String("show") || m_key == QLatin1String("unit") ||
                   m_key == QLatin1String("tolerance")) {
            if (!reveal)
                fail(m_key, QStringLiteral("belongs to a 'reveal:' (none before it in this step)"));
            revealField(*reveal, value);
        } else {
            fail(m_key, QStringLiteral("unknown field (lesson, about, step, text, run, until, edit, focus, "
                                       "compare, reveal, measure, formula, show, unit, tolerance)"));
        }
    }

    [[noreturn]] void fail(const QString &field, const QString &why) const
    {
        const QString where = QStringLiteral("%1:%2").arg(m_file).arg(m_line);
        throw LessonError((field.isEmpty() ? QStringLiteral("%1: %2").arg(where, why)
                                           : QStringLiteral("%1: %2: %3").arg(where, field, why))
                              .toStdString());
    }
    void need(const QString &value) const
    {
        if (value.isEmpty())
            fail(m_key, QStringLiteral("needs a value"));
    }
    // Lines of a text flow into one paragraph (the panel wraps them); an
    // empty `text:` line begins a new paragraph.
    static QString join(const QString &a, const QString &b)
    {
        if (a.isEmpty())
            return b.isEmpty() ? QString() : b;
        if (b.isEmpty())
            return a.endsWith('\n') ? a : a + '\n';
        return a.endsWith('\n') ? a + b : a + ' ' + b;
    }

    int integer(const QString &field, const QString &v, int lo, int hi) const
    {
        bool ok = false;
        const qint64 n = v.toLongLong(&ok);
        if (!ok || n < lo || n > hi)
            fail(field, QStringLiteral("'%1' is not a whole number from %2 to %3").arg(v).arg(lo).arg(hi));
        return int(n);
    }
    double number(const QString &field, const QString &v, double lo, double hi) const
    {
        bool ok = false;
        const double x = v.toDouble(&ok);
        if (!ok || !(x >= lo && x <= hi))
            fail(field, QStringLiteral("'%1' is not a number from %2 to %3").arg(v).arg(lo).arg(hi));
        return x;
    }

    // mesh=dp=2,tp=2,pp=2 (its value holds '=' and ','; the key ends at the
    // first '='): a mesh that parses, whose product is the nodes (given, or
    // set from it), whose tp and cp have the gpt to split.
    void checkMesh(QMap<QString, QString> &settings)
    {
        const QString spec = settings.value(QStringLiteral("mesh"));
        const QString field = QStringLiteral("run mesh");
        net::DeviceMesh mesh;
        try {
            mesh = net::DeviceMesh::parse(spec.toStdString());
        } catch (const std::invalid_argument &e) {
            QString why = QString::fromUtf8(e.what()); // "--mesh SPEC: why": the why
            if (const int at = int(why.indexOf(QLatin1String(": "))); why.startsWith(QLatin1String("--mesh")) && at > 0)
                why = why.mid(at + 2);
            fail(field, QStringLiteral("'%1': %2").arg(spec, why));
        }
        const QString nodes = settings.value(QStringLiteral("nodes"));
        if (!nodes.isEmpty() && nodes.toInt() != mesh.nodes())
            fail(field, QStringLiteral("'%1' has %2 nodes, nodes=%3").arg(spec).arg(mesh.nodes()).arg(nodes));
        settings.insert(QStringLiteral("nodes"), QString::number(mesh.nodes()));
        if ((mesh.size(net::MeshAxis::Tp) > 1 || mesh.size(net::MeshAxis::Cp) > 1) &&
            settings.value(QStringLiteral("model")) != QLatin1String("gpt"))
            fail(field, QStringLiteral("'%1' splits attention (tp, cp): it needs model=gpt").arg(spec));
    }

    // One plain setting's value: in its range, one of its choices.
    void checkSetting(const QString &field, const QString &k, const QString &v) const
    {
        if (k == QLatin1String("strategy") && !kStrategies.contains(v))
            fail(field, QStringLiteral("'%1' is not one of %2").arg(v, kStrategies.join(", ")));
        if (k == QLatin1String("model") && v != QLatin1String("mlp") && v != QLatin1String("gpt"))
            fail(field, QStringLiteral("'%1' is not mlp or gpt").arg(v));
        if (k == QLatin1String("optimizer") && v != QLatin1String("sgd") && v != QLatin1String("adam"))
            fail(field, QStringLiteral("'%1' is not sgd or adam").arg(v));
        if (k == QLatin1String("schedule") && v != QLatin1String("gpipe") && v != QLatin1String("1f1b"))
            fail(field, QStringLiteral("'%1' is not gpipe or 1f1b").arg(v));
        if (k == QLatin1String("nodes"))
            integer(field, v, 1, 64);
        if (k == QLatin1String("batch"))
            integer(field, v, 1, 1 << 20);
        if (k == QLatin1String("steps"))
            integer(field, v, 1, 1000000);
        if (k == QLatin1String("micro-batches"))
            integer(field, v, 1, 4096);
        if (k == QLatin1String("test-every"))
            integer(field, v, 0, 1000000);
        if (k == QLatin1String("seed"))
            integer(field, v, 0, 2147483647);
        if (k == QLatin1String("lr"))
            number(field, v, 1e-9, 100);
        if (k == QLatin1String("slow-motion"))
            number(field, v, 1, 100);
        if (k == QLatin1String("compress"))
            checkCompression(field, v);
        if (k == QLatin1String("compress-start"))
            integer(field, v, 0, 100000000);
        if (k == QLatin1String("accumulate"))
            integer(field, v, 1, 1024);
        engine::Recompute recompute;
        if (k == QLatin1String("recompute") && !engine::parseRecompute(v.toStdString(), &recompute))
            fail(field, QStringLiteral("'%1' is not one of none, selective, full").arg(v));
        engine::Precision precision;
        if (k == QLatin1String("precision") && !engine::parsePrecision(v.toStdString(), &precision))
            fail(field, QStringLiteral("'%1' is not one of fp32, bf16").arg(v));
        net::AllReduceAlgorithm algorithm;
        if (k == QLatin1String("allreduce") && !net::parseAllReduceAlgorithm(v.toStdString(), &algorithm))
            fail(field, QStringLiteral("'%1' is not one of ring, doubling, auto").arg(v));
    }

    // compress=none|fp16|bf16|powersgd:R, as smolctl train's --compress.
    void checkCompression(const QString &field, const QString &v) const
    {
        try {
            engine::parseCompression(v.toStdString());
        } catch (const std::invalid_argument &e) {
            fail(field, QString::fromUtf8(e.what()));
        }
    }

    LessonRun parseRun(const QString &value)
    {
        LessonRun run;
        std::optional<LessonRun::Link> allLinks;
        const QStringList words = value.split(QRegularExpression(QStringLiteral("\\s+")), Qt::SkipEmptyParts);
        if (words.isEmpty())
            fail(m_key, QStringLiteral("needs key=value settings (strategy=ddp nodes=4 ...)"));
        for (const QString &w : words) {
            const int eq = int(w.indexOf('='));
            if (eq <= 0)
                fail(m_key, QStringLiteral("'%1' is not key=value").arg(w));
            const QString k = w.left(eq).toLower(), v = w.mid(eq + 1);
            const QString field = QStringLiteral("run %1").arg(k);
            if (!kRunKeys.contains(k))
                fail(field, QStringLiteral("unknown setting (%1)").arg(kRunKeys.join(", ")));
            if (v.isEmpty())
                fail(field, QStringLiteral("needs a value"));
            if (k == QLatin1String("slow")) {
                const QStringList p = v.split(':');
                if (p.size() != 2)
                    fail(field, QStringLiteral("'%1' is not RANK:FACTOR").arg(v));
                run.slowdown[integer(field, p[0], 0, 63)] = number(field, p[1], 1, 1000);
                continue;
            }
            if (k == QLatin1String("link")) {
                const QStringList p = v.split(':');
                if (p.size() < 2 || p.size() > 3)
                    fail(field, QStringLiteral("'%1' is not RANK:MBIT[:MS] or all:MBIT[:MS]").arg(v));
                LessonRun::Link l;
                l.mbit = number(field, p[1], 0, 1e6);
                l.latencyMs = p.size() == 3 ? number(field, p[2], 0, 10000) : 0;
                if (p[0] == QLatin1String("all"))
                    allLinks = l;
                else
                    run.links[integer(field, p[0], 0, 63)] = l;
                continue;
            }
            if (k == QLatin1String("record")) {
                if (v != QLatin1String("yes") && v != QLatin1String("no"))
                    fail(field, QStringLiteral("'%1' is not yes or no").arg(v));
                run.record = v == QLatin1String("yes");
                continue;
            }
            if (run.settings.contains(k) || (k == QLatin1String("name") && !run.name.isEmpty()))
                fail(field, QStringLiteral("given twice"));
            if (k == QLatin1String("name")) {
                if (!QRegularExpression(QStringLiteral("^[A-Za-z_][A-Za-z0-9_]*$")).match(v).hasMatch() ||
                    v == QLatin1String("pause"))
                    fail(field, QStringLiteral("'%1' is not a name (letters, digits, _; not 'pause')").arg(v));
                run.name = v;
                continue;
            }
            checkSetting(field, k, v);
            run.settings.insert(k, v);
        }
        if (!run.settings.contains(QStringLiteral("strategy")))
            fail(m_key, QStringLiteral("needs strategy=..."));
        if (run.settings.contains(QStringLiteral("mesh")))
            checkMesh(run.settings);
        const int nodes = run.settings.value(QStringLiteral("nodes"), QStringLiteral("4")).toInt();
        if (allLinks) // link=all:MBIT:MS: every rank's links (a rank's own link= still wins)
            for (int rank = 0; rank < nodes; ++rank)
                if (!run.links.contains(rank))
                    run.links[rank] = *allLinks;
        if (run.settings.contains(QStringLiteral("compress")) &&
            run.settings.value(QStringLiteral("compress")) != QLatin1String("none") &&
            run.settings.value(QStringLiteral("strategy")) != QLatin1String("ddp"))
            fail(QStringLiteral("run compress"),
                 QStringLiteral("compresses ddp's all-reduce (alone or as a mesh's dp axis), not %1's gradients")
                     .arg(run.settings.value(QStringLiteral("strategy"))));
        for (auto it = run.slowdown.keyBegin(); it != run.slowdown.keyEnd(); ++it)
            if (*it >= run.settings.value(QStringLiteral("nodes"), QStringLiteral("4")).toInt())
                fail(QStringLiteral("run slow"), QStringLiteral("rank %1 is not in the run").arg(*it));
        if (run.name.isEmpty())
            run.name = run.settings.value(QStringLiteral("strategy"));
        return run;
    }

    LessonUntil parseUntil(const QString &value)
    {
        const QStringList w = value.split(QRegularExpression(QStringLiteral("\\s+")), Qt::SkipEmptyParts);
        LessonUntil u;
        if (w.isEmpty())
            fail(m_key, QStringLiteral("needs end, step N, next, or collective KIND [NAME]"));
        if (w[0] == QLatin1String("end") && w.size() == 1) {
            u.kind = LessonUntil::Kind::End;
        } else if (w[0] == QLatin1String("next") && w.size() == 1) {
            u.kind = LessonUntil::Kind::Next;
        } else if (w[0] == QLatin1String("step") && w.size() == 2) {
            u.kind = LessonUntil::Kind::Step;
            u.step = integer(m_key, w[1], 0, 100000000);
        } else if (w[0] == QLatin1String("collective") && (w.size() == 2 || w.size() == 3)) {
            u.kind = LessonUntil::Kind::Collective;
            u.collective = w[1].toLower();
            if (!kCollectives.contains(u.collective))
                fail(m_key, QStringLiteral("'%1' is not a collective (%2)").arg(w[1], kCollectives.join(", ")));
            if (w.size() == 3)
                u.name = w[2];
        } else {
            fail(m_key, QStringLiteral("unknown condition '%1' (end, step N, next, collective KIND [NAME])").arg(value));
        }
        return u;
    }

    LessonEdit parseEdit(const QString &value)
    {
        const QStringList w = value.split(QRegularExpression(QStringLiteral("\\s+")), Qt::SkipEmptyParts);
        LessonEdit e;
        if (w.size() < 2 || w.size() > 3)
            fail(m_key, QStringLiteral("needs 'nan RANK', 'zero RANK' or 'scale RANK FACTOR'"));
        e.op = w[0].toLower();
        if (e.op != QLatin1String("nan") && e.op != QLatin1String("zero") && e.op != QLatin1String("scale"))
            fail(m_key, QStringLiteral("'%1' is not nan, zero or scale").arg(w[0]));
        e.rank = integer(m_key, w[1], 0, 63);
        if (e.op == QLatin1String("scale")) {
            if (w.size() != 3)
                fail(m_key, QStringLiteral("scale needs a factor"));
            e.factor = number(m_key, w[2], -1e6, 1e6);
        } else if (w.size() != 2) {
            fail(m_key, QStringLiteral("%1 takes a rank only").arg(e.op));
        }
        return e;
    }

    LessonFocus parseFocus(const QString &value)
    {
        LessonFocus f;
        for (const QString &w : value.split(QRegularExpression(QStringLiteral("\\s+")), Qt::SkipEmptyParts)) {
            const int eq = int(w.indexOf('='));
            const QString k = eq > 0 ? w.left(eq) : w, v = eq > 0 ? w.mid(eq + 1) : QString();
            if (k == QLatin1String("tab") && kTabs.contains(v)) {
                f.tab = v;
            } else if (k == QLatin1String("node") && eq > 0) {
                f.rank = integer(QStringLiteral("focus node"), v, 0, 63);
            } else if (k == QLatin1String("steps") && eq > 0) {
                const QStringList p = v.split('-');
                if (p.size() != 2)
                    fail(QStringLiteral("focus steps"), QStringLiteral("'%1' is not FROM-TO").arg(v));
                f.fromStep = integer(QStringLiteral("focus steps"), p[0], 0, 100000000);
                f.toStep = integer(QStringLiteral("focus steps"), p[1], int(f.fromStep), 100000000);
            } else if (k == QLatin1String("memory-lane") && eq < 0) {
                f.memoryLane = true;
            } else {
                fail(m_key, QStringLiteral("'%1' is not tab=%2, node=RANK, steps=FROM-TO or memory-lane")
                                .arg(w, kTabs.join('|')));
            }
        }
        return f;
    }

    void revealField(LessonReveal &r, const QString &value)
    {
        need(value);
        try {
            if (m_key == QLatin1String("measure")) {
                r.measure = Expression::parse(value);
                bool measured = false;
                for (const QString &n : r.measure.names()) {
                    if (isMeasuredName(n))
                        measured = true;
                    else if (!isConfigName(n))
                        fail(m_key, QStringLiteral("'%1' is not a measured figure (%2) or a run's N, P, S, B, M, "
                                                   "steps, layers")
                                        .arg(n, measuredNames().join(", ")));
                }
                if (!measured)
                    fail(m_key, QStringLiteral("'%1' measures nothing: a revealed number comes from the run")
                                    .arg(value));
            } else if (m_key == QLatin1String("formula")) {
                r.formula = Expression::parse(value);
                for (const QString &n : r.formula.names())
                    if (!isConfigName(n))
                        fail(m_key, QStringLiteral("'%1' is not a run's N, P, S, B, M, steps, layers or "
                                                   "planned_model_states, planned_bytes_per_step[_max]")
                                        .arg(n));
            } else if (m_key == QLatin1String("show")) {
                r.show = value;
            } else if (m_key == QLatin1String("unit")) {
                static const QMap<QString, LessonUnit> units = {
                    {QStringLiteral("plain"), LessonUnit::Plain},     {QStringLiteral("bytes"), LessonUnit::Bytes},
                    {QStringLiteral("ratio"), LessonUnit::Ratio},     {QStringLiteral("percent"), LessonUnit::Percent},
                    {QStringLiteral("rate"), LessonUnit::Rate},       {QStringLiteral("seconds"), LessonUnit::Seconds},
                    {QStringLiteral("count"), LessonUnit::Count}};
                if (!units.contains(value))
                    fail(m_key, QStringLiteral("'%1' is not one of %2").arg(value, QStringList(units.keys()).join(", ")));
                r.unit = units.value(value);
            } else if (m_key == QLatin1String("tolerance")) {
                QString v = value;
                r.absolute = v.startsWith(QLatin1String("abs "));
                if (r.absolute)
                    v = v.mid(4).trimmed();
                const bool percent = v.endsWith('%');
                if (percent)
                    v.chop(1);
                r.tolerance = number(m_key, v.trimmed(), 0, percent ? 1000 : 10) / (percent ? 100 : 1);
            }
        } catch (const LessonError &e) {
            const QString what = QString::fromUtf8(e.what());
            if (what.startsWith(m_file + ':'))
                throw;
            fail(m_key, what);
        }
    }

    // Across steps: reveals need a measure; an edit or a run-less until
    // needs a run before it; focus on a rank the runs have.
    void checkSteps(const Lesson &lesson)
    {
        bool haveRun = false;
        QSet<QString> recorded;
        for (const LessonStep &s : lesson.steps) {
            if (s.run && s.run->record)
                recorded.insert(s.run->name);
            for (const QString &name : {s.compareA, s.compareB})
                if (!name.isEmpty() && !recorded.contains(name)) {
                    m_line = s.line;
                    fail(QStringLiteral("compare"),
                         QStringLiteral("'%1' is no run with record=yes before this step").arg(name));
                }
            for (const LessonReveal &r : s.reveals)
                if (r.measure.isEmpty()) {
                    m_line = r.line;
                    fail(QStringLiteral("reveal"), QStringLiteral("'%1' has no 'measure:'").arg(r.label));
                }
            if (s.run) {
                haveRun = true;
                if (s.until.kind == LessonUntil::Kind::Next) {
                    m_line = s.line;
                    fail(QStringLiteral("until"), QStringLiteral("'next' steps a paused run: a new run needs "
                                                                 "end, step N or collective"));
                }
            }
            if (!s.run && (s.edit || s.until.kind != LessonUntil::Kind::None) && !haveRun) {
                m_line = s.line;
                fail(s.edit ? QStringLiteral("edit") : QStringLiteral("until"),
                     QStringLiteral("no run before this step to act on"));
            }
        }
    }

    QString m_file;
    int m_line = 0;
    QString m_key;
};

} // namespace

Lesson parseLesson(const QString &text, const QString &fileName)
{
    LessonParser p(fileName);
    return p.parse(text);
}

Lesson loadLesson(const QString &path)
{
    QFile f(path);
    const QString name = QFileInfo(path).fileName();
    if (!f.open(QIODevice::ReadOnly))
        throw LessonError(QStringLiteral("%1: cannot open: %2").arg(path, f.errorString()).toStdString());
    if (f.size() > kMaxLessonBytes)
        throw LessonError(QStringLiteral("%1: larger than 1 MiB").arg(name).toStdString());
    const QByteArray bytes = f.read(kMaxLessonBytes + 1);
    Lesson l = parseLesson(QString::fromUtf8(bytes), path);
    l.source = path;
    return l;
}

QMap<QString, QString> shippedLessons()
{
    QMap<QString, QString> out;
    const QDir dir(QStringLiteral(":/lessons"));
    for (const QFileInfo &fi : dir.entryInfoList({QStringLiteral("*.lesson")}, QDir::Files, QDir::Name))
        out.insert(fi.completeBaseName(), fi.filePath());
    return out;
}

Lesson findLesson(const QString &nameOrPath)
{
    const auto shipped = shippedLessons();
    if (shipped.contains(nameOrPath))
        return loadLesson(shipped.value(nameOrPath));
    if (QFileInfo::exists(nameOrPath))
        return loadLesson(nameOrPath);
    throw LessonError(QStringLiteral("no lesson '%1' (shipped: %2; or give a .lesson file's path)")
                          .arg(nameOrPath, QStringList(shipped.keys()).join(", "))
                          .toStdString());
}

} // namespace smol::app
