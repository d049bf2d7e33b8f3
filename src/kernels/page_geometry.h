// The geometry of a KV page, one value for the whole engine: page_size token slots, a power of two so the
// attention kernels find a position's page and slot with a shift and a mask. Made (and checked) once from the
// engine's config, then passed down unchanged to the page manager, the KV cache and the kernels' layer views.
#pragma once

#include <bit>
#include <cstdint>

#include "base/error.h"

namespace minfer {

class PageGeometry {
 public:
  PageGeometry() = default;  // unset (size 0): a shape or a view not yet given a geometry

  // The rule: a power of two in [1, 256] (the engine's config asks for at least 8).
  static bool valid(int64_t page_size) {
    return page_size >= 1 && page_size <= 256 && std::has_single_bit(static_cast<uint64_t>(page_size));
  }
  // Throws Error unless valid(page_size).
  static PageGeometry of(int64_t page_size) {
    if (!valid(page_size)) fail("page_size must be a power of two in [1, 256], got {}", page_size);
    PageGeometry g;
    g.size_ = page_size;
    g.shift_ = std::countr_zero(static_cast<uint64_t>(page_size));
    return g;
  }

  int64_t size() const { return size_; }
  int shift() const { return shift_; }
  int64_t mask() const { return size_ - 1; }
  int64_t page_of(int64_t position) const { return position >> shift_; }
  int64_t slot_in_page(int64_t position) const { return position & mask(); }
  int64_t pages_for(int64_t tokens) const { return (tokens + size_ - 1) >> shift_; }
  bool operator==(const PageGeometry&) const = default;

 private:
  int64_t size_ = 0;
  int shift_ = 0;
};

}  // namespace minfer
