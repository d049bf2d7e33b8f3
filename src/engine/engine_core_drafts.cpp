// Speculative decoding in the EngineCore (engine/speculative.h): the draft model's start, the drafts proposed
// before each step, and the check of a verification chunk's rows against them.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "engine/engine_core.h"

namespace minfer {

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
  // The recurrent layers' state after the last kept token (the verification left it after the last draft).
  if (states_ && finish == FinishReason::kNone) states_->keep_history(seq.id, accepted);
  speculator_->record(seq, drafted, accepted);
  seq.draft.clear();
  if (finish == FinishReason::kNone) scheduler_->on_drafts_checked(&seq);
  emit(seq, finish, std::move(o), outputs);
}

}  // namespace minfer
