#include "tools/eval_logits.h"

#include <fmt/format.h>

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
EngineConfig config_for(const ModelWeights& weights, int threads, int64_t context, KvCacheDtype kv) {
  EngineConfig c;
  c.model_path = weights.path;
  c.num_threads = threads;
  c.max_model_len = std::min(context + 1, weights.config.max_position_embeddings);
  c.max_num_seqs = 1;
  c.enable_prefix_caching = false;
  c.kv_cache_dtype = kv;
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

WindowLogits::WindowLogits(const ModelWeights& weights, int threads, int64_t context, KvCacheDtype kv)
    : engine_(EngineAccess::from_weights(config_for(weights, threads, std::max<int64_t>(context, 256), kv), weights)),
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

double LogitScores::ppl_ref() const { return std::exp(nll_ref / static_cast<double>(tokens)); }
double LogitScores::ppl() const { return std::exp(nll / static_cast<double>(tokens)); }

LogitScores score_windows(WindowLogits& model, const std::vector<std::vector<float>>& ref_logits,
                          const std::vector<int32_t>& tokens, const std::vector<EvalWindow>& windows) {
  const int64_t vocab = model.vocab();
  std::vector<double> lr, lq;
  LogitScores s;
  for (size_t wi = 0; wi < windows.size(); ++wi) {
    const EvalWindow& w = windows[wi];
    const std::vector<float>& ql = model.run(tokens, w.begin, w.end);
    for (int64_t t = w.score_from; t < w.end; ++t) {
      const int64_t row = t - 1 - w.begin;
      const float* r = ref_logits[wi].data() + row * vocab;
      const float* qr = ql.data() + row * vocab;
      log_softmax(r, vocab, lr);
      log_softmax(qr, vocab, lq);
      double kl = 0.0;
      for (size_t v = 0; v < lr.size(); ++v) kl += std::exp(lr[v]) * (lr[v] - lq[v]);
      s.kl += kl;
      s.kl_max = std::max(s.kl_max, kl);
      const size_t target = static_cast<size_t>(tokens[static_cast<size_t>(t)]);
      s.nll_ref -= lr[target];
      s.nll -= lq[target];
      s.top1_agree += std::max_element(r, r + vocab) - r == std::max_element(qr, qr + vocab) - qr;
      ++s.tokens;
    }
  }
  return s;
}

void add_eval_text_options(CLI::App* cmd, EvalTextOptions& o) {
  cmd->add_option("-m,--model", o.model, "Hugging Face directory, .gguf file, or llama2.c .bin")->required();
  cmd->add_option("--text", o.text, "UTF-8 text file to evaluate on")->required();
  cmd->add_option("--context", o.context, "Tokens per window")->capture_default_str();
  cmd->add_option("--stride", o.stride, "Tokens the window advances by")->capture_default_str();
  cmd->add_option("--max-tokens", o.max_tokens, "Evaluate at most this many tokens of the text (0 = all)")
      ->capture_default_str();
  cmd->add_option("--greedy-tokens", o.greedy_tokens, "Greedy continuation length compared")->capture_default_str();
  cmd->add_option("-t,--threads", o.threads, "Worker threads (0 = all cores)")->capture_default_str();
}

EvalReference eval_reference(const ModelWeights& weights, const Tokenizer& tokenizer, const EvalTextOptions& o,
                             KvCacheDtype kv) {
  EvalReference r;
  r.context = std::min<int64_t>(o.context, weights.config.max_position_embeddings);
  r.stride = std::min(o.stride, r.context);
  r.tokens = encode_file(tokenizer, o.text, o.max_tokens);
  r.windows = eval_windows(static_cast<int64_t>(r.tokens.size()), r.context, r.stride);
  WindowLogits ref(weights, o.threads, r.context, kv);
  for (const EvalWindow& w : r.windows) r.logits.push_back(ref.run(r.tokens, w.begin, w.end));
  r.prompt.assign(r.tokens.begin(), r.tokens.begin() + 1);
  r.greedy = ref.greedy(r.prompt, o.greedy_tokens);
  return r;
}

std::string EvalReference::describe(const EvalTextOptions& o, const ModelWeights& weights) const {
  return fmt::format("model {} ({}), text {}: {} tokens in {} windows of {} (stride {})", o.model,
                     dtype_name(weights.config.dtype), o.text, tokens.size(), windows.size(), context, stride);
}

size_t common_prefix(const std::vector<int32_t>& got, const std::vector<int32_t>& want) {
  size_t same = 0;
  while (same < got.size() && same < want.size() && got[same] == want[same]) ++same;
  return same;
}

}  // namespace minfer::tools
