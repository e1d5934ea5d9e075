// Every strategy the engine runs, one line each (Strategies, below), in the
// order the window and smolctl list them. A new strategy is its own .cpp and
// header (its class, its StrategyDescription, its factory) and one line here.
//
// No LibTorch: describeStrategy() and strategyNames() only read the
// descriptions. Strategies::make() calls into the strategies' .cpp files;
// only engine/strategy.cpp instantiates it, so a target that reads
// descriptions alone (smol_session) links no LibTorch.
#pragma once

#include "ddp.h"
#include "edp.h"
#include "pipeline.h"
#include "single.h"
#include "syncps.h"
#include "tensor.h"
#include "zero1.h"
#include "zero2.h"
#include "zero3.h"

#include <array>
#include <string>
#include <string_view>
#include <vector>

namespace smol::engine {

// One strategy: its description and its factory. The factory is named only
// inside make(), a template member no description reader instantiates.
template <const StrategyDescription &Description, std::unique_ptr<Strategy> (*Factory)()>
struct StrategyEntry {
    static constexpr const StrategyDescription &kDescription = Description;
    static std::unique_ptr<Strategy> make() { return Factory(); }
};

template <typename... Entry> struct StrategyList {
    static constexpr std::array<const StrategyDescription *, sizeof...(Entry)> kDescriptions{
        &Entry::kDescription...};

    // The strategy called `name`; null when there is none.
    static std::unique_ptr<Strategy> make(std::string_view name)
    {
        std::unique_ptr<Strategy> made;
        ((name == Entry::kDescription.name ? (void)(made = Entry::make()) : void()), ...);
        return made;
    }
};

using Strategies = StrategyList<StrategyEntry<strategies::kSingle, strategies::makeSingle>,
                                StrategyEntry<strategies::kDdp, strategies::makeDdp>,
                                StrategyEntry<strategies::kZero1, strategies::makeZero1>,
                                StrategyEntry<strategies::kZero2, strategies::makeZero2>,
                                StrategyEntry<strategies::kZero3, strategies::makeZero3>,
                                StrategyEntry<strategies::kSyncPs, strategies::makeSyncPs>,
                                StrategyEntry<strategies::kEdp, strategies::makeEdp>,
                                StrategyEntry<strategies::kTensorParallel, strategies::makeTensorParallel>,
                                StrategyEntry<strategies::kPipeline, strategies::makePipeline>>;

// The description of the strategy called `name`; null when there is none
// (a recording of a strategy this build does not know).
inline const StrategyDescription *describeStrategy(std::string_view name)
{
    for (const StrategyDescription *d : Strategies::kDescriptions)
        if (name == d->name)
            return d;
    return nullptr;
}

inline std::vector<std::string> strategyNames()
{
    std::vector<std::string> names;
    for (const StrategyDescription *d : Strategies::kDescriptions)
        names.emplace_back(d->name);
    return names;
}

} // namespace smol::engine
