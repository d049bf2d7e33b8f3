// Small text helpers shared by the layers that scan generated text for markers while it streams (stop strings,
// tool-call and reasoning markers).
#pragma once

#include <algorithm>
#include <cstddef>
#include <string_view>

namespace minfer {

// The length of the longest proper prefix of `marker` that ends `text` (0 when none): the tail a stream must hold
// back, since the next text may complete the marker.
inline size_t partial_marker_at_end(std::string_view text, std::string_view marker) {
  if (marker.empty()) return 0;
  for (size_t n = std::min(marker.size() - 1, text.size()); n > 0; --n)
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  return 0;
}

}  // namespace minfer
