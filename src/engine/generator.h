// Generates one sequence at a time: prefill the prompt in chunks, then decode token by token, sampling each
// step and stopping on max_tokens, EOS or a stop token. The multi-request Engine (continuous batching) builds
// on the same ModelRunner and KV cache.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "engine/model_runner.h"
#include "kv/kv_cache.h"
#include "minfer/outputs.h"  // FinishReason
#include "minfer/sampling.h"
#include "model/model_weights.h"

namespace minfer {

struct GeneratorOptions {
  int num_threads = 0;      // 0 = all hardware threads
  int64_t max_seq_len = 0;  // 0 = the model's max_position_embeddings (capped at 8192)
  int64_t page_size = 16;
  int64_t prefill_chunk = 512;  // tokens per prefill step
  graph::FusionOptions fusion;  // fusion passes the model graph is compiled with
};

struct GenerationResult {
  std::vector<int32_t> token_ids;  // generated tokens (the stop token included when one ended it)
  FinishReason finish_reason = FinishReason::kLength;
  int64_t prompt_tokens = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;
};

class Generator {
 public:
  Generator(const ModelWeights& weights, const GeneratorOptions& options);

  // on_token is called with each new token as it is sampled; return false to stop early.
  // eos_ids end generation unless params.ignore_eos. When prompt_logits is non-null it receives the logits
  // of every prompt position ([prompt_len, vocab]).
  GenerationResult generate(const std::vector<int32_t>& prompt, const SamplingParams& params,
                            const std::vector<int32_t>& eos_ids, const std::function<bool(int32_t)>& on_token,
                            std::vector<float>* prompt_logits = nullptr);

  const ModelRunner& runner() const { return runner_; }
  ModelRunner& runner() { return runner_; }
  int64_t max_seq_len() const { return max_seq_len_; }

 private:
  void ensure_pages(int64_t tokens);

  GeneratorOptions options_;
  int64_t max_seq_len_;
  ThreadPool pool_;
  ModelRunner runner_;
  KvCache cache_;
  PageAllocator pages_;
  std::vector<int32_t> block_table_;
};

}  // namespace minfer
