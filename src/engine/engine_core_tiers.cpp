// The EngineCore's KV tiers (kv/kv_tiers.h): a RAM tier and a disk tier behind the prefix cache of every KV group.
#include <spdlog/spdlog.h>

#include "base/error.h"
#include "engine/engine_core.h"
#include "kernels/kernels.h"
#include "kv/model_identity.h"

namespace minfer {

// Everything besides the weights that changes the KV a page holds: its type and geometry, this rank's heads, the
// weights' quantization, the graph's fusion and the kernels' instruction set (their rounding differs).
std::string EngineCore::tier_settings() const {
  const ModelConfig& m = runner_weights().config;
  const QuantConfig& q = config_.quant;
  std::string skipped;
  for (const std::string& pass : config_.disabled_fusion_passes) skipped += pass + ",";
  return fmt::format(
      "minfer-kv-tiers/1 kv={} page={} layers={} kv_heads={} head_dim={} quant=w{}a{}{}g{} fusion={} skip={} isa={} "
      "tp={}",
      kv_cache_dtype_name(config_.kv_cache_dtype), page_.size(), m.num_layers, m.num_kv_heads, m.head_dim,
      q.weight_bits, q.activation_bits, q.symmetric ? "s" : "a", q.group_size,
      config_.fusion_strategy == FusionStrategy::kAuto ? "auto" : "none", skipped, kernels::active_isa(),
      config_.tensor_parallel_size);
}

void EngineCore::start_tiers() {
  if (config_.kv_offload_ram <= 0 && config_.kv_cache_dir.empty()) return;
  const char* flags = "--kv-offload-ram / --kv-cache-dir (kv_offload_ram / kv_cache_dir)";
  if (!config_.enable_prefix_caching)
    fail(
        "{} keep the prefix cache's pages beyond the pool, but prefix caching is off (the contiguous KV layout or "
        "--no-enable-prefix-caching)",
        flags);
  if (channel_) fail("{}: not yet under tensor parallel (each rank's pages would need their own tier)", flags);
  KvTierOptions o;
  o.ram_bytes = config_.kv_offload_ram;
  o.dir = config_.kv_cache_dir;
  o.dir_bytes = config_.kv_cache_dir_size;
  o.page_size = page_.size();
  if (!o.dir.empty()) o.identity = model_identity(config_.model_path, tier_settings(), o.dir);
  std::vector<KvCache*> caches;
  std::vector<PageManager*> managers;
  for (KvGroup* g : {&full_, &window_})
    if (g->pages) caches.push_back(g->cache.get()), managers.push_back(g->pages.get());
  tiers_ = std::make_unique<KvTiers>(o, caches);
  for (size_t g = 0; g < managers.size(); ++g) managers[g]->set_events(tiers_.get(), static_cast<uint32_t>(g));
  tiers_->set_state_pool(states_.get());  // recurrent layers: their snapshots go through the tiers too
  scheduler_->set_tiers(tiers_.get());
  spdlog::info("KV tiers: RAM {} MiB, disk {}", o.ram_bytes >> 20,
               o.dir.empty() ? std::string("none") : fmt::format("{} ({} MiB at most)", o.dir, o.dir_bytes >> 20));
}

void EngineCore::tier_stats(EngineStats& s) const {
  if (!tiers_) return;
  const KvTierStats t = tiers_->stats();
  auto fill = [](EngineStats::KvTier& out, const KvTierCounters& c) {
    out.hit_tokens = c.hit_tokens;
    out.read_bytes = c.read_bytes;
    out.written_bytes = c.written_bytes;
  };
  fill(s.ram_tier, t.ram);
  s.ram_tier.enabled = t.ram_enabled;
  s.ram_tier.entries = t.ram_store.entries;
  s.ram_tier.bytes = t.ram_store.bytes;
  s.ram_tier.evictions = t.ram_store.evictions;
  fill(s.disk_tier, t.disk);
  s.disk_tier.enabled = t.disk_store.enabled;
  s.disk_tier.entries = t.disk_store.entries;
  s.disk_tier.bytes = t.disk_store.bytes;
  s.disk_tier.evictions = t.disk_store.evictions;
  s.disk_tier.corrupt_removed = t.disk_store.corrupt_removed;
}

}  // namespace minfer
