// The prefix-cache key of one full page: a 64-bit hash chained over the parent page's key and the page's
// token ids, so equal keys mean "probably the same whole prefix". It is only an index: a hit is accepted
// after the page's tokens and its parent's identity are compared (see PageManager), so a collision can
// cost a miss but never wrong output.
#pragma once

#include <cstdint>
#include <span>

namespace minfer {

inline constexpr uint64_t kRootPageHash = 0x9e3779b97f4a7c15ull;

// splitmix64's finaliser: every input bit affects every output bit.
inline uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

inline uint64_t chain_page_hash(uint64_t parent, std::span<const int32_t> tokens) {
  uint64_t h = mix64(parent ^ 0x243f6a8885a308d3ull);
  for (int32_t t : tokens) h = mix64(h ^ static_cast<uint32_t>(t));
  return mix64(h ^ tokens.size());
}

}  // namespace minfer
