// What a step's rows become: each chunk's rows go to its sequence, pooled into an embedding, checked against its
// drafts (engine_core_drafts.cpp) or sampled; a sampled token is appended with its stop checks, grammar and
// logprobs, and the sequence's output is emitted (and the sequence ended when it finished).
#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/engine_core.h"
#include "engine/logprobs.h"

namespace minfer {

// Each chunk's rows, in the order the runner returned them: one per token of an embedding chunk that keeps them
// all and of a chunk that checks drafts, one of each other chunk that samples.
void EngineCore::process_outputs(std::span<const float> step_rows, std::vector<RequestOutput>& outputs) {
  const size_t vocab = static_cast<size_t>(runner_->output_width());
  size_t row = 0;
  for (size_t i = 0; i < chunks_.size(); ++i) {
    if (embedding()) {
      const size_t rows = chunks_[i].sample_all ? chunks_[i].tokens.size() : chunks_[i].sample ? 1 : 0;
      // A chunk from position 0 starts the pooling over (a preempted request is recomputed from the start).
      if (chunks_[i].start_position == 0) chunk_seqs_[i]->pooled.clear();
      on_hidden_rows(*chunk_seqs_[i], step_rows.subspan(row * vocab, rows * vocab), outputs);
      row += rows;
      continue;
    }
    if (chunk_drafts_[i] > 0) {
      const size_t rows = chunks_[i].tokens.size();
      on_verify_rows(*chunk_seqs_[i], step_rows.subspan(row * vocab, rows * vocab), outputs);
      row += rows;
      continue;
    }
    if (!chunks_[i].sample) continue;
    const int64_t position = chunks_[i].start_position + static_cast<int64_t>(chunks_[i].tokens.size()) - 1;
    on_logits_row(*chunk_seqs_[i], position, step_rows.subspan(row * vocab, vocab), outputs);
    ++row;
  }
}

// One row of logits, of the token at `position`: kept when it is a prompt position the request wants, sampled
// from when it is the sequence's last token.
void EngineCore::on_logits_row(Sequence& seq, int64_t position, std::span<const float> logits,
                               std::vector<RequestOutput>& outputs) {
  if (seq.params.prompt_logits && position < seq.prompt_len && position == seq.prompt_logit_rows) {
    seq.prompt_logits.insert(seq.prompt_logits.end(), logits.begin(), logits.end());
    ++seq.prompt_logit_rows;
  }
  if (position + 1 != seq.num_tokens()) return;
  RequestOutput o;
  const FinishReason finish = append_token(seq, sample_token(seq, logits), logits, o);
  emit(seq, finish, std::move(o), outputs);
}

// The sampled token of a row: grammar mask, then logit_bias and min_tokens, then the sampler (penalties,
// temperature, filters).
int32_t EngineCore::sample_token(Sequence& seq, std::span<const float> logits) {
  row_.assign(logits.begin(), logits.end());
  if (seq.grammar) {
    apply_token_mask(row_, seq.grammar_mask);
    if (seq.params.logprobs >= 0) masked_row_ = row_;
  }
  for (const auto& [id, bias] : seq.params.logit_bias) row_[static_cast<size_t>(id)] += bias;
  if (seq.num_output() < seq.params.min_tokens) {
    constexpr float kNegInf = -std::numeric_limits<float>::infinity();
    if (!seq.params.ignore_eos)
      for (int32_t id : eos_ids_) row_[static_cast<size_t>(id)] = kNegInf;
    for (int32_t id : seq.params.stop_token_ids) row_[static_cast<size_t>(id)] = kNegInf;
  }
  const std::span<const int32_t> all(seq.tokens);
  return seq.sampler->sample(row_, all.first(static_cast<size_t>(seq.prompt_len)),
                             all.subspan(static_cast<size_t>(seq.prompt_len)));
}

// Appends a sampled token: stop checks, the grammar, and its id, logprobs and text into o. Returns how the
// sequence finished with it (kNone: it goes on).
FinishReason EngineCore::append_token(Sequence& seq, int32_t token, std::span<const float> logits, RequestOutput& o) {
  seq.tokens.push_back(token);
  ++generated_tokens_;
  StopChecker::Step st = seq.stop->append(token, seq.num_output());
  if (st.finish == FinishReason::kNone && seq.grammar) {
    seq.grammar->accept(token);
    // The language allows nothing more: the output is complete (no step spent on the forced EOS).
    if (seq.grammar->is_stopped()) st.finish = FinishReason::kStop;
  }
  o.new_token_ids.push_back(token);
  // From the logits before bias, penalties and temperature (vLLM's raw logprobs); a constrained sequence's
  // after its grammar mask, as vLLM applies the mask before sampling.
  if (seq.params.logprobs >= 0)
    o.logprobs.push_back(
        compute_logprobs(seq.grammar ? std::span<const float>(masked_row_) : logits, token, seq.params.logprobs));
  o.text_delta += st.text;
  if (!st.stop_reason.empty()) o.stop_reason = std::move(st.stop_reason);
  return st.finish;
}

// A step's output of a sequence (its new tokens in o): ends the sequence when it finished, and fills in the
// request's counters.
void EngineCore::emit(Sequence& seq, FinishReason reason, RequestOutput o, std::vector<RequestOutput>& outputs) {
  if (reason != FinishReason::kNone) finish(&seq, reason);
  set_counters(seq, o);
  // The first output carries the prompt logits.
  if (seq.num_output() == static_cast<int64_t>(o.new_token_ids.size())) o.prompt_logits = std::move(seq.prompt_logits);
  outputs.push_back(std::move(o));
  if (reason != FinishReason::kNone) seqs_.erase(seq.id);
}

// An embedding request's rows of final-normed hidden states: summed (mean pooling) or the last kept; once the
// whole prompt is computed, the pooled vector (L2-normalised unless configured off) is the request's one output.
void EngineCore::on_hidden_rows(Sequence& seq, std::span<const float> rows, std::vector<RequestOutput>& outputs) {
  const size_t width = static_cast<size_t>(runner_->output_width());
  if (seq.pooled.empty()) seq.pooled.assign(width, 0.0f);
  for (size_t r = 0; r * width < rows.size(); ++r) {
    const std::span<const float> h = rows.subspan(r * width, width);
    if (config_.pooling == PoolingType::kMean) {
      for (size_t j = 0; j < width; ++j) seq.pooled[j] += h[j];
    } else {
      std::copy(h.begin(), h.end(), seq.pooled.begin());
    }
  }
  if (seq.num_computed < seq.prompt_len) return;  // more prompt chunks to come
  std::vector<float> embedding = std::move(seq.pooled);
  if (config_.pooling == PoolingType::kMean)
    for (float& v : embedding) v /= static_cast<float>(seq.prompt_len);
  if (config_.normalize_embeddings) {
    double norm = 0.0;
    for (float v : embedding) norm += static_cast<double>(v) * v;
    const float scale = norm > 0.0 ? static_cast<float>(1.0 / std::sqrt(norm)) : 0.0f;
    for (float& v : embedding) v *= scale;
  }
  finish(&seq, FinishReason::kStop);
  RequestOutput o = make_output(seq);
  o.embedding = std::move(embedding);
  outputs.push_back(std::move(o));
  seqs_.erase(seq.id);
}

RequestOutput EngineCore::make_output(const Sequence& seq) const {
  RequestOutput o;
  set_counters(seq, o);
  return o;
}

void EngineCore::set_counters(const Sequence& seq, RequestOutput& o) const {
  o.id = seq.id;
  o.prompt_tokens = seq.prompt_len;
  o.output_tokens = seq.num_output();
  o.cached_tokens = seq.cached_tokens;
  o.finish_reason = seq.finish_reason;
  o.finished = seq.finish_reason != FinishReason::kNone;
  o.spec_decode = seq.spec.usage;
}

void EngineCore::finish(Sequence* seq, FinishReason reason) {
  seq->finish_reason = reason;
  scheduler_->remove(seq);  // frees its pages now
  if (draft_) draft_->release(*seq);
  ++finished_;
}

}  // namespace minfer
