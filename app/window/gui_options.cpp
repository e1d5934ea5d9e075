#include "gui_options.h"

#include "engine/breakpoints/breakpoint_spec.h"
#include "engine/compression_config.h"
#include "net/device_mesh.h"
#include "net/socket_util.h"

#include <QCommandLineParser>
#include <QSettings>

#include <limits>

namespace smol::app {

namespace {

// ~/.config/smolcluster/smolcluster.conf (tests: QStandardPaths' test location).
const QString kOrganisation = QStringLiteral("smolcluster");
const QString kApplication = QStringLiteral("smolcluster");

// Every flag smolcluster takes, and for one that takes a value, the
// value's name in --help (null: a switch).
struct Flag {
    const char *name;
    const char *value;
};
constexpr Flag kFlags[] = {
    {"version", nullptr},       {"projector", nullptr}, {"nodes", "N"},         {"steps", "K"},
    {"strategy", "S"},          {"backend", "B"},       {"screenshot", "FILE"}, {"replay", "SESSION"},
    {"compare", "SESSION"},     {"listen", "PORT"},     {"token", "T"},         {"advertise", "ADDR"},
    {"timeline-budget", "MIB"}, {"lesson", "NAME"},     {"lesson-step", "K"},   {"break", "SPEC"},
    {"view", "NAME"},           {"model", "M"},         {"mesh", "SPEC"},       {"watch", "HOST:PORT"},
    {"join", "HOST:PORT"},      {"name", "N"},          {"watch-token", "W"},
    {"compress", "C"}};

// Reads the flags of one parse; the first bad value is the one reported.
class FlagReader {
public:
    FlagReader(const QCommandLineParser &parser, GuiOptions &options)
        : m_parser(parser)
        , m_options(options)
    {
    }

    bool isSet(const char *name) const { return m_parser.isSet(QLatin1String(name)); }
    QString value(const char *name) const { return m_parser.value(QLatin1String(name)); }
    void fail(const QString &error)
    {
        if (m_options.error.isEmpty())
            m_options.error = error;
    }
    // The flag's value as an integer (0 when it is not one); `ok` false
    // when it is not one or is outside [min, max].
    int integer(const char *name, int min, int max, bool *ok) const
    {
        const int v = value(name).toInt(ok);
        *ok = *ok && v >= min && v <= max;
        return v;
    }

private:
    const QCommandLineParser &m_parser;
    GuiOptions &m_options;
};

// A device mesh: its product is the node count (--nodes, if given, must agree).
void readMesh(FlagReader &r, GuiOptions &o)
{
    if (!r.isSet("mesh"))
        return;
    o.mesh = r.value("mesh").trimmed();
    try {
        const net::DeviceMesh mesh = net::DeviceMesh::parse(o.mesh.toStdString());
        if (mesh.nodes() > kMaxGuiNodes)
            r.fail(QStringLiteral("--mesh %1 has %2 nodes, more than %3")
                       .arg(o.mesh)
                       .arg(mesh.nodes())
                       .arg(kMaxGuiNodes));
        else if (r.isSet("nodes") && o.nodes != mesh.nodes())
            r.fail(QStringLiteral("--mesh %1 has %2 nodes, --nodes says %3")
                       .arg(o.mesh)
                       .arg(mesh.nodes())
                       .arg(o.nodes));
        else
            o.nodes = mesh.nodes();
    } catch (const std::invalid_argument &e) {
        r.fail(QString::fromUtf8(e.what())); // "--mesh SPEC: why"
    }
}

// What the next run is: strategy, model, backend, nodes, mesh, steps.
void readRun(FlagReader &r, GuiOptions &o)
{
    bool ok = false;
    if (r.isSet("strategy"))
        o.strategy = r.value("strategy");
    if (r.isSet("model")) {
        o.model = r.value("model");
        if (o.model != QLatin1String("mlp") && o.model != QLatin1String("gpt"))
            r.fail(QStringLiteral("--model takes mlp or gpt, got '%1'").arg(o.model));
    }
    if (r.isSet("backend")) {
        o.backend = r.value("backend");
        if (o.backend != QLatin1String("ours") && o.backend != QLatin1String("gloo"))
            r.fail(QStringLiteral("--backend takes ours or gloo, got '%1'").arg(r.value("backend")));
    }
    if (r.isSet("nodes")) {
        o.nodes = r.integer("nodes", 1, kMaxGuiNodes, &ok);
        if (!ok)
            r.fail(QStringLiteral("--nodes must be an integer from 1 to %1, got '%2'")
                       .arg(kMaxGuiNodes)
                       .arg(r.value("nodes")));
    }
    if (r.isSet("compress")) {
        o.compress = r.value("compress");
        try {
            engine::parseCompression(o.compress.toStdString());
        } catch (const std::exception &e) {
            r.fail(QStringLiteral("--compress: %1").arg(QString::fromUtf8(e.what())));
        }
    }
    readMesh(r, o);
}

// The views --view may name (MainWindow::showView's keys).
const QStringList kViews = {QStringLiteral("node"),      QStringLiteral("memory"),
                            QStringLiteral("shards"),    QStringLiteral("placement"),
                            QStringLiteral("inspector"), QStringLiteral("log"),
                            QStringLiteral("charts"),    QStringLiteral("timeline")};

// A lesson, a replay and a compared run, and which go together.
void readLessonAndReplay(FlagReader &r, GuiOptions &o)
{
    o.screenshot = r.value("screenshot");
    o.replay = r.value("replay");
    o.compare = r.value("compare");
    o.lesson = r.value("lesson");
    bool ok = false;
    if (r.isSet("lesson-step")) {
        o.lessonStep = r.integer("lesson-step", 1, 1000, &ok);
        if (!ok)
            r.fail(QStringLiteral("--lesson-step must be a step from 1 to 1000, got '%1'")
                       .arg(r.value("lesson-step")));
        else if (o.lesson.isEmpty())
            r.fail(QStringLiteral("--lesson-step needs --lesson NAME|FILE"));
    }
    o.view = r.value("view");
    if (r.isSet("view") && !kViews.contains(o.view))
        r.fail(QStringLiteral("--view takes one of %1, got '%2'")
                   .arg(kViews.join(QStringLiteral(", ")), o.view));
    if (r.isSet("break")) {
        o.breakAt = r.value("break").trimmed();
        try {
            engine::parseBreakpoint(o.breakAt.toStdString());
        } catch (const std::exception &e) {
            r.fail(QStringLiteral("--break %1: %2").arg(o.breakAt, QString::fromUtf8(e.what())));
        }
        if (!o.replay.isEmpty())
            r.fail(QStringLiteral("--break pauses the live cluster: it does not go with --replay"));
    }
    if (!o.compare.isEmpty() && o.replay.isEmpty())
        r.fail(QStringLiteral("--compare B needs --replay A"));
    if (!o.lesson.isEmpty() && !o.replay.isEmpty())
        r.fail(QStringLiteral("--lesson runs the live cluster: it does not go with --replay"));
    if (r.isSet("steps")) {
        o.steps = r.integer("steps", 1, std::numeric_limits<int>::max(), &ok);
        if (!ok)
            r.fail(QStringLiteral("--steps must be a positive integer, got '%1'").arg(r.value("steps")));
    }
}

// How the coordinator listens, and the live timeline's memory budget.
void readListen(FlagReader &r, GuiOptions &o)
{
    bool ok = false;
    if (r.isSet("listen")) {
        const int port = r.integer("listen", 1, 65535, &ok);
        if (!ok)
            r.fail(
                QStringLiteral("--listen must be a port from 1 to 65535, got '%1'").arg(r.value("listen")));
        else
            o.listen.port = quint16(port);
    }
    if (r.isSet("token")) {
        o.listen.token = r.value("token");
        if (o.listen.token.trimmed().isEmpty())
            r.fail(QStringLiteral("--token must not be empty"));
    }
    if (r.isSet("advertise")) {
        o.listen.advertise = r.value("advertise");
        if (o.listen.advertise.isEmpty())
            r.fail(QStringLiteral("--advertise must not be empty"));
    }
    if (r.isSet("timeline-budget")) {
        o.timelineBudgetMiB = r.integer("timeline-budget", 0, 65536, &ok);
        if (!ok)
            r.fail(QStringLiteral("--timeline-budget must be MiB from 0 (none) to 65536, got '%1'")
                       .arg(r.value("timeline-budget")));
    }
    if (const QString why = checkListenSettings(o.listen); !why.isEmpty())
        r.fail(why);
}

// A student's window (--watch / --join HOST:PORT --token T [--name N]), and
// the teacher's --watch-token.
void readWatch(FlagReader &r, GuiOptions &o)
{
    o.watchToken = r.value("watch-token");
    if (r.isSet("watch-token") && (o.watchToken.trimmed().isEmpty() || o.watchToken == o.listen.token))
        r.fail(QStringLiteral("--watch-token must be a token other than --token"));
    if (r.isSet("watch") && r.isSet("join"))
        r.fail(QStringLiteral("--watch or --join, not both (--join also watches)"));
    o.join = r.isSet("join");
    o.name = r.value("name").trimmed();
    const QString where = r.value(o.join ? "join" : "watch");
    if (!r.isSet("watch") && !o.join) {
        if (r.isSet("name"))
            r.fail(QStringLiteral("--name goes with --watch or --join"));
        return;
    }
    const qsizetype colon = where.lastIndexOf(QLatin1Char(':'));
    bool ok = false;
    const int port = colon > 0 ? where.mid(colon + 1).toInt(&ok) : 0;
    o.watchHost = colon > 0 ? where.left(colon) : QString();
    if (!ok || port < 1 || port > 65535 || !net::sock::isPlausibleHost(o.watchHost.toStdString()))
        r.fail(QStringLiteral("--%1 takes HOST:PORT (a host name or IPv4 address, a port from 1 to 65535), got '%2'")
                   .arg(o.join ? "join" : "watch", where));
    o.watchPort = quint16(port);
    if (o.listen.token.isEmpty())
        r.fail(QStringLiteral("--%1 needs --token T (the teacher's token, or its watch token)").arg(o.join ? "join" : "watch"));
    if (r.isSet("listen") || r.isSet("replay") || r.isSet("lesson") || r.isSet("watch-token") || r.isSet("break"))
        r.fail(QStringLiteral("--%1 shows the teacher's cluster: it does not go with --listen, --watch-token, --replay, "
                              "--lesson or --break").arg(o.join ? "join" : "watch"));
}

} // namespace

GuiOptions parseGuiOptions(const QStringList &args)
{
    QCommandLineParser parser;
    parser.addOption(QCommandLineOption(QStringList{QStringLiteral("h"), QStringLiteral("help")}));
    for (const Flag &f : kFlags)
        parser.addOption(f.value
                             ? QCommandLineOption(QLatin1String(f.name), QString(), QLatin1String(f.value))
                             : QCommandLineOption(QLatin1String(f.name)));
    GuiOptions options;
    if (!parser.parse(args)) {
        options.error = parser.errorText();
        return options;
    }
    options.parsed = true;
    FlagReader r(parser, options);
    options.help = r.isSet("help");
    options.version = r.isSet("version");
    options.projector = r.isSet("projector");
    readRun(r, options);
    readLessonAndReplay(r, options);
    readListen(r, options);
    readWatch(r, options);
    if (!parser.positionalArguments().isEmpty())
        r.fail(QStringLiteral("unexpected argument '%1'").arg(parser.positionalArguments().first()));
    return options;
}

QString checkListenSettings(const ListenSettings &settings)
{
    for (const QChar c : settings.token)
        if (c.isSpace())
            return QStringLiteral("the token must not contain spaces, got '%1'").arg(settings.token);
    if (!settings.advertise.isEmpty() && !net::sock::isPlausibleHost(settings.advertise.toStdString()))
        return QStringLiteral("the advertise address must be a host name or an IPv4 address, got '%1'")
            .arg(settings.advertise);
    return {};
}

ListenSettings rememberedListenSettings()
{
    QSettings s(kOrganisation, kApplication);
    ListenSettings out;
    const int port = s.value(QStringLiteral("remote/port"), 0).toInt();
    out.port = port >= 1 && port <= 65535 ? quint16(port) : 0;
    out.token = s.value(QStringLiteral("remote/token")).toString();
    out.advertise = s.value(QStringLiteral("remote/advertise")).toString();
    if (!checkListenSettings(out).isEmpty()) // a hand-edited file: ignore what cannot work
        return {};
    return out;
}

void rememberListenSettings(const ListenSettings &settings)
{
    QSettings s(kOrganisation, kApplication);
    s.setValue(QStringLiteral("remote/port"), int(settings.port));
    s.setValue(QStringLiteral("remote/token"), settings.token);
    s.setValue(QStringLiteral("remote/advertise"), settings.advertise);
    s.sync();
}

ListenSettings effectiveListenSettings(const ListenSettings &flags, const ListenSettings &remembered)
{
    ListenSettings out = remembered;
    if (flags.port != 0)
        out.port = flags.port;
    if (!flags.token.isEmpty())
        out.token = flags.token;
    if (!flags.advertise.isEmpty())
        out.advertise = flags.advertise;
    return out;
}

} // namespace smol::app
