// Picks the next token from one row of logits under SamplingParams. Penalties look at the prompt
// (repetition) and the generated tokens (repetition, presence, frequency).
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "minfer/sampling.h"

namespace minfer {

class Sampler {
 public:
  // The RNG is seeded from params.seed, or from std::random_device when unset.
  explicit Sampler(const SamplingParams& params);

  // logits: one row of vocab_size (modified in place by penalties and temperature).
  int32_t sample(std::span<float> logits, std::span<const int32_t> prompt_ids,
                 std::span<const int32_t> generated_ids);

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<int32_t> order_;  // scratch: candidate ids sorted by logit
};

}  // namespace minfer
