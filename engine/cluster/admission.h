// What keeps a listening coordinator standing on a shared network: a gate
// that bounds the handshakes in progress (in all, and per remote address),
// a refusal log that says one line per address and reason class per window
// instead of one per connection (or per garbage prefix), and the rule for
// text a node sends (names, log lines, errors) before it reaches a
// terminal, a log or the GUI.
//
// Does not: authenticate (net/control_channel.h does), or limit nodes that
// passed the handshake (they hold a token).
#pragma once

#include <QString>

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace smol::engine {

class AdmissionGate {
public:
    AdmissionGate(int maxInProgress, int maxPerAddress) : m_max(maxInProgress), m_maxPerAddress(maxPerAddress) {}
    // True: run one handshake for `address`, then leave(address).
    bool tryEnter(const std::string &address);
    void leave(const std::string &address);
    int inProgress() const;

private:
    mutable std::mutex m_mutex;
    int m_max;
    int m_maxPerAddress;
    int m_total = 0;
    std::map<std::string, int> m_perAddress;
};

// Refusals are counted per address and reason *class* (refusalClass): the
// particulars a peer chooses (the bytes it sent, a rank it claimed) never
// make a refusal new, so random garbage gives one line per window, not one
// per distinct prefix.
class RefusalLog {
public:
    using Clock = std::chrono::steady_clock;
    explicit RefusalLog(std::chrono::milliseconds window) : m_window(window) {}
    // The line to log now (the first refusal of this address and reason
    // class in a window, with its particulars, made printable), or "" when
    // it is only counted.
    std::string refuse(const std::string &address, const std::string &reason, Clock::time_point now);
    // One line per (address, reason class) whose window ended with
    // refusals counted: "refused 4500 more connection(s) from 192.0.2.7 in
    // the last 10 s: expected SMOLAUTH first".
    std::vector<std::string> flush(Clock::time_point now);

private:
    struct Window {
        Clock::time_point start;
        std::int64_t more = 0; // refusals after the one logged
    };
    std::mutex m_mutex;
    std::chrono::milliseconds m_window;
    std::map<std::pair<std::string, std::string>, Window> m_windows;
};

// Text from the network made safe to print: at most `maxChars` characters,
// anything not printable (control characters, escapes, newlines, format
// characters) replaced by '?', and a note of the original length when it
// was cut ("...(2000000 characters)").
QString printableText(const QString &text, int maxChars);
std::string printableText(const std::string &utf8, int maxChars);

// A refusal's reason without what the peer chose: cut at ", got" (what
// came instead: "expected SMOLAUTH first, got 7e 4d ..." -> "expected
// SMOLAUTH first"), quoted text as '?', and every number as N ("wrong
// token (HMAC mismatch) from a peer claiming rank N").
std::string refusalClass(const std::string &reason);

constexpr int kMaxNodeNameChars = 64;
constexpr int kMaxLogLineChars = 1000; // a node's log line, as printed

} // namespace smol::engine
