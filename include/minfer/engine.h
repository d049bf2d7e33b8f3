// The engine API: many requests at once over one model, KV kept in pages, batches formed continuously.
//
//   minfer::EngineConfig config;
//   config.model_path = "models/Qwen2.5-0.5B-Instruct";
//   minfer::Engine engine(config);
//   minfer::SamplingParams params;
//   params.max_tokens = 64;
//   auto id = engine.add_request("Hello", params);
//   while (engine.has_unfinished())
//     for (const minfer::RequestOutput& out : engine.step()) std::cout << out.text_delta;
//
// Engine is single-threaded: call it from one thread. AsyncEngine runs the step loop on its own thread and
// streams each request's outputs to its caller; it is safe to use from many threads.
//
// Errors (a bad config, a budget that cannot hold one max_model_len sequence, a prompt longer than
// max_model_len, out-of-range sampling parameters) are thrown as minfer::Error (minfer/error.h), a
// std::runtime_error whose message says what to change and whose code() says what kind of failure it is.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "minfer/config.h"
#include "minfer/error.h"
#include "minfer/outputs.h"
#include "minfer/request_state.h"
#include "minfer/sampling.h"
#include "minfer/tokenizer.h"

namespace minfer {

class EngineCore;

struct EngineStats {
  int64_t num_running = 0;
  int64_t num_waiting = 0;
  // KV pool (pages of page_size tokens; the null page is not counted).
  int64_t page_size = 0;
  int64_t pages_total = 0;
  int64_t pages_used = 0;    // referenced by a sequence
  int64_t pages_free = 0;    // includes cached pages nobody references (evictable)
  int64_t pages_cached = 0;  // in the prefix cache, referenced or not
  int64_t kv_pool_bytes = 0;
  // The sliding-window layers' own pool, when the model has such layers (Gemma 3's local layers, Mistral): pages
  // behind every window go back to it as sequences advance (the pages above are then the full-attention layers').
  int64_t window_pages_total = 0;
  int64_t window_pages_used = 0;
  int64_t window_pages_released = 0;  // released behind windows so far
  // Tokens whose KV is held / token slots of the pages in use (shared pages counted once).
  double kv_utilisation = 0.0;
  // Prefix cache, over admitted requests: prompt tokens looked up and found.
  int64_t prefix_queried_tokens = 0;
  int64_t prefix_hit_tokens = 0;
  double prefix_cache_hit_rate = 0.0;
  // The tiers behind the prefix cache (EngineConfig::kv_offload_ram, kv_cache_dir), each: prompt tokens whose KV it
  // gave back, bytes copied back into the pool and stored into it, what it holds, and entries dropped for room or
  // (disk) found torn or corrupt and removed.
  struct KvTier {
    bool enabled = false;
    int64_t hit_tokens = 0;
    int64_t read_bytes = 0;
    int64_t written_bytes = 0;
    int64_t entries = 0;
    int64_t bytes = 0;
    int64_t evictions = 0;
    int64_t corrupt_removed = 0;
  };
  KvTier ram_tier, disk_tier;
  int64_t num_preemptions = 0;
  int64_t prompt_tokens = 0;     // of added requests
  int64_t generated_tokens = 0;  // sampled so far
  int64_t computed_tokens = 0;   // run through the model (prefill chunks, recomputes and decodes)
  int64_t num_steps = 0;
  // Tokens per step (prefill chunks and decodes together), as a histogram over kIterationTokenBuckets: counts per
  // bucket (one more for larger steps) and their sum; /metrics serves it as vLLM's iteration_tokens_total.
  static constexpr int64_t kIterationTokenBuckets[] = {1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};
  std::vector<int64_t> iteration_tokens_counts;
  int64_t iteration_tokens_sum = 0;
  int64_t max_num_running = 0;  // the most sequences held at once so far
  int64_t requests_finished = 0;
  int64_t max_model_len = 0;
  // Speculative decoding (EngineConfig::speculative): checks, draft tokens checked and accepted, and per draft
  // position how many checks kept it (vLLM's spec_decode_num_accepted_tokens_per_pos).
  int64_t spec_num_drafts = 0;
  int64_t spec_draft_tokens = 0;
  int64_t spec_accepted_tokens = 0;
  std::vector<int64_t> spec_accepted_per_pos;
  SpecDecodeUsage spec_decode() const { return {spec_num_drafts, spec_draft_tokens, spec_accepted_tokens}; }
  // Bytes of the model weights in memory (int8 payload + scales when quantized; see EngineConfig::quant).
  int64_t weight_bytes = 0;
};

class Engine {
 public:
  // Loads the model and tokenizer and allocates the KV pool. Throws minfer::Error.
  explicit Engine(const EngineConfig& config);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request; returns its id. Text is encoded with the model's tokenizer (BOS as the tokenizer's
  // config says). Throws when the prompt is empty or has max_model_len tokens or more, or params are
  // out of range.
  RequestId add_request(std::string_view prompt, const SamplingParams& params);
  RequestId add_request(std::vector<int32_t> prompt_token_ids, const SamplingParams& params);
  // With images (multimodal models): encoded files (PNG, JPEG, WebP, GIF), one per image placeholder of the
  // prompt in order (Gemma 3: <start_of_image>). Throws naming the image that does not decode or fit.
  RequestId add_request(std::vector<int32_t> prompt_token_ids, const SamplingParams& params,
                        const std::vector<std::string>& images);

  // Runs one scheduling step and returns an output for every request that produced a token, finished or
  // was aborted.
  std::vector<RequestOutput> step();

  // Ends a request (its pages are freed now; its final output, finish_reason abort, comes from the next
  // step()). False when the id is unknown or already finished.
  bool abort(RequestId id);
  bool has_unfinished() const;

  // Blocking convenience: runs the prompts together until all finish; results in prompt order. Outputs of
  // requests added before with add_request are kept for the next step().
  std::vector<CompletionOutput> generate(const std::vector<std::string>& prompts, const SamplingParams& params);
  std::vector<CompletionOutput> generate(const std::vector<std::vector<int32_t>>& prompts,
                                         const SamplingParams& params);

  EngineStats stats() const;
  const EngineConfig& config() const;  // as resolved (max_model_len, the KV budget and KV dtype filled in)
  std::vector<int32_t> encode(std::string_view text) const;
  std::string decode(const std::vector<int32_t>& ids) const;

  // The model's tokenizer (nullptr when it has none).
  const Tokenizer* tokenizer() const;

 private:
  friend struct EngineAccess;  // engine/engine_access.h: the internals, for tests and tools
  explicit Engine(std::unique_ptr<EngineCore> core);
  std::vector<CompletionOutput> run_to_completion(const std::vector<RequestId>& ids,
                                                  const std::vector<std::vector<int32_t>>& prompts);

  std::unique_ptr<EngineCore> core_;
  std::deque<RequestOutput> stashed_;  // outputs of other requests seen while generate() ran
};

// How a caller reads a request it hands to AsyncEngine.
struct RequestOptions {
  bool stream = true;                // keep each delta for RequestState::take()/next(), not only the result
  RequestState::Listener on_update;  // called on the engine thread after each delta (see RequestState)
  // The prompt's images, encoded files (PNG, JPEG, WebP, GIF), one per image placeholder of the prompt in order
  // (Gemma 3: <start_of_image>); a multimodal model only.
  std::vector<std::string> images;
};

class AsyncEngine {
 public:
  explicit AsyncEngine(const EngineConfig& config);
  ~AsyncEngine();  // shutdown(/*drain=*/false)
  AsyncEngine(const AsyncEngine&) = delete;
  AsyncEngine& operator=(const AsyncEngine&) = delete;

  // Thread-safe. The prompt is validated on the caller's thread (throws like Engine::add_request, and
  // minfer::Error with code kUnavailable after shutdown). The engine thread applies the request's outputs to
  // the returned state.
  std::shared_ptr<RequestState> add_request(std::string_view prompt, const SamplingParams& params,
                                            RequestOptions options = {});
  std::shared_ptr<RequestState> add_request(std::vector<int32_t> prompt_token_ids, const SamplingParams& params,
                                            RequestOptions options = {});

  // Thread-safe; the request's last output (finish_reason abort) follows on its stream.
  void abort(RequestId id);

  // Stops accepting requests. drain = true: runs until every request has finished; false: aborts them.
  // Joins the engine thread. Idempotent.
  void shutdown(bool drain = true);

  EngineStats stats() const;  // a snapshot taken after the last step
  const EngineConfig& config() const;
  std::vector<int32_t> encode(std::string_view text) const;
  // The model's tokenizer (nullptr when it has none); thread-safe, for callers that encode or name tokens
  // themselves (the server's chat prompts and logprobs).
  const Tokenizer* tokenizer() const;
  // The checkpoint's chat template (Jinja source): tokenizer_config.json "chat_template", chat_template.jinja
  // beside it, or the GGUF's tokenizer.chat_template; empty when the model has none. Throws minfer::LoadError
  // naming the file when it is malformed.
  std::string chat_template_source() const;
  // Whether the model has a vision tower (its own, or --mmproj's): requests with images are served.
  bool takes_images() const;
  // The checkpoint's sampling defaults (generation_config.json, GGUF general.sampling.*), read when asked.
  SamplingDefaults sampling_defaults() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace minfer
