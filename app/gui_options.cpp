#include "gui_options.h"

#include "net/socket_util.h"

#include <QCommandLineParser>
#include <QSettings>

namespace smol::app {

namespace {

// ~/.config/smolcluster/smolcluster.conf (tests: QStandardPaths' test location).
const QString kOrganisation = QStringLiteral("smolcluster");
const QString kApplication = QStringLiteral("smolcluster");

} // namespace

GuiOptions parseGuiOptions(const QStringList &args)
{
    QCommandLineParser parser;
    const QCommandLineOption help(QStringList{QStringLiteral("h"), QStringLiteral("help")});
    const QCommandLineOption version(QStringLiteral("version"));
    const QCommandLineOption projector(QStringLiteral("projector"));
    const QCommandLineOption nodes(QStringLiteral("nodes"), QString(), QStringLiteral("N"));
    const QCommandLineOption steps(QStringLiteral("steps"), QString(), QStringLiteral("K"));
    const QCommandLineOption strategy(QStringLiteral("strategy"), QString(), QStringLiteral("S"));
    const QCommandLineOption backend(QStringLiteral("backend"), QString(), QStringLiteral("B"));
    const QCommandLineOption screenshot(QStringLiteral("screenshot"), QString(), QStringLiteral("FILE"));
    const QCommandLineOption replay(QStringLiteral("replay"), QString(), QStringLiteral("SESSION"));
    const QCommandLineOption compare(QStringLiteral("compare"), QString(), QStringLiteral("SESSION"));
    const QCommandLineOption listen(QStringLiteral("listen"), QString(), QStringLiteral("PORT"));
    const QCommandLineOption token(QStringLiteral("token"), QString(), QStringLiteral("T"));
    const QCommandLineOption advertise(QStringLiteral("advertise"), QString(), QStringLiteral("ADDR"));
    const QCommandLineOption budget(QStringLiteral("timeline-budget"), QString(), QStringLiteral("MIB"));
    const QCommandLineOption lesson(QStringLiteral("lesson"), QString(), QStringLiteral("NAME"));
    const QCommandLineOption lessonStep(QStringLiteral("lesson-step"), QString(), QStringLiteral("K"));
    parser.addOptions({help, version, projector, nodes, steps, strategy, backend, screenshot, replay, compare, listen, token, advertise,
                       budget, lesson, lessonStep});

    GuiOptions options;
    if (!parser.parse(args)) {
        options.error = parser.errorText();
        return options;
    }
    options.parsed = true;
    options.help = parser.isSet(help);
    options.version = parser.isSet(version);
    options.projector = parser.isSet(projector);
    options.screenshot = parser.value(screenshot);
    options.replay = parser.value(replay);
    options.compare = parser.value(compare);
    if (parser.isSet(strategy))
        options.strategy = parser.value(strategy);
    // The first bad value is the one reported.
    const auto fail = [&](const QString &error) {
        if (options.error.isEmpty())
            options.error = error;
    };
    if (parser.isSet(backend)) {
        options.backend = parser.value(backend);
        if (options.backend != QLatin1String("ours") && options.backend != QLatin1String("gloo"))
            fail(QStringLiteral("--backend takes ours or gloo, got '%1'").arg(parser.value(backend)));
    }
    if (parser.isSet(nodes)) {
        bool ok = false;
        options.nodes = parser.value(nodes).toInt(&ok);
        if (!ok || options.nodes < 1 || options.nodes > kMaxGuiNodes)
            fail(QStringLiteral("--nodes must be an integer from 1 to %1, got '%2'")
                     .arg(kMaxGuiNodes)
                     .arg(parser.value(nodes)));
    }
    options.lesson = parser.value(lesson);
    if (parser.isSet(lessonStep)) {
        bool ok = false;
        options.lessonStep = parser.value(lessonStep).toInt(&ok);
        if (!ok || options.lessonStep < 1 || options.lessonStep > 1000)
            fail(QStringLiteral("--lesson-step must be a step from 1 to 1000, got '%1'").arg(parser.value(lessonStep)));
        else if (options.lesson.isEmpty())
            fail(QStringLiteral("--lesson-step needs --lesson NAME|FILE"));
    }
    if (!options.compare.isEmpty() && options.replay.isEmpty())
        fail(QStringLiteral("--compare B needs --replay A"));
    if (!options.lesson.isEmpty() && !options.replay.isEmpty())
        fail(QStringLiteral("--lesson runs the live cluster: it does not go with --replay"));
    if (parser.isSet(steps)) {
        bool ok = false;
        options.steps = parser.value(steps).toInt(&ok);
        if (!ok || options.steps < 1)
            fail(QStringLiteral("--steps must be a positive integer, got '%1'").arg(parser.value(steps)));
    }
    if (parser.isSet(listen)) {
        bool ok = false;
        const int port = parser.value(listen).toInt(&ok);
        if (!ok || port < 1 || port > 65535)
            fail(QStringLiteral("--listen must be a port from 1 to 65535, got '%1'").arg(parser.value(listen)));
        else
            options.listen.port = quint16(port);
    }
    if (parser.isSet(token)) {
        options.listen.token = parser.value(token);
        if (options.listen.token.trimmed().isEmpty())
            fail(QStringLiteral("--token must not be empty"));
    }
    if (parser.isSet(advertise)) {
        options.listen.advertise = parser.value(advertise);
        if (options.listen.advertise.isEmpty())
            fail(QStringLiteral("--advertise must not be empty"));
    }
    if (parser.isSet(budget)) {
        bool ok = false;
        options.timelineBudgetMiB = parser.value(budget).toInt(&ok);
        if (!ok || options.timelineBudgetMiB < 0 || options.timelineBudgetMiB > 65536)
            fail(QStringLiteral("--timeline-budget must be MiB from 0 (none) to 65536, got '%1'")
                     .arg(parser.value(budget)));
    }
    if (const QString why = checkListenSettings(options.listen); !why.isEmpty())
        fail(why);
    if (!parser.positionalArguments().isEmpty())
        fail(QStringLiteral("unexpected argument '%1'").arg(parser.positionalArguments().first()));
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
