// --compress's values (compression_config.h).
#include "compression_config.h"

#include <cstdlib>
#include <stdexcept>

namespace smol::engine {

std::string CompressionConfig::text() const
{
    switch (kind) {
    case Kind::None: return "none";
    case Kind::Fp16: return "fp16";
    case Kind::Bf16: return "bf16";
    case Kind::PowerSgd: return "powersgd:" + std::to_string(rank);
    }
    return "none";
}

CompressionConfig parseCompression(const std::string &text)
{
    CompressionConfig c;
    if (text == "none" || text.empty())
        return c;
    if (text == "fp16" || text == "bf16") {
        c.kind = text == "fp16" ? CompressionConfig::Kind::Fp16 : CompressionConfig::Kind::Bf16;
        return c;
    }
    const std::string prefix = "powersgd";
    if (text.rfind(prefix, 0) == 0) {
        c.kind = CompressionConfig::Kind::PowerSgd;
        if (text.size() == prefix.size())
            return c; // rank 1, PyTorch's default
        const std::string r = text.substr(prefix.size());
        char *end = nullptr;
        const long v = r.size() > 1 && r[0] == ':' ? std::strtol(r.c_str() + 1, &end, 10) : 0;
        if (end && *end == '\0' && v >= 1 && v <= kMaxPowerSgdRank) {
            c.rank = int(v);
            return c;
        }
        throw std::invalid_argument("--compress powersgd:R takes a rank R from 1 to " +
                                    std::to_string(kMaxPowerSgdRank) + ", not '" + text + "'");
    }
    throw std::invalid_argument("--compress takes none, fp16, bf16 or powersgd:R, not '" + text + "'");
}

} // namespace smol::engine
