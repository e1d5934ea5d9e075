// smolcluster's command line, and the Remote nodes settings the window
// remembers (QSettings), which give the coordinator the same port and token
// at every start, so the join command on the board stays right:
//
//   smolcluster --listen 7080 --token class7 [--advertise 192.168.1.20]
//   smolctl node --join 192.168.1.20:7080 --token class7   (on each student's machine)
//
// A flag wins over the remembered value; with neither, any free port and a
// random token, as before. Parsing is a pure function so tests can table it.
#pragma once

#include <QString>
#include <QStringList>

namespace smol::app {

constexpr int kDefaultGuiNodes = 4;
constexpr int kMaxGuiNodes = 64;

// How the window's coordinator listens (0 / "": not set).
struct ListenSettings {
    quint16 port = 0;
    QString token;
    QString advertise;
    bool operator==(const ListenSettings &o) const
    {
        return port == o.port && token == o.token && advertise == o.advertise;
    }
};

struct GuiOptions {
    bool parsed = false; // false: a parse error (may be a Qt option before QApplication strips them)
    bool help = false;
    bool version = false;
    bool projector = false;
    int nodes = kDefaultGuiNodes;
    int steps = -1; // -1: not given
    QString strategy = QStringLiteral("ddp");
    QString model; // --model mlp|gpt; "": the tool bar's default
    // --mesh dp=2,tp=2,pp=2: a device mesh for the next run; sets the
    // nodes to its product (a --nodes that disagrees is an error).
    QString mesh;
    QString backend = QStringLiteral("ours"); // who runs the collectives: ours or gloo (c10d)
    QString compress; // --compress none|fp16|bf16|powersgd:R (RunSettings::compression); "": the tool bar's
    QString screenshot;
    QString replay;
    QString compare;       // with replay: a second session beside it
    QString lesson;        // --lesson NAME|FILE: open it at start
    int lessonStep = -1;   // --lesson-step K: run it to step K (1-based); -1: stay at its first step
    QString breakAt;       // --break SPEC: a breakpoint before the run (with --screenshot: save at the pause)
    QString view;          // --view NAME: the view shown at start (MainWindow::showView's keys)
    ListenSettings listen; // what the flags set; unset fields come from the remembered settings
    // The teacher's window: an audience may watch with this token but not
    // join as nodes (--watch-token W; "": only with the run's token).
    QString watchToken;
    // A student's window: --watch HOST:PORT (a viewer of the teacher's run)
    // or --join HOST:PORT (also one node of this machine in the teacher's
    // cluster), with --token T and --name N.
    QString watchHost; // "": neither
    quint16 watchPort = 0;
    bool join = false;
    QString name;
    int timelineBudgetMiB = 256; // the live timeline's memory budget (0: none); replays are never trimmed
    QString error;               // one line, for "smolcluster: <error> (try --help)"
};

GuiOptions parseGuiOptions(const QStringList &args);

// "" when the settings can be used, else why not (one line): a token with
// spaces (it goes on the board unquoted), an advertise address that is not a
// host name or IPv4 address.
QString checkListenSettings(const ListenSettings &settings);

// The Remote nodes dialog's settings, remembered between starts
// (QSettings "smolcluster", group "remote").
ListenSettings rememberedListenSettings();
void rememberListenSettings(const ListenSettings &settings);
// The flags, then the remembered settings for what they leave unset.
ListenSettings effectiveListenSettings(const ListenSettings &flags, const ListenSettings &remembered);

} // namespace smol::app
