// `smolctl plan [train's settings] [--check] [--json]`: what the run will
// hold and send per node (run_prediction.h), with the formulas used; with
// --check, the run itself (in process, 5 steps unless --steps says) and each
// figure predicted, measured and their ratio (plan_check.h).
// No LibTorch in this header.
#pragma once

#include <QStringList>
#include <QTextStream>

namespace smol::engine {

extern const char kPlanUsage[];

// Bad arguments: one line on `err`, 2. A run that fails, or a model-state or
// byte figure more than 5% off under --check: 1. Otherwise 0.
int runPlanCommand(const QStringList &args, QTextStream &out, QTextStream &err);

} // namespace smol::engine
