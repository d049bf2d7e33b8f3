// `minfer quantize IN OUT --quantization w8a16|w8a8 [--group-size N] [--asymmetric]`: writes an int8 quantized
// Hugging Face checkpoint (see model/quant/quantized_checkpoint.h) that `minfer` loads like any other.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "base/error.h"
#include "model/quant/quantize_model.h"
#include "model/quant/quantized_checkpoint.h"
#include "tools/commands.h"
#include "tools/quant_flags.h"

namespace minfer::tools {
namespace {

struct QuantizeArgs {
  std::string in, out;
  QuantFlags quant;
  int threads = 0;
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

void run_quantize(const QuantizeArgs& a) {
  const QuantConfig q = a.quant.config();
  if (!q.enabled()) fail("give --quantization w8a16 or w8a8");
  ModelWeights weights = load_model(a.in);
  if (weights.quant.enabled()) fail("{}: already quantized ({})", a.in, quantization_name(weights.quant));
  const uint64_t before = weight_bytes(weights);
  const auto t0 = std::chrono::steady_clock::now();
  quantize_model(weights, q, a.threads, draw_progress);
  nlohmann::json extra = {{"source", a.in}};
  write_quantized_checkpoint(weights, a.out, extra);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print("wrote {} ({}): weights {:.1f} MiB -> {:.1f} MiB in {:.1f} s\n", a.out, quantization_name(q),
             static_cast<double>(before) / (1 << 20), static_cast<double>(weight_bytes(weights)) / (1 << 20), secs);
}

}  // namespace

void add_quantize_command(CLI::App& app) {
  auto args = std::make_shared<QuantizeArgs>();
  CLI::App* cmd = app.add_subcommand("quantize", "Write an int8 quantized copy of a Hugging Face checkpoint");
  cmd->add_option("in", args->in, "Hugging Face model directory (f32/f16/bf16)")->required();
  cmd->add_option("out", args->out, "Output directory")->required();
  add_quant_flags(*cmd, args->quant, /*allow_none=*/false);
  cmd->get_option("--quantization")->required();
  cmd->add_option("-t,--threads", args->threads, "Worker threads (0 = all cores)")->capture_default_str();
  cmd->callback([args] { run_quantize(*args); });
}

}  // namespace minfer::tools
