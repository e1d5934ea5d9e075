// makeModel: from a ModelConfig's kind to a TrainModel. Knows the names of
// the models; the models know their sizes.
#include "engine/models/gpt_model.h"
#include "engine/models/mlp_model.h"
#include "engine/models/model.h"
#include "engine/models/torchscript_model.h"

#include <stdexcept>

namespace smol::engine {

namespace {

bool endsWith(const std::string &s, const std::string &suffix)
{
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// --precision bf16: the parameters cast to bfloat16 (the float32 weights
// the seed gives, rounded to nearest even). Parameters only: buffers keep
// their dtype (the gpt's causal mask is bool).
std::unique_ptr<TrainModel> inPrecision(std::unique_ptr<TrainModel> model, Precision precision)
{
    if (precision == Precision::Bf16) {
        torch::NoGradGuard noGrad;
        for (auto &[name, p] : model->namedParameters())
            p.set_data(p.to(torch::kBFloat16));
    }
    return model;
}

} // namespace

void checkPrecision(const ModelConfig &config)
{
    if (config.precision == Precision::Bf16 && config.kind != "mlp" && config.kind != "gpt")
        throw std::invalid_argument("--precision bf16 is for the mlp and the gpt, not a TorchScript model");
}

void checkRecompute(const ModelConfig &config)
{
    if (config.recompute == Recompute::None || config.kind == "gpt")
        return;
    if (config.kind == "mlp" && config.recompute == Recompute::Full)
        return;
    if (config.kind == "mlp")
        throw std::invalid_argument("--recompute selective recomputes the gpt's attention; the mlp has none "
                                    "(take full or none)");
    throw std::invalid_argument("--recompute is for the mlp and the gpt, not a TorchScript model");
}

const char *recomputeName(Recompute recompute)
{
    switch (recompute) {
    case Recompute::None:
        return "none";
    case Recompute::Selective:
        return "selective";
    case Recompute::Full:
        return "full";
    }
    return "none";
}

bool parseRecompute(const std::string &text, Recompute *out)
{
    for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full})
        if (text == recomputeName(r)) {
            *out = r;
            return true;
        }
    return false;
}

const char *precisionName(Precision precision)
{
    return precision == Precision::Bf16 ? "bf16" : "fp32";
}

bool parsePrecision(const std::string &text, Precision *out)
{
    for (Precision p : {Precision::Fp32, Precision::Bf16})
        if (text == precisionName(p)) {
            *out = p;
            return true;
        }
    return false;
}

std::unique_ptr<TrainModel> makeModel(const ModelConfig &config)
{
    checkRecompute(config);
    checkPrecision(config);
    if (config.kind == "mlp")
        return inPrecision(std::make_unique<MlpModel>(config), config.precision);
    if (config.kind == "gpt")
        return inPrecision(std::make_unique<GptModel>(config), config.precision);
    if (endsWith(config.kind, ".pt"))
        return std::make_unique<TorchScriptModel>(config.kind);
    throw std::invalid_argument("unknown model kind '" + config.kind +
                                "': expected mlp, gpt or a TorchScript file ending in .pt");
}

} // namespace smol::engine
