// Engine configuration (the vLLM EngineArgs a CPU engine needs).
#pragma once

#include <cstdint>
#include <string>

namespace minfer {

// How KV memory is handed to sequences. kContiguous reserves max_model_len per sequence up front, as an
// engine without paging must; it exists only to measure what paging gains.
enum class KvLayout : uint8_t { kPaged, kContiguous };

struct EngineConfig {
  std::string model_path;  // Hugging Face directory, .gguf file, or llama2.c .bin
  int num_threads = 0;     // 0 = one per hardware thread

  // KV cache. page_size: tokens per page, a power of two in [8, 256].
  int64_t page_size = 16;
  // Bytes for the KV pool. 0 = kv_cache_memory_fraction of the memory available after the model is
  // loaded, less an estimate of the activations at the largest batch.
  int64_t kv_cache_memory = 0;
  double kv_cache_memory_fraction = 0.5;
  KvLayout kv_layout = KvLayout::kPaged;
  bool enable_prefix_caching = true;  // automatic prefix caching (paged layout only)

  // Context length per request (prompt + output). 0 = the model's max_position_embeddings, capped at 8192.
  int64_t max_model_len = 0;

  // Scheduling: at most max_num_seqs sequences run at once, and one step computes at most
  // max_num_batched_tokens tokens (prefills are chunked to fit).
  int64_t max_num_seqs = 256;
  int64_t max_num_batched_tokens = 2048;
  // true: admit waiting requests every step (continuous batching); false: run a batch to completion
  // before forming the next (static batching, kept to measure the difference).
  bool enable_continuous_batching = true;

  // Throws minfer::Error naming the field and its allowed range.
  void validate() const;
};

}  // namespace minfer
