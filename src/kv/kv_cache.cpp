#include "kv/kv_cache.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstring>

#include "base/error.h"

namespace minfer {

namespace {

constexpr int64_t round_up_64(int64_t bytes) { return (bytes + 63) / 64 * 64; }

}  // namespace

// Each layer's K codes, V codes, K scales and V scales, one after the other, each on a 64-byte boundary.
KvCache::KvCache(const KvCacheShape& shape) : shape_(shape) {
  MINFER_CHECK(shape.num_pages >= 2 && shape.page.size() > 0, "KV cache needs at least one usable page");
  MINFER_CHECK(kv_code_bits(shape.dtype) > 0, "KV cache of type {}", kv_cache_dtype_name(shape.dtype));
  if (kv_is_blocked(shape.dtype) && shape.head_dim % kKvBlockDims != 0)
    fail(
        "--kv-cache-dtype {} stores blocks of {} along the head dimension, but this model's head_dim is {}; use "
        "int8, fp8_e4m3 or a 16-bit type",
        kv_cache_dtype_name(shape.dtype), kKvBlockDims, shape.head_dim);
  const int64_t slots = shape.num_pages * shape.page.size() * shape.kv_heads;  // token slots x kv heads
  const int64_t code_bytes = round_up_64(slots * shape.head_dim * kv_code_bits(shape.dtype) / 8);
  const int64_t scale_bytes =
      round_up_64(slots * kv_scale_groups(shape.dtype, shape.head_dim) * kv_scale_bytes(shape.dtype));
  const int64_t page_slots = shape.page.size() * shape.kv_heads;
  page_code_bytes_ = page_slots * shape.head_dim * kv_code_bits(shape.dtype) / 8;
  page_scale_bytes_ = page_slots * kv_scale_groups(shape.dtype, shape.head_dim) * kv_scale_bytes(shape.dtype);
  const int64_t per_layer = 2 * (code_bytes + scale_bytes);
  const size_t bytes = static_cast<size_t>(shape.num_layers * per_layer);
  constexpr size_t kHugePage = size_t{2} << 20;
  storage_.bytes = bytes + kHugePage;
  void* base =
      ::mmap(nullptr, storage_.bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED)
    fail("cannot allocate the KV cache: {} MiB ({} pages); lower the KV budget or max_model_len", bytes >> 20,
         shape.num_pages);
  storage_.base = base;
  const auto addr = reinterpret_cast<uintptr_t>(base);
  data_ = static_cast<unsigned char*>(base) + (kHugePage - addr % kHugePage) % kHugePage;
  ::madvise(data_, bytes, MADV_HUGEPAGE);  // advice only: ignored where THP is off
  for (int64_t l = 0; l < shape.num_layers; ++l) {
    unsigned char* layer = data_ + l * per_layer;
    kernels::KvLayerView v;
    v.k = layer;
    v.v = layer + code_bytes;
    if (scale_bytes > 0) {
      v.k_scale = layer + 2 * code_bytes;
      v.v_scale = layer + 2 * code_bytes + scale_bytes;
    }
    v.page = shape.page;
    v.kv_heads = shape.kv_heads;
    v.head_dim = shape.head_dim;
    v.dtype = shape.dtype;
    views_.push_back(v);
  }
}

// A page's bytes in a layer's pools start at page * (the page's bytes): pages are the outer dimension of every pool
// (KvLayerView::head_block, scale_block). fn(part, bytes) for each part of the page, in the payload's order.
template <typename Fn>
void KvCache::for_each_page_part(int32_t page, Fn fn) const {
  MINFER_CHECK(page > 0 && page < shape_.num_pages, "page {} of {}", page, shape_.num_pages);
  const auto p = static_cast<size_t>(page);
  const auto codes = static_cast<size_t>(page_code_bytes_), scales = static_cast<size_t>(page_scale_bytes_);
  for (const kernels::KvLayerView& v : views_) {
    fn(static_cast<unsigned char*>(v.k) + p * codes, codes);
    fn(static_cast<unsigned char*>(v.v) + p * codes, codes);
    if (scales == 0) continue;
    fn(static_cast<unsigned char*>(v.k_scale) + p * scales, scales);
    fn(static_cast<unsigned char*>(v.v_scale) + p * scales, scales);
  }
}

void KvCache::copy_page_out(int32_t page, unsigned char* dst) const {
  for_each_page_part(page, [&](const unsigned char* part, size_t n) { std::memcpy(dst, part, n), dst += n; });
}

void KvCache::copy_page_in(int32_t page, const unsigned char* src) {
  for_each_page_part(page, [&](unsigned char* part, size_t n) { std::memcpy(part, src, n), src += n; });
}

KvCache::Mapping::~Mapping() {
  if (base) ::munmap(base, bytes);
}

}  // namespace minfer
