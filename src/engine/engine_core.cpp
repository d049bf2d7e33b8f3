// The EngineCore's set-up (the constructor's steps) and the requests' way in and out: validation, grammars,
// add_request, aborts and the stats. A step is engine_core_step.cpp, its outputs engine_core_outputs.cpp; the KV
// pools, tensor parallel and speculative decoding have a file each (engine_core_{kv,tp,drafts}.cpp).
#include "engine/engine_core.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "base/error.h"
#include "kv/kv_budget.h"
#include "model/model_tokenizer.h"
#include "model/quant/quantize_model.h"

namespace minfer {
namespace {

// The model's own context unless one is given (fit_max_model_len may then cut it to the KV budget).
int64_t resolve_max_model_len(const EngineConfig& c, const ModelConfig& m) {
  if (c.max_model_len == 0) return m.max_position_embeddings;
  if (c.max_model_len > m.max_position_embeddings)
    fail("max_model_len {} exceeds the model's context ({} positions, max_position_embeddings); lower it",
         c.max_model_len, m.max_position_embeddings);
  return c.max_model_len;
}

}  // namespace

EngineCore::EngineCore(const EngineConfig& config)
    : EngineCore(config, (config.validate(), load_model(config.model_path))) {}

EngineCore::EngineCore(const EngineConfig& config, ModelWeights weights)
    : config_((config.validate(), config)),
      page_(PageGeometry::of(config.page_size)),
      weights_(std::move(weights)),
      pool_(config.num_threads) {
  start_tensor_parallel();
  // int8 at load (issue 5); under tensor parallel, of this rank's shard.
  if (config_.quant.enabled()) quantize_model(shard_ ? *shard_ : weights_, config_.quant, pool_.size());
  load_tokenizer_and_eos_ids();
  resolve_config();
  KvPoolRequest request = kv_pool_request();
  fit_max_model_len(request);
  create_kv_groups(request);
  start_runner();
  start_vision();
  start_scheduler();
  start_tiers();
  if (config_.speculative.enabled()) speculator_ = std::make_unique<Speculator>(config_.speculative);
  if (config_.speculative.method == SpeculativeMethod::kDraftModel) start_draft_model(request.shape);
  log_kv_pools();
}

EngineCore::~EngineCore() { end_tensor_parallel(); }

void EngineCore::load_tokenizer_and_eos_ids() {
  try {
    tokenizer_ = load_tokenizer(weights_);
  } catch (const Error& e) {
    spdlog::warn("no tokenizer ({}); only token-id prompts can be served", e.what());
  }
  eos_ids_ = eos_token_ids(weights_, tokenizer_.get());
}

// The config's automatic and conflicting settings as this model and this machine resolve them.
void EngineCore::resolve_config() {
  const ModelConfig& m = weights_.config;
  max_len_bound_ = config_.max_model_len > 0 ? MaxLenBound::kGiven : MaxLenBound::kModel;
  config_.max_model_len = resolve_max_model_len(config_, m);
  config_.num_threads = pool_.size();
  if (contiguous_kv() && config_.enable_prefix_caching) {
    spdlog::info("prefix caching is off in the contiguous KV layout");
    config_.enable_prefix_caching = false;
  }
  if (config_.kv_cache_dtype == KvCacheDtype::kAuto) config_.kv_cache_dtype = auto_kv_cache_dtype(m.dtype);
}

// Compiles the model's graph (the other ranks of a tensor-parallel group load theirs meanwhile).
void EngineCore::start_runner() {
  if (channel_) send_worker_setup();  // the other ranks load while this one compiles its graph
  runner_ = std::make_unique<ModelRunner>(
      runner_weights(), pool_, graph::FusionOptions{config_.fusion_strategy, config_.disabled_fusion_passes},
      config_.max_model_len, window_layers_, embedding() ? DecoderHead::kHiddenStates : DecoderHead::kLogits);
  if (channel_) dist::Communicator::world().barrier(/*idle=*/true);  // every rank has its model
}

void EngineCore::start_scheduler() {
  SchedulerOptions so;
  so.max_num_seqs = config_.max_num_seqs;
  so.max_num_batched_tokens = config_.max_num_batched_tokens;
  so.continuous = config_.enable_continuous_batching;
  if (weights_.vision)
    so.max_num_encoder_tokens =
        config_.max_num_encoder_tokens > 0 ? config_.max_num_encoder_tokens : config_.max_num_batched_tokens;
  so.watermark_pages = contiguous_kv() ? 0 : std::max<int64_t>(1, kv_pages_ / 100);
  if (states_ && states_->num_snapshots() > 0) so.state_snapshot_tokens = config_.state_snapshot_pages * page_.size();
  std::vector<KvGroupPages> groups;
  if (full_.pages) groups.push_back({full_.pages.get()});
  if (window_.pages) {
    // The attention reads from each window start rounded down to its 128-key blocks (or a page, if larger).
    groups.push_back({window_.pages.get(), weights_.config.sliding_window, std::max<int64_t>(128, page_.size())});
  }
  scheduler_ = std::make_unique<Scheduler>(so, std::move(groups), states_.get());
}

std::vector<int32_t> EngineCore::encode(std::string_view text) const {
  if (!tokenizer_) fail("this model has no tokenizer: give the prompt as token ids");
  return tokenizer_->encode(text);
}

std::string EngineCore::decode(const std::vector<int32_t>& ids) const {
  if (!tokenizer_) fail("this model has no tokenizer");
  return tokenizer_->decode(ids, /*skip_special=*/true);
}

void EngineCore::validate_request(std::span<const int32_t> prompt, const SamplingParams& params) const {
  params.validate();
  if (prompt.empty()) fail("the prompt is empty: give at least one token");
  const int64_t n = static_cast<int64_t>(prompt.size());
  if (n >= config_.max_model_len)
    fail(
        "the prompt has {} tokens but max_model_len is {} (prompt + output); shorten the prompt or raise "
        "max_model_len",
        n, config_.max_model_len);
  for (int32_t t : prompt)
    if (t < 0 || t >= weights_.config.vocab_size)
      fail("prompt token id {} is outside the vocabulary (size {})", t, weights_.config.vocab_size);
  if (!params.stop.empty() && !tokenizer_) fail("stop strings need a tokenizer, and this model has none");
  for (const auto& [id, bias] : params.logit_bias)
    if (id < 0 || id >= weights_.config.vocab_size)
      fail("logit_bias token id {} is outside the vocabulary (size {})", id, weights_.config.vocab_size);
  if (params.structured_outputs && !tokenizer_) fail("structured outputs need a tokenizer, and this model has none");
}

std::unique_ptr<GrammarMatcher> EngineCore::compile_grammar(const SamplingParams& params) const {
  if (!params.structured_outputs) return nullptr;
  if (!tokenizer_) fail("structured outputs need a tokenizer, and this model has none");
  std::call_once(grammar_once_,
                 [this] { grammar_compiler_ = std::make_unique<GrammarCompiler>(*tokenizer_, eos_ids_); });
  return grammar_compiler_->compile(*params.structured_outputs);
}

void EngineCore::add_request(RequestId id, std::vector<int32_t> prompt, const SamplingParams& params,
                             std::unique_ptr<GrammarMatcher> grammar, std::vector<SeqImage> images) {
  MINFER_CHECK(seqs_.count(id) == 0, "request id {} is in use", id);
  auto seq = std::make_unique<Sequence>();
  seq->grammar = grammar ? std::move(grammar) : compile_grammar(params);
  seq->id = id;
  seq->prompt_len = static_cast<int64_t>(prompt.size());
  seq->tokens = std::move(prompt);
  seq->tokens.reserve(static_cast<size_t>(seq->prompt_len + params.max_tokens));
  seq->params = params;
  if (!seq->params.seed && config_.seed) seq->params.seed = *config_.seed + id;
  seq->sampler = std::make_unique<Sampler>(seq->params);
  seq->images = std::move(images);
  seq->bidirectional_images =
      !seq->images.empty() && weights_.vision && weights_.vision->config.projector == vision::ProjectorKind::kGemma3;
  // Every prompt position must be computed (no prefix-cache hit may skip one) when each gives a row: prompt
  // logits, and mean-pooled embeddings.
  seq->every_prompt_row = params.prompt_logits || (embedding() && config_.pooling == PoolingType::kMean);
  const bool has_text = tokenizer_ && std::any_of(seq->tokens.begin(), seq->tokens.end(), [this](int32_t t) {
                          return t >= 0 && t < tokenizer_->vocab_size() && !tokenizer_->is_special(t);
                        });
  seq->stop = std::make_unique<StopChecker>(params, tokenizer_.get(), eos_ids_, seq->prompt_len, config_.max_model_len,
                                            has_text);
  prompt_tokens_ += seq->prompt_len;
  scheduler_->add(seq.get());
  seqs_.emplace(id, std::move(seq));
}

bool EngineCore::abort(RequestId id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return false;
  finish(it->second.get(), FinishReason::kAbort);
  pending_.push_back(make_output(*it->second));
  seqs_.erase(it);
  return true;
}

std::vector<RequestOutput> EngineCore::abort_all(const std::string& error, bool unavailable) {
  std::vector<RequestOutput> out = std::move(pending_);
  pending_.clear();
  for (auto& [id, seq] : seqs_) {
    finish(seq.get(), FinishReason::kAbort);
    out.push_back(make_output(*seq));
    out.back().error = error;
    out.back().error_unavailable = unavailable && !error.empty();
  }
  seqs_.clear();
  return out;
}

EngineStats EngineCore::stats() const {
  EngineStats s;
  s.num_running = static_cast<int64_t>(scheduler_->running().size());
  s.num_waiting = static_cast<int64_t>(scheduler_->waiting().size());
  const PageManager& pages = page_manager();
  s.page_size = pages.page().size();
  s.pages_total = pages.num_usable_pages();
  s.pages_used = pages.num_used_pages();
  s.pages_free = pages.num_free_pages();
  s.pages_cached = pages.num_cached_pages();
  s.kv_pool_bytes = config_.kv_cache_memory;
  if (window_.pages) {
    s.window_pages_total = window_.pages->num_usable_pages();
    s.window_pages_used = window_.pages->num_used_pages();
    s.window_pages_released = scheduler_->window_pages_released();
  }
  // Tokens held per distinct page (prefix-shared pages count once).
  page_fill_.assign(static_cast<size_t>(pages.num_usable_pages() + 1), 0);
  const int64_t ps = pages.page().size();
  for (const Sequence* seq : scheduler_->running()) {
    const std::span<const int32_t> table = pages.page_table(seq->id);
    for (size_t j = 0; j < table.size(); ++j) {
      const int64_t fill = std::clamp<int64_t>(seq->num_computed - static_cast<int64_t>(j) * ps, 0, ps);
      int32_t& f = page_fill_[static_cast<size_t>(table[j])];
      f = std::max(f, static_cast<int32_t>(fill));
    }
  }
  int64_t held = 0;
  for (size_t p = 1; p < page_fill_.size(); ++p) held += page_fill_[p];  // page 0: released entries
  s.kv_utilisation = s.pages_used > 0 ? static_cast<double>(held) / static_cast<double>(s.pages_used * ps) : 0.0;
  const PrefixCacheStats& p = pages.prefix_stats();
  s.prefix_queried_tokens = p.queried_tokens;
  s.prefix_hit_tokens = p.hit_tokens;
  s.prefix_cache_hit_rate =
      p.queried_tokens > 0 ? static_cast<double>(p.hit_tokens) / static_cast<double>(p.queried_tokens) : 0.0;
  tier_stats(s);
  s.num_preemptions = scheduler_->num_preemptions();
  s.prompt_tokens = prompt_tokens_;
  s.generated_tokens = generated_tokens_;
  s.computed_tokens = computed_tokens_;
  s.num_steps = num_steps_;
  s.iteration_tokens_counts = iteration_tokens_counts_;
  s.iteration_tokens_sum = computed_tokens_;
  s.max_num_running = max_running_;
  s.requests_finished = finished_;
  s.max_model_len = config_.max_model_len;
  if (speculator_) {
    const SpecDecodeCounters& c = speculator_->counters();
    s.spec_num_drafts = c.usage.num_drafts;
    s.spec_draft_tokens = c.usage.draft_tokens;
    s.spec_accepted_tokens = c.usage.accepted_tokens;
    s.spec_accepted_per_pos = c.accepted_per_pos;
  }
  s.weight_bytes = static_cast<int64_t>(weight_bytes(runner_weights()));  // this rank's, under tensor parallel
  return s;
}

}  // namespace minfer
