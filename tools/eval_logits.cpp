#include "tools/eval_logits.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "engine/engine_access.h"

namespace minfer::tools {

std::vector<EvalWindow> eval_windows(int64_t num_tokens, int64_t context, int64_t stride) {
  if (context < 2) fail("--context must be at least 2 tokens");
  if (stride < 1 || stride > context) fail("--stride must be in [1, context]");
  std::vector<EvalWindow> out;
  int64_t scored_to = 1;  // token 0 has no history
  for (int64_t begin = 0; scored_to < num_tokens; begin += stride) {
    const int64_t end = std::min(begin + context, num_tokens);
    if (end > scored_to) out.push_back(EvalWindow{begin, end, std::max(scored_to, begin + 1)});
    scored_to = std::max(scored_to, end);
  }
  return out;
}

std::vector<int32_t> encode_file(const Tokenizer& tokenizer, const std::string& path, int64_t max_tokens) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot read the text file", path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::vector<int32_t> ids = tokenizer.encode(ss.str(), /*add_special=*/true);
  if (max_tokens > 0 && static_cast<int64_t>(ids.size()) > max_tokens) ids.resize(static_cast<size_t>(max_tokens));
  if (ids.size() < 2) fail("{}: the text has fewer than 2 tokens", path);
  return ids;
}

namespace {
EngineConfig config_for(const ModelWeights& weights, int threads, int64_t context) {
  EngineConfig c;
  c.model_path = weights.path;
  c.num_threads = threads;
  c.max_model_len = std::min(context + 1, weights.config.max_position_embeddings);
  c.max_num_seqs = 1;
  c.enable_prefix_caching = false;
  c.kv_cache_dtype = KvCacheDtype::kF32;  // the weights' error alone, not the KV cache's rounding
  return c;
}

SamplingParams greedy_params(int32_t count) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = count;
  p.ignore_eos = true;
  return p;
}
}  // namespace

WindowLogits::WindowLogits(const ModelWeights& weights, int threads, int64_t context)
    : engine_(EngineAccess::from_weights(config_for(weights, threads, std::max<int64_t>(context, 256)), weights)),
      vocab_(weights.config.vocab_size) {}

const std::vector<float>& WindowLogits::run(const std::vector<int32_t>& tokens, int64_t begin, int64_t end) {
  SamplingParams p = greedy_params(1);
  p.prompt_logits = true;
  std::vector<std::vector<int32_t>> window = {{tokens.begin() + begin, tokens.begin() + end}};
  logits_ = std::move(engine_->generate(window, p)[0].prompt_logits);
  return logits_;
}

std::vector<int32_t> WindowLogits::greedy(const std::vector<int32_t>& prompt, int32_t count) {
  return engine_->generate(std::vector<std::vector<int32_t>>{prompt}, greedy_params(count))[0].token_ids;
}

void log_softmax(const float* logits, int64_t n, std::vector<double>& out) {
  out.resize(static_cast<size_t>(n));
  double mx = -INFINITY;
  for (int64_t i = 0; i < n; ++i) mx = std::max(mx, static_cast<double>(logits[i]));
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
  const double lse = mx + std::log(sum);
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = static_cast<double>(logits[i]) - lse;
}

}  // namespace minfer::tools
