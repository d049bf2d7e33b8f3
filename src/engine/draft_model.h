// A draft model for speculative decoding (`--speculative-model PATH`, vLLM's draft_model method): a smaller model
// with the same vocabulary proposes k tokens per decoding sequence by greedy decoding on its own KV pages; the
// engine step checks them against the target as it checks prompt-lookup drafts (engine/speculative.h).
//
// Greedy drafts are point masses, so the check that samples each row and keeps a draft when it equals the sampled
// token is Leviathan et al.'s rejection sampling exactly: outputs follow the target's distribution whatever the
// draft proposes.
//
// Each sequence's draft KV covers its tokens [0, draft_computed). Before a step, a sequence first catches up (the
// tokens the target accepted since, or its whole prompt the first time; at most max_catch_up tokens a step, all
// sequences together) with its last row giving d1, then the draft runs k - 1 one-token rounds over the sequences
// still drafting, batched. The next time, the draft KV is cut back to the tokens the sequence kept (roll_back) and
// pages past them return to the draft's pool. The pool holds as many tokens as the target's; a sequence that finds
// no free draft page simply gets no draft that step.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "engine/model_runner.h"
#include "engine/sequence.h"
#include "kv/kv_cache.h"
#include "kv/page_manager.h"
#include "model/model_weights.h"

namespace minfer {

struct DraftModelOptions {
  std::string path;
  graph::FusionOptions fusion;
  PageGeometry page;
  int64_t num_pages = 0;  // the draft pool, null page included
  KvCacheDtype kv_dtype = KvCacheDtype::kF32;
  int64_t max_model_len = 0;
  int64_t max_catch_up = 2048;  // tokens one step catches up at most, all sequences together
};

class DraftModel {
 public:
  // Loads the draft; throws Error naming the path when its vocabulary differs from target_vocab.
  DraftModel(const DraftModelOptions& options, int64_t target_vocab, ThreadPool& pool);

  // Fills seq->draft for each sequence with up to lengths[i] tokens (0: none), running the draft model.
  void propose(std::span<Sequence* const> seqs, std::span<const int64_t> lengths);
  // The sequence finished: its draft pages go back.
  void release(const Sequence& seq) { pages_.free(seq.id); }

  const ModelConfig& config() const { return weights_.config; }

 private:
  void roll_back(Sequence& seq);
  void append_argmax(std::span<const float> rows);

  ModelWeights weights_;
  int64_t max_len_ = 0;  // positions the draft computes: the engine's context or the draft's, the smaller
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<KvCache> cache_;
  PageManager pages_;
  int64_t max_catch_up_ = 0;
  std::vector<SequenceChunk> chunks_;
  std::vector<Sequence*> drafting_;  // the sequences drafting this step, and how many tokens each wants
  std::vector<int64_t> wanted_;
};

}  // namespace minfer
