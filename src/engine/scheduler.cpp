#include "engine/scheduler.h"

#include <algorithm>

#include "base/error.h"

namespace minfer {

Scheduler::Scheduler(const SchedulerOptions& options, PageManager& pages)
    : Scheduler(options, std::vector<KvGroupPages>{KvGroupPages{&pages}}) {}

Scheduler::Scheduler(const SchedulerOptions& options, std::vector<KvGroupPages> groups, StatePool* states)
    : opt_(options), groups_(std::move(groups)), states_(states) {
  MINFER_CHECK(opt_.max_num_seqs >= 1 && opt_.max_num_batched_tokens >= 1, "bad scheduler options");
  MINFER_CHECK(!groups_.empty(), "a scheduler needs a KV group");
  for (const KvGroupPages& g : groups_)
    MINFER_CHECK(g.pages && g.pages->page() == groups_.front().pages->page() && g.read_grid >= 1,
                 "KV groups must share the page size");
}

bool Scheduler::allocate(Sequence* seq, int64_t tokens, const std::vector<std::vector<int32_t>>& prefixes,
                         int64_t keep_free) {
  const bool is_new = !groups_.front().pages->has_pages(seq->id);
  if (is_new && states_ && !states_->has_slot(seq->id) && !states_->acquire(seq->id)) return false;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const std::span<const int32_t> prefix = prefixes.empty() ? std::span<const int32_t>() : prefixes[g];
    if (groups_[g].pages->allocate(seq->id, tokens, prefix, keep_free)) continue;
    if (is_new) {
      for (size_t h = 0; h < g; ++h) groups_[h].pages->free(seq->id);
      if (states_) states_->release(seq->id);
    }
    return false;
  }
  return true;
}

void Scheduler::free_pages(Sequence* seq) {
  for (const KvGroupPages& g : groups_) g.pages->free(seq->id);
  if (states_) states_->release(seq->id);
}

void Scheduler::add(Sequence* seq) {
  seq->status = SeqStatus::kWaiting;
  waiting_.push_back(seq);
}

void Scheduler::preempt(Sequence* victim, SchedulerOutput& out) {
  // Drop its chunk if it was already given one this step, and give the tokens back to the budget.
  auto chunk =
      std::find_if(out.chunks.begin(), out.chunks.end(), [victim](const ScheduledChunk& c) { return c.seq == victim; });
  if (chunk != out.chunks.end()) {
    budget_ += chunk->num_tokens;
    out.num_tokens -= chunk->num_tokens;
    out.chunks.erase(chunk);
  }
  cancel_load(victim);
  free_pages(victim);
  victim->draft.clear();
  victim->num_computed = 0;  // recomputed later (most of it is usually a prefix-cache hit)
  victim->status = SeqStatus::kWaiting;
  running_.erase(std::find(running_.begin(), running_.end(), victim));
  waiting_.push_front(victim);
  ++num_preemptions_;
  ++out.num_preempted;
}

bool Scheduler::reserve(Sequence* seq, int64_t tokens, SchedulerOutput& out) {
  while (!allocate(seq, tokens)) {
    MINFER_CHECK(!running_.empty(), "sequence {} needs pages but nothing runs", seq->id);
    Sequence* victim = running_.back();  // the most recently admitted
    preempt(victim, out);
    if (victim == seq) return false;
  }
  return true;
}

void Scheduler::schedule_running(bool decodes, SchedulerOutput& out) {
  // Index loop: preemption only removes sequences admitted after the current one (the back), and the
  // current one itself, so earlier indices stay valid.
  for (size_t i = 0; i < running_.size() && budget_ > 0;) {
    Sequence* seq = running_[i];
    const int64_t want = seq->tokens_to_compute();
    const bool is_decode = want == 1;
    const bool done =
        std::any_of(out.chunks.begin(), out.chunks.end(), [seq](const ScheduledChunk& c) { return c.seq == seq; });
    if (want <= 0 || is_decode != decodes || done || seq->kv_load_until > 0) {
      ++i;
      continue;
    }
    const int64_t n = cut_chunk(seq, seq->num_computed, std::min(want, budget_));
    if (n <= 0) {  // its next tokens are an image the encoder budget cannot take this step
      ++i;
      continue;
    }
    if (!reserve(seq, seq->num_computed + n, out)) continue;  // seq preempted itself; running_ shrank
    charge_encoder(seq, seq->num_computed, n);
    const int64_t num_draft = is_decode ? reserve_drafts(seq) : 0;
    out.chunks.push_back({seq, n + num_draft, num_draft});
    out.num_tokens += n + num_draft;
    budget_ -= n + num_draft;
    ++i;
  }
}

// The drafts a decoding sequence (its decode token scheduled, budget taken) computes this step: as many of
// seq->draft as the budget left and free pages allow; seq->draft is cut to them. Drafts never preempt: they take
// only pages beyond the watermark and one per running sequence (what the others' decodes may need this step).
int64_t Scheduler::reserve_drafts(Sequence* seq) {
  int64_t n = std::min<int64_t>(static_cast<int64_t>(seq->draft.size()), budget_ - 1);
  const int64_t keep_free = opt_.watermark_pages + static_cast<int64_t>(running_.size());
  while (n > 0 && !allocate(seq, seq->num_computed + 1 + n, {}, keep_free)) --n;
  seq->draft.resize(static_cast<size_t>(std::max<int64_t>(n, 0)));
  return static_cast<int64_t>(seq->draft.size());
}

// The pages of seq's longest prefix hit that every group holds, in its pool or (with tiers) past it in a tier;
// `prefixes` get each group's pool pages of it; with recurrent layers, cut to the newest state snapshot.
size_t Scheduler::prefix_hit(const Sequence* seq, std::vector<std::vector<int32_t>>& prefixes, uint64_t& snapshot,
                             ContentKey& tier_snapshot) const {
  size_t hit_pages = SIZE_MAX;
  const auto max_hit = static_cast<size_t>((seq->num_tokens() - 1) / first_pages().page().size());
  for (size_t g = 0; g < groups_.size(); ++g) {
    // A request for the logits of every prompt position computes every position.
    prefixes.push_back(seq->every_prompt_row ? std::vector<int32_t>() : groups_[g].pages->lookup_prefix(seq->tokens));
    size_t reach = prefixes.back().size();
    if (tiers_ && !seq->every_prompt_row)
      reach += static_cast<size_t>(tiers_->probe(static_cast<uint32_t>(g), seq->tokens, static_cast<int64_t>(reach),
                                                 static_cast<int64_t>(max_hit - reach)));
    hit_pages = std::min(hit_pages, reach);
  }
  snapshot = 0;
  tier_snapshot = {};
  if (states_) hit_pages = snapshot_hit(seq, prefixes.front(), hit_pages, snapshot, tier_snapshot);
  for (std::vector<int32_t>& p : prefixes) p.resize(std::min(p.size(), hit_pages));
  return hit_pages;
}

bool Scheduler::try_admit(Sequence* seq, SchedulerOutput& out) {
  const int64_t ps = first_pages().page().size();
  std::vector<std::vector<int32_t>> prefixes;
  uint64_t snapshot = 0;
  ContentKey tier_snapshot;
  const size_t hit_pages = prefix_hit(seq, prefixes, snapshot, tier_snapshot);
  size_t pool_pages = hit_pages;
  for (const std::vector<int32_t>& p : prefixes) pool_pages = std::min(pool_pages, p.size());
  // A tier holds part of the hit (or its state snapshot): no chunk until it is loaded.
  const bool loading = pool_pages < hit_pages || !tier_snapshot.empty();
  const int64_t hit = static_cast<int64_t>(hit_pages) * ps;
  const int64_t n = loading ? 0 : cut_chunk(seq, hit, std::min(seq->num_tokens() - hit, budget_));
  if (opt_.continuous && n <= 0 && !loading) return false;
  // Static batching reserves the whole prompt at admission, so the batch it forms fits; continuous
  // batching only what this step computes.
  const int64_t hold = opt_.continuous ? hit + n : seq->num_tokens();
  const int64_t keep_free = running_.empty() ? 0 : opt_.watermark_pages;
  if (!allocate(seq, hold, prefixes, keep_free)) return false;
  if (snapshot != 0) states_->restore_snapshot(seq->id, snapshot);
  first_pages().record_prefix_query(seq->num_tokens(), static_cast<int64_t>(pool_pages) * ps);
  seq->num_computed = static_cast<int64_t>(pool_pages) * ps;
  if (!seq->admitted_before) seq->cached_tokens = seq->num_computed;
  if (loading) {
    tiers_->start_load(seq->id, tier_loads(seq, prefixes, hit_pages, tier_snapshot));
    seq->kv_load_until = hit;
    seq->kv_load_first = !seq->admitted_before;
  }
  seq->admitted_before = true;
  seq->status = SeqStatus::kRunning;
  seq->admit_order = next_admit_++;
  running_.push_back(seq);
  if (n > 0) {
    charge_encoder(seq, hit, n);
    out.chunks.push_back({seq, n});
    out.num_tokens += n;
    budget_ -= n;
  }
  return true;
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput out;
  budget_ = opt_.max_num_batched_tokens;
  encoder_budget_ = opt_.max_num_encoder_tokens;
  // Static mode: a new batch starts only when the previous one has completely finished, including
  // members waiting to be recomputed after a preemption.
  const bool batch_done = running_.empty() && std::none_of(waiting_.begin(), waiting_.end(),
                                                           [this](const Sequence* s) { return s->batch == batch_; });
  if (!opt_.continuous && batch_done) ++batch_;

  if (tiers_) finish_loads(/*block=*/false);
  schedule_running(/*decodes=*/true, out);
  schedule_running(/*decodes=*/false, out);
  // A step that had to preempt is short of pages: admitting now would only preempt again.
  if (out.num_preempted > 0) return out;

  while (!waiting_.empty() && static_cast<int64_t>(running_.size()) < opt_.max_num_seqs) {
    Sequence* seq = waiting_.front();
    if (opt_.continuous) {
      if (budget_ <= 0) break;
    } else if (seq->batch != batch_) {
      if (!batch_done) break;  // the running batch is not finished: no new members
      seq->batch = batch_;
    }
    if (!try_admit(seq, out)) {
      if (!opt_.continuous && seq->batch == batch_ && !seq->admitted_before) seq->batch = -1;
      break;
    }
    waiting_.pop_front();
  }
  // Nothing to compute but tier loads to wait for: wait here rather than spin through empty steps.
  if (out.empty() && tiers_ && finish_loads(/*block=*/true)) return schedule();
  return out;
}

void Scheduler::on_step_done(const SchedulerOutput& out) {
  for (const ScheduledChunk& c : out.chunks) {
    c.seq->num_computed += c.num_tokens - c.num_draft;
    MINFER_CHECK(c.seq->num_computed <= c.seq->num_tokens(), "seq {} computed past its tokens", c.seq->id);
    for (const KvGroupPages& g : groups_) {
      g.pages->cache_full_pages(c.seq->id, c.seq->tokens, c.seq->num_computed);
      if (&g == &groups_.front()) take_snapshot(c.seq);
      if (g.window <= 0) continue;
      // The next token (position num_computed) reads from its window start, rounded down to the read grid.
      const int64_t start = c.seq->num_computed - g.window + 1;
      const int64_t read_from = start > 0 ? start / g.read_grid * g.read_grid : 0;
      window_pages_released_ += g.pages->release_before(c.seq->id, g.pages->page().page_of(read_from));
    }
  }
}

int64_t Scheduler::cut_at_encoder(const Sequence* seq, int64_t start, int64_t n) const {
  if (opt_.max_num_encoder_tokens <= 0) return n;
  int64_t left = encoder_budget_;
  for (const SeqImage& img : seq->images) {
    if (!img.unencoded_in(start, start + n)) continue;
    // An image larger than the whole budget goes alone, in a step that has encoded nothing else.
    const bool alone = left == opt_.max_num_encoder_tokens && img.length > left;
    if (img.length > left && !alone) return std::max<int64_t>(img.start - start, 0);
    left -= img.length;
  }
  return n;
}

void Scheduler::charge_encoder(const Sequence* seq, int64_t start, int64_t n) {
  if (opt_.max_num_encoder_tokens <= 0) return;
  for (const SeqImage& img : seq->images)
    if (img.unencoded_in(start, start + n)) encoder_budget_ -= img.length;
}

int64_t Scheduler::cut_chunk(const Sequence* seq, int64_t start, int64_t n) const {
  n = cut_at_encoder(seq, start, cut_at_snapshot(seq, start, n));
  if (n <= 0 || !seq->bidirectional_images) return n;
  // A bidirectional image is computed in one step: a chunk that would end inside one ends before it, or, starting
  // at or inside it, takes the rest of it (past the budget if need be: an image must never wait for a larger one).
  for (const SeqImage& img : seq->images) {
    const int64_t end = start + n;
    if (end > img.start && end < img.end()) return img.start > start ? img.start - start : img.end() - start;
  }
  return n;
}

int64_t Scheduler::cut_at_snapshot(const Sequence* seq, int64_t start, int64_t n) const {
  const int64_t every = opt_.state_snapshot_tokens;
  if (!states_ || every <= 0 || !first_pages().prefix_caching()) return n;
  const int64_t boundary = (start / every + 1) * every;
  return start + n > boundary && boundary < seq->prompt_len ? boundary - start : n;
}

// The newest snapshot boundary within the hit whose state is kept: in the state pool (under the registration of the
// pool page that ends it: `key`), or else in a KV tier (`tier_key`).
size_t Scheduler::snapshot_hit(const Sequence* seq, std::span<const int32_t> pool_prefix, size_t hit_pages,
                               uint64_t& key, ContentKey& tier_key) const {
  key = 0;
  tier_key = {};
  const int64_t every = opt_.state_snapshot_tokens;
  if (every <= 0) return 0;
  const auto pages_per_snapshot = static_cast<size_t>(every / first_pages().page().size());
  const size_t newest = hit_pages / pages_per_snapshot * pages_per_snapshot;
  std::vector<ContentKey> tier_keys;  // at each boundary
  if (tiers_) tier_keys = state_keys(seq->tokens, newest);
  for (size_t k = newest; k > 0; k -= pages_per_snapshot) {
    const uint64_t reg = k <= pool_prefix.size() ? first_pages().registration(pool_prefix[k - 1]) : 0;
    if (reg != 0 && states_->has_snapshot(reg)) {
      key = reg;
      return k;
    }
    if (tiers_ && tiers_->holds(tier_keys[k / pages_per_snapshot - 1])) {
      tier_key = tier_keys[k / pages_per_snapshot - 1];
      return k;
    }
  }
  return 0;
}

void Scheduler::take_snapshot(const Sequence* seq) {
  const int64_t every = opt_.state_snapshot_tokens, done = seq->num_computed;
  if (!states_ || every <= 0 || done == 0 || done % every != 0) return;
  const std::span<const int32_t> table = first_pages().page_table(seq->id);
  const int64_t last = done / first_pages().page().size() - 1;
  if (last >= static_cast<int64_t>(table.size())) return;
  const uint64_t reg = first_pages().registration(table[static_cast<size_t>(last)]);
  if (reg == 0) return;
  states_->save_snapshot(seq->id, reg);
  if (tiers_) {
    const int64_t ps = first_pages().page().size();
    tiers_->on_state_saved(state_keys(seq->tokens, static_cast<size_t>(last + 1)).back(),
                           std::span(seq->tokens).subspan(static_cast<size_t>(last * ps), static_cast<size_t>(ps)),
                           states_->slot_of(seq->id));
  }
}

void Scheduler::on_drafts_checked(Sequence* seq) {
  for (const KvGroupPages& g : groups_) {
    g.pages->cache_full_pages(seq->id, seq->tokens, seq->num_computed);
    g.pages->truncate(seq->id, seq->num_tokens());
  }
}

void Scheduler::remove(Sequence* seq) {
  if (auto it = std::find(running_.begin(), running_.end(), seq); it != running_.end()) running_.erase(it);
  if (auto it = std::find(waiting_.begin(), waiting_.end(), seq); it != waiting_.end()) waiting_.erase(it);
  cancel_load(seq);
  free_pages(seq);
  seq->status = SeqStatus::kFinished;
}

}  // namespace minfer
