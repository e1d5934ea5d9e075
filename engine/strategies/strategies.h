// Factories of the strategies, one per file in this directory.
#pragma once

#include "engine/strategy.h"

namespace smol::engine {

std::unique_ptr<Strategy> makeSingleStrategy();
std::unique_ptr<Strategy> makeDdpStrategy();
std::unique_ptr<Strategy> makeZero1Strategy();
std::unique_ptr<Strategy> makeZero2Strategy();
std::unique_ptr<Strategy> makeZero3Strategy();
std::unique_ptr<Strategy> makeSyncPsStrategy();
std::unique_ptr<Strategy> makeEdpStrategy();
std::unique_ptr<Strategy> makePipelineStrategy();
std::unique_ptr<Strategy> makeTensorStrategy();

} // namespace smol::engine
