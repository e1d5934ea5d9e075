// Bounded admission, refusals counted per address and reason class, and
// network text made printable (admission.h).
#include "admission.h"

#include <cctype>

namespace smol::engine {

bool AdmissionGate::tryEnter(const std::string &address)
{
    std::lock_guard lock(m_mutex);
    int &mine = m_perAddress[address];
    if (m_total >= m_max || mine >= m_maxPerAddress) {
        if (mine == 0)
            m_perAddress.erase(address);
        return false;
    }
    ++mine;
    ++m_total;
    return true;
}

void AdmissionGate::leave(const std::string &address)
{
    std::lock_guard lock(m_mutex);
    auto it = m_perAddress.find(address);
    if (it == m_perAddress.end())
        return;
    --m_total;
    if (--it->second == 0)
        m_perAddress.erase(it);
}

int AdmissionGate::inProgress() const
{
    std::lock_guard lock(m_mutex);
    return m_total;
}

std::string RefusalLog::refuse(const std::string &address, const std::string &reason, Clock::time_point now)
{
    constexpr int kMaxReasonChars = 300; // a refusal's particulars, as printed
    std::lock_guard lock(m_mutex);
    const auto key = std::make_pair(address, refusalClass(reason));
    auto it = m_windows.find(key);
    if (it != m_windows.end() && now - it->second.start < m_window) {
        ++it->second.more;
        return {};
    }
    m_windows[key] = Window{now, 0};
    return "refused a connection from " + address + ": " + printableText(reason, kMaxReasonChars);
}

std::vector<std::string> RefusalLog::flush(Clock::time_point now)
{
    std::vector<std::string> lines;
    std::lock_guard lock(m_mutex);
    for (auto it = m_windows.begin(); it != m_windows.end();) {
        if (now - it->second.start < m_window) {
            ++it;
            continue;
        }
        if (it->second.more > 0)
            lines.push_back("refused " + std::to_string(it->second.more) + " more connection(s) from " +
                            it->first.first + " in the last " +
                            std::to_string(std::chrono::duration_cast<std::chrono::seconds>(m_window).count()) +
                            " s: " + it->first.second);
        it = m_windows.erase(it); // bounded: a window lives at most m_window
    }
    return lines;
}

QString printableText(const QString &text, int maxChars)
{
    QString out = text.left(maxChars);
    for (QChar &ch : out)
        if (!ch.isPrint() || ch.category() == QChar::Other_Format)
            ch = QLatin1Char('?');
    if (text.size() > maxChars)
        out += QStringLiteral("...(%1 characters)").arg(text.size());
    return out;
}

std::string printableText(const std::string &utf8, int maxChars)
{
    // Decode no more than could be shown: a 2 MB field costs no 2 MB QString.
    const std::size_t cut = std::min<std::size_t>(utf8.size(), std::size_t(maxChars) * 4 + 4);
    QString text = QString::fromUtf8(utf8.data(), qsizetype(cut));
    const bool longer = cut < utf8.size() || text.size() > maxChars;
    QString out = printableText(text.left(maxChars), maxChars);
    if (longer)
        out += QStringLiteral("...(%1 bytes)").arg(utf8.size());
    return out.toStdString();
}

std::string refusalClass(const std::string &reason)
{
    constexpr std::size_t kMaxClassChars = 120; // the key of a window: short, and bounded
    const std::string kept = reason.substr(0, reason.find(", got"));
    auto at = [&](std::size_t i) { return i < kept.size() ? static_cast<unsigned char>(kept[i]) : '\0'; };
    std::string out;
    for (std::size_t i = 0; i < kept.size() && out.size() < kMaxClassChars; ++i) {
        const unsigned char ch = at(i);
        const bool wordStart = i == 0 || !(std::isalpha(at(i - 1)) || at(i - 1) == '_');
        if (ch == '\'' && (i == 0 || at(i - 1) == ' ')) {
            // Quoted text ('...' after a space, not "hello's"): what the peer named.
            while (i + 1 < kept.size() && !(at(i + 1) == '\'' && !std::isalnum(at(i + 2))))
                ++i;
            ++i;
            out += "'?'";
        } else if (std::isdigit(ch) && wordStart) {
            while (std::isalnum(at(i + 1)))
                ++i; // a number (12, 0x1f): its value is the peer's
            out += 'N';
        } else {
            out += (ch >= 32 && ch < 127) ? char(ch) : '?';
        }
    }
    return out;
}

} // namespace smol::engine
