// `minfer quantize IN OUT --quantization w8a16|w8a8 [--group-size N] [--asymmetric] [--calibrate TEXT]`: writes
// an int8 quantized Hugging Face checkpoint (see model/quant/quantized_checkpoint.h) that `minfer` loads like any
// other. --calibrate runs the float model over a text first and applies SmoothQuant (model/quant/smoothing.h).
// `minfer quantize IN OUT.gguf --type Q4_0|Q4_K_M|Q5_K_M|Q6_K|Q8_0|F16|BF16`: writes a GGUF file of llama.cpp's
// quantization mix (model/quant/gguf_export.h) from a Hugging Face directory or a GGUF file.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "base/error.h"
#include "engine/calibration.h"
#include "model/model_tokenizer.h"
#include "model/quant/gguf_export.h"
#include "model/quant/quantize_model.h"
#include "model/quant/quantized_checkpoint.h"
#include "tools/commands.h"
#include "tools/eval_logits.h"
#include "tools/quant_flags.h"

namespace minfer::tools {
namespace {

struct QuantizeArgs {
  std::string in, out;
  QuantFlags quant;
  std::string gguf_type;  // --type: a GGUF file instead of an int8 checkpoint
  int threads = 0;
  std::string calibrate;  // SmoothQuant calibration text; empty = no smoothing
  int64_t calibration_tokens = 2048;
  float alpha = 0.5f;
};

// A one-line progress bar on stderr, redrawn in place.
void draw_progress(size_t done, size_t total, const std::string& name) {
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(kWidth * done / std::max<size_t>(total, 1));
  std::fprintf(stderr, "\r[%s%s] %zu/%zu %-24.24s", std::string(static_cast<size_t>(filled), '#').c_str(),
               std::string(static_cast<size_t>(kWidth - filled), ' ').c_str(), done, total, name.c_str());
  if (done == total) std::fputc('\n', stderr);
  std::fflush(stderr);
}

void run_gguf_quantize(const QuantizeArgs& a) {
  const auto type = parse_gguf_file_type(a.gguf_type);
  if (!type) fail("--type {}: not a GGUF file type minfer writes ({})", a.gguf_type, gguf_file_type_names());
  const auto t0 = std::chrono::steady_clock::now();
  const GgufExportResult r = write_quantized_gguf(a.in, a.out, *type, a.threads, draw_progress);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string types;
  for (const auto& [name, count] : r.types) types += fmt::format("{}{} {}", types.empty() ? "" : ", ", count, name);
  fmt::print("wrote {} ({}): {} tensors ({}), {:.1f} MiB in {:.1f} s\n", a.out, gguf_file_type_name(*type), r.tensors,
             types, static_cast<double>(r.bytes) / (1 << 20), secs);
}

void run_quantize(const QuantizeArgs& a) {
  if (!a.gguf_type.empty()) {
    if (a.quant.mode != "none" || !a.calibrate.empty())
      fail("--type writes a GGUF file; it takes no --quantization or --calibrate");
    return run_gguf_quantize(a);
  }
  const QuantConfig q = a.quant.config();
  if (!q.enabled())
    fail("give --quantization w8a16 or w8a8 (an int8 checkpoint) or --type {} (a GGUF file)", gguf_file_type_names());
  ModelWeights weights = load_model(a.in);
  if (weights.quant.enabled()) fail("{}: already quantized ({})", a.in, quantization_name(weights.quant));
  const uint64_t before = weight_bytes(weights);
  const auto t0 = std::chrono::steady_clock::now();
  nlohmann::json extra = {{"source", a.in}};
  SmoothingPlan plan;
  if (!a.calibrate.empty()) {
    const std::vector<int32_t> tokens = encode_file(*load_tokenizer(weights), a.calibrate, a.calibration_tokens);
    fmt::print(stderr, "calibrating on {} tokens of {}\n", tokens.size(), a.calibrate);
    plan = smooth_model(weights, calibrate_activation_ranges(weights, tokens, 512, a.threads), a.alpha);
    extra["smoothquant"] = {{"alpha", a.alpha}, {"calibration", a.calibrate}, {"tokens", tokens.size()}};
  }
  quantize_model(weights, q, a.threads, draw_progress, plan.empty() ? nullptr : &plan);
  write_quantized_checkpoint(weights, a.out, extra);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print("wrote {} ({}): weights {:.1f} MiB -> {:.1f} MiB in {:.1f} s\n", a.out, quantization_name(q),
             static_cast<double>(before) / (1 << 20), static_cast<double>(weight_bytes(weights)) / (1 << 20), secs);
}

}  // namespace

void add_quantize_command(CLI::App& app) {
  auto args = std::make_shared<QuantizeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "quantize", "Write a quantized copy of a model: an int8 Hugging Face checkpoint, or a GGUF file (--type)");
  cmd->add_option("in", args->in, "Hugging Face model directory (f32/f16/bf16), or a GGUF file with --type")
      ->required();
  cmd->add_option("out", args->out, "Output directory, or the .gguf file with --type")->required();
  add_quant_flags(*cmd, args->quant, /*allow_none=*/true);
  cmd->add_option("--type", args->gguf_type,
                  "Write a GGUF file of llama.cpp's quantization mix: " + gguf_file_type_names());
  cmd->add_option("-t,--threads", args->threads, "Worker threads (0 = all cores)")->capture_default_str();
  cmd->add_option("--calibrate", args->calibrate,
                  "Text file to calibrate SmoothQuant on (per-channel smoothing folded into the RMSNorm and up-proj "
                  "weights; helps W8A8 on models with activation outliers)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--calibration-tokens", args->calibration_tokens, "Tokens of the calibration text to use")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--smooth-alpha", args->alpha, "SmoothQuant migration strength alpha in (0, 1)")
      ->capture_default_str()
      ->check(CLI::Range(0.01f, 0.99f));
  cmd->callback([args] { run_quantize(*args); });
}

}  // namespace minfer::tools
