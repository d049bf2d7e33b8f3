// `minfer eval-kv --model PATH --text FILE`: how far each KV cache type moves a model's next-token distributions
// from an f32 cache, the weights as stored. Over the same windows of the text as eval-ppl: the per-token
// KL(p_f32_kv || p_kv), top-1 agreement (teacher-forced), both perplexities, free-running greedy agreement, and
// the KV bytes a token takes. llama.cpp's `llama-perplexity --kl-divergence -ctk T -ctv T` is the peer figure
// (bench/kv_accuracy_llamacpp.py computes the same measures through llama-cpp-python).
#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "kernels/kv_format.h"
#include "model/model_tokenizer.h"
#include "tools/commands.h"
#include "tools/eval_logits.h"

namespace minfer::tools {
namespace {

struct EvalKvArgs {
  EvalTextOptions eval{.context = 512, .stride = 256, .max_tokens = 4096};
  std::vector<std::string> dtypes = {"bf16", "f16", "int8", "fp8_e4m3", "q8_0", "q4_0"};
};

void run_eval_kv(const EvalKvArgs& a) {
  const ModelWeights weights = load_model(a.eval.model);
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(weights);
  const ModelConfig& m = weights.config;
  const EvalReference ref = eval_reference(weights, *tokenizer, a.eval, KvCacheDtype::kF32);

  fmt::print("{}; reference: f32 KV\n", ref.describe(a.eval, weights));
  fmt::print("{:<10} {:>12} {:>10} {:>10} {:>9} {:>9} {:>9} {:>8} {:>11}\n", "kv dtype", "KV B/token", "KL mean",
             "KL max", "top-1", "ppl f32", "ppl kv", "dppl", "greedy");
  for (const std::string& name : a.dtypes) {
    KvCacheDtype dtype = KvCacheDtype::kF32;
    parse_kv_cache_dtype(name, &dtype);
    WindowLogits model(weights, a.eval.threads, ref.context, dtype);
    const LogitScores s = score_windows(model, ref.logits, ref.tokens, ref.windows);
    const size_t same = common_prefix(model.greedy(ref.prompt, a.eval.greedy_tokens), ref.greedy);
    const int64_t bytes = 2 * m.num_attention_layers() * m.num_kv_heads * kv_head_bytes(dtype, m.head_dim);
    fmt::print("{:<10} {:>12} {:>10.2e} {:>10.2e} {:>8.2f}% {:>9.4f} {:>9.4f} {:>7.3f}% {:>5}/{:<5}\n", name, bytes,
               s.kl_mean(), s.kl_max, s.top1_percent(), s.ppl_ref(), s.ppl(), 100.0 * (s.ppl() / s.ppl_ref() - 1.0),
               same, ref.greedy.size());
  }
}

}  // namespace

void add_eval_kv_command(CLI::App& app) {
  auto args = std::make_shared<EvalKvArgs>();
  CLI::App* cmd = app.add_subcommand(
      "eval-kv", "Accuracy of each KV cache type vs an f32 cache: logit KL, top-1 agreement, perplexity, greedy");
  add_eval_text_options(cmd, args->eval);
  cmd->add_option("--kv-cache-dtype", args->dtypes, "KV types to compare (repeatable)")
      ->check(CLI::IsMember({"f32", "bf16", "f16", "int8", "fp8_e4m3", "q8_0", "q4_0"}))
      ->capture_default_str();
  cmd->callback([args] { run_eval_kv(*args); });
}

}  // namespace minfer::tools
