// One step of the EngineCore: the scheduler's plan as chunks, the model run (with the grammar masks computed
// beside it), the counters and the step's log line. What the rows it returns become is engine_core_outputs.cpp.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <iterator>

#include "engine/engine_core.h"

namespace minfer {

std::vector<RequestOutput> EngineCore::step() {
  const auto step_start = Clock::now();
  std::vector<RequestOutput> outputs = std::move(pending_);
  pending_.clear();
  if (!scheduler_->has_unfinished()) return outputs;
  if (speculator_) propose_drafts();
  const SchedulerOutput sched = scheduler_->schedule();
  if (sched.empty()) return outputs;

  if (encoder_) encode_images(sched);
  plan_chunks(sched);
  start_grammar_masks();
  const ModelRun run = run_model();
  scheduler_->on_step_done(sched);
  count_step(sched);
  process_outputs(run.rows, outputs);
  if (spdlog::should_log(spdlog::level::debug)) log_step(sched, step_start, run);
  return outputs;
}

void EngineCore::plan_chunks(const SchedulerOutput& sched) {
  chunks_.clear();
  chunk_seqs_.clear();
  chunk_drafts_.clear();
  for (const ScheduledChunk& c : sched.chunks) add_chunks(*c.seq, c.num_tokens, c.num_draft);
}

// The step's chunks of a scheduled sequence: one, or with prompt_logits one per prompt position, so every
// position samples (they all attend to the same pages: the step writes every row's K/V before attention). A decode
// with drafts computes [its token, drafts...] and returns a row after each.
void EngineCore::add_chunks(Sequence& s, int64_t num_tokens, int64_t num_draft) {
  SequenceChunk chunk;
  chunk.start_position = static_cast<int32_t>(s.num_computed);
  if (full_.pages) chunk.page_table = full_.pages->page_table(s.id);
  if (window_.pages) chunk.local_page_table = window_.pages->page_table(s.id);
  if (states_) chunk.state_slot = states_->slot_of(s.id);
  chunk.images = s.images;
  chunk.bidirectional_images = s.bidirectional_images;
  if (num_draft > 0) {
    s.verify_tokens.assign(1, s.tokens.back());
    s.verify_tokens.insert(s.verify_tokens.end(), s.draft.begin(), s.draft.end());
    chunk.tokens = s.verify_tokens;
    chunk.sample = chunk.sample_all = true;
    if (states_) chunk.state_history = states_->history_of(s.id);
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

// The model over the step's chunks, on every rank.
EngineCore::ModelRun EngineCore::run_model() {
  ModelRun run;
  run.start = Clock::now();
  {
    // The masks are joined even when the model throws: the worker must be done with the matchers before the
    // failed sequences are destroyed.
    GrammarMaskWorker::Join join(mask_worker_.get());
    broadcast_step();
    run.rows = runner_->execute(chunks_, KvPools{full_.cache.get(), window_.cache.get(), states_.get()});
    run.end = Clock::now();
    join.wait();
  }
  mask_wait_ = Clock::now() - run.end;
  return run;
}

void EngineCore::count_step(const SchedulerOutput& sched) {
  ++num_steps_;
  const auto* bucket = std::lower_bound(std::begin(EngineStats::kIterationTokenBuckets),
                                        std::end(EngineStats::kIterationTokenBuckets), sched.num_tokens);
  ++iteration_tokens_counts_[static_cast<size_t>(bucket - std::begin(EngineStats::kIterationTokenBuckets))];
  computed_tokens_ += sched.num_tokens;
  max_running_ = std::max<int64_t>(max_running_, static_cast<int64_t>(scheduler_->running().size()));
}

// One line per step (--log-steps): its shape (tokens, decodes, prefill chunks, sampled rows, the (query, key)
// pairs attention computes), the model's time, and the step's whole time (scheduling and sampling included).
void EngineCore::log_step(const SchedulerOutput& sched, Clock::time_point start, const ModelRun& run) const {
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
      ms(run.end - run.start), ms(Clock::now() - start),
      step_masks_ > 0 ? fmt::format(", {} grammar masks {:.1f} ms (waited {:.1f} ms after the model)", step_masks_,
                                    1e3 * mask_worker_->last_seconds(), ms(mask_wait_))
                      : std::string(),
      drafts > 0 ? fmt::format(", {} draft tokens checked", drafts) : std::string());
}

}  // namespace minfer
