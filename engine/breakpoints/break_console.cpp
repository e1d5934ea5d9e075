#include "break_console.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QStringList>

#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <utility>

namespace smol::engine {

BreakConsole::BreakConsole(BreakpointController &controller, QTextStream &out, std::mutex &outMutex, bool json,
                           double holdSeconds)
    : m_controller(controller), m_out(out), m_outMutex(outMutex), m_json(json), m_holdSeconds(holdSeconds) {}

BreakConsole::~BreakConsole()
{
    stop();
}

void BreakConsole::start()
{
    m_thread = std::thread([this] { run(); });
}

void BreakConsole::stop()
{
    m_stop = true;
    if (m_thread.joinable())
        m_thread.join();
}

void BreakConsole::run()
{
    std::uint64_t seen = 0;
    while (!m_stop) {
        const auto pause = m_controller.waitForPause(std::chrono::milliseconds(100), seen);
        if (!pause)
            continue;
        seen = pause->id;
        print(*pause);
        const char *why = waitToResume();
        if (!why)
            return;
        if (!m_json) {
            std::lock_guard lock(m_outMutex);
            m_out << "resuming (" << why << ")\n";
            m_out.flush();
        }
        m_controller.resume();
    }
}

namespace {

// "[128, 2]"
QString shapeText(const std::vector<std::int64_t> &shape)
{
    QStringList dims;
    for (std::int64_t d : shape)
        dims.append(QString::number(d));
    return QStringLiteral("[%1]").arg(dims.join(QStringLiteral(", ")));
}

QJsonObject statsJson(const TensorSnapshot &s)
{
    return QJsonObject{{"min", s.stats.min},   {"max", s.stats.max},
                       {"mean", s.stats.mean}, {"std", s.stats.std},
                       {"l2", s.stats.l2},     {"nan", double(s.stats.nanCount)},
                       {"inf", double(s.stats.infCount)}};
}

QJsonArray relatedJson(const TensorSnapshot &s)
{
    QJsonArray out;
    for (const TensorSnapshot &r : s.related) {
        QJsonObject o = statsJson(r);
        QJsonArray shape;
        for (std::int64_t d : r.shape)
            shape.append(double(d));
        o.insert("name", QString::fromStdString(r.name));
        o.insert("shape", shape);
        o.insert("count", double(r.count));
        out.append(o);
    }
    return out;
}

} // namespace

void BreakConsole::print(const PauseState &p)
{
    std::lock_guard lock(m_outMutex);
    // The collective that hit (a mesh's other groups are held at their own).
    const TensorSnapshot *first = p.inputs.empty() ? nullptr : &p.inputs.front();
    for (const TensorSnapshot &s : p.inputs)
        if (s.node == p.hitNode)
            first = &s;
    if (m_json)
        printJson(p);
    else
        printText(p, first);
    m_out.flush();
}

void BreakConsole::printJson(const PauseState &p)
{
    QJsonArray nodes;
    for (const TensorSnapshot &s : p.inputs) {
        QJsonObject o = statsJson(s);
        for (const auto &[key, value] :
             {std::pair<const char *, QJsonValue>{"node", s.node}, {"step", double(s.step)},
              {"kind", net::collectiveName(s.kind)}, {"seq", double(s.seq)},
              {"name", QString::fromStdString(s.name)}, {"count", double(s.count)},
              {"offset", double(s.offset)}, {"total", double(s.total)},
              {"part", QString::fromStdString(partLabel(s))}})
            o.insert(QLatin1String(key), value);
        if (!s.related.empty()) // read-only, beside the buffer (PowerSGD's Q and error buffer)
            o.insert("related", relatedJson(s));
        nodes.append(o);
    }
    m_out << QJsonDocument(QJsonObject{{"type", "pause"},
                                       {"id", double(p.id)},
                                       {"reason", QString::fromStdString(p.reason)},
                                       {"hit_node", p.hitNode},
                                       {"complete", p.complete},
                                       {"nodes", nodes}})
                 .toJson(QJsonDocument::Compact)
          << "\n";
}

void BreakConsole::printText(const PauseState &p, const TensorSnapshot *first)
{
    m_out << "\npaused (" << QString::fromStdString(p.reason) << ", hit on node " << p.hitNode << ")";
    if (first)
        m_out << " at " << net::collectiveName(first->kind) << " '" << QString::fromStdString(first->name)
              << "' seq " << net::seqInGroup(first->seq) << ", step " << first->step;
    m_out << ": " << p.inputs.size() << " node(s) held" << (p.complete ? "" : " (not every node reached it)")
          << "\n";
    for (const TensorSnapshot &s : p.inputs) {
        m_out << "  node " << s.node << ": " << s.count << " x " << net::dtypeName(s.dtype) << "  min "
              << QString::number(s.stats.min, 'g', 5) << "  max " << QString::number(s.stats.max, 'g', 5)
              << "  mean " << QString::number(s.stats.mean, 'g', 5) << "  std "
              << QString::number(s.stats.std, 'g', 5) << "  L2 " << QString::number(s.stats.l2, 'g', 6)
              << "  NaN " << s.stats.nanCount;
        if (first && s.name != first->name) // held at another group's collective
            m_out << "  at " << net::collectiveName(s.kind) << " '" << QString::fromStdString(s.name) << "'";
        if (s.count != s.total)
            m_out << "  (" << QString::fromStdString(partLabel(s)) << ")";
        m_out << "\n";
        // What rides with the buffer, read-only (edits change the buffer only).
        for (const TensorSnapshot &r : s.related)
            m_out << "    " << QString::fromStdString(r.name) << " " << shapeText(r.shape) << ": " << r.count
                  << " elements  min " << QString::number(r.stats.min, 'g', 5) << "  max "
                  << QString::number(r.stats.max, 'g', 5) << "  L2 " << QString::number(r.stats.l2, 'g', 6)
                  << "  NaN " << r.stats.nanCount << "  (read-only)\n";
    }
}

const char *BreakConsole::waitToResume()
{
    using Clock = std::chrono::steady_clock;
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(std::max(0.0, m_holdSeconds)));
    while (!m_stop) {
        if (m_stdinClosed)
            return "stdin closed";
        if (m_holdSeconds >= 0 && Clock::now() >= deadline)
            return "hold elapsed";
        pollfd fd{STDIN_FILENO, POLLIN, 0};
        if (::poll(&fd, 1, 100) > 0) {
            // Read one line, or notice EOF.
            char c = 0;
            ssize_t n = 0;
            while ((n = ::read(STDIN_FILENO, &c, 1)) == 1 && c != '\n') {
            }
            if (n <= 0) {
                m_stdinClosed = true;
                return "stdin closed";
            }
            return "line on stdin";
        }
    }
    return nullptr;
}

} // namespace smol::engine
