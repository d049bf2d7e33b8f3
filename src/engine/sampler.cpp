#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "base/error.h"

namespace minfer {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

uint64_t initial_seed(const SamplingParams& params) {
  if (params.seed) return *params.seed;
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ static_cast<uint64_t>(device());
}

// Best first: larger logit, then lower id (a strict weak order once NaNs are gone).
struct Better {
  const float* logits;
  bool operator()(int32_t a, int32_t b) const {
    const float la = logits[a];
    const float lb = logits[b];
    return la > lb || (la == lb && a < b);
  }
};

void check_ids(std::span<const int32_t> ids, size_t vocab, const char* what) {
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= vocab) fail("sampler: {} id {} is outside the vocabulary [0, {})", what, id, vocab);
  }
}

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
    check_ids(prompt_ids, vocab, "prompt");
    check_ids(generated_ids, vocab, "generated");
    seen_.assign(prompt_ids.begin(), prompt_ids.end());
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

int32_t Sampler::sample(std::span<float> logits, std::span<const int32_t> prompt_ids,
                        std::span<const int32_t> generated_ids) {
  MINFER_CHECK(!logits.empty(), "sampler: empty logits row");
  apply_penalties(logits, prompt_ids, generated_ids);
  if (params_.temperature < kGreedyTemperature) return argmax(logits);

  const size_t vocab = logits.size();
  const float temperature = params_.temperature;
  float max_logit = kNegInf;
  for (float& l : logits) {
    l = std::isnan(l) ? kNegInf : l / temperature;
    max_logit = std::max(max_logit, l);
  }
  // Every token masked (or an overflow to +inf): nothing to draw from, fall back to the argmax.
  if (!std::isfinite(max_logit)) return argmax(logits);

  const size_t top_k =
      params_.top_k > 0 && static_cast<size_t>(params_.top_k) < vocab ? static_cast<size_t>(params_.top_k) : vocab;
  const bool use_top_p = params_.top_p < 1.0f;
  const float min_p_threshold = params_.min_p > 0.0f ? max_logit + std::log(params_.min_p) : kNegInf;

  // Candidates: either all ids in id order (no sort at all) or order_[0, n).
  const bool use_order = top_k < vocab || use_top_p;
  const Better better{logits.data()};
  size_t n = vocab;
  if (use_order) {
    order_.resize(vocab);
    std::iota(order_.begin(), order_.end(), 0);
    if (top_k < vocab) {
      std::nth_element(order_.begin(), order_.begin() + static_cast<ptrdiff_t>(top_k), order_.end(), better);
      n = top_k;
    }
    if (use_top_p) {
      // Mass of the top-k survivors, then the smallest best-first prefix holding top_p of it: a token is kept
      // while the mass strictly before it is below top_p (HF's TopPLogitsWarper), so the first always is.
      double total = 0.0;
      for (size_t i = 0; i < n; ++i) total += std::exp(static_cast<double>(logits[static_cast<size_t>(order_[i])]) - max_logit);
      const double target = static_cast<double>(params_.top_p) * total;
      size_t sorted = 0;
      size_t scanned = 0;
      double cumulative = 0.0;
      size_t keep = n;
      size_t want = std::min<size_t>(n, 64);
      while (true) {
        // order_[0, sorted) holds the best `sorted` in order; everything after is no better, so only the tail
        // needs ranking to extend the sorted prefix.
        if (want > sorted) {
          std::span<int32_t> tail(order_.data() + sorted, n - sorted);
          if (want >= n) {
            std::sort(tail.begin(), tail.end(), better);
          } else {
            std::partial_sort(tail.begin(), tail.begin() + static_cast<ptrdiff_t>(want - sorted), tail.end(), better);
          }
          sorted = want;
        }
        bool done = false;
        for (; scanned < sorted; ++scanned) {
          if (cumulative >= target && scanned > 0) {
            keep = scanned;
            done = true;
            break;
          }
          cumulative += std::exp(static_cast<double>(logits[static_cast<size_t>(order_[scanned])]) - max_logit);
        }
        if (done || sorted >= n) break;
        want = std::min(n, want * 4);
      }
      n = keep;
    }
  }

  // Unnormalised probabilities of the survivors (min-p applied as a logit threshold), then one draw.
  probs_.resize(n);
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const float l = logits[use_order ? static_cast<size_t>(order_[i]) : i];
    const double p = l >= min_p_threshold ? std::exp(static_cast<double>(l) - max_logit) : 0.0;
    probs_[i] = p;
    total += p;
  }
  const double u = uniform() * total;
  double cumulative = 0.0;
  size_t last_positive = 0;
  for (size_t i = 0; i < n; ++i) {
    if (probs_[i] <= 0.0) continue;
    cumulative += probs_[i];
    last_positive = i;
    if (u < cumulative) return use_order ? order_[i] : static_cast<int32_t>(i);
  }
  // Rounding left u at the very top of the range: the last token with mass.
  return use_order ? order_[last_positive] : static_cast<int32_t>(last_positive);
}

}  // namespace minfer
