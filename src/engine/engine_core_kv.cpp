// The EngineCore's KV pools: the budget they may take, their split between the full-attention and the
// sliding-window layers, and the page managers over them.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "base/system_memory.h"
#include "engine/engine_core.h"
#include "kv/kv_budget.h"

namespace minfer {
namespace {

// Activations of the largest step, held beside the pool (a rough upper bound of the executor's buffers).
int64_t activation_bytes(const EngineConfig& c, const ModelConfig& m) {
  const int64_t per_token = 6 * m.hidden_size + 3 * m.intermediate_size + 2 * m.num_heads * m.head_dim;
  return 4 * (c.max_num_batched_tokens * per_token + 2 * c.max_num_seqs * m.vocab_size);
}

}  // namespace

// The pools' shape and budget: kv_cache_memory, or a fraction of the memory available less the activations.
KvPoolRequest EngineCore::kv_pool_request() const {
  const ModelConfig& m = weights_.config;
  KvPoolRequest req;
  req.shape.dtype = config_.kv_cache_dtype;
  req.shape.num_layers = m.num_attention_layers();  // recurrent layers keep a state slot instead (create_state_pool)
  req.shape.kv_heads = runner_weights().config.num_kv_heads;  // this rank's, under tensor parallel
  req.shape.head_dim = m.head_dim;
  req.shape.page = page_;
  req.max_model_len = config_.max_model_len;
  req.max_useful_pages = config_.max_num_seqs * pages_per_seq();
  const SystemMemory mem = read_system_memory();  // read after the weights are loaded: they are not available
  const int64_t activations = activation_bytes(config_, m);
  if (config_.kv_cache_memory > 0) {
    req.budget_bytes = config_.kv_cache_memory;
    req.budget_source = "kv_cache_memory";
    // The pool is committed as it fills: a budget beyond what this machine (or container) can give would start,
    // then be killed by the kernel under load, with every request in flight.
    if (config_.kv_cache_memory + activations > mem.available())
      fail(
          "the KV budget (--kv-cache-memory / kv_cache_memory) of {} MiB, with {} MiB for activations, exceeds the "
          "memory this process can still take with its weights loaded: {}. Lower --kv-cache-memory, or leave it "
          "at 0 to take --kv-cache-memory-fraction ({}) of what is available",
          config_.kv_cache_memory >> 20, activations >> 20, mem.describe(), config_.kv_cache_memory_fraction);
    return req;
  }
  const int64_t avail = mem.available();
  req.budget_bytes = static_cast<int64_t>(static_cast<double>(avail) * config_.kv_cache_memory_fraction) - activations;
  req.budget_source = fmt::format("{:.0f}% of {}, less {} MiB for activations", 100 * config_.kv_cache_memory_fraction,
                                  mem.describe(), activations >> 20);
  spdlog::info("KV budget {} MiB: {}", std::max<int64_t>(0, req.budget_bytes) >> 20, req.budget_source);
  share_kv_budget(req);
  return req;
}

// With no max_model_len given, the model's own context, cut to what the KV budget holds for one sequence (half the
// budget when recurrent layers take state slots from it too; the windows of sliding-window layers are counted as
// whole-context layers, so the cut is on the safe side). Past that the start-up refusal of plan_kv_pool applies.
void EngineCore::fit_max_model_len(KvPoolRequest& request) {
  if (max_len_bound_ == MaxLenBound::kGiven || contiguous_kv()) return;
  const bool states = runner_weights().config.has_recurrent_layers();
  const int64_t usable = states ? request.budget_bytes / 2 : request.budget_bytes;
  const int64_t fits = (usable / request.shape.bytes_per_page() - 1) * page_.size();  // less the null page
  if (fits >= config_.max_model_len || fits < page_.size()) return;
  spdlog::info(
      "max_model_len {}: the model's {} positions do not fit the KV budget for one sequence (use a "
      "quantized --kv-cache-dtype or a larger --kv-cache-memory for more)",
      fits, config_.max_model_len);
  max_len_bound_ = MaxLenBound::kKvBudget;
  config_.max_model_len = fits;
  request.max_model_len = fits;
  request.max_useful_pages = config_.max_num_seqs * pages_per_seq();
}

// The recurrent layers' state slots, from the same budget as the pages: one per sequence that may run
// (max_num_seqs), unless that would take more than half the budget; at least one. With prefix caching, up to a
// quarter of the budget (at most four per sequence) more for the snapshots its hits restore.
void EngineCore::create_state_pool(KvPoolRequest& request) {
  const ModelConfig& m = runner_weights().config;  // this rank's heads under tensor parallel
  if (!m.has_recurrent_layers()) return;
  // Speculative decoding keeps the state after each token of a verification: 1 + k more per slot.
  const int64_t history = config_.speculative.enabled() ? config_.speculative.num_speculative_tokens + 1 : 0;
  // The pages of one max_model_len sequence stay out of the states' reach, so a small budget still starts.
  const int64_t slot = StatePool::slot_bytes(m), budget = request.budget_bytes;
  const int64_t room = budget - pages_per_seq() * request.shape.bytes_per_page();
  const int64_t slots =
      std::clamp<int64_t>(std::min(budget / 2, room) / (slot * (1 + history)), 1, config_.max_num_seqs);
  const bool snapshots = config_.enable_prefix_caching && config_.state_snapshot_pages > 0;
  const int64_t left = room - slots * slot * (1 + history);
  const int64_t copies = snapshots ? std::clamp<int64_t>(std::min(budget / 4, left) / slot, 0, 4 * slots) : 0;
  states_ = std::make_unique<StatePool>(m, slots, copies, history);
  if (channel_) states_->record_ops();  // the other ranks replay them (StepChannel::send_step)
  request.budget_bytes -= states_->bytes();
  request.budget_source +=
      fmt::format(", less {} MiB for {} state slots and {} snapshots", states_->bytes() >> 20, slots, copies);
}

void EngineCore::create_kv_group(KvGroup& group, KvCacheShape shape, int64_t num_pages) {
  shape.num_pages = num_pages;
  group.cache = std::make_unique<KvCache>(shape);
  PageManagerOptions bo;
  bo.num_pages = num_pages;
  bo.page = page_;
  bo.enable_prefix_caching = config_.enable_prefix_caching;
  bo.reserve_pages_per_seq = contiguous_kv() ? pages_per_seq() : 0;
  group.pages = std::make_unique<PageManager>(bo);
}

// One pool for every layer; or, when the model has sliding-window layers and the layout is paged, a pool of their
// own beside the full-attention layers' (vLLM's hybrid allocator, in two groups): a sequence holds at most its
// window (plus the block the attention rounds down to, plus its current chunk) there, so that pool is sized for
// max_num_seqs such windows and the rest of the budget buys full-attention pages.
void EngineCore::create_kv_groups(const KvPoolRequest& request) {
  const ModelConfig& m = weights_.config;
  const bool contiguous = contiguous_kv();
  KvPoolRequest req = request;
  create_state_pool(req);
  window_layers_.assign(static_cast<size_t>(m.num_layers), 0);
  int64_t windowed = 0;
  for (int64_t i = 0; i < m.num_layers; ++i)
    if (!contiguous && m.attends(i) && m.is_sliding(i)) window_layers_[static_cast<size_t>(i)] = 1, ++windowed;
  if (windowed == 0) window_layers_.clear();
  const int64_t ps = page_.size(), full_layers = req.shape.num_layers - windowed;
  if (windowed == 0 || full_layers == 0) {  // one pool (all layers alike)
    const KvPoolPlan plan = plan_kv_pool(req);
    config_.kv_cache_memory = plan.bytes;
    kv_pages_ = plan.num_pages - 1;
    create_kv_group(windowed == 0 ? full_ : window_, req.shape, plan.num_pages);
    return;
  }
  KvCacheShape layer = req.shape;
  layer.num_layers = 1;
  const int64_t per_layer_page = layer.bytes_per_page();
  const int64_t window_pages_per_seq = (m.sliding_window + std::max<int64_t>(128, ps) + ps - 1) / ps + 1;
  const int64_t window_cap =
      std::min(config_.max_num_seqs * (window_pages_per_seq + 1) + (config_.max_num_batched_tokens + ps - 1) / ps,
               config_.max_num_seqs * pages_per_seq());
  // Both pools alike while the budget is below max_num_seqs windows per window layer; past that the window pool
  // stops growing.
  const int64_t equal = req.budget_bytes / (per_layer_page * request.shape.num_layers);
  const int64_t window_pages = std::min(equal, window_cap) + 1;  // + its null page
  req.shape.num_layers = full_layers;
  req.budget_bytes -= window_pages * per_layer_page * windowed;
  const KvPoolPlan plan = plan_kv_pool(req);
  kv_pages_ = plan.num_pages - 1;
  create_kv_group(full_, req.shape, plan.num_pages);
  KvCacheShape window_shape = req.shape;
  window_shape.num_layers = windowed;
  create_kv_group(window_, window_shape, window_pages);
  config_.kv_cache_memory = plan.bytes + window_pages * per_layer_page * windowed;
}

void EngineCore::log_kv_pools() const {
  const ModelConfig& m = weights_.config;
  spdlog::info(
      "KV pool: {} pages of {} tokens ({} tokens, {} MiB {}, {} full-length sequences of {}, max_model_len {}){}, {} "
      "layout, prefix caching {}, {} batching",
      kv_pages_, page_.size(), kv_pages_ * page_.size(), config_.kv_cache_memory >> 20,
      kv_cache_dtype_name(config_.kv_cache_dtype), kv_pages_ / pages_per_seq(), config_.max_model_len,
      max_len_bound_ == MaxLenBound::kGiven   ? "given"
      : max_len_bound_ == MaxLenBound::kModel ? "the model's max_position_embeddings"
                                              : "bounded by the KV budget",
      window_.pages && full_.pages
          ? fmt::format(" for {} full-attention layers, {} pages for the {}-position windows of the other {}",
                        full_.cache->shape().num_layers, window_.pages->num_usable_pages(), m.sliding_window,
                        window_.cache->shape().num_layers)
          : "",
      contiguous_kv() ? "contiguous" : "paged", config_.enable_prefix_caching ? "on" : "off",
      config_.enable_continuous_batching ? "continuous" : "static");
  if (states_)
    spdlog::info(
        "state: {} slots of {} KiB for the {} recurrent layers, {} snapshots every {} tokens for prefix caching ({} "
        "MiB; "
        "a sequence holds a slot while it runs)",
        states_->num_slots(), StatePool::slot_bytes(runner_weights().config) >> 10,
        std::count_if(m.layer_mixers.begin(), m.layer_mixers.end(),
                      [](LayerMixer x) { return x != LayerMixer::kAttention && x != LayerMixer::kNone; }),
        states_->num_snapshots(), config_.state_snapshot_pages * page_.size(), states_->bytes() >> 20);
}

}  // namespace minfer
