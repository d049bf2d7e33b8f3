// Picks the next token from one row of logits under SamplingParams. Penalties look at the prompt
// (repetition) and the generated tokens (repetition, presence, frequency).
//
// The order of operations (vLLM / HF semantics):
//   1. repetition penalty over the distinct ids of prompt + generated (HF/CTRL: logit > 0 ? logit / p : logit * p),
//   2. frequency and presence penalties over the generated ids only (OpenAI:
//      logit -= frequency_penalty * count + presence_penalty * (count > 0)),
//   3. temperature < kGreedyTemperature: greedy argmax, ties go to the lowest id (no filters, no RNG draw),
//   4. logits / temperature,
//   5. top-k (keep the k largest), then top-p (smallest prefix of the top-k survivors, sorted by probability,
//      whose renormalised mass reaches top_p; always at least one), then min-p (drop tokens whose probability
//      is below min_p times the largest probability; the ratio does not change under renormalisation, so this
//      is a logit threshold max_logit + log(min_p)),
//   6. draw from the renormalised distribution of the survivors with std::mt19937_64.
// Ties in the candidate order break towards the lower id, so a given (logits, params, seed) is repeatable.
//
// Cost per call for a vocabulary V: penalties O(n log n) in the number of seen ids; no filters or min-p only:
// O(V), no ranking at all; top-k: one O(V) pass keeping a buffer of at most 2k packed (logit, id) keys, then a
// sort of the k survivors only if top-p follows; top-p alone: O(V) — a histogram of the mass over logit buckets
// locates the cut, and only the tokens of the bucket (1/64 nat of logit) holding it are sorted; a full sort happens
// only for a vocabulary whose logits all lie within 1/64 of each other.
// Probabilities use a vectorised exp (Cephes polynomial, relative error < 1e-7) rather than glibc's scalar expf.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "minfer/sampling.h"

namespace minfer {

class Sampler {
 public:
  // Temperatures below this are treated as greedy (as vLLM's _SAMPLING_EPS).
  static constexpr float kGreedyTemperature = 1e-5f;

  // The RNG is seeded from params.seed, or from std::random_device when unset.
  explicit Sampler(const SamplingParams& params);

  // logits: one row of vocab_size (modified in place by penalties and temperature). Ids in prompt_ids and
  // generated_ids must be in [0, vocab_size); throws minfer::Error otherwise.
  int32_t sample(std::span<float> logits, std::span<const int32_t> prompt_ids, std::span<const int32_t> generated_ids);

  // Step 1 and 2 above on their own (exposed for tests and for callers that want penalised logits).
  void apply_penalties(std::span<float> logits, std::span<const int32_t> prompt_ids,
                       std::span<const int32_t> generated_ids);

  // Index of the largest value, the lowest index among equal maxima (NaN never wins).
  static int32_t argmax(std::span<const float> logits);

 private:
  // A uniform double in [0, 1) from 53 bits of the RNG (portable, unlike std::uniform_real_distribution).
  double uniform();
  // Leaves the k best of logits in keys_ (in no particular order).
  void select_top_k(std::span<const float> logits, size_t k);
  // Cuts keys_ (the top-k survivors) to the top-p nucleus, sorting them best first.
  void cut_top_p_sorted(std::span<const float> logits, float max_logit);
  // Fills keys_ with the top-p nucleus of the whole vocabulary.
  void cut_top_p_histogram(std::span<const float> logits, float max_logit);
  // One draw: the index i where the running sum of weights first exceeds uniform() * their total.
  size_t draw(std::span<const float> weights);

  SamplingParams params_;
  std::mt19937_64 rng_;
  // Scratch, reused across calls so a step allocates nothing once warm.
  std::vector<uint64_t> keys_;           // candidates as (logit, id) keys, see make_key in sampler.cpp
  std::vector<int32_t> seen_;            // sorted copies of seen ids for the penalties
  std::vector<float> weights_;           // exp(logit - max) by id
  std::vector<float> cand_weights_;      // weights of the final candidates, in keys_ order
  std::vector<double> block_sums_;       // sums of weights per block of 1024, for the draw
  std::vector<double> bucket_mass_;      // top-p histogram: mass per logit bucket
  std::vector<uint64_t> boundary_keys_;  // top-p histogram: keys of the bucket holding the cut
};

}  // namespace minfer
