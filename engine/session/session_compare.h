// Two recorded runs side by side (`smolctl compare A B`): what differs in
// their configurations, then one figure per row with A's value, B's and B/A.
//
// Every figure is measured from the events a session file holds, never from
// a summary a trainer printed (docs/session-format.md §9 says exactly what
// each one counts):
//
//   run      steps, step time (median, p95), samples/s, final loss, test
//            accuracy, pipeline bubble
//   per node bytes sent per step (send frames inside the node's step spans)
//            and in all, idle share (not computing between its first step's
//            start and its last step's end), memory by category (the
//            largest over its samples) and params+grads+optimizer held at
//            step end
//   A vs B   the largest loss difference over the steps both recorded
//
// What one run has and the other lacks (a node 3 in A only, the bubble of
// a pipeline run) stays a row, with no value (nullopt) on the side that
// lacks it. The rows are the figure table's (figure_table.h) that have a
// compare key, in its order. measureRun() is a pure function of a header
// and its events; the reader overload loads them. The command:
// session_compare_command.cpp.
#pragma once

#include "figure_table.h"
#include "session_events.h"

#include <QJsonValue>
#include <QStringList>
#include <QTextStream>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace smol::engine {

class SessionReader;

// What one run measured (RunFigures, NodeFigures: figure_table.h).
RunFigures measureRun(const SessionHeader &header, const SessionEvents &events);
// Loads the file's frames, spans, memory and metrics (not logs or tensors);
// throws SessionError.
RunFigures measureRun(const SessionReader &reader);

// A figure of two runs. ratio: b / a, nullopt when either is missing or a is 0.
struct ComparedFigure {
    std::optional<double> a, b;
    std::optional<double> ratio() const;
};

struct ComparedRow {
    const char *key;   // the JSON key
    const char *label; // the table's
    FigureUnit unit;
    ComparedFigure value;
};

struct SessionComparison {
    struct ConfigDifference {
        std::string key;
        QJsonValue a, b; // Undefined: the run has no such field
    };
    struct NodeRows {
        int rank = -1;
        std::vector<ComparedRow> rows;
    };
    struct LossDifference {
        double largest = 0; // |loss B - loss A|
        std::int64_t step = -1;
        std::int64_t commonSteps = 0;
    };

    std::vector<ConfigDifference> configDifferences; // by key
    std::vector<ComparedRow> run;                    // table order
    std::vector<NodeRows> nodes;                     // every rank either run has
    std::optional<LossDifference> lossDifference;    // nullopt: no common step with a loss
};

SessionComparison compareRuns(const RunFigures &a, const RunFigures &b);

// A figure and a ratio as the command's table writes them ("12.5 KiB",
// "1.500"; "\u2014" for none); the window's compare table uses the same.
QString formatValue(FigureUnit unit, std::optional<double> v);
QString formatRatio(std::optional<double> r);

// smolctl compare A.smolrec B.smolrec [--json]. Exit codes as
// session_commands.h: 0, 1 a file that cannot be read (one line on stderr),
// 2 bad arguments.
int runCompareCommand(const QStringList &args, QTextStream &out, QTextStream &err);

} // namespace smol::engine
