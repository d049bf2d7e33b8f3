// Scheduler against the real PageManager with a simulated model (each finished prefill or decode
// appends a made-up token): token budget, sequence cap, decodes first, preemption order, abort, static
// batches, prefix hits, and no leaked pages or deadlock after random mixes.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include "engine/scheduler.h"

namespace minfer {
namespace {

struct Sim {
  Sim(int64_t usable_pages, const SchedulerOptions& so, bool prefix = true, int64_t page_size = 16)
      : bm([&] {
          PageManagerOptions o;
          o.num_pages = usable_pages + 1;
          o.page = PageGeometry::of(page_size);
          o.enable_prefix_caching = prefix;
          return o;
        }()),
        sched(so, bm) {}

  Sequence* add(std::vector<int32_t> prompt, int64_t max_out) {
    auto s = std::make_unique<Sequence>();
    s->id = next_id++;
    s->prompt_len = static_cast<int64_t>(prompt.size());
    s->tokens = std::move(prompt);
    s->params.max_tokens = static_cast<int32_t>(max_out);
    sched.add(s.get());
    seqs.push_back(std::move(s));
    return seqs.back().get();
  }
  Sequence* add(int64_t prompt_len, int64_t max_out, int32_t base = 0) {
    std::vector<int32_t> p(static_cast<size_t>(prompt_len));
    for (int64_t i = 0; i < prompt_len; ++i) p[static_cast<size_t>(i)] = base + static_cast<int32_t>(i);
    return add(std::move(p), max_out);
  }

  // One step: schedule, "run", sample where a chunk reached the end, retire finished sequences.
  SchedulerOutput step() {
    SchedulerOutput out = sched.schedule();
    int64_t sum = 0;
    for (const ScheduledChunk& c : out.chunks) {
      EXPECT_GT(c.num_tokens, 0);
      EXPECT_EQ(c.seq->status, SeqStatus::kRunning);
      EXPECT_GE(static_cast<int64_t>(bm.page_table(c.seq->id).size()) * bm.page().size(),
                c.seq->num_computed + c.num_tokens);
      sum += c.num_tokens;
    }
    EXPECT_EQ(sum, out.num_tokens);
    sched.on_step_done(out);
    for (const ScheduledChunk& c : out.chunks) {
      Sequence* s = c.seq;
      if (s->num_computed < s->num_tokens()) continue;
      s->tokens.push_back(static_cast<int32_t>(1000 + s->num_output()));
      if (s->num_output() >= s->params.max_tokens) {
        sched.remove(s);
        ++finished;
      }
    }
    bm.check_invariants();
    ++steps;
    return out;
  }
  void run_to_end(int max_steps = 100000) {
    while (sched.has_unfinished() && steps < max_steps) step();
    ASSERT_FALSE(sched.has_unfinished()) << "no progress after " << steps << " steps";
  }

  PageManager bm;
  Scheduler sched;
  std::vector<std::unique_ptr<Sequence>> seqs;
  RequestId next_id = 1;
  int finished = 0;
  int steps = 0;
};

SchedulerOptions options(int64_t max_seqs, int64_t max_tokens, bool continuous = true) {
  SchedulerOptions o;
  o.max_num_seqs = max_seqs;
  o.max_num_batched_tokens = max_tokens;
  o.continuous = continuous;
  return o;
}

TEST(Scheduler, RespectsTokenBudgetAndSequenceCap) {
  Sim sim(64, options(3, 64));
  for (int i = 0; i < 5; ++i) sim.add(100, 5, i * 1000);
  while (sim.sched.has_unfinished()) {
    const SchedulerOutput out = sim.step();
    EXPECT_LE(out.num_tokens, 64);
    EXPECT_LE(static_cast<int64_t>(sim.sched.running().size()), 3);
  }
  EXPECT_EQ(sim.finished, 5);
  for (const auto& s : sim.seqs) EXPECT_EQ(s->num_output(), 5);
  EXPECT_EQ(sim.bm.num_used_pages(), 0);
  // 5 x 100 prompt tokens in chunks of at most 64, plus 4 decodes each.
  EXPECT_GE(sim.steps, 500 / 64);
}

TEST(Scheduler, ChunksALongPromptAndServesDecodesFirst) {
  Sim sim(64, options(8, 16));
  Sequence* a = sim.add(10, 50);
  SchedulerOutput out = sim.step();  // a's whole prompt
  ASSERT_EQ(out.chunks.size(), 1u);
  EXPECT_EQ(out.chunks[0].num_tokens, 10);
  Sequence* b = sim.add(100, 3);
  out = sim.step();
  ASSERT_EQ(out.chunks.size(), 2u);
  EXPECT_EQ(out.chunks[0].seq, a);  // the decode first
  EXPECT_EQ(out.chunks[0].num_tokens, 1);
  EXPECT_EQ(out.chunks[1].seq, b);
  EXPECT_EQ(out.chunks[1].num_tokens, 15);
  out = sim.step();
  EXPECT_EQ(out.chunks[0].seq, a);
  EXPECT_EQ(out.chunks[1].num_tokens, 15);  // b continues in chunks
  EXPECT_EQ(b->num_computed, 30);
  sim.run_to_end();
}

TEST(Scheduler, PreemptsTheMostRecentlyAdmittedAndRecomputesIt) {
  Sim sim(6, options(8, 256), /*prefix=*/false);
  Sequence* a = sim.add(20, 40, 0);
  Sequence* b = sim.add(20, 40, 100);
  Sequence* c = sim.add(20, 40, 200);
  sim.step();  // all three prefilled: 2 pages each, the pool is full
  EXPECT_EQ(sim.bm.num_free_pages(), 0);
  EXPECT_TRUE(a->admit_order < b->admit_order && b->admit_order < c->admit_order);
  // Decode until a needs a third page (token 33): c, the newest, must go.
  while (sim.sched.num_preemptions() == 0) sim.step();
  EXPECT_EQ(c->status, SeqStatus::kWaiting);
  EXPECT_EQ(c->num_computed, 0);
  EXPECT_EQ(sim.sched.waiting().front(), c);
  EXPECT_FALSE(sim.bm.has_pages(c->id));
  EXPECT_EQ(a->status, SeqStatus::kRunning);
  EXPECT_EQ(b->status, SeqStatus::kRunning);
  const int64_t c_output = c->num_output();
  EXPECT_GT(c_output, 0);  // its output so far is kept and recomputed later
  sim.run_to_end();
  EXPECT_EQ(sim.finished, 3);
  for (const auto& s : sim.seqs) {
    EXPECT_EQ(s->num_output(), 40);
    for (int64_t i = 0; i < 40; ++i) EXPECT_EQ(s->tokens[static_cast<size_t>(20 + i)], 1000 + i);
  }
  EXPECT_EQ(sim.bm.num_used_pages(), 0);
}

TEST(Scheduler, AdmitsOnlyWhatThePagesHoldWithoutPreempting) {
  // 8 usable pages of 16 tokens; three 50-token prompts need 4 pages each: only two fit at once.
  Sim sim(8, options(8, 1024), /*prefix=*/false);
  Sequence* a = sim.add(50, 5, 0);
  Sequence* b = sim.add(50, 5, 100);
  Sequence* c = sim.add(50, 5, 200);
  const SchedulerOutput out = sim.step();
  EXPECT_EQ(out.chunks.size(), 2u);
  EXPECT_EQ(out.num_preempted, 0);
  EXPECT_EQ(a->status, SeqStatus::kRunning);
  EXPECT_EQ(b->status, SeqStatus::kRunning);
  EXPECT_EQ(c->status, SeqStatus::kWaiting);
  EXPECT_EQ(sim.bm.num_used_pages(), 8);
  while (a->status != SeqStatus::kFinished) sim.step();
  sim.step();
  EXPECT_EQ(c->status, SeqStatus::kRunning);  // admitted as soon as a's pages came back
  sim.run_to_end();
  EXPECT_EQ(sim.sched.num_preemptions(), 0);
  EXPECT_EQ(sim.bm.num_used_pages(), 0);
}

TEST(Scheduler, PreemptsNewestFirstOverSeveralVictims) {
  // Five 16-token prompts, one page each, in a pool of 6 pages: as they all grow past their first page, the
  // newest running sequence is preempted each time, so victims come in reverse admission order.
  Sim sim(6, options(8, 256), /*prefix=*/false);
  std::vector<Sequence*> seqs;
  for (int i = 0; i < 5; ++i) seqs.push_back(sim.add(15, 30, i * 100));
  sim.step();
  std::vector<Sequence*> victims;
  std::map<Sequence*, SeqStatus> before;
  while (sim.sched.has_unfinished() && victims.size() < 3) {
    for (Sequence* s : seqs) before[s] = s->status;
    const SchedulerOutput out = sim.step();
    if (out.num_preempted == 0) continue;
    // The sequences preempted this step, newest first (the order preempt() chose them).
    std::vector<Sequence*> now;
    for (Sequence* s : seqs)
      if (before[s] == SeqStatus::kRunning && s->status == SeqStatus::kWaiting) now.push_back(s);
    std::sort(now.begin(), now.end(), [](Sequence* x, Sequence* y) { return x->admit_order > y->admit_order; });
    for (Sequence* v : now) {
      // Every sequence still running was admitted before the victim.
      for (Sequence* r : sim.sched.running()) EXPECT_LT(r->admit_order, v->admit_order);
      victims.push_back(v);
    }
  }
  ASSERT_GE(victims.size(), 2u);
  EXPECT_EQ(victims[0], seqs[4]);
  EXPECT_EQ(victims[1], seqs[3]);
  sim.run_to_end();
  EXPECT_EQ(sim.finished, 5);
  EXPECT_EQ(sim.bm.num_used_pages(), 0);
}

TEST(Scheduler, AbortFreesPagesWhereverTheSequenceIs) {
  Sim sim(16, options(1, 64));
  Sequence* a = sim.add(40, 10);
  Sequence* b = sim.add(40, 10);
  sim.step();
  EXPECT_EQ(a->status, SeqStatus::kRunning);
  EXPECT_EQ(b->status, SeqStatus::kWaiting);  // max_num_seqs 1
  EXPECT_EQ(sim.bm.num_used_pages(), 3);
  sim.sched.remove(a);
  sim.sched.remove(b);
  EXPECT_EQ(sim.bm.num_used_pages(), 0);
  EXPECT_FALSE(sim.sched.has_unfinished());
  sim.bm.check_invariants();
}

TEST(Scheduler, PrefixHitStopsOneTokenShortOfThePrompt) {
  Sim sim(32, options(8, 256));
  Sequence* a = sim.add(32, 2);
  sim.run_to_end();
  Sequence* b = sim.add(32, 2);  // the same 32 tokens: two full pages cached
  const SchedulerOutput out = sim.step();
  ASSERT_EQ(out.chunks.size(), 1u);
  EXPECT_EQ(b->cached_tokens, 16);  // not 32: the last token is recomputed for its logits
  EXPECT_EQ(out.chunks[0].num_tokens, 16);
  Sequence* c = sim.add(33, 2);
  sim.step();
  EXPECT_EQ(c->cached_tokens, 32);
  EXPECT_EQ(a->status, SeqStatus::kFinished);
  sim.run_to_end();
  EXPECT_EQ(sim.bm.num_used_pages(), 0);
  EXPECT_EQ(sim.bm.prefix_stats().hit_tokens, 48);
}

TEST(Scheduler, StaticBatchRunsToCompletionBeforeTheNext) {
  Sim sim(64, options(2, 256, /*continuous=*/false));
  Sequence* a = sim.add(10, 3);
  Sequence* b = sim.add(10, 8);
  Sequence* c = sim.add(10, 3);
  Sequence* d = sim.add(10, 3);
  sim.step();
  EXPECT_EQ(sim.sched.running().size(), 2u);
  while (a->status != SeqStatus::kFinished) sim.step();
  // a is done, b still runs: c waits although a slot is free.
  sim.step();
  EXPECT_EQ(b->status, SeqStatus::kRunning);
  EXPECT_EQ(c->status, SeqStatus::kWaiting);
  while (b->status != SeqStatus::kFinished) sim.step();
  sim.step();
  EXPECT_EQ(c->status, SeqStatus::kRunning);
  EXPECT_EQ(d->status, SeqStatus::kRunning);
  sim.run_to_end();
}

TEST(Scheduler, ContinuousAdmitsIntoFreedSlotsAtOnce) {
  Sim sim(64, options(2, 256));
  Sequence* a = sim.add(10, 3);
  sim.add(10, 8);
  Sequence* c = sim.add(10, 3);
  while (a->status != SeqStatus::kFinished) sim.step();
  sim.step();
  EXPECT_EQ(c->status, SeqStatus::kRunning);
  sim.run_to_end();
}

// Random prompts (sharing prefixes), outputs, arrivals and aborts over a pool that holds one
// max-length sequence and a bit: everything finishes, nothing leaks, outputs are complete.
TEST(Scheduler, RandomMixNeverLeaksOrDeadlocks) {
  for (bool continuous : {true, false})
    for (bool prefix : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "continuous " << continuous << " prefix " << prefix);
      const int64_t max_model_len = 128, ps = 8;
      Sim sim(max_model_len / ps + 4, options(6, 24, continuous), prefix, ps);
      std::mt19937 rng(continuous * 2 + prefix);
      std::map<Sequence*, bool> aborted;
      int added = 0;
      while (added < 60 || sim.sched.has_unfinished()) {
        if (added < 60 && rng() % 3 == 0) {
          const int64_t plen = 1 + rng() % 60;
          std::vector<int32_t> p(static_cast<size_t>(plen));
          for (auto& t : p) t = static_cast<int32_t>(rng() % 3);
          sim.add(std::move(p), 1 + static_cast<int64_t>(rng() % (max_model_len - plen)));
          ++added;
        }
        if (rng() % 40 == 0 && !sim.sched.running().empty()) {
          Sequence* victim = sim.sched.running()[rng() % sim.sched.running().size()];
          sim.sched.remove(victim);
          aborted[victim] = true;
        }
        if (rng() % 60 == 0 && !sim.sched.waiting().empty()) {
          Sequence* victim = sim.sched.waiting()[rng() % sim.sched.waiting().size()];
          sim.sched.remove(victim);
          aborted[victim] = true;
        }
        sim.step();
        // Page count: the pages in use are exactly the distinct pages of the running sequences' tables.
        std::set<int32_t> held;
        for (const Sequence* r : sim.sched.running())
          for (int32_t p : sim.bm.page_table(r->id)) held.insert(p);
        for (const Sequence* w : sim.sched.waiting()) EXPECT_FALSE(sim.bm.has_pages(w->id));
        ASSERT_EQ(static_cast<int64_t>(held.size()), sim.bm.num_used_pages());
        ASSERT_LT(sim.steps, 50000);
      }
      for (const auto& s : sim.seqs) {
        EXPECT_EQ(s->status, SeqStatus::kFinished);
        if (!aborted.count(s.get())) {
          EXPECT_EQ(s->num_output(), s->params.max_tokens);
        }
      }
      EXPECT_EQ(sim.bm.num_used_pages(), 0);
      EXPECT_EQ(sim.bm.num_free_pages(), sim.bm.num_usable_pages());
    }
}

}  // namespace
}  // namespace minfer
