// An image in a sequence's prompt (engine/engine_core_images.cpp): the vision encoder's embeddings replace the
// embeddings of its tokens [start, start + length). In Sequence::tokens those positions hold ids derived from the
// image's content (negative: outside every vocabulary), so the prefix cache and the KV tiers, which key pages by
// their tokens, share pages between requests with the same image and never between different images; the model
// runner embeds them as the model's image token before the encoder's rows replace them.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "media/image_processor.h"

namespace minfer {

struct SeqImage {
  int64_t start = 0, length = 0;
  uint64_t key[2] = {0, 0};   // XXH3-128 of the preprocessed pixels: the embedding cache's key
  media::PixelValues pixels;  // until encoded
  std::shared_ptr<const std::vector<float>> embeddings;  // [length, text hidden] once encoded

  int64_t end() const { return start + length; }
  // Whether positions [from, to) reach the image while it is not encoded yet (its encoder work is still to do).
  bool unencoded_in(int64_t from, int64_t to) const { return !embeddings && end() > from && start < to; }
};

// The id Sequence::tokens holds at token j of an image with content key `key`.
inline int32_t image_token_key(const uint64_t key[2], int64_t j) {
  uint64_t x = key[0] ^ (key[1] + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(j + 1));
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 29;
  return -1 - static_cast<int32_t>(x & 0x3fffffff);
}

}  // namespace minfer
