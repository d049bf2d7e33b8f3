#include "engine/stop_checker.h"

#include <algorithm>

#include "base/error.h"
#include "base/text.h"

namespace minfer {

StopChecker::StopChecker(const SamplingParams& params, const Tokenizer* tokenizer, std::span<const int32_t> eos_ids,
                         int64_t prompt_len, int64_t max_total_tokens, bool continues_text)
    : params_(params), eos_(eos_ids.begin(), eos_ids.end()), prompt_len_(prompt_len), max_total_(max_total_tokens) {
  if (tokenizer) {
    decoder_.emplace(*tokenizer, params.skip_special_tokens, continues_text);
    vocab_size_ = tokenizer->vocab_size();
  }
  if (!tokenizer && !params.stop.empty()) fail("stop strings need a tokenizer, and this model has none");
  for (const std::string& s : params.stop)
    if (s.empty()) fail("SamplingParams.stop contains an empty string");
}

std::string StopChecker::release(size_t n) {
  std::string out = pending_.substr(0, n);
  pending_.erase(0, n);
  released_ += out;
  return out;
}

size_t StopChecker::held_suffix() const {
  // The longest proper prefix of any stop string that is a suffix of pending_.
  size_t best = 0;
  for (const std::string& s : params_.stop) best = std::max(best, partial_marker_at_end(pending_, s));
  return best;
}

StopChecker::Step StopChecker::append(int32_t token, int64_t num_output) {
  Step step;
  const bool is_eos = !params_.ignore_eos && std::find(eos_.begin(), eos_.end(), token) != eos_.end();
  const bool is_stop_id =
      std::find(params_.stop_token_ids.begin(), params_.stop_token_ids.end(), token) != params_.stop_token_ids.end();
  const bool at_length = num_output >= params_.max_tokens || prompt_len_ + num_output >= max_total_;

  if (is_eos || is_stop_id) {
    // The stop token is not text; what was held back can no longer become a stop string.
    if (decoder_) pending_ += decoder_->flush();
    step.text = release(pending_.size());
    step.finish = FinishReason::kStop;
    return step;
  }
  // Padded vocabularies (the model's is larger than the tokenizer's) can sample ids with no text.
  if (decoder_ && token < vocab_size_) {
    pending_ += decoder_->push(token);
  }
  if (decoder_ && at_length) pending_ += decoder_->flush();
  // pending_ holds every byte where a match can still start (a held tail is at most a stop string's
  // length), so searching it alone finds the earliest match.
  size_t match = std::string::npos;
  const bool stop_strings_on = num_output >= params_.min_tokens;  // min_tokens: no stop string before then
  for (const std::string& s : stop_strings_on ? params_.stop : std::vector<std::string>{}) {
    const size_t at = pending_.find(s);
    if (at < match) {
      match = at;
      step.stop_reason = s;
    }
  }
  if (match != std::string::npos) {
    step.text = release(match);
    pending_.clear();
    step.finish = FinishReason::kStop;
    return step;
  }
  step.stop_reason.clear();
  if (at_length) {
    step.text = release(pending_.size());
    step.finish = FinishReason::kLength;
    return step;
  }
  step.text = release(pending_.size() - held_suffix());
  return step;
}

}  // namespace minfer
