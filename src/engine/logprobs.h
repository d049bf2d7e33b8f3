// Log-probabilities of a sampled token for SamplingParams.logprobs: log-softmax over one row of the model's
// raw logits (before penalties and temperature), and the most likely alternatives.
#pragma once

#include <cstdint>
#include <span>

#include "minfer/outputs.h"

namespace minfer {

// O(V) for the normaliser plus O(V log top_n) for the alternatives (ties towards the lower id).
TokenLogprobs compute_logprobs(std::span<const float> logits, int32_t token, int top_n);

}  // namespace minfer
