// `minfer make-test-model`: writes a real model's Hugging Face layout (config, safetensors, tokenizer) with seeded
// random weights, for tests and benchmarks.
#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <string>

#include "base/error.h"
#include "model/test_model_writer.h"
#include "tools/commands.h"

namespace minfer::tools {
namespace {

struct MakeTestModelArgs {
  std::string preset;
  std::string out;
  std::optional<std::string> dtype;
  std::string tokenizer;
  uint64_t seed = 0;
  uint64_t shard_size = 0;
  int64_t sliding_window = 0;
  int64_t layers = 0;
  bool quiet = false;
};

void run_make_test_model(const MakeTestModelArgs& args) {
  TestModelOptions o;
  o.preset = args.preset;
  o.out_dir = args.out;
  o.dtype = default_test_model_dtype(args.preset);
  if (args.dtype) {
    if (*args.dtype == "f32") {
      o.dtype = DType::F32;
    } else if (*args.dtype == "bf16") {
      o.dtype = DType::BF16;
    } else {
      fail("--dtype {}: supported are bf16 and f32", *args.dtype);
    }
  }
  o.seed = args.seed;
  o.tokenizer_json = args.tokenizer;
  o.shard_bytes = args.shard_size;
  o.sliding_window = args.sliding_window;
  o.layers = args.layers;
  const TestModelResult r = write_test_model(o);
  if (args.quiet) return;
  fmt::print("wrote {} to {}: {} parameters ({:.1f} MiB of {} weights), vocab {}\n", o.preset, o.out_dir, r.parameters,
             static_cast<double>(r.weight_bytes) / (1 << 20), dtype_name(o.dtype), r.vocab_size);
  for (const auto& f : r.files) fmt::print("  {}\n", f);
}

}  // namespace

void add_make_test_model_command(CLI::App& app) {
  auto args = std::make_shared<MakeTestModelArgs>();
  std::string presets;
  for (const auto& p : test_model_presets()) presets += (presets.empty() ? "" : "|") + p;
  CLI::App* cmd = app.add_subcommand("make-test-model",
                                     "Write a model with a real model's Hugging Face layout and seeded random weights");
  cmd->add_option("--preset", args->preset, presets)->required();
  cmd->add_option("--out", args->out, "Output directory (created if missing)")->required();
  cmd->add_option("--dtype", args->dtype, "bf16|f32 (default: bf16 for the real shapes, f32 for tiny-*)");
  cmd->add_option("--tokenizer", args->tokenizer,
                  "Copy this tokenizer.json (and tokenizer_config.json beside it) instead of generating one");
  cmd->add_option("--seed", args->seed, "Random seed of the weights (default 0)");
  cmd->add_option("--sliding-window", args->sliding_window,
                  "Gemma 2/3 and Mistral presets: the sliding window (default: the preset's)");
  cmd->add_option("--layers", args->layers,
                  "Only the preset's first N layers (a real shape's layers where all of them do not fit; default all)");
  cmd->add_option("--shard-size", args->shard_size,
                  "Split the weights into shards of at most this many bytes, with model.safetensors.index.json");
  cmd->add_flag("--quiet", args->quiet, "Print nothing");
  cmd->callback([args] { run_make_test_model(*args); });
}

}  // namespace minfer::tools
