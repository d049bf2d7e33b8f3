// Decides, each step, which sequences run and how many tokens each computes (vLLM v1 style).
//
// A decoding sequence with speculative drafts (seq->draft) computes them too, budget and pages allowing (drafts
// are cut to fit and never preempt anyone).
//
// A step has a token budget (max_num_batched_tokens) and a sequence cap (max_num_seqs). Running decodes
// are served first (one token each), then running prefills (chunked to the budget that is left), then,
// in continuous mode, waiting requests in arrival order while pages and budget allow. A waiting request
// starts from its longest prefix-cache hit. When a running sequence needs a page and none is free, the
// most recently admitted running sequence is preempted: its pages are freed and it goes back to the
// front of the queue to be recomputed later (its output so far is kept). Because the pool holds at least
// one max_model_len sequence, the oldest running sequence can always proceed: no request that fits
// max_model_len fails and the scheduler never deadlocks.
//
// Static mode admits a batch only when nothing is running and then runs it to completion; members
// preempted on the way are resumed before any new request is admitted.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "engine/sequence.h"
#include "kv/kv_tiers.h"
#include "kv/page_manager.h"
#include "kv/state_pool.h"

namespace minfer {

struct SchedulerOptions {
  int64_t max_num_seqs = 256;
  int64_t max_num_batched_tokens = 2048;
  bool continuous = true;
  // Admission leaves this many pages free (vLLM's watermark), so a fresh admission does not cause an
  // immediate preemption of the running decodes.
  int64_t watermark_pages = 0;
  // With a state pool: a copy of each sequence's recurrent state is kept at every multiple of this many prompt tokens
  // (a whole number of pages), and prefills are cut there; a prefix-cache hit is used up to the newest boundary with
  // a copy. 0: no copies, and no prefix hits for such sequences.
  int64_t state_snapshot_tokens = 0;
  // Image tokens whose images the vision encoder may encode per step (vLLM's encoder budget): a chunk that would
  // reach an image not encoded yet beyond it ends before the image, so the step's decodes do not wait for a pile of
  // encodings. An image larger than the whole budget is taken alone. 0: no limit.
  int64_t max_num_encoder_tokens = 0;
};

// A group of layers whose KV pages one PageManager holds: all layers, or (engine_core.h) the full-attention layers
// and the sliding-window ones apart. A windowed group's pages wholly behind the window of a sequence's next token
// (rounded down to the attention kernels' block grid, which they read from) are released after each step.
struct KvGroupPages {
  PageManager* pages = nullptr;
  int64_t window = 0;     // 0: keep every page
  int64_t read_grid = 1;  // the attention reads from the window start rounded down to a multiple of this
};

struct ScheduledChunk {
  Sequence* seq = nullptr;
  int64_t num_tokens = 0;  // tokens [seq->num_computed, seq->num_computed + num_tokens) run this step
  // Of num_tokens, speculative drafts (seq->draft) after the decode token: computed this step, but their KV is the
  // sequence's only once the step accepts them (on_drafts_checked).
  int64_t num_draft = 0;
};

struct SchedulerOutput {
  std::vector<ScheduledChunk> chunks;
  int64_t num_tokens = 0;
  int64_t num_preempted = 0;
  bool empty() const { return chunks.empty(); }
};

class Scheduler {
 public:
  Scheduler(const SchedulerOptions& options, PageManager& pages);
  // Several KV groups (the first one's prefix-cache statistics are the engine's): every sequence holds pages in each.
  // With `states` (a model with recurrent layers), a sequence also holds a state slot from admission to its end or
  // preemption: admission waits for a free slot as for pages. Its prefix-cache hits end at a state snapshot
  // (SchedulerOptions::state_snapshot_tokens).
  Scheduler(const SchedulerOptions& options, std::vector<KvGroupPages> groups, StatePool* states = nullptr);

  // KV tiers beyond the pools (kv/kv_tiers.h; null: none): a waiting request's prefix hit continues into them, its
  // pages copied back by their worker while the sequence waits in running_ (holding its pages, computing nothing);
  // groups_[g] is tier group g.
  void set_tiers(KvTiers* tiers) { tiers_ = tiers; }

  void add(Sequence* seq);  // queues a new request
  SchedulerOutput schedule();
  // After the step ran: advances num_computed and registers full pages in the prefix cache.
  void on_step_done(const SchedulerOutput& out);
  // After a step checked seq's drafts and advanced its num_computed over the accepted ones: registers its full
  // pages in the prefix cache (over accepted tokens only) and releases the pages that held only rejected drafts.
  void on_drafts_checked(Sequence* seq);
  // Removes a sequence wherever it is (finished, aborted) and frees its pages.
  void remove(Sequence* seq);

  const std::deque<Sequence*>& waiting() const { return waiting_; }
  const std::vector<Sequence*>& running() const { return running_; }
  int64_t num_preemptions() const { return num_preemptions_; }
  // Pages released behind sliding windows so far (all windowed groups).
  int64_t window_pages_released() const { return window_pages_released_; }
  bool has_unfinished() const { return !waiting_.empty() || !running_.empty(); }

 private:
  // Gets pages for seq to hold `tokens`, preempting newer sequences as needed. False when seq itself
  // had to be preempted.
  bool reserve(Sequence* seq, int64_t tokens, SchedulerOutput& out);
  void preempt(Sequence* victim, SchedulerOutput& out);
  int64_t reserve_drafts(Sequence* seq);
  // Pages for seq to hold `tokens` in every group (a new sequence's table starting with its prefix hit in each);
  // all or nothing for a new sequence.
  bool allocate(Sequence* seq, int64_t tokens, const std::vector<std::vector<int32_t>>& prefixes = {},
                int64_t keep_free = 0);
  void free_pages(Sequence* seq);
  PageManager& first_pages() const { return *groups_.front().pages; }
  size_t prefix_hit(const Sequence* seq, std::vector<std::vector<int32_t>>& prefixes, uint64_t& snapshot,
                    ContentKey& tier_snapshot) const;
  // Admits the head of the queue if pages (and, in continuous mode, the budget) allow.
  bool try_admit(Sequence* seq, SchedulerOutput& out);
  void schedule_running(bool decodes, SchedulerOutput& out);
  // The recurrent state's prefix caching: n tokens from `start` cut at the next snapshot boundary of the prompt; the
  // pages of a prefix hit that end at the newest boundary with a snapshot (and its key, 0: none); the snapshot after a
  // step that ended on a boundary.
  int64_t cut_at_snapshot(const Sequence* seq, int64_t start, int64_t n) const;
  // n tokens from `start` cut at a snapshot boundary (above), and never ending inside a bidirectional image.
  int64_t cut_chunk(const Sequence* seq, int64_t start, int64_t n) const;
  // The encoder budget: n cut before the first image not encoded yet that the budget left cannot take; then the
  // images a scheduled chunk reaches are charged.
  int64_t cut_at_encoder(const Sequence* seq, int64_t start, int64_t n) const;
  void charge_encoder(const Sequence* seq, int64_t start, int64_t n);
  size_t snapshot_hit(const Sequence* seq, std::span<const int32_t> pool_prefix, size_t hit_pages, uint64_t& key,
                      ContentKey& tier_key) const;
  void take_snapshot(const Sequence* seq);
  // KV tiers: the pages past `prefixes` (up to hit_pages) each group loads for a new sequence; the end of a load
  // (the sequence goes on from its pages, or back to the queue when an entry turned out missing or corrupt); the
  // ends of the loads done by now, or, with `block`, of the oldest one.
  std::vector<TierLoad> tier_loads(const Sequence* seq, const std::vector<std::vector<int32_t>>& prefixes,
                                   size_t hit_pages, const ContentKey& tier_snapshot) const;
  // The tiers' keys of the state snapshots after each boundary in the first `pages` pages of tokens (one per
  // state_snapshot_tokens; each chains over every page before it).
  std::vector<ContentKey> state_keys(std::span<const int32_t> tokens, size_t pages) const;
  void finish_load(Sequence* seq, bool ok);
  bool finish_loads(bool block);
  void cancel_load(Sequence* seq);

  SchedulerOptions opt_;
  std::vector<KvGroupPages> groups_;
  StatePool* states_ = nullptr;
  KvTiers* tiers_ = nullptr;
  int64_t window_pages_released_ = 0;
  std::deque<Sequence*> waiting_;
  std::vector<Sequence*> running_;  // in admission order
  uint64_t next_admit_ = 1;
  int64_t batch_ = 0;  // static mode: the batch being run
  int64_t num_preemptions_ = 0;
  int64_t budget_ = 0;          // tokens left in the step being scheduled
  int64_t encoder_budget_ = 0;  // image tokens the encoder may still take this step
};

}  // namespace minfer
