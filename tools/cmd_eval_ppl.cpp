// `minfer eval-ppl --model PATH --text FILE [--quantization ...]`: perplexity of a model over a text, with a
// sliding window (every token after the first scored once, with up to --context tokens of history).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <string>

#include "model/model_tokenizer.h"
#include "model/quant/quantize_model.h"
#include "tools/commands.h"
#include "tools/eval_logits.h"
#include "tools/quant_flags.h"

namespace minfer::tools {
namespace {

struct EvalPplArgs {
  std::string model;
  std::string text;
  QuantFlags quant;
  int threads = 0;
  int64_t context = 256;
  int64_t stride = 128;
  int64_t max_tokens = 0;
};

void run_eval_ppl(const EvalPplArgs& a) {
  ModelWeights weights = load_model(a.model);
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(weights);
  quantize_model(weights, a.quant.config(), a.threads);
  const int64_t context = std::min<int64_t>(a.context, weights.config.max_position_embeddings);
  const std::vector<int32_t> tokens = encode_file(*tokenizer, a.text, a.max_tokens);
  const auto windows = eval_windows(static_cast<int64_t>(tokens.size()), context, std::min(a.stride, context));
  WindowLogits model(weights, a.threads, context);
  const int64_t vocab = model.vocab();
  double nll = 0.0;
  int64_t scored = 0;
  std::vector<double> logp;
  const auto t0 = std::chrono::steady_clock::now();
  for (const EvalWindow& w : windows) {
    const std::vector<float>& logits = model.run(tokens, w.begin, w.end);
    for (int64_t t = w.score_from; t < w.end; ++t) {
      log_softmax(logits.data() + (t - 1 - w.begin) * vocab, vocab, logp);
      nll -= logp[static_cast<size_t>(tokens[static_cast<size_t>(t)])];
      ++scored;
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print("model:         {}\n", a.model);
  fmt::print("quantization:  {}\n", quantization_name(weights.quant));
  fmt::print("weights:       {:.2f} MiB in memory\n", static_cast<double>(weight_bytes(weights)) / (1 << 20));
  fmt::print("text:          {} ({} tokens, {} scored, context {}, stride {}, {} windows)\n", a.text, tokens.size(),
             scored, context, std::min(a.stride, context), windows.size());
  fmt::print("nll/token:     {:.5f}\n", nll / static_cast<double>(scored));
  fmt::print("perplexity:    {:.4f}\n", std::exp(nll / static_cast<double>(scored)));
  spdlog::info("evaluated in {:.2f} s", secs);
}

}  // namespace

void add_eval_ppl_command(CLI::App& app) {
  auto args = std::make_shared<EvalPplArgs>();
  CLI::App* cmd = app.add_subcommand("eval-ppl", "Perplexity of a model over a text file (sliding window)");
  cmd->add_option("-m,--model", args->model, "Hugging Face directory, .gguf file, or llama2.c .bin")->required();
  cmd->add_option("--text", args->text, "UTF-8 text file to score")->required();
  cmd->add_option("--context", args->context, "Tokens per window")->capture_default_str();
  cmd->add_option("--stride", args->stride, "Tokens the window advances by")->capture_default_str();
  cmd->add_option("--max-tokens", args->max_tokens, "Score at most this many tokens of the text (0 = all)")
      ->capture_default_str();
  cmd->add_option("-t,--threads", args->threads, "Worker threads (0 = all cores)")->capture_default_str();
  add_quant_flags(*cmd, args->quant);
  cmd->callback([args] { run_eval_ppl(*args); });
}

}  // namespace minfer::tools
