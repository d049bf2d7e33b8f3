#include "engine/draft_model.h"

#include <algorithm>

#include "base/error.h"
#include "engine/sampler.h"

namespace minfer {
namespace {

PageManagerOptions draft_pages(const DraftModelOptions& o) {
  PageManagerOptions p;
  p.num_pages = o.num_pages;
  p.page = o.page;
  p.enable_prefix_caching = false;  // drafts are recomputed cheaply; no sharing to manage
  return p;
}

}  // namespace

DraftModel::DraftModel(const DraftModelOptions& options, int64_t target_vocab, ThreadPool& pool)
    : weights_(load_model(options.path)), pages_(draft_pages(options)), max_catch_up_(options.max_catch_up) {
  const ModelConfig& m = weights_.config;
  if (m.vocab_size != target_vocab)
    fail(
        "speculative model {}: its vocabulary has {} tokens, the served model's {}; a draft model must share the "
        "served model's vocabulary",
        options.path, m.vocab_size, target_vocab);
  // Its drafts roll back by truncating its KV; a recurrent layer's state would need the target's history slots.
  if (m.has_recurrent_layers())
    fail("speculative model {}: a {} draft model (with recurrent layers) is not supported; use an attention model",
         options.path, m.arch);
  max_len_ = std::min<int64_t>(options.max_model_len, m.max_position_embeddings);
  runner_ = std::make_unique<ModelRunner>(weights_, pool, options.fusion, options.max_model_len);
  KvCacheShape shape;
  shape.num_layers = m.num_layers;
  shape.kv_heads = m.num_kv_heads;
  shape.head_dim = m.head_dim;
  shape.page = options.page;
  shape.num_pages = options.num_pages;
  shape.dtype = options.kv_dtype;
  cache_ = std::make_unique<KvCache>(shape);
}

// The draft KV of seq that is still its own: the tokens before draft_computed, then as many of the tokens fed after
// them as the sequence kept; never its last token, whose row gives the first draft.
void DraftModel::roll_back(Sequence& seq) {
  SpecDecodeState& s = seq.spec;
  int64_t valid = s.draft_computed;
  for (int32_t t : s.draft_fed) {
    if (valid >= seq.num_tokens() || seq.tokens[static_cast<size_t>(valid)] != t) break;
    ++valid;
  }
  s.draft_computed = std::min(valid, seq.num_tokens() - 1);
  s.draft_fed.clear();
  pages_.truncate(seq.id, s.draft_computed);
}

void DraftModel::propose(std::span<Sequence* const> seqs, std::span<const int64_t> lengths) {
  // Round 0: each sequence catches up to its last token, whose row gives d1 when the whole gap fits this step.
  chunks_.clear();
  drafting_.clear();
  wanted_.clear();
  int64_t budget = max_catch_up_;
  for (size_t i = 0; i < seqs.size(); ++i) {
    Sequence& s = *seqs[i];
    s.draft.clear();
    roll_back(s);
    const int64_t from = s.spec.draft_computed, to = s.num_tokens();
    // The draft computes positions up to to + len - 2: within its context.
    const int64_t len = std::min(lengths[i], max_len_ - to + 1);
    const int64_t n = std::min(to - from, budget);
    if (len <= 0 || n <= 0) continue;
    const bool drafts = from + n == to;
    if (!pages_.allocate(s.id, drafts ? to + len - 1 : from + n)) continue;  // the draft pool is full: no draft
    SequenceChunk c;
    c.tokens = std::span<const int32_t>(s.tokens).subspan(static_cast<size_t>(from), static_cast<size_t>(n));
    c.start_position = static_cast<int32_t>(from);
    c.page_table = pages_.page_table(s.id);
    c.sample = drafts;
    chunks_.push_back(c);
    budget -= n;
    s.spec.draft_computed = from + n;
    if (!drafts) continue;
    drafting_.push_back(&s);
    wanted_.push_back(len);
    s.draft.reserve(static_cast<size_t>(len));
  }
  if (chunks_.empty()) return;
  append_argmax(runner_->execute(chunks_, *cache_));

  // Rounds 1..: each sequence still short of its length feeds its latest draft token.
  for (size_t round = 1;; ++round) {
    chunks_.clear();
    size_t kept = 0;
    for (size_t j = 0; j < drafting_.size(); ++j) {
      Sequence& s = *drafting_[j];
      if (static_cast<int64_t>(s.draft.size()) >= wanted_[j]) continue;
      SequenceChunk c;
      c.tokens = std::span<const int32_t>(s.draft).subspan(round - 1, 1);
      c.start_position = static_cast<int32_t>(s.num_tokens() - 1 + static_cast<int64_t>(round));
      c.page_table = pages_.page_table(s.id);
      chunks_.push_back(c);
      s.spec.draft_fed.push_back(s.draft.back());
      drafting_[kept] = &s;
      wanted_[kept++] = wanted_[j];
    }
    drafting_.resize(kept);
    wanted_.resize(kept);
    if (chunks_.empty()) return;
    append_argmax(runner_->execute(chunks_, *cache_));
  }
}

// Greedy drafts: the argmax of each row, appended to the drafting sequences in order.
void DraftModel::append_argmax(std::span<const float> rows) {
  const size_t vocab = static_cast<size_t>(runner_->output_width());
  for (size_t j = 0; j < drafting_.size(); ++j)
    drafting_[j]->draft.push_back(Sampler::argmax(rows.subspan(j * vocab, vocab)));
}

}  // namespace minfer
