#include "tools/eval_logits.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "base/error.h"

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
GeneratorOptions options_for(int threads, int64_t context) {
  GeneratorOptions o;
  o.num_threads = threads;
  o.max_seq_len = context + 1;
  return o;
}
}  // namespace

WindowLogits::WindowLogits(const ModelWeights& weights, int threads, int64_t context)
    : generator_(weights, options_for(threads, std::max<int64_t>(context, 256))) {}

const std::vector<float>& WindowLogits::run(const std::vector<int32_t>& tokens, int64_t begin, int64_t end) {
  const std::vector<int32_t> window(tokens.begin() + begin, tokens.begin() + end);
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = 1;
  p.ignore_eos = true;
  generator_.generate(
      window, p, {}, [](int32_t) { return false; }, &logits_);
  return logits_;
}

std::vector<int32_t> WindowLogits::greedy(const std::vector<int32_t>& prompt, int32_t count) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = count;
  p.ignore_eos = true;
  return generator_.generate(prompt, p, {}, [](int32_t) { return true; }).token_ids;
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
