// SmoothQuant (model/quant/smoothing.h, engine/calibration.h) on stories260K, a trained model:
// - calibration observes every Linear input (q/k/v share one range, the ranges are the real maxima);
// - folding the factors leaves the float model's function unchanged (logits within 1e-4);
// - on a model with activation outlier channels (injected in a way that leaves its float function unchanged, as
//   trained LLMs have them), SmoothQuant cuts the W8A8 error (KL to the float model) by a large factor;
// - bad uses fail with a message.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "base/error.h"
#include "engine/calibration.h"
#include "engine_test_support.h"
#include "model/model_weights.h"
#include "model/quant/quantize_model.h"
#include "model/quant/smoothing.h"

namespace minfer {
namespace {

namespace fs = std::filesystem;

const std::string kStories = std::string(MINFER_SHARED_DIR) + "/models/stories260K/stories260K.bin";

using testing::greedy_ids;
using testing::prompt_logits;

// Mean over positions of KL(softmax(a) || softmax(b)).
double mean_kl(const std::vector<float>& a, const std::vector<float>& b, size_t vocab) {
  const size_t rows = a.size() / vocab;
  double total = 0.0;
  for (size_t r = 0; r < rows; ++r) {
    auto log_softmax = [&](const float* x) {
      std::vector<double> out(vocab);
      const double mx = *std::max_element(x, x + vocab);
      double sum = 0.0;
      for (size_t v = 0; v < vocab; ++v) sum += std::exp(x[v] - mx);
      for (size_t v = 0; v < vocab; ++v) out[v] = x[v] - mx - std::log(sum);
      return out;
    };
    const std::vector<double> la = log_softmax(a.data() + r * vocab), lb = log_softmax(b.data() + r * vocab);
    for (size_t v = 0; v < vocab; ++v) total += std::exp(la[v]) * (la[v] - lb[v]);
  }
  return total / static_cast<double>(rows);
}

// Replaces weight `name` by an f32 copy with column c multiplied by cols[c] and row r by rows[r] (empty = 1).
void scale_weight(ModelWeights& w, const std::string& name, const std::vector<float>& cols,
                  const std::vector<float>& rows) {
  Tensor t = to_f32(w.get(name));
  const int64_t n = t.dim(0), k = t.rank() == 2 ? t.dim(1) : 1;
  float* p = t.mutable_as<float>();
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c)
      p[r * k + c] *=
          (cols.empty() ? 1.0f : cols[static_cast<size_t>(c)]) * (rows.empty() ? 1.0f : rows[static_cast<size_t>(r)]);
  w.tensors[name] = std::move(t);
}

// What quantize_model does with the plan's factors, without the rounding.
void apply_plan_in_float(ModelWeights& w, const SmoothingPlan& plan) {
  for (const auto& [name, f] : plan) scale_weight(w, name, f.columns, f.rows);
}

// Gives every layer a few activation outlier channels (x30) without changing the float function: the RMSNorm
// weight of channel c grows 30x and the columns reading it shrink 30x; likewise w_up's row j and w_down's column j.
void inject_outliers(ModelWeights& w) {
  const int64_t hidden = w.config.hidden_size, ffn = w.config.intermediate_size;
  std::vector<float> up_h(static_cast<size_t>(hidden), 1.0f), down_h(static_cast<size_t>(hidden), 1.0f);
  for (int64_t c : {3, 17, 40}) up_h[static_cast<size_t>(c)] = 30.0f, down_h[static_cast<size_t>(c)] = 1.0f / 30.0f;
  std::vector<float> up_f(static_cast<size_t>(ffn), 1.0f), down_f(static_cast<size_t>(ffn), 1.0f);
  for (int64_t j : {5, 99}) up_f[static_cast<size_t>(j)] = 30.0f, down_f[static_cast<size_t>(j)] = 1.0f / 30.0f;
  for (int64_t i = 0; i < w.config.num_layers; ++i) {
    const std::string l = "layers." + std::to_string(i) + ".";
    scale_weight(w, l + "attn_norm", {}, up_h);  // a [hidden] vector: its "rows" are the channels
    scale_weight(w, l + "ffn_norm", {}, up_h);
    for (const char* m : {"wq", "wk", "wv", "w_gate"}) scale_weight(w, l + m, down_h, {});
    scale_weight(w, l + "w_up", down_h, up_f);
    scale_weight(w, l + "w_down", down_f, {});
  }
}

class Smoothing : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kStories)) GTEST_SKIP() << kStories << " not found";
    base_ = load_model(kStories);
    story_ = {1};
    const std::vector<int32_t> gen = greedy_ids(base_, {1}, 120);
    story_.insert(story_.end(), gen.begin(), gen.end());
  }
  ModelWeights base_;
  std::vector<int32_t> story_;  // BOS + the model's own greedy story: in-domain calibration text
};

TEST_F(Smoothing, CalibrationRecordsTheInputRangeOfEveryLinear) {
  const ActivationRanges ranges = calibrate_activation_ranges(base_, story_, 64, 2);
  for (int64_t i = 0; i < base_.config.num_layers; ++i) {
    const std::string l = "layers." + std::to_string(i) + ".";
    for (const char* m : {"wq", "wk", "wv", "wo", "w_gate", "w_up", "w_down"}) {
      ASSERT_TRUE(ranges.count(l + m)) << l + m;
      const std::vector<float>& r = ranges.at(l + m);
      EXPECT_EQ(static_cast<int64_t>(r.size()), base_.get(l + m).dim(1)) << l + m;
      EXPECT_GT(*std::max_element(r.begin(), r.end()), 0.0f) << l + m;
    }
    EXPECT_EQ(ranges.at(l + "wq"), ranges.at(l + "wk"));  // one input
    EXPECT_EQ(ranges.at(l + "w_gate"), ranges.at(l + "w_up"));
  }
}

TEST_F(Smoothing, FoldedFactorsKeepTheFloatFunction) {
  const std::vector<float> ref = prompt_logits(base_, story_);
  ModelWeights smoothed = base_;
  const SmoothingPlan plan = smooth_model(smoothed, calibrate_activation_ranges(base_, story_, 64, 2));
  ASSERT_EQ(plan.size(), static_cast<size_t>(6 * base_.config.num_layers));  // wq wk wv w_gate w_up w_down
  apply_plan_in_float(smoothed, plan);
  const std::vector<float> got = prompt_logits(smoothed, story_);
  ASSERT_EQ(got.size(), ref.size());
  float max_ref = 0.0f, max_diff = 0.0f;
  for (size_t i = 0; i < ref.size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(ref[i]));
    max_diff = std::max(max_diff, std::fabs(ref[i] - got[i]));
  }
  EXPECT_LE(max_diff, 1e-4f * max_ref);
}

TEST_F(Smoothing, CutsTheW8A8ErrorOfOutlierChannels) {
  ModelWeights outliers = base_;
  inject_outliers(outliers);
  const size_t vocab = static_cast<size_t>(base_.config.vocab_size);
  const std::vector<float> ref = prompt_logits(outliers, story_);
  // The injection itself is function-preserving.
  EXPECT_LT(mean_kl(prompt_logits(base_, story_), ref, vocab), 1e-8);

  const QuantConfig w8a8 = parse_quantization("w8a8");
  ModelWeights plain = outliers;
  quantize_model(plain, w8a8, 2);
  const double kl_plain = mean_kl(ref, prompt_logits(plain, story_), vocab);

  ModelWeights smooth = outliers;
  const SmoothingPlan plan = smooth_model(smooth, calibrate_activation_ranges(outliers, story_, 64, 2));
  quantize_model(smooth, w8a8, 2, {}, &plan);
  const double kl_smooth = mean_kl(ref, prompt_logits(smooth, story_), vocab);
  std::printf("W8A8 KL with outlier channels: plain %.3g, smoothquant %.3g\n", kl_plain, kl_smooth);
  EXPECT_LT(kl_smooth, kl_plain / 4);
}

TEST_F(Smoothing, RejectsQuantizedWeightsAndMissingRanges) {
  ModelWeights q = base_;
  quantize_model(q, parse_quantization("w8a16"), 2);
  EXPECT_THROW(smooth_model(q, {}), Error);
  EXPECT_THROW(calibrate_activation_ranges(q, story_), Error);
  ModelWeights w = base_;
  EXPECT_THROW(smooth_model(w, {}), Error);
  EXPECT_THROW(smooth_model(w, calibrate_activation_ranges(base_, story_, 64, 2), 1.5f), Error);
  EXPECT_THROW(calibrate_activation_ranges(base_, {}), Error);
}

}  // namespace
}  // namespace minfer
