#include "kv/kv_tiers.h"

#include <spdlog/spdlog.h>

#include "base/error.h"

namespace minfer {

KvTiers::KvTiers(const KvTierOptions& options, std::vector<KvCache*> groups)
    : opt_(options), groups_(std::move(groups)) {
  MINFER_CHECK(opt_.page_size > 0 && !groups_.empty(), "KV tiers need a page size and a pool");
  if (opt_.ram_bytes > 0) ram_ = std::make_unique<RamTier>(opt_.ram_bytes);
  if (!opt_.dir.empty()) disk_ = std::make_unique<DiskTier>(opt_.dir, opt_.dir_bytes, opt_.identity);
  counts_.ram_enabled = ram_ != nullptr;
  worker_ = std::thread([this] { run(); });
}

KvTiers::~KvTiers() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    for (auto& [seq, pages] : loads_) results_[seq] = false;  // nobody waits for them any more
    loads_.clear();
    if (!writes_.empty())
      spdlog::info("KV disk tier: writing the {} queued pages ({} MiB) before exit", writes_.size(),
                   queued_bytes_ >> 20);
  }
  work_cv_.notify_all();
  worker_.join();
}

TierPagePtr KvTiers::copy_out(uint32_t group, int32_t page, const ContentKey& key,
                              std::span<const int32_t> tokens) const {
  auto p = std::make_shared<TierPage>();
  p->group = group;
  p->key = key;
  p->tokens.assign(tokens.begin(), tokens.end());
  p->payload.resize(static_cast<size_t>(groups_[group]->page_payload_bytes()));
  groups_[group]->copy_page_out(page, p->payload.data());
  return p;
}

void KvTiers::queue_write(TierPagePtr page) {
  if (!disk_ || !disk_->enabled() || queued_.count(page->key) || disk_->contains(page->key)) return;
  const auto bytes = static_cast<int64_t>(page->payload.size());
  if (queued_bytes_ + bytes > opt_.max_queued_bytes) {
    ++counts_.dropped_writes;
    return;
  }
  queued_bytes_ += bytes;
  queued_.insert(page->key);
  writes_.push_back({std::move(page)});
  work_cv_.notify_one();
}

void KvTiers::on_registered(uint32_t group, int32_t page, const ContentKey& key, std::span<const int32_t> tokens) {
  if (!disk_ || !disk_->enabled() || disk_->contains(key)) return;
  {
    std::lock_guard lock(mu_);
    if (queued_.count(key)) return;
  }
  TierPagePtr copy = copy_out(group, page, key, tokens);
  std::lock_guard lock(mu_);
  queue_write(std::move(copy));
}

void KvTiers::on_evicted(uint32_t group, int32_t page, const ContentKey& key, std::span<const int32_t> tokens) {
  if (ram_) {
    if (ram_->contains(key)) return;
    std::vector<TierPagePtr> evicted = ram_->put(copy_out(group, page, key, tokens));
    std::lock_guard lock(mu_);
    counts_.ram.written_bytes += groups_[group]->page_payload_bytes();
    for (TierPagePtr& p : evicted) queue_write(std::move(p));
    return;
  }
  if (!disk_ || !disk_->enabled() || disk_->contains(key)) return;  // written through already, as a rule
  TierPagePtr copy = copy_out(group, page, key, tokens);
  std::lock_guard lock(mu_);
  queue_write(std::move(copy));
}

void KvTiers::on_state_saved(const ContentKey& key, std::span<const int32_t> tokens, int32_t slot) {
  if (holds(key)) return;
  auto p = std::make_shared<TierPage>();
  p->group = kStateTierGroup;
  p->key = key;
  p->tokens.assign(tokens.begin(), tokens.end());
  p->payload.resize(static_cast<size_t>(states_->bytes_per_slot()));
  states_->copy_slot_out(slot, p->payload.data());
  std::vector<TierPagePtr> evicted;
  if (ram_) evicted = ram_->put(p);
  std::lock_guard lock(mu_);
  if (ram_) counts_.ram.written_bytes += static_cast<int64_t>(p->payload.size());
  queue_write(std::move(p));
  for (TierPagePtr& e : evicted) queue_write(std::move(e));
}

bool KvTiers::holds(const ContentKey& key) const {
  return (ram_ && ram_->contains(key)) || (disk_ && disk_->enabled() && disk_->contains(key));
}

int64_t KvTiers::probe(uint32_t group, std::span<const int32_t> tokens, int64_t first, int64_t max_pages) const {
  const int64_t ps = opt_.page_size;
  const int64_t end = std::min<int64_t>(first + max_pages, static_cast<int64_t>(tokens.size()) / ps);
  ContentKey key = root_content_key(group);
  int64_t found = 0;
  for (int64_t j = 0; j < end; ++j) {
    key = chain_content_key(key, tokens.subspan(static_cast<size_t>(j * ps), static_cast<size_t>(ps)));
    if (j < first) continue;
    if (!holds(key)) break;
    ++found;
  }
  return found;
}

void KvTiers::start_load(RequestId seq, std::vector<TierLoad> pages) {
  std::lock_guard lock(mu_);
  MINFER_CHECK(!in_flight_.count(seq), "sequence {} already loads KV from a tier", seq);
  in_flight_.insert(seq);
  loads_.emplace_back(seq, std::move(pages));
  work_cv_.notify_one();
}

std::optional<bool> KvTiers::poll(RequestId seq) {
  std::lock_guard lock(mu_);
  auto it = results_.find(seq);
  if (it == results_.end()) return std::nullopt;
  const bool ok = it->second;
  results_.erase(it);
  in_flight_.erase(seq);
  return ok;
}

bool KvTiers::wait(RequestId seq) {
  std::unique_lock lock(mu_);
  done_cv_.wait(lock, [&] { return results_.count(seq) != 0; });
  const bool ok = results_[seq];
  results_.erase(seq);
  in_flight_.erase(seq);
  return ok;
}

// RAM first; a disk hit is promoted into the RAM tier (its evictions go to disk only when missing there).
bool KvTiers::load_page(const TierLoad& p) {
  const bool state = p.group == kStateTierGroup;
  const int64_t bytes = state ? states_->bytes_per_slot() : groups_[p.group]->page_payload_bytes();
  auto copy_in = [&](const std::vector<unsigned char>& payload) {
    if (state)
      states_->copy_slot_in(p.page, payload.data());
    else
      groups_[p.group]->copy_page_in(p.page, payload.data());
  };
  if (ram_) {
    if (TierPagePtr hit = ram_->get(p.key, p.tokens)) {
      copy_in(hit->payload);
      std::lock_guard lock(mu_);
      if (p.group == 0) counts_.ram.hit_tokens += opt_.page_size;  // a position's tokens count once
      counts_.ram.read_bytes += bytes;
      return true;
    }
  }
  if (!disk_) return false;
  auto page = std::make_shared<TierPage>();
  if (disk_->read(p.key, p.tokens, bytes, page->payload) != TierRead::kOk) return false;
  copy_in(page->payload);
  page->group = p.group;
  page->key = p.key;
  page->tokens = p.tokens;
  std::vector<TierPagePtr> evicted;
  if (ram_) evicted = ram_->put(std::move(page));
  std::lock_guard lock(mu_);
  if (p.group == 0) counts_.disk.hit_tokens += opt_.page_size;
  counts_.disk.read_bytes += bytes;
  for (TierPagePtr& e : evicted) queue_write(std::move(e));
  return true;
}

// Loads before writes: a load holds a request back, a write only insures against a restart.
void KvTiers::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [this] { return stop_ || !loads_.empty() || !writes_.empty(); });
    if (!loads_.empty()) {
      auto [seq, pages] = std::move(loads_.front());
      loads_.pop_front();
      lock.unlock();
      bool ok = true;
      for (const TierLoad& p : pages)
        if (!(ok = load_page(p))) break;
      lock.lock();
      if (!ok) ++counts_.failed_loads;
      results_[seq] = ok;
      done_cv_.notify_all();
      continue;
    }
    if (!writes_.empty()) {
      TierPagePtr page = std::move(writes_.front().page);
      writes_.pop_front();
      lock.unlock();
      const bool written = disk_->write(page->key, page->tokens, page->payload);
      lock.lock();
      queued_.erase(page->key);
      queued_bytes_ -= static_cast<int64_t>(page->payload.size());
      if (written) counts_.disk.written_bytes += static_cast<int64_t>(page->payload.size());
      continue;
    }
    if (stop_) return;
  }
}

KvTierStats KvTiers::stats() const {
  KvTierStats s;
  {
    std::lock_guard lock(mu_);
    s = counts_;
  }
  if (ram_) s.ram_store = ram_->stats();
  if (disk_) s.disk_store = disk_->stats();
  return s;
}

}  // namespace minfer
