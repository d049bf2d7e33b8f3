#include "engine/sampler.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <limits>

#include "base/error.h"

namespace minfer {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

uint64_t initial_seed(const SamplingParams& params) {
  if (params.seed) return *params.seed;
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ static_cast<uint64_t>(device());
}

void check_ids(std::span<const int32_t> ids, size_t vocab, const char* what) {
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= vocab)
      fail("sampler: {} id {} is outside the vocabulary [0, {})", what, id, vocab);
  }
}

// The bits of a float mapped so that unsigned order is float order (-0 folded into +0); NaN must be gone.
inline uint32_t ordered_bits(uint32_t bits) {
  bits &= static_cast<uint32_t>(-static_cast<int32_t>(bits != 0x80000000u));
  return bits ^ (static_cast<uint32_t>(-static_cast<int32_t>(bits >> 31)) | 0x80000000u);
}

inline float from_ordered_bits(uint32_t ordered) {
  return std::bit_cast<float>(ordered ^ (((ordered >> 31) - 1u) | 0x80000000u));
}

// A candidate as one integer: the logit's ordered bits in the high half, the complement of the id in the low
// half, so a larger key is a larger logit, then a lower id. Ranking keys is plain integer work on a contiguous
// array.
inline uint64_t make_key(float logit, int32_t id) {
  return (static_cast<uint64_t>(ordered_bits(std::bit_cast<uint32_t>(logit))) << 32) |
         (0xFFFFFFFFu - static_cast<uint32_t>(id));
}

inline int32_t key_id(uint64_t key) { return static_cast<int32_t>(0xFFFFFFFFu - static_cast<uint32_t>(key)); }

// exp(x) for x <= 0 (Cephes expf: Cody-Waite reduction by ln 2, degree-6 polynomial, relative error < 1e-7),
// written without float compares or float->int conversions so that GCC vectorises loops over it under the default
// -ftrapping-math; glibc's expf is a scalar call and would dominate a pass over a 152K vocabulary. For x <= 0 the
// float's bits order by magnitude, so the clamp to -87 and the "x < -87" test are integer operations. Below -87
// (including -inf, a masked token) the result is exactly 0.
inline float exp_nonpositive(float x) {
  constexpr uint32_t kMinus87 = 0xC2AE0000u;  // bits of -87.0f
  const uint32_t xb = std::bit_cast<uint32_t>(x);
  const uint32_t keep = static_cast<uint32_t>(-static_cast<int32_t>(xb <= kMinus87));  // all ones unless x < -87
  const float xc = std::bit_cast<float>(std::min(xb, kMinus87));
  const float big = xc * 1.44269504088896341f + 12582912.0f;  // 1.5 * 2^23: round(x / ln 2) lands in the low bits
  const float fn = big - 12582912.0f;
  const uint32_t n = std::bit_cast<uint32_t>(big) - 0x4B400000u;
  const float r = (xc - fn * 0.693359375f) - fn * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  const float scale = std::bit_cast<float>((n + 127u) << 23);
  return std::bit_cast<float>(std::bit_cast<uint32_t>(y * scale) & keep);
}

constexpr size_t kBlock = 1024;  // weights summed per block, so a draw skips whole blocks

}  // namespace

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(initial_seed(params)) {}

double Sampler::uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

int32_t Sampler::argmax(std::span<const float> logits) {
  int32_t best = 0;
  float best_value = kNegInf;
  bool found = false;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float v = logits[i];
    if (std::isnan(v)) continue;
    if (!found || v > best_value) {
      best = static_cast<int32_t>(i);
      best_value = v;
      found = true;
    }
  }
  return best;
}

void Sampler::apply_penalties(std::span<float> logits, std::span<const int32_t> prompt_ids,
                              std::span<const int32_t> generated_ids) {
  const size_t vocab = logits.size();
  const float rep = params_.repetition_penalty;
  if (rep != 1.0f) {
    check_ids(generated_ids, vocab, "generated");
    // A prompt's image tokens hold negative content keys (engine/seq_image.h): not tokens to penalise.
    seen_.clear();
    std::copy_if(prompt_ids.begin(), prompt_ids.end(), std::back_inserter(seen_), [](int32_t id) { return id >= 0; });
    check_ids(seen_, vocab, "prompt");
    seen_.insert(seen_.end(), generated_ids.begin(), generated_ids.end());
    std::sort(seen_.begin(), seen_.end());
    seen_.erase(std::unique(seen_.begin(), seen_.end()), seen_.end());
    for (int32_t id : seen_) {
      float& l = logits[static_cast<size_t>(id)];
      l = l > 0.0f ? l / rep : l * rep;
    }
  }
  const float freq = params_.frequency_penalty;
  const float pres = params_.presence_penalty;
  if (freq != 0.0f || pres != 0.0f) {
    check_ids(generated_ids, vocab, "generated");
    seen_.assign(generated_ids.begin(), generated_ids.end());
    std::sort(seen_.begin(), seen_.end());
    for (size_t i = 0; i < seen_.size();) {
      size_t j = i;
      while (j < seen_.size() && seen_[j] == seen_[i]) ++j;
      float& l = logits[static_cast<size_t>(seen_[i])];
      // Two steps, as vLLM: the frequency term, then the presence term.
      l -= freq * static_cast<float>(j - i);
      l -= pres;
      i = j;
    }
  }
}

size_t Sampler::draw(std::span<const float> weights) {
  // Block sums with four interleaved accumulators (a fixed order, so repeatable), then the total.
  const size_t n = weights.size();
  const size_t blocks = (n + kBlock - 1) / kBlock;
  block_sums_.resize(blocks);
  double total = 0.0;
  for (size_t b = 0; b < blocks; ++b) {
    const size_t begin = b * kBlock;
    const size_t end = std::min(n, begin + kBlock);
    double acc[4] = {0.0, 0.0, 0.0, 0.0};
    size_t i = begin;
    for (; i + 4 <= end; i += 4) {
      for (size_t k = 0; k < 4; ++k) acc[k] += weights[i + k];
    }
    for (; i < end; ++i) acc[0] += weights[i];
    block_sums_[b] = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    total += block_sums_[b];
  }
  const double u = uniform() * total;
  double cumulative = 0.0;
  size_t last_positive = 0;
  for (size_t b = 0; b < blocks; ++b) {
    if (block_sums_[b] <= 0.0) continue;
    const size_t begin = b * kBlock;
    const size_t end = std::min(n, begin + kBlock);
    if (u >= cumulative + block_sums_[b] && b + 1 < blocks) {
      cumulative += block_sums_[b];
      for (size_t i = end; i-- > begin;) {
        if (weights[i] > 0.0f) {
          last_positive = i;
          break;
        }
      }
      continue;
    }
    for (size_t i = begin; i < end; ++i) {
      if (weights[i] <= 0.0f) continue;
      cumulative += weights[i];
      last_positive = i;
      if (u < cumulative) return i;
    }
  }
  // Rounding left u at the very top of the range: the last entry with weight.
  return last_positive;
}

int32_t Sampler::sample(std::span<float> logits, std::span<const int32_t> prompt_ids,
                        std::span<const int32_t> generated_ids) {
  MINFER_CHECK(!logits.empty(), "sampler: empty logits row");
  apply_penalties(logits, prompt_ids, generated_ids);
  if (params_.temperature < kGreedyTemperature) return argmax(logits);

  const size_t vocab = logits.size();
  float* l = logits.data();
  if (params_.temperature != 1.0f) {
    const float temperature = params_.temperature;
    for (size_t i = 0; i < vocab; ++i) l[i] /= temperature;
  }
  // NaN -> -inf and the max, on the bits (no float compares, so it vectorises).
  uint32_t max_ordered = 0;
  for (size_t i = 0; i < vocab; ++i) {
    uint32_t bits = std::bit_cast<uint32_t>(l[i]);
    const uint32_t nan = static_cast<uint32_t>(-static_cast<int32_t>((bits & 0x7FFFFFFFu) > 0x7F800000u));
    bits = (bits & ~nan) | (0xFF800000u & nan);
    l[i] = std::bit_cast<float>(bits);
    max_ordered = std::max(max_ordered, ordered_bits(bits));
  }
  const float max_logit = from_ordered_bits(max_ordered);
  // Every token masked (or an overflow to +inf): nothing to draw from, fall back to the argmax.
  if (!std::isfinite(max_logit)) return argmax(logits);

  const bool use_top_k = params_.top_k > 0 && static_cast<size_t>(params_.top_k) < vocab;
  const bool use_top_p = params_.top_p < 1.0f;
  // min-p: prob >= min_p * max prob  <=>  logit >= max_logit + log(min_p), whatever the normalisation.
  const float min_p_logit = params_.min_p > 0.0f ? max_logit + std::log(params_.min_p) : kNegInf;

  if (!use_top_k && !use_top_p) {
    // No ranking at all: weights in id order, one draw.
    weights_.resize(vocab);
    float* w = weights_.data();
    for (size_t i = 0; i < vocab; ++i) w[i] = exp_nonpositive(l[i] - max_logit);
    if (params_.min_p > 0.0f) {
      for (size_t i = 0; i < vocab; ++i) {
        if (l[i] < min_p_logit) w[i] = 0.0f;
      }
    }
    return static_cast<int32_t>(draw(weights_));
  }

  // Otherwise the candidates end up in keys_ (see make_key), in a deterministic order.
  if (use_top_k) select_top_k(logits, static_cast<size_t>(params_.top_k));
  if (use_top_p) {
    if (use_top_k) {
      cut_top_p_sorted(logits, max_logit);
    } else {
      cut_top_p_histogram(logits, max_logit);
    }
  }

  // Weights of the survivors with min-p applied, then one draw.
  const size_t n = keys_.size();
  cand_weights_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const float li = l[static_cast<size_t>(key_id(keys_[i]))];
    cand_weights_[i] = li >= min_p_logit ? exp_nonpositive(li - max_logit) : 0.0f;
  }
  return key_id(keys_[draw(cand_weights_)]);
}

void Sampler::select_top_k(std::span<const float> logits, size_t k) {
  // One pass with a rising bar: a key enters the buffer only if it beats the k-th best seen so far; when the
  // buffer fills, nth_element shrinks it back to k and raises the bar. Linear, and after the first few refills
  // almost every token is one integer compare.
  const size_t capacity = std::max(2 * k, k + 256);
  keys_.clear();
  keys_.reserve(capacity);
  const auto shrink = [&] {
    std::nth_element(keys_.begin(), keys_.begin() + static_cast<ptrdiff_t>(k - 1), keys_.end(), std::greater<>());
    keys_.resize(k);
    return keys_[k - 1];
  };
  uint64_t bar = 0;  // every key is > 0: its low half is 0xFFFFFFFF - id with id < 2^31
  for (size_t i = 0; i < logits.size(); ++i) {
    const uint64_t key = make_key(logits[i], static_cast<int32_t>(i));
    if (key > bar) {
      keys_.push_back(key);
      if (keys_.size() == capacity) bar = shrink();
    }
  }
  if (keys_.size() > k) shrink();
}

void Sampler::cut_top_p_sorted(std::span<const float> logits, float max_logit) {
  // The top-k survivors, best first; a token is kept while the mass strictly before it is below top_p of
  // their total (HF's TopPLogitsWarper), so the first always is.
  std::sort(keys_.begin(), keys_.end(), std::greater<>());
  const size_t n = keys_.size();
  cand_weights_.resize(n);
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) {
    cand_weights_[i] = exp_nonpositive(logits[static_cast<size_t>(key_id(keys_[i]))] - max_logit);
    total += cand_weights_[i];
  }
  const double target = static_cast<double>(params_.top_p) * total;
  double before = 0.0;
  size_t keep = n;
  for (size_t i = 0; i < n; ++i) {
    if (i > 0 && before >= target) {
      keep = i;
      break;
    }
    before += cand_weights_[i];
  }
  keys_.resize(keep);
}

void Sampler::cut_top_p_histogram(std::span<const float> logits, float max_logit) {
  // Top-p over the whole vocabulary without sorting it: bucket tokens by (max_logit - logit) in steps of
  // 1/kBucketsPerNat (monotone in the logit, so buckets are ranges of the best-first order), sum the mass per
  // bucket, find the bucket where the running mass reaches top_p, keep every bucket before it whole and sort only
  // that boundary bucket. The last bucket also holds everything further down (weights below e^-64).
  constexpr size_t kBucketsPerNat = 64;
  constexpr size_t kBuckets = 64 * kBucketsPerNat;
  const size_t vocab = logits.size();
  const float* l = logits.data();
  const auto bucket_of = [&](float li) -> size_t {
    const float d = (max_logit - li) * static_cast<float>(kBucketsPerNat);
    return d < static_cast<float>(kBuckets - 1) ? static_cast<size_t>(d) : kBuckets - 1;
  };
  weights_.resize(vocab);
  float* w = weights_.data();
  for (size_t i = 0; i < vocab; ++i) w[i] = exp_nonpositive(l[i] - max_logit);
  // bucket_mass_ is all zeros between calls; only the buckets up to the last one used are touched (and re-zeroed),
  // so a small vocabulary or a peaked distribution does not pay for all of them.
  if (bucket_mass_.size() != kBuckets) bucket_mass_.assign(kBuckets, 0.0);
  size_t used = 0;
  for (size_t i = 0; i < vocab; ++i) {
    const size_t b = bucket_of(l[i]);
    bucket_mass_[b] += w[i];
    used = std::max(used, b + 1);
  }
  double total = 0.0;
  for (size_t b = 0; b < used; ++b) total += bucket_mass_[b];
  const double target = static_cast<double>(params_.top_p) * total;

  size_t boundary = kBuckets;  // none: rounding never reached target, keep everything
  double before = 0.0;
  for (size_t b = 0; b < used; ++b) {
    if (before + bucket_mass_[b] >= target) {
      boundary = b;
      break;
    }
    before += bucket_mass_[b];
  }
  keys_.clear();
  boundary_keys_.clear();
  for (size_t i = 0; i < vocab; ++i) {
    const size_t b = bucket_of(l[i]);
    if (b < boundary) {
      keys_.push_back(make_key(l[i], static_cast<int32_t>(i)));
    } else if (b == boundary) {
      boundary_keys_.push_back(make_key(l[i], static_cast<int32_t>(i)));
    }
  }
  std::fill(bucket_mass_.begin(), bucket_mass_.begin() + static_cast<ptrdiff_t>(used), 0.0);
  std::sort(boundary_keys_.begin(), boundary_keys_.end(), std::greater<>());
  for (uint64_t key : boundary_keys_) {
    if (!keys_.empty() && before >= target) break;
    keys_.push_back(key);
    before += w[static_cast<size_t>(key_id(key))];
  }
}

}  // namespace minfer
