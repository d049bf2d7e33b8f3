// `minfer eval-quant --model PATH --text FILE`: how far int8 quantization moves a model. For each scheme
// (--quantization, or w8a16 and w8a8 per-channel plus w8a16 group 128 by default), over the same windows
// of the text as eval-ppl: the per-token KL divergence KL(p_float || p_quant) of the next-token
// distributions, top-1 agreement (same argmax, teacher-forced), the perplexity of both, and free-running
// greedy agreement (tokens equal to the float model's greedy continuation before the first difference).
// --calibrate TEXT adds each scheme again with SmoothQuant calibrated on TEXT (model/quant/smoothing.h).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "engine/calibration.h"
#include "model/model_tokenizer.h"
#include "model/quant/quantize_model.h"
#include "tools/commands.h"
#include "tools/eval_logits.h"
#include "tools/quant_flags.h"

namespace minfer::tools {
namespace {

struct EvalQuantArgs {
  EvalTextOptions eval;
  std::vector<std::string> modes;
  int group_size = -1;  // -1: the default set of schemes
  bool asymmetric = false;
  std::string calibrate;
  int64_t calibration_tokens = 2048;
  float alpha = 0.5f;
};

void run_eval_quant(const EvalQuantArgs& a) {
  const ModelWeights base = load_model(a.eval.model);
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(base);
  std::vector<QuantConfig> schemes;
  if (a.modes.empty() && a.group_size < 0) {
    schemes = {parse_quantization("w8a16"), parse_quantization("w8a16", 128), parse_quantization("w8a8"),
               parse_quantization("w8a8", 128)};
  } else {
    for (const std::string& m : a.modes.empty() ? std::vector<std::string>{"w8a16", "w8a8"} : a.modes)
      schemes.push_back(parse_quantization(m, std::max(a.group_size, 0), !a.asymmetric));
  }

  // The float model's logits once, kept per window.
  const EvalReference ref = eval_reference(base, *tokenizer, a.eval);
  fmt::print("{}\n", ref.describe(a.eval, base));
  fmt::print("{:<40} {:>10} {:>10} {:>10} {:>9} {:>9} {:>10} {:>8} {:>11}\n", "scheme", "weights", "KL mean", "KL max",
             "top-1", "ppl ref", "ppl quant", "dppl", "greedy");
  ActivationRanges ranges;
  if (!a.calibrate.empty())
    ranges = calibrate_activation_ranges(base, encode_file(*tokenizer, a.calibrate, a.calibration_tokens), 512,
                                         a.eval.threads);
  for (size_t run = 0; run < schemes.size() * (ranges.empty() ? 1 : 2); ++run) {
    const QuantConfig& q = schemes[run % schemes.size()];
    const bool smoothed = run >= schemes.size();
    ModelWeights qw = base;
    SmoothingPlan plan;
    if (smoothed) plan = smooth_model(qw, ranges, a.alpha);
    quantize_model(qw, q, a.eval.threads, {}, smoothed ? &plan : nullptr);
    WindowLogits model(qw, a.eval.threads, ref.context);
    const LogitScores s = score_windows(model, ref.logits, ref.tokens, ref.windows);
    const size_t same = common_prefix(model.greedy(ref.prompt, a.eval.greedy_tokens), ref.greedy);
    fmt::print("{:<40} {:>7.1f}MiB {:>10.2e} {:>10.2e} {:>8.2f}% {:>9.3f} {:>10.3f} {:>7.2f}% {:>5}/{:<5}\n",
               quantization_name(q) + (smoothed ? ", smooth" : ""), static_cast<double>(weight_bytes(qw)) / (1 << 20),
               s.kl_mean(), s.kl_max, s.top1_percent(), s.ppl_ref(), s.ppl(), 100.0 * (s.ppl() / s.ppl_ref() - 1.0),
               same, ref.greedy.size());
  }
}

}  // namespace

void add_eval_quant_command(CLI::App& app) {
  auto args = std::make_shared<EvalQuantArgs>();
  CLI::App* cmd = app.add_subcommand(
      "eval-quant", "Accuracy of int8 quantization vs the float model: logit KL, top-1 agreement, perplexity, greedy");
  add_eval_text_options(cmd, args->eval);
  cmd->add_option("--quantization", args->modes, "Schemes to compare (repeatable: w8a16, w8a8); default: a set")
      ->check(CLI::IsMember({"w8a16", "w8a8"}));
  cmd->add_option("--group-size", args->group_size, "0 = per channel, 32/64/128 (with --quantization)");
  cmd->add_flag("--asymmetric", args->asymmetric, "Asymmetric weights (with --quantization)");
  cmd->add_option("--calibrate", args->calibrate, "Also run each scheme with SmoothQuant calibrated on this text")
      ->check(CLI::ExistingFile);
  cmd->add_option("--calibration-tokens", args->calibration_tokens, "Tokens of the calibration text to use")
      ->capture_default_str();
  cmd->add_option("--smooth-alpha", args->alpha, "SmoothQuant migration strength alpha in (0, 1)")
      ->capture_default_str()
      ->check(CLI::Range(0.01f, 0.99f));
  cmd->callback([args] { run_eval_quant(*args); });
}

}  // namespace minfer::tools
