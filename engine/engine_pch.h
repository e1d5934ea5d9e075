// Precompiled for every engine translation unit: parsing LibTorch dominates
// build time on small machines.
#pragma once
#include <torch/torch.h>
