#include "engine/ngram_proposer.h"

#include <algorithm>

namespace minfer {

std::vector<int32_t> propose_ngram(std::span<const int32_t> tokens, const NgramOptions& options) {
  const int64_t len = static_cast<int64_t>(tokens.size());
  if (options.k <= 0 || options.min_n <= 0 || options.max_n < options.min_n) return {};
  for (int64_t n = std::min<int64_t>(options.max_n, len - 1); n >= options.min_n; --n) {
    const std::span<const int32_t> suffix = tokens.subspan(static_cast<size_t>(len - n));
    // Latest first: the nearer context predicts better. A match must end before the suffix starts, so at least one
    // token follows it.
    for (int64_t start = len - n - 1; start >= 0; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) continue;
      const int64_t from = start + n;
      int64_t to = std::min(len, from + options.k);
      // An image's tokens are content keys, not vocabulary ids (engine/seq_image.h): never a draft.
      to = std::find_if(tokens.begin() + from, tokens.begin() + to, [](int32_t t) { return t < 0; }) - tokens.begin();
      return {tokens.begin() + from, tokens.begin() + to};
    }
  }
  return {};
}

}  // namespace minfer
