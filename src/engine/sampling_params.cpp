#include <cmath>

#include "base/error.h"
#include "minfer/sampling.h"

namespace minfer {

// Every check is written so that NaN fails it (comparisons with NaN are false).
void SamplingParams::validate() const {
  if (!(temperature >= 0.0f) || !std::isfinite(temperature))
    fail("SamplingParams.temperature must be a finite value >= 0 (0 = greedy), got {}", temperature);
  if (!(top_p > 0.0f && top_p <= 1.0f)) fail("SamplingParams.top_p must be in (0, 1] (1 = off), got {}", top_p);
  if (top_k < -1) fail("SamplingParams.top_k must be >= 0, or -1 (0 and -1 both mean off), got {}", top_k);
  if (!(min_p >= 0.0f && min_p <= 1.0f)) fail("SamplingParams.min_p must be in [0, 1] (0 = off), got {}", min_p);
  if (!(repetition_penalty > 0.0f) || !std::isfinite(repetition_penalty))
    fail("SamplingParams.repetition_penalty must be a finite value > 0 (1 = off), got {}", repetition_penalty);
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f))
    fail("SamplingParams.presence_penalty must be in [-2, 2] (0 = off), got {}", presence_penalty);
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f))
    fail("SamplingParams.frequency_penalty must be in [-2, 2] (0 = off), got {}", frequency_penalty);
  if (max_tokens < 1) fail("SamplingParams.max_tokens must be >= 1, got {}", max_tokens);
  if (logprobs < -1 || logprobs > 20) fail("SamplingParams.logprobs must be in [0, 20], or -1 = off, got {}", logprobs);
  if (min_tokens < 0 || min_tokens > max_tokens)
    fail("SamplingParams.min_tokens must be in [0, max_tokens = {}], got {}", max_tokens, min_tokens);
  for (const auto& [id, bias] : logit_bias)
    if (!(bias >= -100.0f && bias <= 100.0f))
      fail("SamplingParams.logit_bias of token {} must be in [-100, 100], got {}", id, bias);
}

}  // namespace minfer
