#include "engine/generator.h"

#include <algorithm>
#include <chrono>

#include "base/error.h"
#include "engine/sampler.h"

namespace minfer {
namespace {

int64_t resolve_max_seq_len(const GeneratorOptions& o, const ModelConfig& c) {
  if (o.max_seq_len > 0) return o.max_seq_len;
  return std::min<int64_t>(c.max_position_embeddings, 8192);
}

KvCacheShape cache_shape(const ModelConfig& c, int64_t page_size, int64_t max_seq_len) {
  KvCacheShape s;
  s.num_layers = c.num_layers;
  s.kv_heads = c.num_kv_heads;
  s.head_dim = c.head_dim;
  s.page_size = page_size;
  s.num_pages = (max_seq_len + page_size - 1) / page_size + 1;  // + the null page
  return s;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Generator::Generator(const ModelWeights& weights, const GeneratorOptions& options)
    : options_(options),
      max_seq_len_(resolve_max_seq_len(options, weights.config)),
      pool_(options.num_threads),
      runner_(weights, pool_, options.fusion, max_seq_len_),
      cache_(cache_shape(weights.config, options.page_size, max_seq_len_)),
      pages_(cache_.shape().num_pages) {}

void Generator::ensure_pages(int64_t tokens) {
  while (static_cast<int64_t>(block_table_.size()) * options_.page_size < tokens) {
    const int32_t page = pages_.allocate();
    MINFER_CHECK(page > 0, "out of KV pages");
    block_table_.push_back(page);
  }
}

GenerationResult Generator::generate(const std::vector<int32_t>& prompt, const SamplingParams& params,
                                     const std::vector<int32_t>& eos_ids, const std::function<bool(int32_t)>& on_token,
                                     std::vector<float>* prompt_logits) {
  params.validate();
  if (prompt.empty()) fail("the prompt is empty: give at least one token");
  if (static_cast<int64_t>(prompt.size()) >= max_seq_len_)
    fail("the prompt has {} tokens but max_seq_len is {}", prompt.size(), max_seq_len_);
  for (int32_t p : block_table_) pages_.free(p);
  block_table_.clear();

  GenerationResult result;
  result.prompt_tokens = static_cast<int64_t>(prompt.size());
  Sampler sampler(params);
  const int64_t vocab = runner_.vocab_size();
  std::vector<float> logits(static_cast<size_t>(vocab));
  if (prompt_logits) prompt_logits->clear();

  // Prefill in chunks; with prompt_logits every position samples, otherwise only the last one.
  auto t0 = std::chrono::steady_clock::now();
  const int64_t n = static_cast<int64_t>(prompt.size());
  for (int64_t start = 0; start < n; start += options_.prefill_chunk) {
    const int64_t len = std::min(options_.prefill_chunk, n - start);
    ensure_pages(start + len);
    std::vector<SequenceChunk> chunks;
    if (prompt_logits) {
      // One chunk per position so every row samples; all attend to the same pages.
      for (int64_t i = 0; i < len; ++i)
        chunks.push_back(
            SequenceChunk{{prompt.data() + start + i, 1}, static_cast<int32_t>(start + i), block_table_, true});
    } else {
      chunks.push_back(SequenceChunk{{prompt.data() + start, static_cast<size_t>(len)},
                                     static_cast<int32_t>(start),
                                     block_table_,
                                     start + len == n});
    }
    auto out = runner_.execute(chunks, cache_);
    if (prompt_logits) prompt_logits->insert(prompt_logits->end(), out.begin(), out.end());
    if (start + len == n) std::copy(out.end() - vocab, out.end(), logits.begin());
  }
  result.prefill_seconds = seconds_since(t0);

  t0 = std::chrono::steady_clock::now();
  std::vector<int32_t> context = prompt;
  for (int32_t step = 0; step < params.max_tokens; ++step) {
    const int32_t token = sampler.sample(logits, prompt, result.token_ids);
    result.token_ids.push_back(token);
    const bool is_eos = !params.ignore_eos && std::find(eos_ids.begin(), eos_ids.end(), token) != eos_ids.end();
    const bool is_stop =
        std::find(params.stop_token_ids.begin(), params.stop_token_ids.end(), token) != params.stop_token_ids.end();
    const bool keep_going = on_token(token);
    if (is_eos || is_stop) {
      result.finish_reason = FinishReason::kStop;
      break;
    }
    if (!keep_going) {
      result.finish_reason = FinishReason::kStop;
      break;
    }
    if (step + 1 == params.max_tokens) break;
    const int64_t pos = static_cast<int64_t>(context.size());
    if (pos + 1 > max_seq_len_) break;  // context full
    context.push_back(token);
    ensure_pages(pos + 1);
    SequenceChunk chunk{{context.data() + pos, 1}, static_cast<int32_t>(pos), block_table_, true};
    auto out = runner_.execute({&chunk, 1}, cache_);
    std::copy(out.begin(), out.end(), logits.begin());
  }
  result.decode_seconds = seconds_since(t0);
  return result;
}

}  // namespace minfer
