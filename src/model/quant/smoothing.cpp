#include "model/quant/smoothing.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "kernels/quant.h"

namespace minfer {
namespace {

// max |W[n, j]| over the rows n of every weight in `names` (which share their input), per column j.
std::vector<float> weight_column_ranges(const ModelWeights& weights, const std::vector<std::string>& names) {
  std::vector<float> out;
  for (const std::string& name : names) {
    const Tensor& w = weights.get(name);
    if (kernels::is_quantized(w) || w.dtype == DType::I8)
      fail("{}: SmoothQuant needs float weights, '{}' is already quantized", weights.path, name);
    const Tensor f = to_f32(w);
    const int64_t n = f.dim(0), k = f.dim(1);
    if (out.empty()) out.assign(static_cast<size_t>(k), 0.0f);
    MINFER_CHECK(static_cast<int64_t>(out.size()) == k, "smoothing: '{}' has {} columns, expected {}", name, k,
                 out.size());
    const float* p = f.as<float>();
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < k; ++c)
        out[static_cast<size_t>(c)] = std::max(out[static_cast<size_t>(c)], std::fabs(p[r * k + c]));
  }
  return out;
}

const std::vector<float>& range_of(const ActivationRanges& ranges, const std::string& name, size_t width) {
  auto it = ranges.find(name);
  if (it == ranges.end()) fail("smoothing: the calibration recorded no activations for '{}'", name);
  if (it->second.size() != width)
    fail("smoothing: '{}' has {} calibrated channels, expected {}", name, it->second.size(), width);
  return it->second;
}

// s_j = max|x_j|^alpha / max|W_j|^(1-alpha). A channel the calibration never saw active (or a zero weight
// column) keeps s = 1; s is clamped to [1e-5, 1e5] so the folded norm weight stays finite.
std::vector<float> factors(const std::vector<float>& x_range, const std::vector<float>& w_range, float alpha) {
  std::vector<float> s(x_range.size(), 1.0f);
  for (size_t j = 0; j < s.size(); ++j) {
    if (x_range[j] <= 0.0f || w_range[j] <= 0.0f) continue;
    const double v = std::pow(static_cast<double>(x_range[j]), alpha) /
                     std::pow(static_cast<double>(w_range[j]), 1.0 - static_cast<double>(alpha));
    s[j] = static_cast<float>(std::clamp(v, 1e-5, 1e5));
  }
  return s;
}

// norm weight (any float dtype) / s, as a new f32 tensor.
Tensor divided_norm(const Tensor& norm, const std::vector<float>& s) {
  Tensor out = to_f32(norm);
  MINFER_CHECK(static_cast<size_t>(out.numel()) == s.size(), "smoothing: norm of {} for {} factors", out.numel(),
               s.size());
  float* p = out.mutable_as<float>();
  for (size_t j = 0; j < s.size(); ++j) p[j] /= s[j];
  return out;
}

}  // namespace

SmoothingPlan smooth_model(ModelWeights& weights, const ActivationRanges& ranges, float alpha) {
  if (!(alpha > 0.0f && alpha < 1.0f)) fail("smoothing: alpha {} must be in (0, 1)", alpha);
  if (weights.quant.enabled())
    fail("{}: SmoothQuant needs float weights; the model is already quantized", weights.path);
  SmoothingPlan plan;
  for (int64_t i = 0; i < weights.config.num_layers; ++i) {
    const std::string l = "layers." + std::to_string(i) + ".";
    // Norm-fed groups: the norm weight absorbs 1/s, every weight reading the norm's output takes s on columns.
    const struct {
      const char* norm;
      std::vector<std::string> readers;
    } groups[] = {{"attn_norm", {l + "wq", l + "wk", l + "wv"}}, {"ffn_norm", {l + "w_gate", l + "w_up"}}};
    for (const auto& g : groups) {
      const std::vector<float> w_range = weight_column_ranges(weights, g.readers);
      const std::vector<float> s = factors(range_of(ranges, g.readers[0], w_range.size()), w_range, alpha);
      Tensor& norm = weights.tensors.at(l + g.norm);
      norm = divided_norm(norm, s);
      for (const std::string& r : g.readers) plan[r].columns = s;
    }
    // w_up's rows absorb 1/s of w_down's input channels.
    const std::vector<float> w_range = weight_column_ranges(weights, {l + "w_down"});
    const std::vector<float> s = factors(range_of(ranges, l + "w_down", w_range.size()), w_range, alpha);
    plan[l + "w_down"].columns = s;
    std::vector<float>& up_rows = plan[l + "w_up"].rows;
    up_rows.resize(s.size());
    for (size_t j = 0; j < s.size(); ++j) up_rows[j] = 1.0f / s[j];
  }
  return plan;
}

}  // namespace minfer
