// What `eval-ppl` and `eval-quant` share: the evaluation text as token windows, and the logits of every
// position of a window from one model (an Engine request with prompt logits).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "minfer/engine.h"
#include "model/model_weights.h"
#include "tokenizer/tokenizer.h"

namespace minfer::tools {

// Sliding windows over a token sequence (as HF's perplexity recipe): window w covers tokens [begin, end) and
// scores the targets [score_from, end) (each predicted from the position before it), so every token after the
// first is scored exactly once with up to `context` tokens of history.
struct EvalWindow {
  int64_t begin = 0, end = 0, score_from = 0;
};
std::vector<EvalWindow> eval_windows(int64_t num_tokens, int64_t context, int64_t stride);

// Reads a UTF-8 text file and encodes it (with BOS as the tokenizer adds it); at most max_tokens (0 = all).
std::vector<int32_t> encode_file(const Tokenizer& tokenizer, const std::string& path, int64_t max_tokens);

class WindowLogits {
 public:
  // kv: the KV cache's type (f32 by default: a weights' evaluation measures the weights' error alone).
  WindowLogits(const ModelWeights& weights, int threads, int64_t context, KvCacheDtype kv = KvCacheDtype::kF32);
  // Logits [end - begin, vocab] of tokens[begin, end).
  const std::vector<float>& run(const std::vector<int32_t>& tokens, int64_t begin, int64_t end);
  // Greedy continuation of `prompt` by `count` tokens.
  std::vector<int32_t> greedy(const std::vector<int32_t>& prompt, int32_t count);
  int64_t vocab() const { return vocab_; }

 private:
  std::unique_ptr<Engine> engine_;
  int64_t vocab_;
  std::vector<float> logits_;
};

// log softmax of one row into out (same length).
void log_softmax(const float* logits, int64_t n, std::vector<double>& out);

// A model's next-token distributions against a reference's over the same windows: KL(p_ref || p_model) per token,
// top-1 agreement (teacher-forced), and the perplexity of both.
struct LogitScores {
  double nll_ref = 0, nll = 0, kl = 0, kl_max = 0;
  int64_t tokens = 0, top1_agree = 0;
  double kl_mean() const { return kl / static_cast<double>(tokens); }
  double top1_percent() const { return 100.0 * static_cast<double>(top1_agree) / static_cast<double>(tokens); }
  double ppl_ref() const;
  double ppl() const;
};
LogitScores score_windows(WindowLogits& model, const std::vector<std::vector<float>>& ref_logits,
                          const std::vector<int32_t>& tokens, const std::vector<EvalWindow>& windows);
// How many leading tokens of `got` equal `want`'s.
size_t common_prefix(const std::vector<int32_t>& got, const std::vector<int32_t>& want);

// What eval-quant and eval-kv share: the model and text options, and the reference run they compare against.
struct EvalTextOptions {
  std::string model;
  std::string text;
  int threads = 0;
  int64_t context = 128;
  int64_t stride = 64;
  int64_t max_tokens = 512;
  int32_t greedy_tokens = 64;
};
// -m/--model, --text, --context, --stride, --max-tokens, --greedy-tokens, -t/--threads (defaults as o holds them).
void add_eval_text_options(CLI::App* cmd, EvalTextOptions& o);

struct EvalReference {
  std::vector<int32_t> tokens;
  int64_t context = 0, stride = 0;  // cut to the model's context
  std::vector<EvalWindow> windows;
  std::vector<std::vector<float>> logits;  // the reference's, per window
  std::vector<int32_t> prompt;             // BOS: the model's own text follows
  std::vector<int32_t> greedy;             // the reference's greedy continuation of prompt
  // "model M (dtype), text T: N tokens in W windows of C (stride S)".
  std::string describe(const EvalTextOptions& o, const ModelWeights& weights) const;
};
// The text's windows and, for `weights` with a KV cache of type `kv`, the logits and greedy text compared against.
EvalReference eval_reference(const ModelWeights& weights, const Tokenizer& tokenizer, const EvalTextOptions& o,
                             KvCacheDtype kv = KvCacheDtype::kF32);

}  // namespace minfer::tools
