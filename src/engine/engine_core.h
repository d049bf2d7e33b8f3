// The engine's step loop behind the public Engine and AsyncEngine: owns the model runner, the KV pool,
// the block manager, the scheduler and the sequences. Single-threaded except where marked.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/thread_pool.h"
#include "engine/draft_model.h"
#include "engine/model_runner.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "engine/speculative.h"
#include "engine/step_channel.h"
#include "kv/kv_budget.h"
#include "kv/kv_cache.h"
#include "kv/kv_tiers.h"
#include "kv/page_manager.h"
#include "kv/state_pool.h"
#include "minfer/config.h"
#include "minfer/engine.h"
#include "model/model_tokenizer.h"
#include "model/model_weights.h"
#include "tokenizer/tokenizer.h"
#include "vision/vision_encoder.h"

namespace minfer {

class EngineCore {
 public:
  explicit EngineCore(const EngineConfig& config);
  // Over weights already loaded (tests and tools that change them first); config.model_path only names them.
  EngineCore(const EngineConfig& config, ModelWeights weights);
  ~EngineCore();

  // Thread-safe (read only the config, the tokenizer and an atomic counter).
  const EngineConfig& config() const { return config_; }
  const ModelConfig& model_config() const { return weights_.config; }
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }
  // The checkpoint's chat template source (model_tokenizer.h chat_template_source); empty when it has none.
  // Throws LoadError naming the file when it is malformed.
  std::string chat_template_source() const { return minfer::chat_template_source(weights_); }
  std::vector<int32_t> encode(std::string_view text) const;
  bool takes_images() const { return encoder_ != nullptr; }
  std::string decode(const std::vector<int32_t>& ids) const;
  // Throws minfer::Error when the request cannot be served.
  void validate_request(std::span<const int32_t> prompt, const SamplingParams& params) const;
  RequestId next_id() { return next_id_.fetch_add(1); }

  // The matcher of params.structured_outputs (null without), compiled on the caller's thread so that a slow
  // schema never holds up the step loop. Thread-safe. Throws Error(kInvalidArgument) carrying llguidance's
  // message for an invalid schema, regex or grammar.
  std::unique_ptr<GrammarMatcher> compile_grammar(const SamplingParams& params) const;

  // Step-loop thread only. add_request takes a request validate_request has passed (the public Engine and
  // AsyncEngine validate once, on the caller's thread) and its compiled grammar (compiled here when null and
  // the request has structured outputs).
  void add_request(RequestId id, std::vector<int32_t> prompt, const SamplingParams& params,
                   std::unique_ptr<GrammarMatcher> grammar = nullptr, std::vector<SeqImage> images = {});
  // A request's images (engine_core_images.cpp), on the caller's thread: each decoded and preprocessed, and the
  // prompt's image placeholders expanded into the model's image tokens (keyed by content: engine/seq_image.h).
  // Thread-safe. Throws Error (kInvalidArgument) naming the image and the problem.
  std::vector<SeqImage> prepare_images(std::vector<int32_t>& prompt, std::span<const std::string> images) const;
  bool abort(RequestId id);
  std::vector<RequestOutput> step();
  bool has_unfinished() const { return scheduler_->has_unfinished() || !pending_.empty(); }
  // Ends every request with finish_reason abort (and `error`, when the engine failed).
  // unavailable: the error is the engine's state, not a bug (RequestOutput::error_unavailable).
  std::vector<RequestOutput> abort_all(const std::string& error = "", bool unavailable = false);
  EngineStats stats() const;

  // The full-attention layers' pages (the only ones, or the window pool's when every layer slides).
  const PageManager& page_manager() const { return full_.pages ? *full_.pages : *window_.pages; }
  const PageManager* window_page_manager() const { return full_.pages ? window_.pages.get() : nullptr; }
  const Scheduler& scheduler() const { return *scheduler_; }
  const ModelRunner& runner() const { return *runner_; }
  ModelRunner& runner() { return *runner_; }  // calibration observes its matmuls
  const ModelWeights& weights() const { return weights_; }

 private:
  using Clock = std::chrono::steady_clock;
  // A KV pool and the pages of it sequences hold. full_: the full-attention layers; window_: the sliding-window
  // layers (present only when the model has them and the KV layout is paged), whose pages behind the window are
  // released. Either may be absent, not both.
  struct KvGroup {
    std::unique_ptr<KvCache> cache;
    std::unique_ptr<PageManager> pages;
  };
  // A step's model run: its output rows (logits, or hidden states when embedding), when it started and ended.
  struct ModelRun {
    std::span<const float> rows;
    Clock::time_point start, end;
  };

  void load_tokenizer_and_eos_ids();
  void resolve_config();
  void start_runner();
  void start_scheduler();
  bool contiguous_kv() const { return config_.kv_layout == KvLayout::kContiguous; }
  int64_t pages_per_seq() const { return page_.pages_for(config_.max_model_len); }
  bool embedding() const { return config_.task == EngineTask::kEmbed; }

  // The KV pools (engine_core_kv.cpp).
  KvPoolRequest kv_pool_request() const;
  void fit_max_model_len(KvPoolRequest& request);
  void create_kv_groups(const KvPoolRequest& request);
  void create_state_pool(KvPoolRequest& request);
  void create_kv_group(KvGroup& group, KvCacheShape shape, int64_t num_pages);
  void log_kv_pools() const;
  // The KV tiers (engine_core_tiers.cpp): made when configured, their identity, their counters.
  void start_tiers();
  std::string tier_settings() const;
  void tier_stats(EngineStats& s) const;

  // Tensor parallel (engine_core_tp.cpp).
  void start_tensor_parallel();
  void share_kv_budget(KvPoolRequest& request) const;
  void send_worker_setup();
  void broadcast_step();
  void end_tensor_parallel();
  const ModelWeights& runner_weights() const { return shard_ ? *shard_ : weights_; }

  // A step (engine_core_step.cpp): its chunks, the grammar masks beside the model, the counters and the log line.
  void plan_chunks(const SchedulerOutput& sched);
  void add_chunks(Sequence& seq, int64_t num_tokens, int64_t num_draft);
  void start_grammar_masks();
  ModelRun run_model();
  void count_step(const SchedulerOutput& sched);
  void log_step(const SchedulerOutput& sched, Clock::time_point start, const ModelRun& run) const;

  // A step's outputs (engine_core_outputs.cpp): each chunk's rows to its sequence, sampling, stop checks, outputs.
  void process_outputs(std::span<const float> step_rows, std::vector<RequestOutput>& outputs);
  void on_logits_row(Sequence& seq, int64_t position, std::span<const float> logits, std::vector<RequestOutput>& out);
  void on_hidden_rows(Sequence& seq, std::span<const float> rows, std::vector<RequestOutput>& outputs);
  int32_t sample_token(Sequence& seq, std::span<const float> logits);
  FinishReason append_token(Sequence& seq, int32_t token, std::span<const float> logits, RequestOutput& o);
  void emit(Sequence& seq, FinishReason reason, RequestOutput o, std::vector<RequestOutput>& outputs);
  RequestOutput make_output(const Sequence& seq) const;
  void set_counters(const Sequence& seq, RequestOutput& o) const;  // id, token counts, finish reason, spec usage
  void finish(Sequence* seq, FinishReason reason);

  // Images (engine_core_images.cpp): the vision encoder, and the scheduled chunks' images encoded before the run.
  void start_vision();
  void encode_images(const SchedulerOutput& sched);

  // Speculative decoding (engine_core_drafts.cpp).
  void start_draft_model(const KvCacheShape& target_shape);
  void propose_drafts();
  void on_verify_rows(Sequence& seq, std::span<const float> rows, std::vector<RequestOutput>& outputs);

  EngineConfig config_;
  PageGeometry page_;  // from config_.page_size, checked once; every pool, page manager and view gets this one
  // Which bound set config_.max_model_len: the config's value, the model's context, or the KV budget
  // (fit_max_model_len).
  enum class MaxLenBound : uint8_t { kGiven, kModel, kKvBudget } max_len_bound_ = MaxLenBound::kModel;
  ModelWeights weights_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::vector<int32_t> eos_ids_;
  ThreadPool pool_;
  std::unique_ptr<ModelRunner> runner_;
  // Tensor parallel (config_.tensor_parallel_size > 1): this rank's shard of weights_, which the runner computes
  // with, and the channel that sends each step to the other ranks (engine/tp_worker.h).
  std::unique_ptr<ModelWeights> shard_;
  std::unique_ptr<StepChannel> channel_;
  KvGroup full_, window_;
  std::unique_ptr<StatePool> states_;   // the recurrent layers' state slots (models with such layers)
  std::unique_ptr<KvTiers> tiers_;      // the RAM and disk tiers behind the prefix cache (destroyed before the pools)
  std::vector<uint8_t> window_layers_;  // [num_layers] 1: the layer's KV is in window_
  int64_t kv_pages_ = 0;                // pages of the full pool (or of the window pool when there is no full one)
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<Speculator> speculator_;  // config_.speculative enabled
  std::unique_ptr<DraftModel> draft_;       // with the draft_model method
  std::vector<Sequence*> draft_seqs_;       // propose_drafts scratch
  std::vector<int64_t> draft_lengths_;
  std::unordered_map<RequestId, std::unique_ptr<Sequence>> seqs_;
  // Multimodal models: the tower, the tokens around each image's (Gemma 3: "\n\n"), and the embeddings of recent
  // images by content key (a repeated image is encoded once).
  std::unique_ptr<vision::VisionEncoder> encoder_;
  std::vector<int32_t> image_wrap_ids_;
  std::map<std::pair<uint64_t, uint64_t>, std::shared_ptr<const std::vector<float>>> image_cache_;
  std::deque<std::pair<uint64_t, uint64_t>> image_cache_order_;
  std::vector<RequestOutput> pending_;  // outputs of aborted requests, returned by the next step()
  std::atomic<RequestId> next_id_{1};

  // Step scratch.
  std::vector<SequenceChunk> chunks_;
  std::vector<Sequence*> chunk_seqs_;  // the sequence of each chunk (a prompt-logits prefill gives it several)
  std::vector<int64_t> chunk_drafts_;  // the drafts each chunk checks (0: none)
  std::vector<float> row_;
  std::vector<float> masked_row_;  // a constrained row with logprobs: the masked logits they are computed from

  // Structured outputs: made at the first constrained request.
  mutable std::once_flag grammar_once_;
  mutable std::unique_ptr<GrammarCompiler> grammar_compiler_;
  std::unique_ptr<GrammarMaskWorker> mask_worker_;
  int64_t step_masks_ = 0;       // constrained sequences whose masks this step computes
  Clock::duration mask_wait_{};  // this step's wait for the masks after the model finished (--log-level debug)
  mutable std::vector<int32_t> page_fill_;

  // Counters.
  int64_t prompt_tokens_ = 0;
  int64_t generated_tokens_ = 0;
  int64_t computed_tokens_ = 0;
  int64_t num_steps_ = 0;
  std::vector<int64_t> iteration_tokens_counts_ =
      std::vector<int64_t>(std::size(EngineStats::kIterationTokenBuckets) + 1, 0);
  int64_t max_running_ = 0;
  int64_t finished_ = 0;
};

}  // namespace minfer
