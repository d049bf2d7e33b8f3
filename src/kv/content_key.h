// The identity of a page's KV beyond one process: a 128-bit hash chained over every token of the prefix up to and
// including the page (XXH3-128), so equal keys mean the same whole prefix. The pool's own 64-bit keys (page_hash.h)
// are checked against a registration id that dies with the process; the tiers (kv_tiers.h) outlive it, so their key
// must be strong enough to stand alone (collisions of 128-bit keys are out of reach by accident) and it is checked
// against the page's stored tokens as well.
#pragma once

#include <xxhash.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace minfer {

struct ContentKey {
  uint64_t hi = 0, lo = 0;
  bool operator==(const ContentKey&) const = default;
  bool empty() const { return hi == 0 && lo == 0; }
  std::string hex() const;
  // The key hex() wrote (32 characters; nullopt for any other length).
  static std::optional<ContentKey> from_hex(std::string_view hex);
};

struct ContentKeyHash {
  size_t operator()(const ContentKey& k) const { return static_cast<size_t>(k.lo ^ (k.hi * 0x9e3779b97f4a7c15ull)); }
};

// The key of the root's children for KV group `group` (a model's full-attention and sliding-window layers hold their
// pages apart: each group's pages are separate entries).
inline ContentKey root_content_key(uint32_t group) { return ContentKey{0x6d696e666572ull, group + 1ull}; }

inline ContentKey chain_content_key(const ContentKey& parent, std::span<const int32_t> tokens) {
  std::array<uint64_t, 2 + 256 / 2> buf;  // the parent's key, then up to 256 token ids (the largest page)
  buf[0] = parent.hi, buf[1] = parent.lo;
  const size_t n = std::min<size_t>(tokens.size(), 256);
  std::memcpy(&buf[2], tokens.data(), n * sizeof(int32_t));
  const XXH128_hash_t h = XXH3_128bits(buf.data(), 2 * sizeof(uint64_t) + n * sizeof(int32_t));
  return ContentKey{h.high64, h.low64};
}

}  // namespace minfer
