// Parses `--break` specs into Breakpoints and matches them against collectives.
#include "breakpoint_spec.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <stdexcept>

namespace smol::engine {

namespace {

struct KindName {
    const char *name;
    net::CollectiveKind kind;
};

constexpr KindName kKinds[] = {
    {"any", net::CollectiveKind::None},
    {"allreduce", net::CollectiveKind::AllReduce},
    {"all-reduce", net::CollectiveKind::AllReduce},
    {"reducescatter", net::CollectiveKind::ReduceScatter},
    {"reduce-scatter", net::CollectiveKind::ReduceScatter},
    {"allgather", net::CollectiveKind::AllGather},
    {"all-gather", net::CollectiveKind::AllGather},
    {"broadcast", net::CollectiveKind::Broadcast},
    {"barrier", net::CollectiveKind::Barrier},
    {"gather", net::CollectiveKind::Gather},
    {"scatter", net::CollectiveKind::Scatter},
    {"sendrecv", net::CollectiveKind::SendRecv},
    {"send", net::CollectiveKind::SendRecv},
    {"recv", net::CollectiveKind::SendRecv},
    {"push", net::CollectiveKind::Push},
    {"pull", net::CollectiveKind::Pull},
};

std::int64_t parseInt(const std::string &key, const std::string &value, const std::string &spec)
{
    std::size_t used = 0;
    long long n = -1;
    try {
        n = std::stoll(value, &used);
    } catch (const std::exception &) {
        used = 0;
    }
    if (value.empty() || used != value.size() || n < 0)
        throw std::invalid_argument("bad breakpoint '" + spec + "': " + key + " takes a whole number >= 0, got '" +
                                    value + "'");
    return n;
}

} // namespace

bool isPointToPoint(net::CollectiveKind kind)
{
    return kind == net::CollectiveKind::SendRecv || kind == net::CollectiveKind::Push ||
           kind == net::CollectiveKind::Pull;
}

Breakpoint parseBreakpoint(const std::string &spec)
{
    Breakpoint b;
    b.text = spec;
    if (spec == "next") {
        b.next = true;
        return b;
    }
    const std::size_t cut = spec.find_first_of("@,");
    const std::string grammar = "KIND[@AXIS][@step=N][,rank=R][,name=SUBSTR] or next";
    const std::string kind = spec.substr(0, cut);
    const auto it = std::find_if(std::begin(kKinds), std::end(kKinds), [&](const KindName &k) { return kind == k.name; });
    if (it == std::end(kKinds))
        throw std::invalid_argument("bad breakpoint '" + spec +
                                    "': expected " + grammar + ", with KIND one of "
                                    "allreduce, reducescatter, allgather, broadcast, barrier, gather, scatter, "
                                    "sendrecv, push, pull, any");
    b.kind = it->kind;
    std::size_t at = cut;
    while (at != std::string::npos && at < spec.size()) {
        const std::size_t end = spec.find_first_of("@,", at + 1);
        const std::string item = spec.substr(at + 1, end == std::string::npos ? std::string::npos : end - at - 1);
        const std::size_t eq = item.find('=');
        const std::string key = item.substr(0, eq);
        const std::string value = eq == std::string::npos ? std::string() : item.substr(eq + 1);
        if (eq == std::string::npos && (item == "dp" || item == "tp" || item == "pp" || item == "cp")) {
            b.axis = item;
            at = end;
            continue;
        }
        if (eq == std::string::npos)
            throw std::invalid_argument("bad breakpoint '" + spec + "': expected key=value, got '" + item + "'");
        if (key == "step")
            b.step = parseInt(key, value, spec);
        else if (key == "rank")
            b.rank = int(std::min<std::int64_t>(parseInt(key, value, spec), std::numeric_limits<int>::max()));
        else if (key == "name" && !value.empty())
            b.name = value;
        else
            throw std::invalid_argument("bad breakpoint '" + spec + "': unknown condition '" + item +
                                        "' (an axis dp, tp, pp or cp; step=N, rank=R, name=SUBSTR)");
        at = end;
    }
    return b;
}

bool Breakpoint::matches(const net::CollectiveInfo &info, std::int64_t atStep, int node) const
{
    if (next)
        return true;
    if (kind != net::CollectiveKind::None && kind != info.kind)
        return false;
    if (step >= 0 && step != atStep)
        return false;
    // Every rank enters the same collective, so the rank condition picks
    // among point-to-point calls only.
    if (rank >= 0 && isPointToPoint(info.kind) && rank != node)
        return false;
    if (!axis.empty()) { // "dp+cp" (the gradients' group) is on both axes
        const std::string axes = "+" + info.axis + "+";
        if (axes.find("+" + axis + "+") == std::string::npos)
            return false;
    }
    return name.empty() || info.name.find(name) != std::string::npos;
}

} // namespace smol::engine
