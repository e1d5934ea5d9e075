// `smolctl train --break SPEC`: the headless face of BreakpointController.
// At each pause, prints every held node's tensor stats, and those of the
// read-only tensors riding with it (PowerSGD's Q and error buffer beside P;
// text, or one {"type":"pause",...} JSON line), then resumes after --break-hold seconds
// or on a line from stdin, whichever comes first; at EOF on stdin, at once.
#pragma once

#include "breakpoints.h"

#include <QTextStream>

#include <atomic>
#include <mutex>
#include <thread>

namespace smol::engine {

class BreakConsole {
public:
    // holdSeconds < 0: wait for a line from stdin only. `outMutex` guards `out`
    // against the progress printer.
    BreakConsole(BreakpointController &controller, QTextStream &out, std::mutex &outMutex, bool json,
                 double holdSeconds);
    ~BreakConsole(); // stops and joins
    void start();
    void stop();

private:
    void run();
    void print(const PauseState &pause);
    void printJson(const PauseState &pause);
    void printText(const PauseState &pause, const TensorSnapshot *first);
    const char *waitToResume(); // why it resumed, or nullptr when stopped

    BreakpointController &m_controller;
    QTextStream &m_out;
    std::mutex &m_outMutex;
    bool m_json;
    double m_holdSeconds;
    bool m_stdinClosed = false;
    std::atomic<bool> m_stop{false};
    std::thread m_thread;
};

} // namespace smol::engine
