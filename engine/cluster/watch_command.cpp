// smolctl watch: a ViewerClient whose handlers print. Lines go out from the
// client's reader thread one at a time (under a mutex); the main thread
// waits for the run's end or the connection's.
#include "watch_command.h"

#include "viewer_client.h"

#include <QJsonDocument>
#include <QJsonObject>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>

namespace smol::engine {

namespace {

const char kWatchUsage[] = R"(Usage: smolctl watch HOST:PORT --token T [OPTIONS]

Watches the run of the cluster whose coordinator (the teacher's smolcluster
window, or `smolctl train --listen PORT --viewers`) listens at HOST:PORT,
without joining it as a node: one line per step (step, loss, samples/s),
per pause and resume, per lesson step the teacher shows, and the run's end.
The token is the cluster's or its watch token (--watch-token on the
coordinator), which may watch but never join as a node.

Options:
  --token T          the cluster's token or its watch token
                     (default: SMOLCLUSTER_TOKEN)
  --name NAME        how the teacher sees this viewer's answers (default: watch)
  --json             one JSON object per line instead of text
  --predict K=X      when the teacher's lesson shows step K, answer X
                     (the number the step asks to predict); repeatable
  --runs N           exit after N runs ended (default 1); 0: watch every
                     run until the coordinator goes away (a lesson's runs;
                     exit 0 when the last run ended well)
  --timeout SEC      give up when the run has not ended after SEC seconds
                     (default: wait as long as it takes)
  --stall            stop reading after the first batch (a viewer that
                     stalls, for tests of the coordinator's stream)
  -h, --help         show this help

Exit code 0 when the run ended well, 1 when it failed or the connection
ended first (the coordinator went away or dropped this viewer), 2 on bad
arguments or when the coordinator could not be reached or refused the token.
)";

struct WatchOptions {
    ViewerClientOptions client;
    bool json = false;
    bool stall = false;
    std::map<int, double> predictions; // lesson step -> value
    int runs = 1;                      // 0: until the connection ends
    std::optional<std::chrono::seconds> timeout;
};

// Parses the arguments; "" or the reason they are bad.
QString parseWatch(const QStringList &args, WatchOptions &o, bool &help)
{
    o.client.token = qEnvironmentVariable("SMOLCLUSTER_TOKEN").toStdString();
    o.client.name = "watch";
    bool haveTarget = false;
    for (int i = 0; i < args.size(); ++i) {
        const QString a = args[i];
        if (a == "-h" || a == "--help") {
            help = true;
            return {};
        }
        if (a == "--json" || a == "--stall") {
            (a == "--json" ? o.json : o.stall) = true;
            if (o.stall)
                o.client.receiveBuffer = 4096; // the stall shows at the coordinator within seconds
            continue;
        }
        if (!a.startsWith("--")) {
            const int colon = a.lastIndexOf(':');
            bool ok = false;
            const int port = colon > 0 ? a.mid(colon + 1).toInt(&ok) : 0;
            if (haveTarget || !ok || port <= 0 || port > 65535)
                return "'" + a + "' is not HOST:PORT";
            o.client.host = a.left(colon).toStdString();
            o.client.port = std::uint16_t(port);
            haveTarget = true;
            continue;
        }
        if (i + 1 >= args.size())
            return "'" + a + "' is unknown or needs a value (see smolctl watch --help)";
        const QString v = args[++i];
        if (a == "--token") {
            o.client.token = v.toStdString();
        } else if (a == "--name") {
            o.client.name = v.left(64).toStdString();
        } else if (a == "--runs") {
            bool ok = false;
            o.runs = v.toInt(&ok);
            if (!ok || o.runs < 0)
                return "--runs takes a number of runs (0: until the coordinator goes away)";
        } else if (a == "--timeout") {
            bool ok = false;
            const int s = v.toInt(&ok);
            if (!ok || s <= 0)
                return "--timeout takes a positive number of seconds";
            o.timeout = std::chrono::seconds(s);
        } else if (a == "--predict") {
            const int eq = v.indexOf('=');
            bool okK = false, okX = false;
            const int k = eq > 0 ? v.left(eq).toInt(&okK) : -1;
            const double x = eq > 0 ? v.mid(eq + 1).toDouble(&okX) : 0;
            if (!okK || !okX || k < 0 || !std::isfinite(x))
                return "--predict takes STEP=VALUE, e.g. 2=3.5";
            o.predictions[k] = x;
        } else {
            return "'" + a + "' is unknown (see smolctl watch --help)";
        }
    }
    if (!haveTarget)
        return "which coordinator? smolctl watch HOST:PORT --token T";
    if (o.client.token.empty())
        return "--token T is needed (or SMOLCLUSTER_TOKEN)";
    return {};
}

// What the handlers print, one line at a time.
class Printer {
public:
    Printer(QTextStream &out, bool json) : m_out(out), m_json(json) { }
    void line(const QJsonObject &json, const QString &text)
    {
        std::lock_guard lock(m_mutex);
        m_out << (m_json ? QString::fromUtf8(QJsonDocument(json).toJson(QJsonDocument::Compact)) : text) << "\n";
        m_out.flush();
    }

private:
    QTextStream &m_out;
    bool m_json;
    std::mutex m_mutex;
};

// The answer --predict gives for lesson step k, if any, sent and said.
void predict(Printer &p, const WatchOptions &o, ViewerClient *client, int k)
{
    const auto answer = o.predictions.find(k);
    if (answer != o.predictions.end() && client && client->sendPrediction(k, answer->second))
        p.line(QJsonObject{{"event", "predicted"}, {"step", k}, {"value", answer->second}},
               QStringLiteral("predicted %1 for lesson step %2").arg(answer->second).arg(k));
}

struct WatchState {
    std::mutex mutex;
    std::condition_variable cv;
    bool over = false;
    bool ok = false;
    std::string why;
    bool gotBatch = false;
    int lessonBeforeClient = -1;
    int runsEnded = 0;
    std::map<std::int64_t, double> loss; // cluster-wide, by step, until its samples/s arrives
};

ViewerClient::Handlers handlersFor(Printer &p, WatchState &s, const WatchOptions &o,
                                  std::atomic<ViewerClient *> &client)
{
    ViewerClient::Handlers h;
    h.run = [&p](const SessionHeader &hd, const QJsonObject &) {
        p.line(QJsonObject{{"event", "run"}, {"strategy", QString::fromStdString(hd.strategy)},
                           {"model", QString::fromStdString(hd.model)}, {"nodes", hd.nodes}, {"steps", double(hd.steps)}},
               QStringLiteral("run: %1, %2, %3 nodes, %4 steps")
                   .arg(QString::fromStdString(hd.strategy), QString::fromStdString(hd.model))
                   .arg(hd.nodes)
                   .arg(hd.steps));
    };
    h.events = [&p, &s](ViewerBatch &b) {
        std::lock_guard lock(s.mutex);
        s.gotBatch = true;
        s.cv.notify_all();
        for (const MetricSample &m : b.events.metrics) {
            if (m.node != -1)
                continue;
            if (m.name == "loss")
                s.loss[m.step] = m.value;
            if (m.name != "samples_per_s")
                continue;
            const auto l = s.loss.find(m.step);
            const double loss = l == s.loss.end() ? std::nan("") : l->second;
            s.loss.erase(s.loss.begin(), s.loss.upper_bound(m.step));
            p.line(QJsonObject{{"event", "step"}, {"step", double(m.step)}, {"loss", loss}, {"samples_per_s", m.value}},
                   QStringLiteral("step %1: loss %2, %3 samples/s").arg(m.step).arg(loss, 0, 'f', 4).arg(m.value, 0, 'f', 0));
        }
    };
    h.pause = [&p](bool held) {
        p.line(QJsonObject{{"event", held ? "pause" : "resume"}}, held ? QStringLiteral("paused") : QStringLiteral("resumed"));
    };
    h.lesson = [&p, &o, &client, &s](const QJsonObject &lesson) {
        if (!lesson.contains(QStringLiteral("index")))
            return;
        const int k = lesson.value(QStringLiteral("index")).toInt();
        {
            std::lock_guard lock(s.mutex); // main sets `client` under it
            if (!client.load()) {
                s.lessonBeforeClient = k;
                return;
            }
        }
        QJsonObject json = lesson;
        json.insert("event", "lesson");
        json.remove("type");
        p.line(json, QStringLiteral("lesson step %1: %2").arg(k).arg(lesson.value(QStringLiteral("title")).toString()));
        predict(p, o, client.load(), k);
    };
    h.end = [&s, &o, &p](bool ok, const std::string &summary) {
        std::lock_guard lock(s.mutex);
        s.ok = ok;
        s.why = summary;
        ++s.runsEnded;
        if (o.runs > 0 && s.runsEnded >= o.runs) {
            s.over = true;
            s.cv.notify_all();
        } else {
            p.line(QJsonObject{{"event", "run_end"}, {"ok", ok}, {"summary", QString::fromStdString(summary)}},
                   QStringLiteral("run ended: %1").arg(QString::fromStdString(summary)));
        }
    };
    h.closed = [&s, &o](const std::string &why) {
        std::lock_guard lock(s.mutex);
        // Watching every run: the coordinator going away is the end, good
        // when the last run was; otherwise the connection ended first.
        if (!s.over && (o.runs > 0 || s.runsEnded == 0)) {
            s.ok = false;
            s.why = why;
        }
        s.over = true;
        s.cv.notify_all();
    };
    return h;
}

} // namespace

int runWatchCommand(const QStringList &args, QTextStream &out, QTextStream &err)
{
    WatchOptions o;
    bool help = false;
    if (const QString bad = parseWatch(args, o, help); !bad.isEmpty()) {
        err << "smolctl watch: " << bad << "\n";
        return 2;
    }
    if (help) {
        out << kWatchUsage;
        return 0;
    }
    Printer printer(out, o.json);
    WatchState state;
    std::atomic<ViewerClient *> client{nullptr};
    std::unique_ptr<ViewerClient> owned;
    const auto started = std::chrono::steady_clock::now();
    try {
        owned = std::make_unique<ViewerClient>(o.client, handlersFor(printer, state, o, client));
    } catch (const std::exception &e) {
        err << "smolctl watch: " << QString::fromUtf8(e.what()) << "\n";
        return 2;
    }
    std::unique_lock lock(state.mutex);
    client = owned.get();
    // A lesson step shown before `client` was set: answer it now.
    if (state.lessonBeforeClient >= 0)
        predict(printer, o, client, state.lessonBeforeClient);
    if (o.stall) {
        state.cv.wait(lock, [&] { return state.gotBatch || state.over; });
        owned->stopReading();
        printer.line(QJsonObject{{"event", "stalled"}}, QStringLiteral("stalled: reading nothing more"));
    }
    auto over = [&] { return state.over; };
    if (o.timeout)
        state.cv.wait_for(lock, *o.timeout, over);
    else
        state.cv.wait(lock, over);
    const bool ended = state.over, ok = state.ok;
    const std::string why = state.why;
    lock.unlock();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    const auto bytes = double(owned->bytesReceived());
    owned.reset();
    printer.line(QJsonObject{{"event", "end"}, {"ok", ended && ok}, {"summary", QString::fromStdString(why)},
                             {"bytes_received", bytes}, {"seconds", seconds}, {"bytes_per_s", bytes / std::max(seconds, 1e-9)}},
                 QStringLiteral("%1: %2\nreceived %3 bytes in %4 s (%5 bytes/s)")
                     .arg(!ended ? QStringLiteral("timed out") : ok ? QStringLiteral("run ended") : QStringLiteral("ended"))
                     .arg(QString::fromStdString(why.empty() ? "no end within --timeout" : why))
                     .arg(bytes, 0, 'f', 0)
                     .arg(seconds, 0, 'f', 1)
                     .arg(bytes / std::max(seconds, 1e-9), 0, 'f', 0));
    return ended && ok ? 0 : 1;
}

} // namespace smol::engine
