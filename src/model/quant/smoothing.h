// SmoothQuant (Xiao et al., 2023): migrate the quantization difficulty of activation outlier channels into the
// weights. For a Linear layer y = x W^T whose input channel j has a large range, dividing x_j by s_j and
// multiplying W's column j by s_j leaves y unchanged but narrows the per-token range W8A8 quantizes. With
//     s_j = max|x_j|^alpha / max|W_j|^(1 - alpha)      (alpha = 0.5 by default, as the paper)
// from a calibration set. The division of x is folded into the op that produces x, so it costs nothing:
//   attn_norm (RMSNorm weight)  -> wq, wk, wv   (one s shared by the three, which read the same x)
//   ffn_norm  (RMSNorm weight)  -> w_gate, w_up
//   w_up rows                   -> w_down       (silu(gate) * (up / s) = (silu(gate) * up) / s)
// wo is left alone: its input comes out of attention, where a factor could only be folded into wv's rows if
// it were shared by every query head of a KV group. The multiplications of W happen inside quantize_model
// (the plan's factors), so no float copy of a weight is made.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "model/model_weights.h"

namespace minfer {

// Per Linear weight (canonical name, e.g. "layers.3.w_down"): max |x_j| over the calibration tokens of each
// input channel j of that weight.
using ActivationRanges = std::map<std::string, std::vector<float>>;

// What quantize_model multiplies a weight by before quantizing it.
struct WeightFactors {
  std::vector<float> columns;  // [in_features]; empty = all 1
  std::vector<float> rows;     // [out_features]; empty = all 1
};
using SmoothingPlan = std::map<std::string, WeightFactors>;

// Computes the factors from `ranges` (which must cover wq and w_gate and w_down of every layer), divides the
// RMSNorm weights by them in place (stored as f32 from then on), and returns the factors for quantize_model to
// apply to wq, wk, wv, w_gate, w_up (columns), w_down (columns) and w_up (rows). The model's float function is
// unchanged up to rounding. Throws Error when the weights are already quantized or a range is missing.
SmoothingPlan smooth_model(ModelWeights& weights, const ActivationRanges& ranges, float alpha = 0.5f);

}  // namespace minfer
