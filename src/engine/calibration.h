// SmoothQuant calibration: runs the float model over calibration tokens and records, for every Linear weight,
// the largest |activation| each of its input channels carries (what model/quant/smoothing.h turns into factors).
#pragma once

#include <cstdint>
#include <vector>

#include "model/model_weights.h"
#include "model/quant/smoothing.h"

namespace minfer {

// Runs `tokens` through the model as consecutive sequences of up to `window` tokens (a fresh context each) on
// `threads` threads (0 = all), with fusion off so every matmul's input is observed. Throws Error when the model
// is already quantized or tokens is empty.
ActivationRanges calibrate_activation_ranges(const ModelWeights& weights, const std::vector<int32_t>& tokens,
                                             int64_t window = 512, int threads = 0);

}  // namespace minfer
