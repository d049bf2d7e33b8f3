#include "engine/engine_core.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "base/error.h"
#include "engine/logprobs.h"
#include "kv/kv_budget.h"
#include "model/model_tokenizer.h"
#include "model/quant/quantize_model.h"
#include "model/shard_weights.h"

namespace minfer {
namespace {

int64_t resolve_max_model_len(const EngineConfig& c, const ModelConfig& m) {
  if (c.max_model_len == 0) return std::min<int64_t>(m.max_position_embeddings, 8192);
  if (c.max_model_len > m.max_position_embeddings)
    fail("max_model_len {} exceeds the model's context ({} positions, max_position_embeddings); lower it",
         c.max_model_len, m.max_position_embeddings);
  return c.max_model_len;
}

// Activations of the largest step, held beside the pool (a rough upper bound of the executor's buffers).
int64_t activation_bytes(const EngineConfig& c, const ModelConfig& m) {
  const int64_t per_token = 6 * m.hidden_size + 3 * m.intermediate_size + 2 * m.num_heads * m.head_dim;
  return 4 * (c.max_num_batched_tokens * per_token + 2 * c.max_num_seqs * m.vocab_size);
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
  try {
    tokenizer_ = load_tokenizer(weights_);
  } catch (const Error& e) {
    spdlog::warn("no tokenizer ({}); only token-id prompts can be served", e.what());
  }
  eos_ids_ = eos_token_ids(weights_, tokenizer_.get());
  const ModelConfig& m = weights_.config;
  config_.max_model_len = resolve_max_model_len(config_, m);
  config_.num_threads = pool_.size();

  const bool contiguous = config_.kv_layout == KvLayout::kContiguous;
  if (contiguous && config_.enable_prefix_caching) {
    spdlog::info("prefix caching is off in the contiguous KV layout");
    config_.enable_prefix_caching = false;
  }
  if (config_.kv_cache_dtype == KvCacheDtype::kAuto)
    config_.kv_cache_dtype = m.dtype == DType::BF16 ? KvCacheDtype::kBf16 : KvCacheDtype::kF32;
  KvPoolRequest req;
  req.shape.dtype = config_.kv_cache_dtype == KvCacheDtype::kBf16 ? DType::BF16 : DType::F32;
  req.shape.num_layers = m.num_layers;
  req.shape.kv_heads = runner_weights().config.num_kv_heads;  // this rank's, under tensor parallel
  req.shape.head_dim = m.head_dim;
  req.shape.page = page_;
  req.max_model_len = config_.max_model_len;
  const int64_t pages_per_seq = page_.pages_for(config_.max_model_len);
  req.max_useful_pages = config_.max_num_seqs * pages_per_seq;
  if (config_.kv_cache_memory > 0) {
    req.budget_bytes = config_.kv_cache_memory;
    req.budget_source = "kv_cache_memory";
  } else {
    const int64_t avail = available_memory_bytes();
    req.budget_bytes = static_cast<int64_t>(static_cast<double>(avail) * config_.kv_cache_memory_fraction) -
                       activation_bytes(config_, m);
    req.budget_source =
        fmt::format("{:.0f}% of {} MiB available, less {} MiB for activations", 100 * config_.kv_cache_memory_fraction,
                    avail >> 20, activation_bytes(config_, m) >> 20);
    if (const int local = dist::Communicator::local_size(); channel_ && local > 1) {
      req.budget_bytes /= local;  // the other ranks on this machine plan the same pages
      req.budget_source += fmt::format(", shared by {} ranks on this machine", local);
    }
  }
  create_kv_groups(req, contiguous, pages_per_seq);
  if (channel_) send_worker_setup();  // the other ranks load while this one compiles its graph
  runner_ = std::make_unique<ModelRunner>(
      runner_weights(), pool_, graph::FusionOptions{config_.fusion_strategy, config_.disabled_fusion_passes},
      config_.max_model_len, window_layers_,
      config_.task == EngineTask::kEmbed ? DecoderHead::kHiddenStates : DecoderHead::kLogits);
  if (channel_) dist::Communicator::world().barrier(/*idle=*/true);  // every rank has its model

  SchedulerOptions so;
  so.max_num_seqs = config_.max_num_seqs;
  so.max_num_batched_tokens = config_.max_num_batched_tokens;
  so.continuous = config_.enable_continuous_batching;
  so.watermark_pages = contiguous ? 0 : std::max<int64_t>(1, kv_pages_ / 100);
  std::vector<KvGroupPages> groups;
  if (full_.pages) groups.push_back({full_.pages.get()});
  if (window_.pages) {
    // The attention reads from each window start rounded down to its 128-key blocks (or a page, if larger).
    groups.push_back({window_.pages.get(), m.sliding_window, std::max<int64_t>(128, page_.size())});
  }
  scheduler_ = std::make_unique<Scheduler>(so, std::move(groups));
  if (config_.speculative.enabled()) speculator_ = std::make_unique<Speculator>(config_.speculative);
  if (config_.speculative.method == SpeculativeMethod::kDraftModel) start_draft_model(req.shape);
  spdlog::info(
      "KV pool: {} pages of {} tokens ({} tokens, {} MiB {}, {} full-length sequences of {}){}, {} layout, prefix "
      "caching {}, {} batching",
      kv_pages_, page_.size(), kv_pages_ * page_.size(), config_.kv_cache_memory >> 20,
      kv_cache_dtype_name(config_.kv_cache_dtype), kv_pages_ / pages_per_seq, config_.max_model_len,
      window_.pages && full_.pages
          ? fmt::format(" for {} full-attention layers, {} pages for the {}-position windows of the other {}",
                        full_.cache->shape().num_layers, window_.pages->num_usable_pages(), m.sliding_window,
                        window_.cache->shape().num_layers)
          : "",
      contiguous ? "contiguous" : "paged", config_.enable_prefix_caching ? "on" : "off",
      config_.enable_continuous_batching ? "continuous" : "static");
}

void EngineCore::create_kv_group(KvGroup& group, KvCacheShape shape, int64_t num_pages, bool contiguous,
                                 int64_t pages_per_seq) {
  shape.num_pages = num_pages;
  group.cache = std::make_unique<KvCache>(shape);
  PageManagerOptions bo;
  bo.num_pages = num_pages;
  bo.page = page_;
  bo.enable_prefix_caching = config_.enable_prefix_caching;
  bo.reserve_pages_per_seq = contiguous ? pages_per_seq : 0;
  group.pages = std::make_unique<PageManager>(bo);
}

// One pool for every layer; or, when the model has sliding-window layers and the layout is paged, a pool of their
// own beside the full-attention layers' (vLLM's hybrid allocator, in two groups): a sequence holds at most its
// window (plus the block the attention rounds down to, plus its current chunk) there, so that pool is sized for
// max_num_seqs such windows and the rest of the budget buys full-attention pages.
void EngineCore::create_kv_groups(const KvPoolRequest& request, bool contiguous, int64_t pages_per_seq) {
  const ModelConfig& m = weights_.config;
  window_layers_.assign(static_cast<size_t>(m.num_layers), 0);
  int64_t windowed = 0;
  for (int64_t i = 0; i < m.num_layers; ++i)
    if (!contiguous && m.is_sliding(i)) window_layers_[static_cast<size_t>(i)] = 1, ++windowed;
  if (windowed == 0) window_layers_.clear();
  const int64_t ps = page_.size(), full_layers = m.num_layers - windowed;
  KvPoolRequest req = request;
  if (windowed == 0 || full_layers == 0) {  // one pool (all layers alike)
    const KvPoolPlan plan = plan_kv_pool(req);
    config_.kv_cache_memory = plan.bytes;
    kv_pages_ = plan.num_pages - 1;
    create_kv_group(windowed == 0 ? full_ : window_, req.shape, plan.num_pages, contiguous, pages_per_seq);
    return;
  }
  KvCacheShape layer = req.shape;
  layer.num_layers = 1;
  const int64_t per_layer_page = layer.bytes_per_page();
  const int64_t window_pages_per_seq = (m.sliding_window + std::max<int64_t>(128, ps) + ps - 1) / ps + 1;
  const int64_t window_cap =
      std::min(config_.max_num_seqs * (window_pages_per_seq + 1) + (config_.max_num_batched_tokens + ps - 1) / ps,
               config_.max_num_seqs * pages_per_seq);
  // Both pools alike while the budget is below max_num_seqs windows per window layer; past that the window pool
  // stops growing.
  const int64_t equal = req.budget_bytes / (per_layer_page * m.num_layers);
  const int64_t window_pages = std::min(equal, window_cap) + 1;  // + its null page
  req.shape.num_layers = full_layers;
  req.budget_bytes -= window_pages * per_layer_page * windowed;
  const KvPoolPlan plan = plan_kv_pool(req);
  kv_pages_ = plan.num_pages - 1;
  create_kv_group(full_, req.shape, plan.num_pages, contiguous, pages_per_seq);
  KvCacheShape window_shape = req.shape;
  window_shape.num_layers = windowed;
  create_kv_group(window_, window_shape, window_pages, contiguous, pages_per_seq);
  config_.kv_cache_memory = plan.bytes + window_pages * per_layer_page * windowed;
}

// Checks the group mpirun started matches the config, and takes this rank's shard of the weights.
void EngineCore::start_tensor_parallel() {
  dist::Communicator& comm = dist::Communicator::world();
  if (config_.tensor_parallel_size == 1 && !comm.distributed()) return;
  if (comm.size() != config_.tensor_parallel_size)
    fail(
        "--tensor-parallel-size {} but this group has {} process(es): start it as `mpirun -np {} minfer ...` (minfer "
        "serve, generate and bench start mpirun themselves when run without it)",
        config_.tensor_parallel_size, comm.size(), config_.tensor_parallel_size);
  MINFER_CHECK(comm.rank() == 0, "the engine runs on rank 0; rank {} runs the worker loop", comm.rank());
  comm.set_timeout(std::chrono::milliseconds(static_cast<int64_t>(config_.distributed_timeout_s * 1000)));
  shard_ = std::make_unique<ModelWeights>(shard_weights(weights_, 0, comm.size(), config_.enable_expert_parallel));
  channel_ = std::make_unique<StepChannel>(comm);
}

// The other ranks build the same pools (their pages are the ones this rank's scheduler hands out).
void EngineCore::send_worker_setup() {
  WorkerSetup setup{.config = config_, .window_layers = window_layers_};
  if (full_.cache) setup.full = full_.cache->shape();
  if (window_.cache) setup.window = window_.cache->shape();
  channel_->send_setup(setup);
  spdlog::info("tensor parallel: rank 0 of {} ({} of {} heads, {} KV heads per rank{}); waiting for the other ranks",
               config_.tensor_parallel_size, runner_weights().config.num_heads, weights_.config.num_heads,
               runner_weights().config.num_kv_heads, config_.enable_expert_parallel ? ", experts spread" : "");
}

EngineCore::~EngineCore() {
  if (!channel_) return;
  try {
    channel_->send_end_engine();
  } catch (const std::exception& e) {
    spdlog::warn("tensor parallel: could not end the other ranks' run: {}", e.what());
  }
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
                             std::unique_ptr<GrammarMatcher> grammar) {
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
  // Every prompt position must be computed (no prefix-cache hit may skip one) when each gives a row: prompt
  // logits, and mean-pooled embeddings.
  seq->every_prompt_row = params.prompt_logits || (embedding() && config_.pooling == PoolingType::kMean);
  const bool has_text = tokenizer_ && std::any_of(seq->tokens.begin(), seq->tokens.end(), [this](int32_t t) {
                          return t < tokenizer_->vocab_size() && !tokenizer_->is_special(t);
                        });
  seq->stop = std::make_unique<StopChecker>(params, tokenizer_.get(), eos_ids_, seq->prompt_len, config_.max_model_len,
                                            has_text);
  prompt_tokens_ += seq->prompt_len;
  scheduler_->add(seq.get());
  seqs_.emplace(id, std::move(seq));
}

RequestOutput EngineCore::make_output(const Sequence& seq) const {
  RequestOutput o;
  set_counters(seq, o);
  return o;
}

void EngineCore::set_counters(const Sequence& seq, RequestOutput& o) const {
  o.id = seq.id;
  o.prompt_tokens = seq.prompt_len;
  o.output_tokens = seq.num_output();
  o.cached_tokens = seq.cached_tokens;
  o.finish_reason = seq.finish_reason;
  o.finished = seq.finish_reason != FinishReason::kNone;
  o.spec_decode = seq.spec.usage;
}

void EngineCore::finish(Sequence* seq, FinishReason reason) {
  seq->finish_reason = reason;
  scheduler_->remove(seq);  // frees its pages now
  if (draft_) draft_->release(*seq);
  ++finished_;
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

std::vector<RequestOutput> EngineCore::step() {
  const auto step_start = std::chrono::steady_clock::now();
  std::vector<RequestOutput> outputs = std::move(pending_);
  pending_.clear();
  if (!scheduler_->has_unfinished()) return outputs;
  if (speculator_) propose_drafts();
  const SchedulerOutput sched = scheduler_->schedule();
  if (sched.empty()) return outputs;

  chunks_.clear();
  chunk_seqs_.clear();
  chunk_drafts_.clear();
  for (const ScheduledChunk& c : sched.chunks) add_chunks(*c.seq, c.num_tokens, c.num_draft);
  start_grammar_masks();
  const auto t0 = std::chrono::steady_clock::now();
  std::span<const float> logits;
  Clock::time_point run_end;
  {
    // The masks are joined even when the model throws: the worker must be done with the matchers before the
    // failed sequences are destroyed.
    GrammarMaskWorker::Join join(mask_worker_.get());
    if (channel_) channel_->send_step(chunks_);
    logits = runner_->execute(chunks_, KvPools{full_.cache.get(), window_.cache.get()});
    run_end = std::chrono::steady_clock::now();
    join.wait();
  }
  mask_wait_ = std::chrono::steady_clock::now() - run_end;
  scheduler_->on_step_done(sched);
  ++num_steps_;
  const auto* bucket = std::lower_bound(std::begin(EngineStats::kIterationTokenBuckets),
                                        std::end(EngineStats::kIterationTokenBuckets), sched.num_tokens);
  ++iteration_tokens_counts_[static_cast<size_t>(bucket - std::begin(EngineStats::kIterationTokenBuckets))];
  computed_tokens_ += sched.num_tokens;
  max_running_ = std::max<int64_t>(max_running_, static_cast<int64_t>(scheduler_->running().size()));

  const size_t vocab = static_cast<size_t>(runner_->output_width());
  size_t row = 0;
  for (size_t i = 0; i < chunks_.size(); ++i) {
    if (embedding()) {
      const size_t rows = chunks_[i].sample_all ? chunks_[i].tokens.size() : chunks_[i].sample ? 1 : 0;
      // A chunk from position 0 starts the pooling over (a preempted request is recomputed from the start).
      if (chunks_[i].start_position == 0) chunk_seqs_[i]->pooled.clear();
      on_hidden_rows(*chunk_seqs_[i], logits.subspan(row * vocab, rows * vocab), outputs);
      row += rows;
      continue;
    }
    if (chunk_drafts_[i] > 0) {
      const size_t rows = chunks_[i].tokens.size();
      on_verify_rows(*chunk_seqs_[i], logits.subspan(row * vocab, rows * vocab), outputs);
      row += rows;
      continue;
    }
    if (!chunks_[i].sample) continue;
    const int64_t position = chunks_[i].start_position + static_cast<int64_t>(chunks_[i].tokens.size()) - 1;
    on_logits_row(*chunk_seqs_[i], position, logits.subspan(row * vocab, vocab), outputs);
    ++row;
  }
  if (spdlog::should_log(spdlog::level::debug)) log_step(sched, step_start, t0, run_end);
  return outputs;
}

// The step's chunks of a scheduled sequence: one, or with prompt_logits one per prompt position, so every
// position samples (they all attend to the same pages: the step writes every row's K/V before attention). A decode
// with drafts computes [its token, drafts...] and returns a row after each.
void EngineCore::add_chunks(Sequence& s, int64_t num_tokens, int64_t num_draft) {
  SequenceChunk chunk;
  chunk.start_position = static_cast<int32_t>(s.num_computed);
  if (full_.pages) chunk.page_table = full_.pages->page_table(s.id);
  if (window_.pages) chunk.local_page_table = window_.pages->page_table(s.id);
  if (num_draft > 0) {
    s.verify_tokens.assign(1, s.tokens.back());
    s.verify_tokens.insert(s.verify_tokens.end(), s.draft.begin(), s.draft.end());
    chunk.tokens = s.verify_tokens;
    chunk.sample = chunk.sample_all = true;
    chunks_.push_back(chunk);
    chunk_seqs_.push_back(&s);
    chunk_drafts_.push_back(num_draft);
    return;
  }
  chunk.tokens =
      std::span<const int32_t>(s.tokens).subspan(static_cast<size_t>(s.num_computed), static_cast<size_t>(num_tokens));
  chunk.sample = s.num_computed + num_tokens == s.num_tokens();
  chunk.sample_all = embedding() && config_.pooling == PoolingType::kMean;
  if (!s.params.prompt_logits || s.num_computed >= s.prompt_len) {
    chunks_.push_back(chunk);
    chunk_seqs_.push_back(&s);
    chunk_drafts_.push_back(0);
    return;
  }
  for (int64_t i = 0; i < num_tokens; ++i) {
    SequenceChunk one = chunk;
    one.tokens = chunk.tokens.subspan(static_cast<size_t>(i), 1);
    one.start_position = chunk.start_position + static_cast<int32_t>(i);
    one.sample = true;
    chunks_.push_back(one);
    chunk_seqs_.push_back(&s);
    chunk_drafts_.push_back(0);
  }
}

// One row of logits, of the token at `position`: kept when it is a prompt position the request wants, sampled
// from when it is the sequence's last token.
void EngineCore::on_logits_row(Sequence& seq, int64_t position, std::span<const float> logits,
                               std::vector<RequestOutput>& outputs) {
  if (seq.params.prompt_logits && position < seq.prompt_len && position == seq.prompt_logit_rows) {
    seq.prompt_logits.insert(seq.prompt_logits.end(), logits.begin(), logits.end());
    ++seq.prompt_logit_rows;
  }
  if (position + 1 != seq.num_tokens()) return;
  RequestOutput o;
  const FinishReason finish = append_token(seq, sample_token(seq, logits), logits, o);
  emit(seq, finish, std::move(o), outputs);
}

// A verification chunk's rows (speculative.h): row i holds the logits after the decode token and drafts [0, i).
// Tokens are sampled from them in order as plain steps would; a draft equal to the token sampled in its place is
// kept (its KV, computed this step, becomes the sequence's) and the first that differs ends the check.
void EngineCore::on_verify_rows(Sequence& seq, std::span<const float> rows, std::vector<RequestOutput>& outputs) {
  const size_t vocab = static_cast<size_t>(runner_->output_width());
  const int64_t drafted = static_cast<int64_t>(seq.draft.size());
  RequestOutput o;
  FinishReason finish = FinishReason::kNone;
  int64_t accepted = 0;
  for (int64_t i = 0; i <= drafted; ++i) {
    // The first row's mask came from the worker during the step; the others follow the tokens kept since.
    if (i > 0 && seq.grammar) seq.grammar->compute_mask(seq.grammar_mask);
    const std::span<const float> logits = rows.subspan(static_cast<size_t>(i) * vocab, vocab);
    const int32_t token = sample_token(seq, logits);
    finish = append_token(seq, token, logits, o);
    const bool kept = i < drafted && token == seq.draft[static_cast<size_t>(i)];
    accepted += kept ? 1 : 0;
    if (finish != FinishReason::kNone || !kept) break;
    ++seq.num_computed;  // the draft's KV at this position is the sequence's
  }
  speculator_->record(seq, drafted, accepted);
  seq.draft.clear();
  if (finish == FinishReason::kNone) scheduler_->on_drafts_checked(&seq);
  emit(seq, finish, std::move(o), outputs);
}

// Appends a sampled token: stop checks, the grammar, and its id, logprobs and text into o. Returns how the
// sequence finished with it (kNone: it goes on).
FinishReason EngineCore::append_token(Sequence& seq, int32_t token, std::span<const float> logits, RequestOutput& o) {
  seq.tokens.push_back(token);
  ++generated_tokens_;
  StopChecker::Step st = seq.stop->append(token, seq.num_output());
  if (st.finish == FinishReason::kNone && seq.grammar) {
    seq.grammar->accept(token);
    // The language allows nothing more: the output is complete (no step spent on the forced EOS).
    if (seq.grammar->is_stopped()) st.finish = FinishReason::kStop;
  }
  o.new_token_ids.push_back(token);
  // From the logits before bias, penalties and temperature (vLLM's raw logprobs); a constrained sequence's
  // after its grammar mask, as vLLM applies the mask before sampling.
  if (seq.params.logprobs >= 0)
    o.logprobs.push_back(
        compute_logprobs(seq.grammar ? std::span<const float>(masked_row_) : logits, token, seq.params.logprobs));
  o.text_delta += st.text;
  if (!st.stop_reason.empty()) o.stop_reason = std::move(st.stop_reason);
  return st.finish;
}

// A step's output of a sequence (its new tokens in o): ends the sequence when it finished, and fills in the
// request's counters.
void EngineCore::emit(Sequence& seq, FinishReason reason, RequestOutput o, std::vector<RequestOutput>& outputs) {
  if (reason != FinishReason::kNone) finish(&seq, reason);
  set_counters(seq, o);
  // The first output carries the prompt logits.
  if (seq.num_output() == static_cast<int64_t>(o.new_token_ids.size())) o.prompt_logits = std::move(seq.prompt_logits);
  outputs.push_back(std::move(o));
  if (reason != FinishReason::kNone) seqs_.erase(seq.id);
}

// Drafts for every sequence that decodes next step, at most what fits before max_tokens and the context end.
void EngineCore::propose_drafts() {
  draft_seqs_.clear();
  draft_lengths_.clear();
  const int64_t off_at = config_.speculative.disable_by_batch_size;
  if (off_at > 0 && static_cast<int64_t>(scheduler_->running().size()) >= off_at) {
    for (Sequence* seq : scheduler_->running()) seq->draft.clear();
    return;
  }
  for (Sequence* seq : scheduler_->running()) {
    if (seq->tokens_to_compute() != 1) continue;
    const int64_t room =
        std::min(seq->params.max_tokens - seq->num_output(), config_.max_model_len - seq->num_tokens());
    if (!draft_) {
      speculator_->propose_ngram(*seq, room - 1);
      continue;
    }
    draft_seqs_.push_back(seq);
    draft_lengths_.push_back(speculator_->draft_length(*seq, room - 1));
  }
  if (draft_ && !draft_seqs_.empty()) draft_->propose(draft_seqs_, draft_lengths_);
}

// The draft model's pool holds as many tokens as the target's full-attention pool (its pages are smaller or larger
// by its layers and heads), in the target's KV element type.
void EngineCore::start_draft_model(const KvCacheShape& target_shape) {
  DraftModelOptions o;
  o.path = config_.speculative.model;
  o.fusion = graph::FusionOptions{config_.fusion_strategy, config_.disabled_fusion_passes};
  o.page = page_;
  o.num_pages = kv_pages_ + 1;
  o.kv_dtype = target_shape.dtype;
  o.max_model_len = config_.max_model_len;
  o.max_catch_up = config_.max_num_batched_tokens;
  draft_ = std::make_unique<DraftModel>(o, weights_.config.vocab_size, pool_);
  const ModelConfig& d = draft_->config();
  spdlog::info("draft model {}: {} layers, hidden {}, {} KV pages of its own", o.path, d.num_layers, d.hidden_size,
               kv_pages_);
}

// An embedding request's rows of final-normed hidden states: summed (mean pooling) or the last kept; once the
// whole prompt is computed, the pooled vector (L2-normalised unless configured off) is the request's one output.
void EngineCore::on_hidden_rows(Sequence& seq, std::span<const float> rows, std::vector<RequestOutput>& outputs) {
  const size_t width = static_cast<size_t>(runner_->output_width());
  if (seq.pooled.empty()) seq.pooled.assign(width, 0.0f);
  for (size_t r = 0; r * width < rows.size(); ++r) {
    const std::span<const float> h = rows.subspan(r * width, width);
    if (config_.pooling == PoolingType::kMean) {
      for (size_t j = 0; j < width; ++j) seq.pooled[j] += h[j];
    } else {
      std::copy(h.begin(), h.end(), seq.pooled.begin());
    }
  }
  if (seq.num_computed < seq.prompt_len) return;  // more prompt chunks to come
  std::vector<float> embedding = std::move(seq.pooled);
  if (config_.pooling == PoolingType::kMean)
    for (float& v : embedding) v /= static_cast<float>(seq.prompt_len);
  if (config_.normalize_embeddings) {
    double norm = 0.0;
    for (float v : embedding) norm += static_cast<double>(v) * v;
    const float scale = norm > 0.0 ? static_cast<float>(1.0 / std::sqrt(norm)) : 0.0f;
    for (float& v : embedding) v *= scale;
  }
  finish(&seq, FinishReason::kStop);
  RequestOutput o = make_output(seq);
  o.embedding = std::move(embedding);
  outputs.push_back(std::move(o));
  seqs_.erase(seq.id);
}

// The sampled token of a row: grammar mask, then logit_bias and min_tokens, then the sampler (penalties,
// temperature, filters).
int32_t EngineCore::sample_token(Sequence& seq, std::span<const float> logits) {
  row_.assign(logits.begin(), logits.end());
  if (seq.grammar) {
    apply_token_mask(row_, seq.grammar_mask);
    if (seq.params.logprobs >= 0) masked_row_ = row_;
  }
  for (const auto& [id, bias] : seq.params.logit_bias) row_[static_cast<size_t>(id)] += bias;
  if (seq.num_output() < seq.params.min_tokens) {
    constexpr float kNegInf = -std::numeric_limits<float>::infinity();
    if (!seq.params.ignore_eos)
      for (int32_t id : eos_ids_) row_[static_cast<size_t>(id)] = kNegInf;
    for (int32_t id : seq.params.stop_token_ids) row_[static_cast<size_t>(id)] = kNegInf;
  }
  const std::span<const int32_t> all(seq.tokens);
  return seq.sampler->sample(row_, all.first(static_cast<size_t>(seq.prompt_len)),
                             all.subspan(static_cast<size_t>(seq.prompt_len)));
}

// The masks of the constrained sequences that sample this step, computed on the worker while the model runs.
void EngineCore::start_grammar_masks() {
  std::vector<GrammarMaskWorker::Job> jobs;
  step_masks_ = 0;
  for (size_t i = 0; i < chunks_.size(); ++i) {
    Sequence& s = *chunk_seqs_[i];
    const int64_t last = chunks_[i].start_position + static_cast<int64_t>(chunks_[i].tokens.size());
    if (chunks_[i].sample && s.grammar && last - chunk_drafts_[i] == s.num_tokens())
      jobs.push_back({s.grammar.get(), &s.grammar_mask});
  }
  if (jobs.empty()) return;
  step_masks_ = static_cast<int64_t>(jobs.size());
  if (!mask_worker_) mask_worker_ = std::make_unique<GrammarMaskWorker>();
  mask_worker_->start(std::move(jobs));
}

// One line per step (--log-steps): its shape (tokens, decodes, prefill chunks, sampled rows, the (query, key)
// pairs attention computes), the model's time, and the step's whole time (scheduling and sampling included).
void EngineCore::log_step(const SchedulerOutput& sched, Clock::time_point start, Clock::time_point run_start,
                          Clock::time_point run_end) const {
  int64_t decodes = 0, sampled = 0, pairs = 0, drafts = 0;
  for (size_t i = 0; i < chunks_.size(); ++i) {
    const SequenceChunk& c = chunks_[i];
    const int64_t n = static_cast<int64_t>(c.tokens.size());
    decodes += n == 1 || chunk_drafts_[i] > 0 ? 1 : 0;
    drafts += chunk_drafts_[i];
    sampled += c.sample ? 1 : 0;
    pairs += n * c.start_position + n * (n + 1) / 2;
  }
  const auto ms = [](Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
  spdlog::debug(
      "step {}: {} tokens, {} decodes, {} prefill chunks, {} sampled, {} attention pairs, {:.1f} ms model, "
      "{:.1f} ms step{}{}",
      num_steps_, sched.num_tokens, decodes, static_cast<int64_t>(chunks_.size()) - decodes, sampled, pairs,
      ms(run_end - run_start), ms(Clock::now() - start),
      step_masks_ > 0 ? fmt::format(", {} grammar masks {:.1f} ms (waited {:.1f} ms after the model)", step_masks_,
                                    1e3 * mask_worker_->last_seconds(), ms(mask_wait_))
                      : std::string(),
      drafts > 0 ? fmt::format(", {} draft tokens checked", drafts) : std::string());
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
